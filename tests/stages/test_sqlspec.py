"""Golden tests of the SQL spec stage, one titled case per entry of tests/fixtures/sqlspec/*.yaml.

Each case gives ``title``, ``sql``, an optional ``dialect``, ``expect`` (a partial SqlSpec: only
the fields the case is about) and an optional ``xfail`` reason for a known bug, whose expectation
is the right answer. Comparison, field by field:

- ``filters``: exactly as many predicates as listed, matched one to one in any order; each listed
  predicate is a subset of ``lhs``, ``op``, ``rhs``, ``clause``, ``values``, ``wildcard``,
  ``columns``, ``text``, or ``lhs_contains`` / ``rhs_contains`` (a substring).
- ``aggregations``: one to one in any order, each a subset of ``func``, ``column``, ``distinct``.
- ``order_by``: in order, each a subset of ``expr``, ``direction``.
- ``tables``, ``ctes``: as sets. ``parse_error``: ``true`` (present) or a substring.
- everything else: equality.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stef.stages.sqlspec
from stef.models import SqlSpec
from stef.stages.sqlspec import guess_candidates, sqlspec
from tests.golden import checked_expect, load_golden

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sqlspec"

CASE_KEYS = {"title", "sql", "dialect", "expect", "xfail"}
PLAIN_FIELDS = {
    "dialect",
    "dialect_guessed",
    "projections",
    "group_by",
    "limit",
    "statement_type",
    "parsed",
    "mutating",
    "multiple_statements",
    "distinct",
    "has_join",
    "has_subquery",
    "has_nested_where",
    "has_window",
    "has_set_operation",
    "has_cte",
}
SET_FIELDS = {"tables", "ctes"}
FIELDS = PLAIN_FIELDS | SET_FIELDS | {"filters", "aggregations", "order_by", "parse_error"}
PREDICATE_KEYS = {"lhs", "op", "rhs", "clause", "values", "wildcard", "columns", "text"}
PREDICATE_SUBSTRINGS = {"lhs_contains": "lhs", "rhs_contains": "rhs"}
AGGREGATION_KEYS = {"func", "column", "distinct"}
ORDER_KEYS = {"expr", "direction"}


def _check_case(source: str, case: Any) -> None:
    """Fail loudly on a malformed fixture rather than let it pass vacuously."""
    where, expect = checked_expect(source, case, keys=CASE_KEYS, fields=FIELDS)
    for item in expect.get("filters") or []:
        allowed = PREDICATE_KEYS | set(PREDICATE_SUBSTRINGS)
        assert isinstance(item, dict) and set(item) <= allowed, f"{where}: bad filter {item!r}"
        for key in ("lhs", "op", "rhs", "clause", "text", "lhs_contains", "rhs_contains"):
            # YAML turns 2023 into an int and yes into a bool: values are strings, quote them.
            assert key not in item or isinstance(item[key], str), f"{where}: quote {key} {item!r}"
        for key in ("values", "columns"):
            assert key not in item or all(isinstance(v, str) for v in item[key]), (
                f"{where}: quote every item of {key} in {item!r}"
            )
    for item in expect.get("aggregations") or []:
        assert isinstance(item, dict) and set(item) <= AGGREGATION_KEYS, f"{where}: bad {item!r}"
    for item in expect.get("order_by") or []:
        assert isinstance(item, dict) and set(item) <= ORDER_KEYS, f"{where}: bad {item!r}"


CASES = load_golden(FIXTURES, _check_case)


def _predicate_matches(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    for key, want in expected.items():
        if key in PREDICATE_SUBSTRINGS:
            if want not in actual[PREDICATE_SUBSTRINGS[key]]:
                return False
        elif key in ("values", "columns"):
            if list(actual[key]) != list(want):
                return False
        elif actual[key] != want:
            return False
    return True


def _one_to_one(actual: list[dict[str, Any]], expected: list[dict[str, Any]], match: Any) -> bool:
    """Whether each expected item matches a distinct actual item (small lists: backtracking)."""
    if len(actual) != len(expected):
        return False

    def assign(i: int, used: frozenset[int]) -> bool:
        if i == len(expected):
            return True
        return any(
            j not in used and match(a, expected[i]) and assign(i + 1, used | {j})
            for j, a in enumerate(actual)
        )

    return assign(0, frozenset())


def _subset(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(actual.get(k) == v for k, v in expected.items())


def _compare(spec: SqlSpec, expect: dict[str, Any]) -> list[str]:
    """The differences between a spec and a partial expectation, one line each."""
    got = spec.model_dump()
    problems = []
    for field, want in expect.items():
        have = got[field]
        if field == "filters":
            ok = _one_to_one(have, want, _predicate_matches)
            shown = [
                {k: p[k] for k in ("lhs", "op", "rhs", "clause", "values", "wildcard")}
                for p in have
            ]
        elif field == "aggregations":
            ok = _one_to_one(have, want, _subset)
            shown = have
        elif field == "order_by":
            ok = len(have) == len(want) and all(
                _subset(a, e) for a, e in zip(have, want, strict=True)
            )
            shown = have
        elif field in SET_FIELDS:
            ok = sorted(have) == sorted(want)
            shown = have
        elif field == "parse_error":
            ok = have is not None and (want is True or str(want).casefold() in have.casefold())
            shown = have
        else:
            ok = have == want
            shown = have
        if not ok:
            problems.append(f"{field}: expected {want!r}, got {shown!r}")
    return problems


@pytest.mark.parametrize("case", CASES)
def test_sqlspec_golden(case: dict[str, Any]) -> None:
    spec = sqlspec(case["sql"], case.get("dialect"))
    assert isinstance(spec, SqlSpec)
    assert [p.id for p in spec.filters] == list(range(1, len(spec.filters) + 1))
    problems = _compare(spec, case["expect"])
    assert not problems, "\n".join(problems)


def test_fixture_count() -> None:
    """The golden set stays broad: it is the contract of the stage."""
    assert len(CASES) >= 45


def test_comparator_rejects_a_wrong_expectation() -> None:
    """The partial comparison is not vacuous: a wrong value, a missing or extra predicate fail."""
    spec = sqlspec("SELECT a FROM t WHERE x = 1 AND y = 'b'")
    assert not _compare(spec, {"filters": [{"lhs": "y", "rhs": "b"}, {"lhs": "x", "op": "="}]})
    assert _compare(spec, {"filters": [{"lhs": "x", "rhs": "1"}]})
    assert _compare(spec, {"filters": [{"lhs": "x"}, {"lhs": "x"}]})
    assert _compare(spec, {"filters": [{"lhs": "x", "rhs": "2"}, {"lhs": "y"}]})
    assert _compare(spec, {"tables": ["t", "u"]})
    assert _compare(spec, {"parsed": False})


def test_a_3000_term_and_chain_is_parsed_with_3000_filters() -> None:
    """Valid SQL stays parsed however long its AND chain (the split once recursed per term)."""
    spec = sqlspec("SELECT a FROM t WHERE " + " AND ".join(f"c{i} = {i}" for i in range(3000)))
    assert spec.parsed and spec.parse_error is None
    assert [(f.id, f.lhs, f.rhs) for f in spec.filters] == [
        (i + 1, f"c{i}", str(i)) for i in range(3000)
    ]
    assert spec.where_count == 3000


def test_a_3000_term_or_chain_is_parsed() -> None:
    spec = sqlspec("SELECT a FROM t WHERE " + " OR ".join(f"c{i} = {i}" for i in range(3000)))
    assert spec.parsed and spec.parse_error is None
    (only,) = spec.filters
    assert only.op == "or" and len(only.values) == 3000


# ----------------------------------------------------------------------------- dialect guess


@pytest.mark.parametrize(
    ("sql", "candidates"),
    [
        pytest.param(
            "SELECT `a` FROM `t`", ["mysql", "bigquery", "postgres", "snowflake"], id="bt"
        ),
        pytest.param(
            "SELECT a FROM `p.d.t`", ["bigquery", "mysql", "postgres", "snowflake"], id="path"
        ),
        pytest.param("SELECT [a] FROM [t]", ["tsql", "postgres", "snowflake"], id="brackets"),
        pytest.param(
            "SELECT `a`, [b] FROM t", ["mysql", "bigquery", "tsql", "postgres"], id="both-capped"
        ),
        pytest.param("SELECT a FROM t", ["postgres", "snowflake"], id="no-hint"),
    ],
)
def test_guess_candidates_follow_the_text(sql: str, candidates: list[str]) -> None:
    assert guess_candidates(sql) == candidates


def _parses(monkeypatch: pytest.MonkeyPatch, sql: str, dialect: str | None = None) -> list[Any]:
    """The dialects sqlspec parsed ``sql`` in, in order."""
    calls: list[Any] = []
    real = stef.stages.sqlspec.parse_sql

    def counting(text: str, read: str | None) -> Any:
        calls.append(read)
        return real(text, read)

    monkeypatch.setattr(stef.stages.sqlspec, "parse_sql", counting)
    sqlspec(sql, dialect)
    return calls


def test_sql_the_generic_dialect_reads_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parses(monkeypatch, "SELECT a FROM t WHERE b = 1") == [None]


def test_the_guess_stops_at_the_first_dialect_that_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _parses(monkeypatch, "SELECT `a` FROM `t`") == [None, "mysql"]


def test_the_guess_is_bounded_on_text_no_dialect_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _parses(monkeypatch, "SELECT FROM WHERE `x` [y] = = 1")
    assert calls == [None, "mysql", "bigquery", "tsql", "postgres"]


def test_a_named_dialect_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parses(monkeypatch, "SELECT `a` FROM `t`", "postgres") == ["postgres"]


def test_the_guess_can_be_turned_off() -> None:
    spec = sqlspec("SELECT `a` FROM `t`", guess=False)
    assert (spec.parsed, spec.dialect, spec.dialect_guessed) == (False, None, False)
