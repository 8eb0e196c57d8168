"""Standard streams closed or full at start (``>&-``, ``2>&-``, ``<&-``, ``>/dev/full``): every
record still comes out, the status is the run's, and what could not be written is said in one
line, never a traceback (an attack found tracebacks, a replay's results left in its temporary
file, and exit 120 from the interpreter's last flush)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from stef.exits import Exit
from tests.conftest import ROOT, STEF

RECORDS = [
    {"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"},
    {"question": "How many users?", "sql": "SELECT COUNT(*) FROM users"},
]


def _log(tmp_path: Path, *, invalid: bool = False) -> Path:
    log = tmp_path / "log.jsonl"
    lines = [json.dumps(r) for r in RECORDS] + (["not json"] if invalid else [])
    log.write_text("\n".join(lines) + "\n")
    return log


def _stef(redirect: str, *args: str, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``stef ARGS REDIRECT`` through a shell (the redirections close the streams)."""
    command = " ".join(f"'{a}'" for a in (*STEF, *args)) + " " + redirect
    with open(stdin or "/dev/null", "rb") as given:
        return subprocess.run(
            ["bash", "-c", command],
            stdin=given,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else -1


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"], ids=["closed", "full"])
def test_replay_writes_its_files_whatever_stdout_is(tmp_path: Path, redirect: str) -> None:
    log, out, dead = _log(tmp_path, invalid=True), tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    done = _stef(redirect, "replay", str(log), "-o", str(out), "--dead-letters", str(dead),
                 "--fail-on", "invalid")  # fmt: skip
    assert (done.returncode, _lines(out), _lines(dead)) == (Exit.GATE, 2, 1), done.stderr
    assert "the summary could not be written to stdout" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob(".*.partial"))


def test_replay_results_to_a_closed_stdout_fail_the_run(tmp_path: Path) -> None:
    done = _stef(">&-", "replay", str(_log(tmp_path)), "-o", "-")
    assert done.returncode == Exit.FAILURE
    assert "Traceback" not in done.stderr


def test_a_gate_holds_with_stderr_closed(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _stef("2>&-", "replay", str(_log(tmp_path, invalid=True)), "-o", str(out),
                 "--fail-on", "invalid")  # fmt: skip
    assert (done.returncode, _lines(out)) == (Exit.GATE, 2)


def test_a_closed_stdin_reads_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    replayed = _stef("<&-", "replay", "-", "-o", str(out))
    assert replayed.returncode == Exit.OK and _lines(out) == 0, replayed.stderr
    judged = _stef("<&-", "judge")
    assert judged.returncode == Exit.USAGE and "no record on stdin" in judged.stderr
    assert "Traceback" not in replayed.stderr + judged.stderr


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"], ids=["closed", "full"])
def test_summary_to_an_unwritable_stdout_is_one_line_and_exit_1(
    tmp_path: Path, redirect: str
) -> None:
    results = tmp_path / "results.jsonl"
    assert _stef("", "replay", str(_log(tmp_path)), "-o", str(results)).returncode == Exit.OK
    done = _stef(redirect, "summary", str(results))
    assert done.returncode == Exit.FAILURE
    assert done.stderr.strip().splitlines()[-1].startswith("stef: standard output: ")
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_replay_refuses_an_output_that_is_its_standard_input(tmp_path: Path) -> None:
    log = _log(tmp_path)
    before = log.read_bytes()
    done = _stef("", "replay", "-", "-o", str(log), stdin=log)
    assert done.returncode == Exit.USAGE and "standard input" in done.stderr
    assert log.read_bytes() == before


def test_help_and_version_to_a_closed_stdout_are_one_line_not_120() -> None:
    for args in (("--version",), ("rules", "--help")):
        done = _stef(">&-", *args)
        assert done.returncode == Exit.FAILURE, done.stderr
        assert done.stderr.strip() == "stef: standard output: Bad file descriptor"


def test_a_failing_stdin_is_not_blamed_on_stdout(tmp_path: Path) -> None:
    """The one-line "standard output" failure is stdout's alone: a standard input open for
    writing only fails its read, said as such."""
    done = _stef(f"0>>'{tmp_path / 'w'}'", "judge")
    assert "standard output" not in done.stderr


def test_dev_null_as_input_and_output_is_no_input_file(tmp_path: Path) -> None:
    done = _stef("", "replay", "-", "-o", "/dev/null", stdin=Path("/dev/null"))
    assert done.returncode == Exit.OK, done.stderr
