"""One log stream (issue 25 section 6): text for people on a terminal, JSON lines otherwise
(``--log-format`` forces either), and each dead letter of a replay said once."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit
from stef.testing.fake_server import FakeLlmServer
from tests.conftest import STEF, run_stef

GOOD = {"id": "r-1", "question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    return path


def _stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run stef with its stderr on a pseudo-terminal; its exit status and what it wrote there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*STEF, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=_env(),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_the_log_is_text_for_people(tmp_path: Path) -> None:
    status, text = _stderr_on_a_terminal(
        "--log-level", "info", "replay", str(_log(tmp_path)), "--no-progress"
    )
    assert status == Exit.OK, text
    lines = [line for line in text.splitlines() if "service_started" in line]
    assert len(lines) == 1, text
    assert not lines[0].lstrip().startswith("{")  # not a JSON object
    assert "[info" in re.sub(r"\x1b\[[0-9;]*m", "", lines[0])


def test_log_format_json_holds_on_a_terminal(tmp_path: Path) -> None:
    status, text = _stderr_on_a_terminal(
        "--log-level",
        "info",
        "--log-format",
        "json",
        "replay",
        str(_log(tmp_path)),
        "--no-progress",
    )
    assert status == Exit.OK, text
    started = [json.loads(line) for line in text.splitlines() if "service_started" in line]
    assert [line["level"] for line in started] == ["info"]


def test_off_a_terminal_the_log_is_json_lines(tmp_path: Path) -> None:
    proc = run_stef("replay", str(_log(tmp_path)), "--log-level", "info")
    assert proc.returncode == Exit.OK, proc.stderr
    events = [json.loads(line)["event"] for line in proc.stderr.splitlines() if line[:1] == "{"]
    assert "service_started" in events


def test_an_unknown_log_format_in_the_environment_is_a_usage_error() -> None:
    proc = run_stef("rules", "schema", STEF_LOG_FORMAT="yaml")
    assert proc.returncode == Exit.USAGE
    assert "Traceback" not in proc.stderr and "log format" in proc.stderr


@pytest.mark.parametrize("fmt", [None, "console"])
def test_a_replay_says_each_dead_letter_once(
    fmt: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text(
        "\n".join([json.dumps(GOOD), "not json", json.dumps({"id": "r-3"}), json.dumps(GOOD)])
        + "\n",
        encoding="utf-8",
    )
    form = ["--log-format", fmt] if fmt else []  # None: not a terminal, JSON lines
    status = main(["--log-level", "info", *form, "replay", str(log), "--no-progress"])
    assert status == Exit.OK
    stderr = capsys.readouterr().err
    for line in (1, 2, 3, 4):
        # FILE:LINE: in the replay's own message, "line": N or line=N in a log line
        mention = re.compile(rf':{line}:|"line": {line}\b|\bline={line}\b')
        said = [text for text in stderr.splitlines() if mention.search(text)]
        assert len(said) == (1 if line in (2, 3) else 0), said


@pytest.mark.parametrize(("deps", "shown"), [(None, False), ("debug", True)])
def test_debug_against_a_real_endpoint_keeps_the_http_clients_quiet_unless_asked(
    deps: str | None, shown: bool, tmp_path: Path
) -> None:
    flags = ["--log-deps-level", deps] if deps else []
    with FakeLlmServer() as server:
        llm = {
            "STEF_LLM_BASE_URL": server.base_url,
            "STEF_LLM_MODEL": "judge-model",
            "STEF_LLM_API_KEY": "test-key",
        }
        proc = run_stef("--log-level", "debug", *flags, "replay", str(_log(tmp_path)), **llm)
    assert proc.returncode == Exit.OK, proc.stderr
    lines = [json.loads(line) for line in proc.stderr.splitlines()]  # every line JSON
    loggers = {line["logger"].split(".")[0] for line in lines}
    assert "stef" in loggers  # STEF's own debug lines are there
    clients = loggers & {"httpx", "httpx2", "httpcore", "httpcore2", "openai"}
    assert bool(clients) is shown, sorted(loggers)
