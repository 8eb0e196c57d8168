"""The commands share one parser tree and one settings loader: ``stef --help`` names every
command, a bad log level is a usage error, and a ``--config`` file (its field mapping, its limits)
means the same to ``stef judge`` and ``stef replay``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from stef.exits import Exit
from tests.conftest import run_stef

COMMANDS = ("judge", "replay", "summary", "rules", "run", "calibrate")
# A record in the agent's own field names: the config maps STEF's fields onto them.
AGENT_RECORD = {
    "id": "r-1",
    "user_query": "How many customers are in APAC in 2023?",
    "generated": {"sql": "SELECT COUNT(*) FROM customers WHERE region = 'APAC' AND year = 2023"},
    "app": "sales",
    "bot": "helper",
}
CONFIG = """\
field_mapping:
  question: user_query
  sql: generated.sql
  agent: bot
"""


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what differs from one run to the next (its latency)."""
    usage = {k: v for k, v in result["usage"].items() if k != "latency_ms"}
    return {**result, "usage": usage}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "stef.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- the parser


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*args, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    listed = _help(capsys).split("positional arguments:")[1]
    for command in COMMANDS:
        assert f"\n    {command} " in listed, command


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _help(capsys, command).startswith(f"usage: stef {command}")


def test_run_help_names_the_shared_flags(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "run")
    for flag in ("--config", "--rules", "--log-level"):
        assert flag in text


def test_stef_help_exits_0_as_a_process() -> None:
    proc = run_stef("--help")
    assert proc.returncode == 0, proc.stderr
    assert all(command in proc.stdout for command in COMMANDS)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--log-level", "bogus", "judge"), id="before-the-command"),
        pytest.param(("judge", "--log-level", "bogus"), id="after-the-command"),
        pytest.param(("replay", "-", "--log-level", "bogus"), id="replay"),
    ],
)
def test_a_bogus_log_level_flag_is_a_usage_error(args: tuple[str, ...]) -> None:
    proc = run_stef(*args, stdin="")
    assert proc.returncode == Exit.USAGE
    assert "invalid choice: 'bogus'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bogus_log_level_in_the_config_file_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("log_level: bogus\n", encoding="utf-8")
    proc = run_stef("judge", "--config", str(bad), stdin=json.dumps(AGENT_RECORD))
    assert proc.returncode == Exit.USAGE
    assert "log_level" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bogus_log_level_in_the_environment_is_a_usage_error() -> None:
    proc = run_stef("judge", stdin=json.dumps(AGENT_RECORD), STEF_LOG_LEVEL="bogus")
    assert "Traceback" not in proc.stderr
    assert proc.returncode == Exit.USAGE


# ------------------------------------------------------------------ one settings loader


def test_judge_reads_a_record_in_the_agents_field_names(config: Path) -> None:
    proc = run_stef("judge", "--config", str(config), stdin=json.dumps(AGENT_RECORD))
    assert proc.returncode == Exit.OK, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["id"], result["app"], result["agent"]) == ("r-1", "sales", "helper")
    assert result["outcome"] == "evaluated"
    assert result["sql_spec"]["tables"] == ["customers"]  # the SQL came from generated.sql
    assert {f["rhs"] for f in result["question_spec"]["filters"]} >= {"apac", "2023"}


def test_without_the_config_the_same_record_is_invalid() -> None:
    proc = run_stef("judge", stdin=json.dumps(AGENT_RECORD))
    assert proc.returncode == Exit.FAILURE
    assert "missing_field" in proc.stderr


def test_replay_with_the_same_config_gives_the_same_result(config: Path, tmp_path: Path) -> None:
    judged = run_stef("judge", "--config", str(config), stdin=json.dumps(AGENT_RECORD))
    assert judged.returncode == Exit.OK, judged.stderr
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(AGENT_RECORD) + "\n", encoding="utf-8")
    out = tmp_path / "results.jsonl"
    replayed = run_stef(
        "replay", str(log), "--config", str(config), "-o", str(out), "--no-progress"
    )
    assert replayed.returncode == Exit.OK, replayed.stderr
    [line] = out.read_text(encoding="utf-8").splitlines()
    assert _comparable(json.loads(line)) == _comparable(json.loads(judged.stdout))


def test_stef_config_in_the_environment_is_the_same_as_the_flag(config: Path) -> None:
    by_flag = run_stef("judge", "--config", str(config), stdin=json.dumps(AGENT_RECORD))
    by_env = run_stef("judge", stdin=json.dumps(AGENT_RECORD), STEF_CONFIG=str(config))
    assert by_env.returncode == by_flag.returncode == Exit.OK, by_env.stderr
    assert _comparable(json.loads(by_env.stdout)) == _comparable(json.loads(by_flag.stdout))


def test_limits_in_the_config_apply_to_judge_and_replay(tmp_path: Path) -> None:
    config = tmp_path / "tight.yaml"
    config.write_text(CONFIG + "limits:\n  max_question_chars: 20\n", encoding="utf-8")
    judged = run_stef("judge", "--config", str(config), stdin=json.dumps(AGENT_RECORD))
    assert judged.returncode == Exit.FAILURE
    assert "invalid input (too_large)" in judged.stderr
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(AGENT_RECORD) + "\n", encoding="utf-8")
    dead = tmp_path / "dead.jsonl"
    replayed = run_stef(
        "replay", str(log), "--config", str(config), "--dead-letters", str(dead), "--no-progress"
    )
    # Its only record is a dead letter: the replay says so and fails (issue 25 section 4).
    assert replayed.returncode == Exit.FAILURE, replayed.stderr
    assert "every one of the 1 records was invalid input" in replayed.stderr
    [letter] = [json.loads(x) for x in dead.read_text(encoding="utf-8").splitlines()]
    assert letter["reason"] == "too_large"
    assert letter["source"] == {"file": str(log), "line": 1}
