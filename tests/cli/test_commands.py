"""The CLI: stef judge, stef replay (invalid lines never fatal), stef summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from stef.cli import main
from tests.conftest import ROOT


def test_judge_flags_subprocess(stef_cli: Callable[..., CompletedProcess[str]]) -> None:
    proc = stef_cli(
        "judge",
        "--question",
        "How many customers are in APAC?",
        "--sql",
        "SELECT COUNT(*) FROM customers WHERE region = 'APAC'",
        "--app",
        "sales",
        "--rules",
        str(ROOT / "rules"),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "evaluated" and result["app"] == "sales"
    assert result["sql_spec"]["dialect"] == "snowflake"
    # Every filter found (Φ before Γ is 100), but the heuristic's calibrated confidence is below
    # the multiplier's top cut-off: it cannot say excellent (issue 22).
    c = result["components"]
    assert c["confidence_source"] == "calibrated" and 0 < result["judge"]["p_correct"] < 1
    assert result["score"] == 100.0 * c["confidence_multiplier"] < 100.0
    assert result["tier"] != "excellent"


def test_judge_needs_question_and_sql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "--question", "q"]) == 2
    assert "--sql" in capsys.readouterr().err


def test_judge_invalid_stdin(stef_cli: Callable[..., CompletedProcess[str]]) -> None:
    proc = stef_cli("judge", stdin="[1,2]")
    assert proc.returncode == 1
    assert "not_object" in proc.stderr


def test_replay_reports_invalid_lines(
    tmp_path: Path, stef_cli: Callable[..., CompletedProcess[str]]
) -> None:
    log = tmp_path / "log.jsonl"
    lines = [
        json.dumps(
            {
                "id": "a",
                "question": "How many users?",
                "sql": "SELECT COUNT(*) FROM u",
                "app": "sales",
                "agent": "bot",
                "agent_version": "1",
            }
        ),
        "this is not json",
        json.dumps(
            {
                "id": "b",
                "question": "Users in 2023?",
                "sql": "SELECT * FROM u",
                "app": "sales",
                "agent": "bot",
                "agent_version": "1",
            }
        ),
        "",
        json.dumps({"id": "c", "sql": "SELECT 1"}),
        json.dumps({"id": "d", "question": "Drop it", "sql": "DROP TABLE u", "app": "support"}),
    ]
    log.write_text("\n".join(lines) + "\n")
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    proc = stef_cli(
        "replay",
        str(log),
        "--output",
        str(out),
        "--dead-letters",
        str(dead),
        "--rules",
        str(ROOT / "rules"),
        "--concurrency",
        "3",
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{log}:2: invalid input (not_json)" in proc.stderr
    assert f"{log}:5: invalid input (missing_field)" in proc.stderr
    results = [json.loads(x) for x in out.read_text().splitlines()]
    # replay is the service on a file: results are written as they finish
    assert sorted(r["id"] for r in results) == ["a", "b", "d"]
    letters = [json.loads(x) for x in dead.read_text().splitlines()]
    assert [(d["reason"], d["source"]["line"]) for d in letters] == [
        ("not_json", 2),
        ("missing_field", 5),
    ]
    assert letters[0]["payload"] == "this is not json"
    table = proc.stdout
    assert "sales" in table and "bot@1" in table and "TOTAL" in table
    assert "invalid input lines (dead letters): 2" in table
    # support samples 50%: "d" is either judged or skipped, never lost
    d = next(r for r in results if r["id"] == "d")
    assert d["outcome"] in ("evaluated", "skipped_sampling")


def test_summary_of_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The judge's own confidence (no calibration): the figures below are the paper's Φ unscaled.
    monkeypatch.setenv("STEF_CALIBRATION", "none")
    log = tmp_path / "log.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(
                {
                    "question": f"Orders in {y}?",
                    "sql": f"SELECT * FROM o WHERE year = {y}",
                    "app": "x",
                    "agent": "a",
                }
            )
            for y in range(2000, 2010)
        )
    )
    out = tmp_path / "r.jsonl"
    assert main(["replay", str(log), "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    row = next(line for line in table if line.startswith("x "))
    assert row.split()[2:6] == ["10", "100.0", "100.0", "100.0%"]


def test_summary_rejects_non_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text('{"nope": 1}\n')
    assert main(["summary", str(f)]) == 1
    assert ":1: not a result" in capsys.readouterr().err


def test_summary_keeps_long_names_to_one_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "q?", "sql": "SELECT 1", "agent": "G" * 10_000}) + "\n")
    assert main(["replay", str(log), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert max(len(line) for line in table.splitlines()) < 300
    assert "G" * 39 + "…" in table


def test_replay_to_a_pipe_closed_early_keeps_its_failure(tmp_path: Path) -> None:
    """``stef replay -o - | head -1``: the results could not all be written, so the exit
    status is 1, as ``stef run --results -`` says; the summary printed after it to the same
    closed pipe used to turn it into 0."""
    import subprocess
    import sys

    log = str(ROOT / "examples" / "agent_log.jsonl")
    args = ["-o", "-", "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}", "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stef.cli", "replay", log, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["id"]
    proc.stdout.close()  # the reader leaves after one line
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "Exception ignored" not in err


def test_replay_gates_hold_when_the_reader_of_the_summary_left(tmp_path: Path) -> None:
    """``stef replay ... --fail-on poor | head -1``: the gate's status 4 stands; the closed
    pipe under the summary made it 0."""
    import subprocess
    import sys

    log = str(ROOT / "examples" / "agent_log.jsonl")
    out = ["-o", str(tmp_path / "r.jsonl"), "--dead-letters", f"file:{tmp_path / 'd.jsonl'}"]
    gate = ["--no-progress", "--fail-on", "poor,invalid"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stef.cli", "replay", log, *out, *gate],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader leaves before the summary
    assert proc.wait(timeout=120) == 4
