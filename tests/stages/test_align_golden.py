"""Golden tests of the alignment stage, one titled case per entry of tests/fixtures/align/*.yaml.

Each case gives ``title``, ``sql``, optional ``dialect``, optional ``question`` (read by the
normalization stage; default ``q``), optional ``question_spec`` (QuestionSpec fields), optional
``matches`` (the judge's FilterMatch list), optional ``rules`` (AppRules fields), ``expect`` and an
optional ``xfail`` reason for a known bug, whose expectation is the right answer. Comparison:
``status`` (a FilterStatus value) and ``leniency`` by equality; each listed Alignment field
(``matched``, ``missing``, ``mismatched``, ``extras``, ``benign_extras``, ``ignored``: exact lists
in order; ``projections_match``, ``aggregations_match``, ``group_by_match``: booleans).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.models import (
    Alignment,
    Enrichment,
    EnrichmentStatus,
    FilterMatch,
    FilterStatus,
    InputRecord,
    JudgeOutput,
    QuestionSpec,
    Verdict,
)
from stef.rules import AppRules
from stef.stages.align import align
from stef.stages.normalize import normalize
from stef.stages.sqlspec import sqlspec
from tests.golden import checked_expect, load_golden

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "align"

CASE_KEYS = {
    "title",
    "sql",
    "dialect",
    "question",
    "question_spec",
    "matches",
    "rules",
    "expect",
    "xfail",
}
FIELDS = {"status", "leniency", *Alignment.model_fields}


def _check_case(source: str, case: Any) -> None:
    """Fail loudly on a malformed fixture rather than let it pass vacuously."""
    where, expect = checked_expect(source, case, keys=CASE_KEYS, fields=FIELDS)
    if "status" in expect:
        FilterStatus(expect["status"])
    for key, want in expect.items():
        if isinstance(want, list):
            assert all(isinstance(v, str) for v in want), f"{where}: quote every item of {key}"


CASES = load_golden(FIXTURES, _check_case)


def _run(case: dict[str, Any]) -> dict[str, Any]:
    """The alignment of a case as one mapping: the Alignment fields, status and leniency."""
    rules = AppRules(**case.get("rules", {}))
    spec = sqlspec(case["sql"], case.get("dialect"))
    out = JudgeOutput(
        question_spec=QuestionSpec(**case.get("question_spec", {})),
        filter_matches=[FilterMatch(**m) for m in case.get("matches", [])],
        enrichment=Enrichment(status=EnrichmentStatus.FAITHFUL),
        verdict=Verdict.CORRECT,
        confidence=0.9,
        issues=["none"],
    )
    record = InputRecord(id="golden", question=case.get("question", "q"), sql=case["sql"])
    alignment, status, leniency = align(out, spec, normalize(record, spec, rules), rules)
    return {**alignment.model_dump(), "status": status.value, "leniency": leniency}


def _compare(got: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    return [
        f"{field}: expected {want!r}, got {got[field]!r}"
        for field, want in expect.items()
        if got[field] != want
    ]


@pytest.mark.parametrize("case", CASES)
def test_align_golden(case: dict[str, Any]) -> None:
    got = _run(case)
    # Leniency only ever rewards extras that are all benign.
    assert got["leniency"] in (0, 1)
    if got["leniency"]:
        assert got["status"] == "fully_applied_with_extras"
        assert got["extras"] == got["benign_extras"]
    problems = _compare(got, case["expect"])
    assert not problems, "\n".join(problems)


def test_fixture_count() -> None:
    assert len(CASES) >= 30


def test_comparator_rejects_a_wrong_expectation() -> None:
    got = _run({"sql": "SELECT * FROM t WHERE a = 1 AND b = 2"})
    assert not _compare(got, {"status": "fully_applied_with_extras", "extras": ["a = 1", "b = 2"]})
    assert _compare(got, {"extras": ["b = 2", "a = 1"]})
    assert _compare(got, {"status": "fully_applied"})
    assert _compare(got, {"leniency": 1})
