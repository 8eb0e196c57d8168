"""Results and labels files a hostile or clumsy user points a command at (``summary``, ``report``,
``estimate``, ``calibrate --results``, ``canary add``): each is one line naming the file and the
line and a non-zero exit, or figures that hold; never a traceback, a memory blow-up or a number
that is not one."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from stef.cli import main
from tests.conftest import STEF, run_stef

# Far more than the interpreter and a bounded line need (about 250 MB), far less than an
# unbounded read of /dev/zero takes before it fails.
PRLIMIT = ("prlimit", "--as=1500000000")


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
@pytest.mark.parametrize("read", ["results", "labels"])
def test_a_file_without_line_ends_is_refused_at_the_bound(read: str, tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"id": "a", "outcome": "evaluated"}) + "\n")
    if read == "results":
        done = run_stef("summary", "/dev/zero", prefix=PRLIMIT)
    else:
        args = ("estimate", "--results", str(results), "--labels", "/dev/zero")
        done = run_stef(*args, prefix=PRLIMIT)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "/dev/zero:1: longer than 64 MiB" in done.stderr


def _results(path: Path, scores: list[object]) -> Path:
    lines = [{"id": "good", "app": "a", "outcome": "evaluated", "score": 50.0, "tier": "marginal"}]
    for i, score in enumerate(scores):
        lines.append({"id": f"r{i}", "app": "a", "outcome": "evaluated", "score": score})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


BAD_SCORES = [math.nan, math.inf, -math.inf, -5, 500, "high", True]


def test_a_score_that_is_not_one_is_read_as_none_by_report(tmp_path: Path) -> None:
    """As a ``p_correct`` outside 0-1 is: a NaN stopped the report with a traceback, -5 and
    500 moved its percentiles."""
    pages = []
    for name, scores in [("bad", BAD_SCORES), ("none", [None] * len(BAD_SCORES))]:
        (tmp_path / name).mkdir()
        results, page = tmp_path / name / "results.jsonl", tmp_path / name / "report.html"
        assert main(["report", str(_results(results, scores)), "-o", str(page)]) == 0
        pages.append(page.read_text().replace(str(tmp_path / name), "DIR"))
    assert pages[0] == pages[1]


@pytest.fixture(scope="module")
def judged() -> dict[str, object]:
    """One whole result, as ``stef judge`` prints it."""
    done = run_stef("judge", "-q", "How many orders?", "-s", "SELECT COUNT(*) FROM orders")
    result: dict[str, object] = json.loads(done.stdout)
    assert result["outcome"] == "evaluated"
    return result


@pytest.mark.parametrize("score", [math.nan, math.inf, -5, 500], ids=str)
def test_summary_refuses_a_score_that_is_not_one_at_its_line(
    score: float, judged: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN score made the mean NaN (and ``--format json`` print a NaN, which is not JSON);
    -5 or 500 moved it without a word."""
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(judged) + "\n" + json.dumps({**judged, "score": score}) + "\n")
    assert main(["summary", str(path), "--format", "json"]) == 1
    assert f"{path}:2: not a result: score" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["estimate", "calibrate"])
def test_a_lone_surrogate_in_results_and_labels_is_read_as_u_fffd(
    command: str, tmp_path: Path
) -> None:
    """JSON reads "\\ud800" as a lone surrogate, which has no UTF-8: printing the app's row
    (estimate) or a disagreement's id (calibrate --results) stopped with a UnicodeEncodeError
    traceback. Read as U+FFFD in both files, the label still joins its result."""
    results, labels = tmp_path / "results.jsonl", tmp_path / "labels.jsonl"
    line = {"id": "a\udc01", "app": "x\ud800", "outcome": "evaluated", "score": 90.0}
    line |= {"components": {"verdict": "Correct"}, "judge": {"p_correct": 0.9}}
    results.write_text(json.dumps(line) + "\n")
    labels.write_text(json.dumps({"id": "a\udc01", "label": False}) + "\n")
    done = run_stef(command, "--results", str(results), "--labels", str(labels))
    assert done.returncode == 0, done.stderr
    assert ("x\ufffd" if command == "estimate" else "a\ufffd") in done.stdout


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_judge_refuses_stdin_without_end_at_the_bound() -> None:
    """``stef judge < /dev/zero`` read stdin until memory ran out (a MemoryError traceback)."""
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [*PRLIMIT, *STEF, "judge"], stdin=zero, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "stef judge: stdin: longer than 64 MiB" in done.stderr


def test_judge_reads_a_record_saved_with_a_bom() -> None:
    """A record saved by an editor that writes a UTF-8 BOM (Notepad) is judged, as the file
    readers pass the BOM over; it was refused as invalid input."""
    record = json.dumps({"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"})
    done = run_stef("judge", stdin="\ufeff" + record + "\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "evaluated"


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_summary_counts_dead_letters_line_by_line_and_names_that_file(tmp_path: Path) -> None:
    """--dead-letters was read with open(): /dev/zero ended in a MemoryError traceback, and a
    byte that is not UTF-8 was reported against the results file."""
    results, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    results.write_text("")
    done = run_stef("summary", str(results), "--dead-letters", "/dev/zero", prefix=PRLIMIT)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "/dev/zero:1: longer than 64 MiB" in done.stderr
    dead.write_bytes(b'{"reason": "not_utf8", "payload": "caf\xe9"}\n\n{"reason": "not_json"}\n')
    done = run_stef("summary", str(results), "--dead-letters", str(dead), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["invalid"] == 2


def test_judge_reads_a_record_past_the_bound_that_the_settings_allow(tmp_path: Path) -> None:
    """With limits.max_record_bytes above 64 MiB, a record within it (which stef replay
    judges) is judged from stdin too: it was refused as longer than 64 MiB."""
    config = tmp_path / "stef.yaml"
    config.write_text(f"limits:\n  max_record_bytes: {70 << 20}\n")
    head = json.dumps({"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"})
    record = head[:-1] + " " * (65 << 20) + "}"  # 65 MiB, most of it inside the object
    done = run_stef("judge", "--config", str(config), "--format", "text", stdin=record)
    assert done.returncode == 0, done.stderr[-500:]
    assert "longer than" not in done.stderr
