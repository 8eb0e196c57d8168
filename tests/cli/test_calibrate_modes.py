"""``stef calibrate LABELS`` (judged now) and ``stef calibrate --results R --labels L`` (judged
before) read the same records the same way: the same pass rule on the same calibrated
p_correct, and the same κ, AUC, Brier and ECE (issue 31 §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.calibration import calibration_for
from stef.cli import main
from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import load_rules
from tests.conftest import write_jsonl

ROWS = [
    ("How many singers are there?", "SELECT COUNT(*) FROM singer", True),
    ("Names of singers from France", "SELECT name FROM singer WHERE country = 'Germany'", False),
    ("Names of singers from France", "SELECT name FROM singer WHERE country = 'France'", True),
    ("Orders in 2023 from EMEA", "SELECT * FROM orders WHERE region = 'EMEA'", False),
    ("Orders in 2023 from EMEA",
     "SELECT * FROM orders WHERE region = 'EMEA' AND year = 2023", True),
    ("Average age of singers", "SELECT MAX(age) FROM singer", False),
    ("Average age of singers", "SELECT AVG(age) FROM singer", True),
    ("Top 3 customers by revenue",
     "SELECT customer, SUM(revenue) FROM sales GROUP BY customer", False),
    ("Top 3 customers by revenue",
     "SELECT customer, SUM(revenue) AS r FROM sales GROUP BY customer ORDER BY r DESC LIMIT 3",
     True),
    ("Count stadiums with capacity above 5000",
     "SELECT COUNT(*) FROM stadium WHERE capacity > 500", False),
]  # fmt: skip
FIGURES = ("n", "kappa", "auc", "brier", "ece", "confusion", "pass_rule", "probability")


def test_file_mode_and_results_mode_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {"id": f"r{i}", "question": q, "sql": sql, "label": label}
        for i, (q, sql, label) in enumerate(ROWS)
    ]
    labelled = tmp_path / "labelled.jsonl"
    write_jsonl(labelled, records)
    judge = HeuristicJudge()
    pipeline = Pipeline(
        load_rules(None), judge, PipelineOptions(calibration=calibration_for(None, judge.info))
    )
    results, labels = tmp_path / "results.jsonl", tmp_path / "labels.jsonl"
    lines = []
    for r in records:
        payload = {k: v for k, v in r.items() if k != "label"}
        result = pipeline.process(json.dumps(payload).encode(), {}).result
        assert result is not None
        lines.append(result.to_json())
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_jsonl(labels, ({"id": r["id"], "label": r["label"]} for r in records))
    assert main(["calibrate", str(labelled), "--json", "--no-progress"]) == 0
    now = json.loads(capsys.readouterr().out)
    assert main(["calibrate", "--results", str(results), "--labels", str(labels), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert now["probability"] == "p_correct" and now["auc"] is not None
    assert {k: now[k] for k in FIGURES} == {k: before[k] for k in FIGURES}
