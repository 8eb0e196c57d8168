"""``stef canary add``: labelled results become canary lines once, in the calibrate format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.cli import main
from stef.labels_file import read_labels


def test_labelled_results_join_the_canary_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r.jsonl"
    rows = [
        {"id": "a", "app": "sales", "outcome": "evaluated", "score": 90.0, "judge": {},
         "input": {"question": "Orders in EMEA", "enriched_question": None,
                   "sql": "SELECT 1 FROM orders WHERE region = 'EMEA'"}},
        {"id": "b", "app": "hr", "outcome": "evaluated", "score": 10.0, "judge": {},
         "input": {"question": "Staff", "sql": "SELECT name FROM staff"}},
        {"id": "c", "app": "sales", "outcome": "evaluated", "score": 10.0, "judge": {}},
        {"id": "d", "app": "sales", "outcome": "evaluated", "score": 10.0, "judge": {},
         "input": {"question": "x", "sql": "SELECT 2"}},
    ]  # fmt: skip
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels = tmp_path / "l.jsonl"
    labels.write_text(
        '{"id": "a", "label": true}\n{"id": "b", "label": false}\n'
        '{"id": "c", "label": false}\n{"id": "d", "label": null}\n'
    )
    canary = tmp_path / "canary.jsonl"
    argv = ["canary", "add", "--results", str(results), "--labels", str(labels)]
    assert main([*argv, "--canary", str(canary)]) == 0
    assert json.loads(capsys.readouterr().out) == {"added": 2, "without_question_or_sql": 1}
    assert main([*argv, "--canary", str(canary)]) == 0  # again: nothing new
    assert json.loads(capsys.readouterr().out)["added"] == 0
    read = read_labels(canary)  # the format stef calibrate and the canary read
    assert [(x.payload["id"], x.label, x.payload.get("app")) for x in read] == [
        ("a", True, "sales"),
        ("b", False, "hr"),
    ]
    assert read[0].payload["sql"] == rows[0]["input"]["sql"]  # type: ignore[index]
    assert read[0].source == "review"
