"""Local LLM settings are checked before the network (issue 32, item 5): with STEF_LLM_MODEL
unset, or an LLM cache file that is not SQLite, ``stef run`` against an endpoint that does not
answer exits 2 naming the setting, not 3 blaming the endpoint."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit


@pytest.fixture
def unreachable(monkeypatch: pytest.MonkeyPatch) -> str:
    """An endpoint on a loopback port nothing listens on."""
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("STEF_LLM_BASE_URL", url)
    return url


def _run(tmp_path: Path) -> int:
    log = tmp_path / "app.log"
    log.write_text(json.dumps({"question": "How many orders?", "sql": "SELECT 1"}) + "\n")
    args = ["run", "--source", f"file:{log}", "--results", f"file:{tmp_path / 'out.jsonl'}"]
    args += ["--dead-letters", f"file:{tmp_path / 'dead.jsonl'}", "--metrics-port", "off"]
    return main(args)


def _line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("{")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.usefixtures("unreachable")
def test_no_model_is_a_settings_error_before_the_endpoint_is_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path) == Exit.USAGE
    line = _line(capsys.readouterr().err)
    assert "STEF_LLM_MODEL" in line and "connect" not in line


@pytest.mark.usefixtures("unreachable")
def test_a_cache_file_that_is_not_sqlite_is_a_settings_error_before_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache.db"
    cache.write_text("not a database, just text\n" * 100)
    monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
    monkeypatch.setenv("STEF_LLM_CACHE", str(cache))
    assert _run(tmp_path) == Exit.USAGE
    line = _line(capsys.readouterr().err)
    assert str(cache) in line and "connect" not in line
    assert cache.read_text().startswith("not a database")  # left as it was


def test_good_local_settings_still_meet_the_endpoint_check(
    unreachable: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
    assert _run(tmp_path) == Exit.JUDGE_ERROR
    assert unreachable in _line(capsys.readouterr().err)
