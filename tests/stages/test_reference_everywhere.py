"""A decisive reference is the record's verdict everywhere (issue 30 §3): the result's
verdict, confidence, tier and review flag, the summary's verdict mix and estimated accuracy
(no "use references" note while references decide every record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.cli import main

ROWS = [
    {
        "id": "same-1",
        "question": "List the singers from France",
        "sql": "SELECT name FROM singer WHERE country = 'France'",
        "gold_sql": "SELECT s.name FROM singer AS s WHERE (s.country = 'France')",
    },
    {
        "id": "same-2",
        "question": "How many concerts were held in 2014?",
        "sql": "SELECT COUNT(*) FROM concert WHERE year = 2014",
        "gold_sql": "SELECT COUNT(*) FROM concert WHERE 2014 = year",
    },
    {
        "id": "offset",
        "question": "Which singer has the second highest fee?",
        "sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 2, 1",
        "gold_sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 1, 1",
    },
]


@pytest.fixture
def results(tmp_path: Path) -> list[dict[str, object]]:
    log, out = tmp_path / "log.jsonl", tmp_path / "results.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["replay", str(log), "--no-progress", "-o", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_reference_sets_confidence_tier_and_review(
    results: list[dict[str, object]],
) -> None:
    by_id = {r["id"]: r for r in results}
    for rid, verdict in (("same-1", "Correct"), ("same-2", "Correct"), ("offset", "Incorrect")):
        rec = by_id[rid]
        ref, components, judge = rec["reference"], rec["components"], rec["judge"]
        assert isinstance(ref, dict) and isinstance(components, dict) and isinstance(judge, dict)
        assert ref["verdict"] == verdict
        assert judge["p_correct"] == ref["p_correct"]
        assert components["confidence"] == max(ref["p_correct"], 1 - ref["p_correct"])
        assert rec["needs_review"] is False
    assert by_id["same-1"]["tier"] == "excellent"


def test_the_summary_reads_the_references(
    results: list[dict[str, object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    capsys.readouterr()
    assert main(["summary", str(path), "--format", "json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    # The verdict mix is the judge's (the reference's verdict is reference.verdict).
    judged = [r["components"]["verdict"] for r in results]  # type: ignore[index]
    errors = sum(v == "Incorrect" for v in judged) / len(judged)
    assert total["verdict_mix"]["error"] == pytest.approx(errors, abs=1e-3)
    assert total["estimated_accuracy_note"] is None
    p = [r["judge"]["p_correct"] for r in results]  # type: ignore[index]
    assert total["estimated_accuracy"]["value"] == pytest.approx(sum(p) / len(p), abs=1e-4)
