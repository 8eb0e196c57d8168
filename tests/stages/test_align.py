"""Alignment: filter status from the per-filter matching, extras, benign, ignored, leniency."""

from __future__ import annotations

from stef.models import (
    Enrichment,
    EnrichmentStatus,
    FilterMatch,
    FilterStatus,
    InputRecord,
    JudgeOutput,
    QuestionFilter,
    QuestionSpec,
    Verdict,
)
from stef.rules import AppRules
from stef.stages.align import align
from stef.stages.normalize import normalize
from stef.stages.sqlspec import sqlspec


def _align(
    sql: str, n_filters: int, matches: list[FilterMatch], rules: AppRules | None = None
) -> tuple[FilterStatus, int, dict[str, list[str]]]:
    rules = rules or AppRules()
    spec = sqlspec(sql)
    out = JudgeOutput(
        question_spec=QuestionSpec(
            filters=[QuestionFilter(rhs=f"v{i}", text=f"v{i}") for i in range(n_filters)]
        ),
        filter_matches=matches,
        enrichment=Enrichment(status=EnrichmentStatus.FAITHFUL),
        verdict=Verdict.CORRECT,
        confidence=0.9,
        issues=["none"],
    )
    norm = normalize(InputRecord(id="1", question="q", sql=sql), spec, rules)
    alignment, status, leniency = align(out, spec, norm, rules)
    return status, leniency, alignment.model_dump()


M = FilterMatch


def test_statuses() -> None:
    sql = "SELECT * FROM t WHERE a = 1 AND b = 2"
    assert (
        _align(
            sql,
            2,
            [
                M(filter=0, status="matched", predicates=[1]),
                M(filter=1, status="matched", predicates=[2]),
            ],
        )[0]
        is FilterStatus.FULLY_APPLIED
    )
    assert (
        _align(sql, 1, [M(filter=0, status="matched", predicates=[1])])[0]
        is FilterStatus.FULLY_APPLIED_WITH_EXTRAS
    )
    assert (
        _align(
            sql, 2, [M(filter=0, status="matched", predicates=[1]), M(filter=1, status="missing")]
        )[0]
        is FilterStatus.PARTIALLY_APPLIED
    )
    assert (
        _align(sql, 1, [M(filter=0, status="mismatched", predicates=[1, 2])])[0]
        is FilterStatus.NOT_APPLIED
    )
    assert _align("SELECT * FROM t", 0, [])[0] is FilterStatus.FULLY_APPLIED
    assert _align(sql, 0, [])[0] is FilterStatus.FULLY_APPLIED_WITH_EXTRAS


def test_filters_the_judge_forgot_are_missing() -> None:
    status, _, a = _align(
        "SELECT * FROM t WHERE a = 1", 2, [M(filter=0, status="matched", predicates=[1])]
    )
    assert status is FilterStatus.PARTIALLY_APPLIED
    assert a["missing"] == ["v1"]


def test_benign_extras_structural_and_leniency() -> None:
    rules = AppRules(benign_filters=["Status = 'ACTIVE'", "is_deleted = FALSE"])
    sql = "SELECT * FROM t WHERE a = 1 AND t.status='active' AND is_deleted = 0"
    status, leniency, a = _align(sql, 1, [M(filter=0, status="matched", predicates=[1])], rules)
    assert status is FilterStatus.FULLY_APPLIED_WITH_EXTRAS
    assert leniency == 1
    assert a["extras"] == a["benign_extras"] == ["t.status = 'active'", "is_deleted = 0"]
    sql2 = sql + " AND signup_year = 2020"
    _, leniency, a = _align(sql2, 1, [M(filter=0, status="matched", predicates=[1])], rules)
    assert leniency == 0 and "signup_year = 2020" in a["extras"]


def test_ignored_columns_are_neither_required_nor_extra() -> None:
    rules = AppRules(ignore_filters=["TENANT_ID"])
    status, _, a = _align(
        "SELECT * FROM t WHERE t.tenant_id = 42 AND a = 1",
        1,
        [M(filter=0, status="matched", predicates=[2])],
        rules,
    )
    assert status is FilterStatus.FULLY_APPLIED
    assert a["ignored"] == ["t.tenant_id = 42"] and a["extras"] == []


def test_qualify_dedup_is_not_an_extra_filter() -> None:
    sql = "SELECT a FROM t WHERE a = 1 QUALIFY ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) = 1"
    status, _, _ = _align(sql, 1, [M(filter=0, status="matched", predicates=[1])])
    assert status is FilterStatus.FULLY_APPLIED
