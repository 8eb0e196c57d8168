"""Files read at start say what is wrong in one line, never a traceback, never a hang (issue 21
§5): the settings file, a followed source's checkpoint, the LLM cache file, the calibration
file and the metrics port. Each case is exit 2 with one line on stderr naming the file (and the
line where there is one), within a second of the command's start."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stef.calibration import default_path
from stef.cli import main
from stef.exits import Exit
from stef.testing.fake_server import FakeLlmServer

RECORD = json.dumps({"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"})


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _write(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


# Each case: what the file is, and what the line must say beside the file's name.
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "invalid_utf8": (_write(b"concurrency: 2\nsource: \xff\n"), ":2:"),
    "5000_digit_integer": (_write(b"concurrency: " + b"9" * 5000 + b"\n"), ":1:"),
    "5000_deep_nesting": (_write(b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n"), ":1:"),
    "directory": (lambda p: p.mkdir(), "directory"),
    "fifo": (_fifo, "not a regular file"),
    "missing": (lambda p: None, "No such file"),
    "huge": (_write(b"# " + b"x" * (2 << 20) + b"\n"), "larger than"),
    "wrong_type": (_write(b"source: '-'\n\nconcurrency: [1, 2]\n"), ":3: concurrency"),
    "wrong_type_llm": (_write(b"llm:\n  base_url: http://h/v1\n  timeout_s: {}\n"), ":3: llm"),
    "not_a_mapping": (_write(b"- concurrency\n"), "mapping"),
    "not_yaml": (_write(b"concurrency: [\n"), "not valid YAML"),
}


def _one_line(err: str, name: str) -> str:
    # The error is one plain line; the service's JSON log lines (``rules_loaded`` at info, say)
    # may come before it.
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("{")]
    assert len(lines) == 1, err
    assert name in lines[0] and "Traceback" not in err
    return lines[0]


class _Hung(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hung


def _timed(args: list[str]) -> int:
    """``main(args)`` (in the main thread: the service installs signal handlers), with an alarm
    that turns a hang (an open() of a FIFO blocks) into a failure instead of a stuck suite. No
    tighter bound on the wall clock: under a loaded machine (load 8 on 2 cores) a refusal that
    takes 0.1 s took over 1 s, and a hang is what this guards against."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        status = main(args)
    except _Hung:
        pytest.fail(f"stef {args[0]} hangs")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return status


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_settings_file_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, says = CASES[case]
    path = tmp_path / "stef.yaml"
    make(path)
    assert _timed(["check", "--config", str(path)]) == Exit.USAGE
    line = _one_line(capsys.readouterr().err, str(path))
    assert says in line


def test_an_unreadable_settings_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "stef.yaml"
    path.write_text("concurrency: 2\n")
    path.chmod(0)
    assert _timed(["check", "--config", str(path)]) == Exit.USAGE
    assert "Permission denied" in _one_line(capsys.readouterr().err, str(path))


CHECKPOINTS: dict[str, Callable[[Path], None]] = {
    "garbage": _write(b"\x00\x01garbage"),
    "invalid_utf8": _write(b'{"source": "\xff"}'),
    "5000_deep": _write(b"[" * 5000 + b"]" * 5000),
    "5000_digit_integer": _write(b'{"offset": ' + b"9" * 5000 + b"}"),
    "wrong_types": _write(b'{"source": 1, "file": [], "offset": "x", "line": null}'),
    "directory": lambda p: p.mkdir(),
    "fifo": _fifo,
    "huge": _write(b" " * (1 << 20)),
}


@pytest.mark.parametrize("case", list(CHECKPOINTS))
def test_an_odd_checkpoint_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "app.log"
    log.write_text(RECORD + "\n")
    checkpoint = tmp_path / "checkpoint"
    CHECKPOINTS[case](checkpoint)
    args = ["run", "--source", f"file:{log}", "--follow", "--file-checkpoint", str(checkpoint)]
    args += ["--results", f"file:{tmp_path / 'out.jsonl'}", "--metrics-port", "off"]
    args += ["--dead-letters", f"file:{tmp_path / 'dead.jsonl'}"]
    assert _timed(args) == Exit.USAGE
    _one_line(capsys.readouterr().err, str(checkpoint))


