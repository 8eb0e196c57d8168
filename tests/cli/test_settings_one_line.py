"""Five settings that ended in a traceback (exit 1) are one line and exit 2 (issue 32, item 4):
``STEF_LLM_PRICES`` nested 5,000 deep or holding a 5,001-digit integer, a canary file nested
5,000 deep, a checkpoint whose offset is negative, and an API key with non-ASCII characters
(at ``--log-level debug``, where the HTTP library's failure surfaced as a traceback)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit
from stef.testing.fake_server import FakeLlmServer

RECORDS = "".join(
    json.dumps({"id": f"r{i}", "question": f"How many orders in {2020 + i}?", "sql": "SELECT 1"})
    + "\n"
    for i in range(3)
)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLlmServer]:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)
    with FakeLlmServer() as server:
        monkeypatch.setenv("STEF_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
        yield server


def _run(tmp_path: Path, *extra: str) -> int:
    log = tmp_path / "app.log"
    log.write_text(RECORDS)
    args = ["run", "--source", f"file:{log}", "--results", f"file:{tmp_path / 'out.jsonl'}"]
    args += ["--dead-letters", f"file:{tmp_path / 'dead.jsonl'}", "--metrics-port", "off"]
    return main([*args, *extra])


def _one_line(err: str, *names: str) -> str:
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("{")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("stef run: ")
    for name in names:
        assert name in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "prices",
    ["[" * 5000 + "]" * 5000, '{"m": {"prompt": ' + "9" * 5001 + ', "completion": 1}}'],
    ids=["5000_deep", "5001_digits"],
)
@pytest.mark.usefixtures("llm")
def test_prices_that_json_cannot_hold_are_one_line(
    prices: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEF_LLM_PRICES", prices)
    assert _run(tmp_path) == Exit.USAGE
    _one_line(capsys.readouterr().err, "STEF_LLM_PRICES")


@pytest.mark.usefixtures("llm")
def test_a_canary_nested_5000_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    canary = tmp_path / "canary.jsonl"
    canary.write_text("[" * 5000 + "]" * 5000 + "\n")
    assert _run(tmp_path, "--canary", str(canary)) == Exit.USAGE
    _one_line(capsys.readouterr().err, str(canary))


@pytest.mark.usefixtures("llm")
def test_a_checkpoint_with_a_negative_offset_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, checkpoint = tmp_path / "app.log", tmp_path / "checkpoint"
    log.write_text(RECORDS)
    st = os.stat(log)
    head = log.read_bytes()[:10]
    sha = hashlib.sha256(head).hexdigest()
    identity = {"dev": st.st_dev, "ino": st.st_ino, "head_len": 10, "head_sha256": sha}
    saved = {"version": 1, "source": str(log), "file": identity, "offset": -5, "line": 1}
    checkpoint.write_text(json.dumps(saved))
    assert _run(tmp_path, "--follow", "--file-checkpoint", str(checkpoint)) == Exit.USAGE
    _one_line(capsys.readouterr().err, str(checkpoint))


def test_a_non_ascii_api_key_is_one_line_and_never_shown(
    llm: FakeLlmServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STEF_LLM_API_KEY", "sk-clé-ünïcode")
    assert _run(tmp_path, "--log-level", "debug") == Exit.USAGE
    err = capsys.readouterr().err
    _one_line(err, "STEF_LLM_API_KEY")
    assert "clé" not in err
    assert llm.requests == []  # refused before any call
