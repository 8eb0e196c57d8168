"""Golden tests of the heuristic judge, one titled case per entry of
tests/fixtures/heuristic/*.yaml.

Each case gives ``title``, ``question``, ``sql``, optional ``enriched_question``, optional
``dialect``, optional ``rules`` (AppRules fields), ``expect`` and an optional ``xfail`` reason for
a known bug, whose expectation is the right answer. The record goes through the stages the
pipeline runs before the judge (sqlspec, normalize). Comparison, field by field:

- ``verdict`` (a Verdict value), ``confidence``, ``enrichment`` (an EnrichmentStatus value):
  equality.
- ``issues``: the exact label list, in order.
- ``filters``: the question filters in order, each a subset of ``rhs``, ``kind``, ``lhs``,
  ``op`` and ``status`` (the judge's match status for that filter).
- ``rationale_contains``: each string is a substring of the rationale.
- ``rationale_lacks``: no string is a substring of the rationale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import EnrichmentStatus, InputRecord, JudgeOutput, Verdict
from stef.pipeline import judge_request
from stef.rules import AppRules
from tests.golden import checked_expect, load_golden

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "heuristic"

CASE_KEYS = {
    "title",
    "question",
    "sql",
    "enriched_question",
    "dialect",
    "timestamp",
    "rules",
    "expect",
    "xfail",
}
FIELDS = {
    "verdict",
    "confidence",
    "enrichment",
    "issues",
    "filters",
    "rationale_contains",
    "rationale_lacks",
}
FILTER_KEYS = {"rhs", "kind", "lhs", "op", "status"}
JUDGE = HeuristicJudge()


def _check_case(source: str, case: Any) -> None:
    """Fail loudly on a malformed fixture rather than let it pass vacuously."""
    where, expect = checked_expect(
        source, case, keys=CASE_KEYS, fields=FIELDS, texts=("question", "sql")
    )
    if "verdict" in expect:
        Verdict(expect["verdict"])
    if "enrichment" in expect:
        EnrichmentStatus(expect["enrichment"])
    for key in ("issues", "rationale_contains", "rationale_lacks"):
        assert key not in expect or all(isinstance(v, str) for v in expect[key]), (
            f"{where}: {key} is a list of strings (quote items with commas)"
        )
    for item in expect.get("filters") or []:
        assert isinstance(item, dict) and set(item) <= FILTER_KEYS, f"{where}: bad {item!r}"
        # YAML turns 2023 into an int: values are strings, quote them.
        assert all(isinstance(v, str) for v in item.values()), f"{where}: quote {item!r}"


CASES = load_golden(FIXTURES, _check_case)


def _run(case: dict[str, Any]) -> JudgeOutput:
    """Judge a case the way the pipeline does: SQL spec, normalization, then the judge."""
    rules = AppRules(**case.get("rules", {}))
    record = InputRecord(
        id="golden",
        question=case["question"],
        sql=case["sql"],
        enriched_question=case.get("enriched_question"),
        dialect=case.get("dialect"),
        timestamp=case.get("timestamp"),
    )
    request, _ = judge_request(record, rules)
    return JUDGE.judge(request).output


def _filters(out: JudgeOutput) -> list[dict[str, Any]]:
    """The question filters with the judge's status for each."""
    status = {m.filter: m.status for m in out.filter_matches}
    return [
        {**f.model_dump(include={"rhs", "kind", "lhs", "op"}), "status": status.get(i)}
        for i, f in enumerate(out.question_spec.filters)
    ]


def _compare(out: JudgeOutput, expect: dict[str, Any]) -> list[str]:
    """The differences between a judge output and a partial expectation, one line each."""
    got: dict[str, Any] = {
        "verdict": out.verdict.value,
        "confidence": out.confidence,
        "enrichment": out.enrichment.status.value,
        "issues": list(out.issues),
        "filters": _filters(out),
        "rationale_contains": out.rationale,
        "rationale_lacks": out.rationale,
    }
    problems = []
    for field, want in expect.items():
        have = got[field]
        if field == "filters":
            ok = len(have) == len(want) and all(
                all(h.get(k) == v for k, v in w.items()) for h, w in zip(have, want, strict=True)
            )
        elif field == "rationale_contains":
            ok = all(w in have for w in want)
        elif field == "rationale_lacks":
            ok = not any(w in have for w in want)
        else:
            ok = have == want
        if not ok:
            problems.append(f"{field}: expected {want!r}, got {have!r}")
    return problems


@pytest.mark.parametrize("case", CASES)
def test_heuristic_golden(case: dict[str, Any]) -> None:
    out = _run(case)
    # Every question filter gets exactly one match, in order.
    assert [m.filter for m in out.filter_matches] == list(range(len(out.question_spec.filters)))
    problems = _compare(out, case["expect"])
    assert not problems, "\n".join(problems)


def test_fixture_count() -> None:
    assert len(CASES) >= 40


def test_comparator_rejects_a_wrong_expectation() -> None:
    out = _run({"question": "Total revenue in 2023?", "sql": "SELECT SUM(r) FROM s WHERE y = 2022"})
    assert not _compare(
        out,
        {
            "verdict": "Incorrect",
            "issues": ["filters_incorrect"],
            "filters": [{"rhs": "2023", "status": "mismatched"}],
        },
    )
    assert _compare(out, {"verdict": "Correct"})
    assert _compare(out, {"issues": ["filters_incorrect", "filters_extra"]})
    assert _compare(out, {"filters": [{"rhs": "2023", "status": "matched"}]})
    assert _compare(out, {"filters": []})
    assert _compare(out, {"rationale_contains": ["no such reason"]})
