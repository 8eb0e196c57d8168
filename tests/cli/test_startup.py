"""The command line's first contact (issue 34 §6): ``stef --version`` and ``--help`` load no
command (each command's module is imported only when it runs), a mistyped flag or choice gets a
did-you-mean, ``stef judge`` with nothing on stdin says so, and ``--format text`` is short."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import stef.logs
from stef.cli import COMMANDS, FORMATS, LEVELS, main, parser
from stef.exits import Exit

HEAVY = ("structlog", "openai", "pydantic", "sqlglot", "stef.logs", "stef.pipeline")

_PROBE = """
import sys, time
t = time.perf_counter()
from stef.cli import main
try:
    main([{arg!r}])
except SystemExit:
    pass
took = time.perf_counter() - t
loaded = sorted(m for m in sys.modules if m in {heavy!r} or m.startswith("stef.cli."))
print(took, loaded, file=sys.stderr)
"""


@pytest.mark.parametrize("arg", ["--version", "--help"])
def test_version_and_help_load_no_command(arg: str) -> None:
    code = _PROBE.format(arg=arg, heavy=HEAVY)
    best, loaded = 9.9, ""
    for _ in range(3):  # the best of three: the machine may be busy
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        took, loaded = done.stderr.strip().split(" ", 1)
        best = min(best, float(took))
    assert loaded == "[]"
    assert best < 0.3, f"stef {arg}: {best:.3f} s past the interpreter's start"


_LOADED = """
import sys
before = set(sys.modules)
from stef.cli import main
try:
    main([{arg!r}])
except SystemExit:
    pass
