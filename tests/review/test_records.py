"""Results read for people: the input log joined by id, the teaching and random orders, and
bad lines named with their number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from stef.errors import FileError
from stef.results_file import read_results
from stef.review.records import queue
from tests.conftest import write_jsonl


def test_input_log_is_joined_by_id_where_results_lack_input(tmp_path: Path) -> None:
    results = write_jsonl(
        tmp_path / "r.jsonl",
        [
            {"id": "a", "outcome": "evaluated"},
            {"id": "b", "outcome": "evaluated", "input": {"question": "kept", "sql": "SELECT 2"}},
        ],
    )
    log = write_jsonl(
        tmp_path / "log.jsonl",
        [
            "not json",  # the log's bad lines are passed over: their dead letters say why
            {"id": "a", "question": "Orders?", "sql": "SELECT 1", "enriched_question": "E"},
            {"id": "b", "question": "replaced?", "sql": "SELECT 3"},
        ],
    )
    got = {r["id"]: r["input"] for r in read_results(results, log)}
    assert got["a"] == {"question": "Orders?", "enriched_question": "E", "sql": "SELECT 1"}
    assert got["b"]["question"] == "kept"


def test_teaching_order_and_filters() -> None:
    def rec(rid: str, **kw: Any) -> dict[str, Any]:
        return {"id": rid, "outcome": "evaluated", "app": "sales", "judge": {}, **kw}

    records = [
        rec("plain"),
        rec("error", outcome="judge_error"),
        rec("unsafe", safety={"mutating": True}),
        rec("second", judge={"second_opinion": {"agrees": False}}),
        rec("p90", judge={"p_correct": 0.9}),
        rec("p55", judge={"p_correct": 0.55}),
        rec("flagged", needs_review=True, judge={"p_correct": 0.99}),
        rec("sampled", outcome="skipped_sampling"),
        rec("hr", app="hr", issues=["filters_missing"]),
    ]
    order = [r["id"] for r in queue(records)]
    assert order == ["flagged", "p55", "p90", "second", "unsafe", "error", "plain", "hr"]
    assert [r["id"] for r in queue(records, app="hr")] == ["hr"]
    assert [r["id"] for r in queue(records, issue="filters_missing")] == ["hr"]
    shuffled = [r["id"] for r in queue(records, order="random")]
    assert sorted(shuffled) == sorted(order) and shuffled == [
        r["id"] for r in queue(list(reversed(records)), order="random")
    ]


def test_a_line_that_is_not_a_result_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "outcome": "evaluated"}, {"id": 3}])
    with pytest.raises(FileError, match=r"r\.jsonl:2:"):
        read_results(path)


def test_review_refuses_a_broken_labels_file_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "outcome": "evaluated"}])
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": "a", "label": "yes"}])
    argv = ["review", "--results", str(results), "--labels", str(labels), "--port", "0"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{labels}:1:" in err and "Traceback" not in err
