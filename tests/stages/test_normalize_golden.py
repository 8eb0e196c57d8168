"""Golden tests of the normalization stage, one titled case per entry of
tests/fixtures/normalize/*.yaml.

Each case gives ``title``, ``question``, ``sql``, optional ``dialect``, optional
``enriched_question`` (default: the question itself; ``null`` for none), optional ``rules``
(AppRules fields), ``expect`` and an optional ``xfail`` reason for a known bug, whose expectation
is the right answer. Comparison, field by field:

- ``normalizations``, ``flags``, ``benign_group_by``: exact lists, in order.
- ``notes_contain``: each string is a substring of one note; ``[]`` means no notes at all.
- ``cues``: a subset of ``ordering_requested``, ``top_k``, ``superlative``, ``rows``.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from stef.models import InputRecord
from stef.rules import AppRules
from stef.stages.normalize import Normalized, normalize
from stef.stages.sqlspec import sqlspec
from tests.golden import checked_expect, load_golden

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "normalize"

CASE_KEYS = {"title", "question", "sql", "dialect", "enriched_question", "rules", "expect", "xfail"}
LIST_FIELDS = {"normalizations", "flags", "benign_group_by"}
CUE_KEYS = {"ordering_requested", "top_k", "superlative", "rows"}
FIELDS = LIST_FIELDS | {"notes_contain", "cues"}


def _check_case(source: str, case: Any) -> None:
    """Fail loudly on a malformed fixture rather than let it pass vacuously."""
    where, expect = checked_expect(
        source, case, keys=CASE_KEYS, fields=FIELDS, texts=("question", "sql")
    )
    for key in LIST_FIELDS | {"notes_contain"}:
        assert key not in expect or all(isinstance(v, str) for v in expect[key]), (
            f"{where}: {key} is a list of strings"
        )
    assert set(expect.get("cues") or {}) <= CUE_KEYS, f"{where}: bad cues"


CASES = load_golden(FIXTURES, _check_case)


def _run(case: dict[str, Any]) -> Normalized:
    record = InputRecord(
        id="golden",
        question=case["question"],
        sql=case["sql"],
        enriched_question=case.get("enriched_question", case["question"]),
        dialect=case.get("dialect"),
    )
    rules = AppRules(**case.get("rules", {}))
    return normalize(record, sqlspec(record.sql, record.dialect), rules)


def _compare(n: Normalized, expect: dict[str, Any]) -> list[str]:
    """The differences between a normalization and a partial expectation, one line each."""
    problems = []
    for field, want in expect.items():
        if field == "notes_contain":
            have: Any = n.notes
            ok = (not want and not n.notes) or (
                bool(want) and all(any(w in note for note in n.notes) for w in want)
            )
        elif field == "cues":
            have = asdict(n.cues)
            ok = all(have[k] == v for k, v in want.items())
        else:
            have = getattr(n, field)
            ok = have == want
        if not ok:
            problems.append(f"{field}: expected {want!r}, got {have!r}")
    return problems


@pytest.mark.parametrize("case", CASES)
def test_normalize_golden(case: dict[str, Any]) -> None:
    n = _run(case)
    # The booleans agree with the names: one source of truth for the later stages.
    assert n.required_group_by == ("required_group_by" in n.normalizations)
    assert n.default_order_by == ("default_order_by" in n.normalizations)
    assert n.safety_limit == ("safety_limit" in n.normalizations)
    problems = _compare(n, case["expect"])
    assert not problems, "\n".join(problems)


def test_fixture_count() -> None:
    assert len(CASES) >= 30


def test_comparator_rejects_a_wrong_expectation() -> None:
    n = _run({"question": "list customers", "sql": "SELECT name FROM c LIMIT 999"})
    assert not _compare(n, {"flags": ["limit_below_min"], "normalizations": []})
    assert _compare(n, {"flags": []})
    assert _compare(n, {"normalizations": ["safety_limit"]})
    assert _compare(n, {"notes_contain": []})
    assert _compare(n, {"notes_contain": ["LIMIT 999", "no such note"]})
    assert _compare(n, {"cues": {"top_k": 999}})