print(" ".join(sorted(set(sys.modules) - before)), file=sys.stderr)
"""


@pytest.mark.parametrize("arg", ["--version", "--help"])
def test_version_and_help_load_only_the_standard_library_and_the_parser(arg: str) -> None:
    # Issue 36 §6: what `stef --version` loads is the contract, not how long it takes.
    done = subprocess.run(
        [sys.executable, "-c", _LOADED.format(arg=arg)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded = done.stderr.split()
    assert "stef.cli" in loaded
    third_party = sorted(
        m for m in loaded if m.split(".")[0] not in (*sys.stdlib_module_names, "stef")
    )
    assert third_party == []
    assert sorted(m for m in loaded if m.split(".")[0] == "stef") == [
        "stef",
        "stef.cli",
        "stef.exits",
    ]


def test_the_lazy_help_is_the_full_help() -> None:
    assert parser(lazy=True).format_help() == parser().format_help()
    assert "95%%" not in parser().format_help()
    assert (LEVELS, FORMATS) == (stef.logs.LEVELS, stef.logs.FORMATS)


def test_each_commands_help_has_no_doubled_percent(capsys: pytest.CaptureFixture[str]) -> None:
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        assert "%%" not in capsys.readouterr().out, name


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["replay", "log.jsonl", "--outptu", "x.jsonl"], "did you mean --output?"),
        (["judge", "--question", "q", "--sql", "s", "--fromat", "text"], "did you mean --format?"),
        (["judge", "--format", "txt"], "did you mean 'text'?"),
        (["replya", "log.jsonl"], "did you mean 'replay'?"),
    ],
)
def test_a_mistyped_flag_gets_a_did_you_mean(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == Exit.USAGE
    assert hint in capsys.readouterr().err


def test_judge_with_nothing_on_stdin_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert main(["judge"]) == Exit.USAGE
    err = capsys.readouterr().err
    # Before: "invalid input (not_json): record is not JSON: Expecting value".
    assert "no record on stdin" in err and "not_json" not in err


def test_judge_text_format_is_short_and_says_the_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("STEF_")]:
        monkeypatch.delenv(name)
    question = "How many customers in APAC signed up in 2023?"
    sql = "SELECT COUNT(*) FROM customers WHERE region = 'EMEA' AND status = 'active'"
    assert main(["judge", "-q", question, "-s", sql, "--format", "text"]) == Exit.OK
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert len(lines) <= 25
    assert lines[0].split(": ", 1)[1].startswith("score ") and ", tier " in lines[0]
    assert any(x.startswith("verdict: ") and "decided by heuristic" in x for x in lines)
    assert any(x.startswith("filters: ") and " of " in x for x in lines)
    assert any("missing from the SQL" in x for x in lines)
    assert any(x.startswith("issues: ") for x in lines)
    with pytest.raises(ValueError):
        json.loads(text)  # text, not the JSON result


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["summary", "r.jsonl", "--worst", "-1"], "argument --worst: must be at least 0"),
        (["report", "r.jsonl", "-o", "r.html", "--worst", "-1"], "--worst: must be at least 0"),
        (
            ["review", "--results", "r", "--labels", "l", "--port", "65536"],
            "--port: must be 0..65535",
        ),
        (["review", "--results", "r", "--labels", "l", "--port", "x"], "--port: invalid int value"),
        (["replay", "log.jsonl", "--concurrency", "0"], "--concurrency: must be at least 1"),
        (["replay", "log.jsonl", "--max-judge-error-rate", "1.5"], "must be from 0 to 1"),
        (["replay", "log.jsonl", "--max-judge-error-rate", "nan"], "must be from 0 to 1"),
        (["calibrate", "l.jsonl", "--limit", "0"], "--limit: must be at least 1"),
        (["calibrate", "l.jsonl", "--window", "0"], "--window: must be at least 1"),
        (["calibrate", "l.jsonl", "--pass-threshold", "101"], "must be from 0 to 100"),
        (["calibrate", "l.jsonl", "--reference-databases", "-1"], "must be at least 0"),
        (["calibrate", "--results", "r", "--labels", "l", "--disagreements", "-1"], "at least 0"),
    ],
)
def test_an_argument_out_of_its_range_is_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 36 §6: the ranges are the parser's (argparse types), checked before a file is read.
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == Exit.USAGE
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    "signums",
    [[15], [2], [3], [1, 10, 12, 15]],
    ids=["SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP-SIGUSR1-SIGUSR2-SIGTERM"],
)
def test_a_stop_signal_during_start_up_stops_cleanly(tmp_path: Path, signums: list[int]) -> None:
    """SIGTERM while ``stef run`` was still starting (imports, settings, preflight: seconds)
    ended it with status 143, and SIGINT with 130 and a traceback from whatever import was
    running, and SIGQUIT with 131 and a core; SIGHUP, SIGUSR1 and SIGUSR2 ended it too (their
    default action). Now the replica stops as soon as it runs: status 0, nothing judged."""
    import os
    import signal as signals
    import time

    log = tmp_path / "agent.jsonl"
    log.write_text(json.dumps({"question": "q", "sql": "SELECT 1"}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    args = ["--source", f"file:{log}", "--follow", "--results", f"file:{tmp_path / 'r.jsonl'}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stef.cli", "run", *args, "--metrics-port", "off"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    # As soon as the command catches SIGTERM (its first moment), long before the replica runs.
    deadline = time.monotonic() + 30
    while not _catches_sigterm(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    for signum in signums:  # SIGHUP, SIGUSR1, SIGUSR2 ended it too: nothing to do yet
        proc.send_signal(signals.Signals(signum))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err


def _catches_sigterm(pid: int) -> bool:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        caught = next(line for line in f if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (15 - 1)))


def test_a_signal_of_start_up_is_taken_over_by_the_replica() -> None:
    """The start-up handler records the signal; the replica's handlers take it over, and its
    loop then stops before fetching anything."""
    import os
    import signal as signals

    from stef import signals as early
    from stef.service.health import HealthState
    from stef.service.lifecycle import Lifecycle

    caught = (signals.SIGTERM, signals.SIGINT, signals.SIGQUIT)
    caught = (*caught, signals.SIGHUP, signals.SIGUSR1, signals.SIGUSR2)
    saved = {s: signals.getsignal(s) for s in caught}
    try:
        early.catch_early()
        os.kill(os.getpid(), signals.SIGTERM)
        assert early.early == [signals.SIGTERM]
        lifecycle = Lifecycle(HealthState(), lambda: 0)
        lifecycle.install_signal_handlers()
        assert lifecycle.signals == [signals.SIGTERM]
        assert early.early == []
    finally:
        early.early.clear()
        for s, handler in saved.items():
            signals.signal(s, handler)
