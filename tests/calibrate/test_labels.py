"""The labelled records: reading the labels file, judging through the one record path (gold SQL
never reaches the judge, errors are kept, order is kept), re-formatting and sampling."""

from __future__ import annotations

from pathlib import Path

import pytest

from stef.calibrate.agreement import confusion_at
from stef.calibrate.labels import judge_all, reformat_sql, without_sampling
from stef.errors import FileError
from stef.labels_file import LabelledRecord, read_labels
from stef.pipeline import Pipeline
from stef.rules import load_rules
from tests.calibrate.conftest import Recording, labels_file
from tests.conftest import ROOT


def test_reformat_normalises_keyword_case() -> None:
    out = reformat_sql("select count(distinct a) from t where b = 'x'", "sqlite")
    assert out == "SELECT COUNT(DISTINCT a) FROM t WHERE b = 'x'"
    assert reformat_sql("SELECT FROM WHERE ((", None) == "SELECT FROM WHERE (("


def test_gold_sql_never_reaches_the_judge_and_errors_are_kept(tmp_path: Path) -> None:
    records = read_labels(labels_file(tmp_path))
    assert [r.label for r in records] == [True, False, True, False]
    backend = Recording()
    items = judge_all(Pipeline(load_rules(None), backend), records, concurrency=2)
    assert len(items) == 4
    assert all("gold_secret_table" not in r.model_dump_json() for r in backend.seen)
    assert items[2].score is None  # judge_error
    assert items[3].score is None  # invalid input (question is a number)
    assert items[1].error_types == ("Value Mismatch",)
    assert confusion_at(items, 75.0).n == 4


def test_results_keep_input_order_under_concurrency() -> None:
    records = [
        LabelledRecord(
            n, {"id": str(n), "question": f"q {n}", "sql": f"SELECT {n}"}, n % 2 == 0, None, ()
        )
        for n in range(40)
    ]
    backend = Recording()
    items = judge_all(Pipeline(load_rules(None), backend), records, concurrency=4)
    assert [i.label for i in items] == [r.label for r in records]


def test_reformat_changes_what_the_judge_sees() -> None:
    rec = LabelledRecord(
        1, {"question": "How many?", "sql": "select count(*) from t"}, True, None, ()
    )
    backend = Recording()
    judge_all(Pipeline(load_rules(None), backend), [rec], reformat=True)
    assert backend.seen[0].record.sql == "SELECT COUNT(*) FROM t"


def test_sampling_is_switched_off() -> None:
    rules = without_sampling(load_rules(ROOT / "rules"))
    assert rules.for_app("support").sampling_rate == 1.0
    assert load_rules(ROOT / "rules").for_app("support").sampling_rate < 1.0


def test_read_labels_rejects_unlabelled_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "sql": "SELECT 1", "label": true}\n{"question": "q"}\n')
    with pytest.raises(FileError, match=":2: 'label' must be true or false"):
        read_labels(path)
    assert len(read_labels(path, limit=1)) == 1


def test_a_limit_stops_before_the_lines_after_it(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"question": "q", "sql": "SELECT 1", "label": true}\n{broken\n')
    assert read_labels(path, limit=0) == []
    assert len(read_labels(path, limit=1)) == 1  # the broken line is never read
