"""`make eval`'s fixed sample and its figures (bench/eval.py): the same records every time,
balanced by source and label, and the metrics it reports computed right."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.eval import DEV_SET, SAMPLE, SEED, auc, brier, draw_sample, ece
from stef.labels_file import read_labels
from tests.conftest import SHARED_DATA


@pytest.mark.skipif(
    not (SHARED_DATA / "judge-dev.jsonl").exists(), reason="the shared dev set is absent"
)
def test_the_committed_sample_is_the_one_the_seed_draws() -> None:
    records = read_labels(DEV_SET)
    stored = json.loads(SAMPLE.read_text())
    assert stored["seed"] == SEED
    assert draw_sample(records, stored["size"], SEED) == stored["ids"]


def test_the_sample_is_balanced_and_its_prefixes_too() -> None:
    stored = json.loads(SAMPLE.read_text())
    ids = stored["ids"]
    assert len(ids) == len(set(ids)) == 150
    # Every stratum that has enough records holds the same number (20 or 21).
    full = [n for n in stored["strata"].values() if n >= 20]
    assert len(full) == 6 and max(full) - min(full) <= 1
    # The first 30 (a short structured run) come in rounds over the ten strata.
    by_source = Counter(i.split("-")[0] for i in ids[:30])
    assert max(by_source.values()) - min(by_source.values()) <= 2


def test_draw_sample_gives_small_strata_all_they_have() -> None:
    from stef.labels_file import LabelledRecord

    def rec(i: int, source: str, label: bool) -> LabelledRecord:
        return LabelledRecord(
            line=i, payload={"id": f"{source}-{i}"}, label=label, source=source, error_types=()
        )

    records = [rec(i, "big", i % 2 == 0) for i in range(100)] + [rec(100, "small", True)]
    ids = draw_sample(records, 11, seed=1)
    assert "small-100" in ids
    assert Counter(i.split("-")[0] for i in ids) == {"big": 10, "small": 1}
    assert draw_sample(records, 11, seed=1) == ids


def test_the_metrics() -> None:
    labels = [True, True, False, False]
    assert auc(labels, [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert auc(labels, [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert auc(labels, [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auc([True, True], [0.1, 0.2]) is None
    assert brier(labels, [1.0, 1.0, 0.0, 0.0]) == 0.0
    assert brier(labels, [0.5] * 4) == 0.25
    # A constant at the base rate is perfectly calibrated (and ranks nothing: AUC 0.5).
    assert ece(labels, [0.5] * 4) == 0.0
    assert ece(labels, [1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.5)


def test_the_few_shot_examples_leave_the_sample_and_its_questions_out(tmp_path: Path) -> None:
    from bench.eval import Row, write_examples
    from stef.judges.llm.examples import load_examples
    from stef.labels_file import LabelledRecord

    def rec(rid: str, question: str, label: bool, errors: tuple[str, ...] = ()) -> LabelledRecord:
        payload = {"id": rid, "app": "bird", "question": question, "sql": f"SELECT {rid}"}
        return LabelledRecord(1, payload, label, "src", errors)

    def row(rid: str, verdict: str) -> Row:
        return Row(rid, "src", True, "evaluated", None, 80.0, verdict, 0.8, None, 0, 0, 0.0)

    records = [
        rec("s1", "How many bonds?", True),
        rec("same-q", "how  many BONDS?", False),  # the sample's question: never an example
        rec("p1", "Most common element", False, ("Other Errors/DISTINCT",)),
        rec("p2", "Atoms per molecule", True),
    ]
    path = tmp_path / "ex.jsonl"
    counts = write_examples(path, records, ["s1"], [row("p1", "Correct"), row("p2", "Correct")])
    assert counts == {"examples": 2, "same_question_left_out": 1}
    examples = load_examples(path)
    assert examples.counts() == {"bird": {"examples": 2, "judge_wrong": 1}}
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["note"] == "Other Errors/DISTINCT"
    assert lines[0]["judge_verdict"] == "Correct"