def test_a_cache_file_that_is_not_sqlite_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(RECORD + "\n")
    cache = tmp_path / "cache.sqlite"
    cache.write_text("these are notes, not a database\n" * 100)
    with FakeLlmServer() as server:
        monkeypatch.setenv("STEF_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
        code = _timed(["replay", str(log), "--no-progress", "--cache", str(cache)])
    assert code == Exit.USAGE
    _one_line(capsys.readouterr().err, str(cache))
    assert cache.read_text().startswith("these are notes")  # left as it was


def test_a_metrics_port_already_taken_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "app.log"
    log.write_text(RECORD + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["run", "--source", f"file:{log}", "--results", f"file:{tmp_path / 'o.jsonl'}"]
        args += ["--dead-letters", f"file:{tmp_path / 'd.jsonl'}", "--metrics-port", str(port)]
        assert _timed(args) == Exit.USAGE
    _one_line(capsys.readouterr().err, f"127.0.0.1:{port}")


# A directory is a rules directory (one file per app), so it is not among the bad cases here.
RULES_CASES = ["invalid_utf8", "5000_digit_integer", "5000_deep_nesting", "fifo", "missing"]
RULES_CASES += ["huge", "not_a_mapping", "not_yaml"]


@pytest.mark.parametrize("case", RULES_CASES)
def test_a_bad_rules_file_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, _ = CASES[case]
    path = tmp_path / "rules.yaml"
    make(path)
    assert _timed(["check", "--rules", str(path)]) == Exit.USAGE
    _one_line(capsys.readouterr().err, str(path))


def _calibration(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    """The shipped heuristic calibration with ``change`` made to it."""

    def make(path: Path) -> None:
        data = json.loads(default_path("heuristic").read_text())  # type: ignore[union-attr]
        change(data)
        path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them

    return make


CALIBRATIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "not a regular file"),
    "dev_zero": (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
    "directory": (lambda p: p.mkdir(), "directory"),
    "huge": (_write(b" " * (17 << 20)), "larger than"),
    "5000_deep": (_write(b"[" * 5000 + b"]" * 5000), "not JSON"),
    "utf16": (_write('{"format": 2}'.encode("utf-16")), "not UTF-8"),
    "nan_in_map": (_calibration(lambda d: d["map"]["y"].__setitem__(2, math.nan)), "map.y.2"),
    "y_above_1": (_calibration(lambda d: d["map"].update(y=[0.1, 0.2, 3, 5, 7, 9])), "map.y.2"),
    "x_below_0": (_calibration(lambda d: d["map"]["x"].__setitem__(0, -10)), "map.x.0"),
    "platt_nan": (
        _calibration(lambda d: d.update(map={"kind": "platt", "a": math.nan, "b": 0})),
        "map.a",
    ),
    "transfer_inf": (
        _calibration(lambda d: d["transfer"].update(mean_p_wrong=math.inf)),
        "transfer.mean_p_wrong",
    ),
    # Printed at the end of every run ("AUC 0.64"): a 401-digit one stopped it there
    # (OverflowError, exit 1 after every result was written); NaN printed "AUC nan".
    "auc_401_digits": (_calibration(lambda d: d["metrics"].update(auc=10**400)), "metrics.auc"),
    "auc_nan": (_calibration(lambda d: d["metrics"].update(auc=math.nan)), "metrics.auc"),
    "kappa_text": (_calibration(lambda d: d["metrics"].update(kappa="high")), "metrics.kappa"),
}


@pytest.mark.parametrize("case", list(CALIBRATIONS))
def test_a_bad_calibration_file_is_one_line(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO held the start for ever (deaf to SIGTERM), /dev/zero filled the memory, deep
    nesting was a traceback, and a map with a NaN, an infinity or a point outside 0-1 was
    applied: every p_correct it touched came out as the floor or the ceiling."""
    make, says = CALIBRATIONS[case]
    path = tmp_path / "calibration.json"
    make(path)
    log = tmp_path / "app.log"
    log.write_text(RECORD + "\n")
    monkeypatch.setenv("STEF_CALIBRATION", str(path))
    assert _timed(["replay", str(log), "--no-progress"]) == Exit.USAGE
    assert says in _one_line(capsys.readouterr().err, str(path))
