"""``stef calibrate``'s reference figures: the reference verdict against the labels, over the
records with a ``gold_sql`` only."""

from __future__ import annotations

from stef.calibrate.reference import auc, reference_agreement
from stef.labels_file import LabelledRecord
from stef.rules import load_rules
from stef.stages.reference_generated import Generated

GOLD = "SELECT name FROM singer WHERE country = 'France'"


def _rec(n: int, sql: str, label: bool, gold: str | None) -> LabelledRecord:
    payload = {"id": str(n), "question": "Names of singers from France", "sql": sql}
    return LabelledRecord(n, payload, label, "S", (), gold_sql=gold)


def test_agreement_over_the_records_with_a_reference() -> None:
    records = [
        _rec(1, "select s.name from singer as s where s.country = 'France'", True, GOLD),
        _rec(2, "SELECT name FROM singer WHERE country = 'France'", True, GOLD),
        _rec(3, "SELECT name FROM singer WHERE country = 'Spain'", False, GOLD),
        _rec(4, "SELECT name FROM singer", False, GOLD),
        _rec(5, "SELECT 1", True, None),  # no reference: not counted
        _rec(6, "SELECT 1", True, "SELEC nothing (("),  # a reference that does not parse
    ]
    rules = load_rules(None)
    pooled = {"kappa": 1.0, "auc": 1.0, "n": 4}
    for reformat in (False, True):
        for generated in (None, Generated()):
            found = reference_agreement(records, rules, reformat=reformat, generated=generated)
            assert {k: found[k] for k in pooled} == pooled
            assert found["by_source"]["S"]["n"] == 4
            assert sum(f["n"] for f in found["by_decided"].values()) == 4
            assert sum(found["decided"].values()) == 1.0
    structure = reference_agreement(records, rules)
    assert structure["decided"] == {"structure": 1.0}
    assert structure["execution_ms"] == {"p50": None, "p99": None}
    executed = reference_agreement(records, rules, generated=Generated())
    # Spain against France and no filter: counterexamples; the two others agree everywhere.
    assert executed["decided"] == {"counterexample": 0.5, "execution_same": 0.5}
    assert executed["by_decided"]["execution"]["n"] == 4
    assert executed["execution_ms"]["p50"] is not None
    empty = reference_agreement(records[4:], rules)
    assert {k: empty[k] for k in pooled} == {"kappa": None, "auc": None, "n": 0}


def test_auc_counts_ties_half() -> None:
    assert auc([True, False], [0.9, 0.2]) == 1.0
    assert auc([True, False], [0.2, 0.9]) == 0.0
    assert auc([True, False, True, False], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auc([True, True], [0.1, 0.2]) is None
