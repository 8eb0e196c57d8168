"""A run whose every record is a dead letter says so, names the likely cause, and fails
(issue 25 §4): before, it exited 0 with an empty summary."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_stef, write_jsonl


def _log(tmp_path: Path) -> Path:
    # An agent's own field names, no field_mapping: every record misses `question` and `sql`.
    log = tmp_path / "agent.jsonl"
    rows = [
        {"user_query": f"How many orders in {2020 + i}?", "gen_sql": "SELECT 1"} for i in range(5)
    ]
    write_jsonl(log, rows)
    return log


def _stef(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_stef(*args, cwd=ROOT, STEF_STATE_DIR=str(tmp_path / "state"))


@pytest.mark.parametrize("command", ["replay", "run"])
def test_a_run_of_nothing_but_dead_letters_fails_and_names_the_field_mapping(
    tmp_path: Path, command: str
) -> None:
    log = _log(tmp_path)
    if command == "replay":
        args = ["replay", str(log), "--output", str(tmp_path / "r.jsonl")]
    else:
        args = [
            "run",
            "--source",
            f"file:{log}",
            "--results",
            f"file:{tmp_path / 'r.jsonl'}",
            "--dead-letters",
            f"file:{tmp_path / 'd.jsonl'}",
            "--metrics-port",
            "off",
            "--file-checkpoint",
            "off",
        ]
    proc = _stef(tmp_path, *args)
    assert proc.returncode == 1, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if "every one of the 5 records" in ln]
    assert len(line) == 1 and "field_mapping" in line[0]


def test_a_replay_with_some_valid_records_is_not_refused(tmp_path: Path) -> None:
    log = _log(tmp_path)
    with log.open("a") as fh:
        fh.write(
            json.dumps({"question": "How many orders?", "sql": "SELECT COUNT(*) FROM o"}) + "\n"
        )
    proc = _stef(tmp_path, "replay", str(log), "--output", str(tmp_path / "r.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert "every one of" not in proc.stderr
