"""A refused start empties no file (issue 34 §1): ``stef replay`` replaces its outputs only once
the run has started, so a bad setting, rules file, endpoint or source leaves every existing output
byte-identical; a replay that runs still replaces them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit
from stef.testing.fake_server import FakeLlmServer

RECORD = {"question": "How many orders in 2023?", "sql": "SELECT COUNT(*) FROM orders"}
KEPT = b'{"an": "earlier result"}\n' * 30


def _clean_env(mp: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("STEF_"):
            mp.delenv(name)


def _bad_settings(tmp_path: Path, mp: pytest.MonkeyPatch) -> list[str]:
    config = tmp_path / "stef.yaml"
    config.write_text("concurrency: [1, 2]\n")
    return ["--config", str(config)]


def _bad_rules(tmp_path: Path, mp: pytest.MonkeyPatch) -> list[str]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "default.yaml").write_text("column_mapings:\n  region: RegionName\n")
    return ["--rules", str(rules)]


def _bad_endpoint(tmp_path: Path, mp: pytest.MonkeyPatch) -> list[str]:
    server = FakeLlmServer(api_key="sk-right-key-0123456789").start()
    _SERVERS.append(server)
    mp.setenv("STEF_LLM_BASE_URL", server.base_url)
    mp.setenv("STEF_LLM_MODEL", "fake-model")
    mp.setenv("STEF_LLM_API_KEY", "sk-wrong-key-9876543210")
    mp.setenv("STEF_LLM_MAX_RETRIES", "0")
    return []


def _bad_source(tmp_path: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp_path / "log.jsonl").unlink()
    (tmp_path / "log.jsonl").mkdir()  # a directory, not a log
    return []


_SERVERS: list[FakeLlmServer] = []

REFUSALS: dict[str, tuple[Callable[[Path, pytest.MonkeyPatch], list[str]], int]] = {
    "settings": (_bad_settings, Exit.USAGE),
    "rules": (_bad_rules, Exit.USAGE),
    "endpoint": (_bad_endpoint, Exit.JUDGE_ERROR),
    "source": (_bad_source, Exit.USAGE),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_refused_replay_leaves_its_outputs_byte_identical(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_env(monkeypatch)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(RECORD) + "\n")
    out, dead = tmp_path / "keep.jsonl", tmp_path / "dead.jsonl"
    out.write_bytes(KEPT)
    dead.write_bytes(KEPT)
    make, status = REFUSALS[kind]
    extra = make(tmp_path, monkeypatch)
    try:
        code = main(
            [
                "replay",
                str(log),
                "--no-progress",
                "-o",
                str(out),
                "--dead-letters",
                str(dead),
                *extra,
            ]
        )
    finally:
        while _SERVERS:
            _SERVERS.pop().close()
    assert code == status
    assert out.read_bytes() == KEPT
    assert dead.read_bytes() == KEPT
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_replay_that_runs_replaces_its_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_env(monkeypatch)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(RECORD) + "\nnot json\n")
    out, dead = tmp_path / "keep.jsonl", tmp_path / "dead.jsonl"
    out.write_bytes(KEPT)
    dead.write_bytes(KEPT)
    code = main(["replay", str(log), "--no-progress", "-o", str(out), "--dead-letters", str(dead)])
    assert code == Exit.OK
    assert [json.loads(x)["outcome"] for x in out.read_text().splitlines()] == ["evaluated"]
    assert len(dead.read_text().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_replaced_output_keeps_its_mode_and_its_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_env(monkeypatch)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(RECORD) + "\n")
    real = tmp_path / "real.jsonl"
    real.write_bytes(KEPT)
    real.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert main(["replay", str(log), "--no-progress", "-o", str(link)]) == Exit.OK
    assert link.is_symlink() and len(real.read_text().splitlines()) == 1
    assert real.stat().st_mode & 0o777 == 0o640
