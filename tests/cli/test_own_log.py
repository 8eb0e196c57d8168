"""First contact with one's own log (issue 34 §3): an unmapped log is told its required fields are
missing and pointed at field_mapping (a nested optional field does not hide that), the lines come
in input order, no empty table prints for 0 judged records, and the README's "Judge your own log"
works as written."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit
from tests.conftest import ROOT, run_stef

CHAT = {
    "request_id": "r-1",
    "agent": {"name": "sqlbot", "version": "1.4"},
    "messages": [
        {"role": "user", "content": "How many orders in 2023?"},
        {"role": "assistant", "content": "```sql\nSELECT COUNT(*) FROM orders\n```"},
    ],
}


@pytest.fixture(autouse=True)
def _no_stef_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)


def _invalid_lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if ": invalid input (" in x]


def test_an_unmapped_chat_log_is_told_its_required_fields_and_the_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text(json.dumps(CHAT) + "\n")
    assert main(["replay", str(log), "--no-progress"]) == Exit.FAILURE
    captured = capsys.readouterr()
    (line,) = _invalid_lines(captured.err)
    # Before: "field 'agent' (from 'agent') must be a string, not dict".
    assert "(missing_field): required fields 'question' and 'sql'" in line
    assert "field_mapping" in line and "'agent'" not in line
    # Before: a table of zeros and a TOTAL row for 0 judged records.
    assert "TOTAL" not in captured.out and "app " not in captured.out


def test_a_nested_optional_field_names_the_mapping_that_reads_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text(json.dumps({**CHAT, "question": "How many orders?", "sql": "SELECT 1"}) + "\n")
    main(["replay", str(log), "--no-progress"])
    (line,) = _invalid_lines(capsys.readouterr().err)
    assert "(wrong_type)" in line and "agent: agent.<key>" in line


def test_invalid_lines_are_reported_in_input_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "mixed.jsonl"
    good = {"question": "How many orders in 2023?", "sql": "SELECT COUNT(*) FROM orders"}
    rows = [json.dumps(good) if i % 3 == 0 else json.dumps({"n": i}) for i in range(60)]
    rows[30] = ""  # a blank line is no record and holds nothing back
    log.write_text("\n".join(rows) + "\n")
    assert main(["replay", str(log), "--no-progress", "--concurrency", "8"]) == Exit.OK
    said = [
        int(re.search(r":(\d+): invalid", x).group(1))
        for x in _invalid_lines(capsys.readouterr().err)
    ]  # type: ignore[union-attr]
    expected = [i + 1 for i in range(60) if i % 3 and i != 30]
    assert said == expected


def _readme_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Judge your own log")
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_readme_judge_your_own_log_runs_as_written(tmp_path: Path) -> None:
    section = _readme_section()
    assert len(section.strip().splitlines()) < 25
    record = json.loads(re.search(r"```json\n(.*?)```\n", section, re.S).group(1))  # type: ignore[union-attr]
    config = re.search(r"```yaml\n(.*?)```\n", section, re.S).group(1)  # type: ignore[union-attr]
    command = re.search(r"and the run: `([^`]+)`", section).group(1)  # type: ignore[union-attr]
    (tmp_path / "my-log.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "stef.yaml").write_text(config)
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/stef"
    done = run_stef(*argv[1:], cwd=tmp_path, STEF_STATE_DIR=str(tmp_path / "state"))
    assert done.returncode == 0, done.stderr
    (result,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert result["id"] == "r-17" and result["outcome"] == "evaluated"
    assert (result["agent"], result["agent_version"]) == ("sqlbot", "1.4")
    assert result["timestamp"].startswith("2024-05-29")
    assert "sql_extracted" in result["normalizations"]
