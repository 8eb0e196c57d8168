"""Matching question filters against SQL predicates: the index finds what testing every
predicate found, and its cost grows linearly with the number of values and predicates."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from stef.judges.heuristic.judge import (
    _FEW_VALUES,
    _value_match,
    _Values,
    match_filters,
    replaced_values,
)
from stef.judges.heuristic.question import question_spec
from stef.models import FilterMatch, Predicate, QuestionFilter
from stef.rules import AppRules
from stef.stages.sqlspec import sqlspec

FACTOR = 8
BOUND = 24  # linear: ~8; quadratic (every value against every predicate): ~64


def _match(question: str, sql: str) -> list[FilterMatch]:
    spec = sqlspec(sql, "sqlite")
    qs, kinds = question_spec(question, spec, sql, AppRules())
    return match_filters(qs.filters, kinds, spec, sql)


def _statuses(question: str, sql: str) -> list[tuple[str, list[int]]]:
    return [(m.status, m.predicates) for m in _match(question, sql)]


def test_each_way_of_matching_is_found_through_the_index() -> None:
    sql = (
        "SELECT * FROM o WHERE quarter = 3 AND d >= '2023-07-01' AND name LIKE '%acme%' "
        "AND x > 500 AND city = 'new york city' AND created >= DATE('now', '-30 days')"
    )
    question = "Orders in Q3 2023 from 'Acme' over 500 in New York in the last 30 days"
    assert _statuses(question, sql) == [
        ("matched", [2, 6]),  # the window: a date range, date arithmetic relative to now
        ("matched", [3]),  # 'acme' inside the LIKE pattern
        ("matched", [1, 2]),  # Q3: the quarter column and the range starting in July
        ("mismatched", [2]),  # 2023 of Q3 2023: a start with no end keeps more than Q3
        ("matched", [4]),  # 500 exactly
        ("matched", [5]),  # the name inside a longer value
    ]


def test_a_wrong_value_on_the_same_column_is_mismatched() -> None:
    assert _statuses("Revenue in 2023", "SELECT SUM(r) FROM s WHERE year = 2022") == [
        ("mismatched", [1])
    ]


def _cpu(n: int) -> float:
    """This thread's CPU seconds to match n question values against 2n predicates, none of them
    equal. Thread time, not process time: threads other tests left running spend process time
    (a CI run once measured the large case 4x slow)."""
    words = [f"w{i:05d}x" for i in range(3 * n)]
    question = " and ".join(f"'{w}'" for w in words[:n])
    sql = "SELECT * FROM t WHERE " + " AND ".join(f"c{i} = '{w}'" for i, w in enumerate(words[n:]))
    spec = sqlspec(sql, "sqlite")
    qs, kinds = question_spec(question, spec, sql, AppRules())
    started = time.thread_time()
    for _ in range(3):
        match_filters(qs.filters, kinds, spec, sql)
    return time.thread_time() - started


def test_matching_is_linear() -> None:
    small = max(min(_cpu(60) for _ in range(3)), 1e-4)
    assert min(_cpu(60 * FACTOR) for _ in range(3)) / small < BOUND


def _growth(cpu: Callable[[int], float], n: int) -> float:
    small = max(min(cpu(n) for _ in range(3)), 1e-4)
    return min(cpu(n * FACTOR) for _ in range(3)) / small


def _thread_cpu(run: Callable[[], object]) -> float:
    started = time.thread_time()
    for _ in range(3):
        run()
    return time.thread_time() - started


def _replacing(question: str, sql: str) -> Callable[[], object]:
    """The search for a predicate that replaced a missing value, on its own."""
    spec = sqlspec(sql, "sqlite")
    qs, kinds = question_spec(question, spec, sql, AppRules())
    out = match_filters(qs.filters, kinds, spec, sql)
    return lambda: replaced_values(out, qs, kinds, spec, [question])


def test_replaced_values_is_linear_in_numbers_and_predicates() -> None:
    """n numbers of the question none of which the SQL has, 2n comparisons none of which can
    stand in for one (another operator): each number once read the whole list."""

    def cpu(n: int) -> float:
        question = " ".join(str(100 + i) for i in range(n))
        sql = "SELECT a FROM t WHERE " + " AND ".join(f"c{i} < {5000 + i}" for i in range(2 * n))
        return _thread_cpu(_replacing(question, sql))

    assert _growth(cpu, 100) < BOUND


def test_a_value_repeated_by_predicates_is_searched_once() -> None:
    """n predicates on one value that is not a word, the text holding it inside words n times:
    each predicate once searched every place (n x n)."""

    def cpu(n: int) -> float:
        question = "Show 'zzz' " + "a-" * n
        sql = "SELECT a FROM t WHERE " + " AND ".join(f"c{i} = '-'" for i in range(n))
        return _thread_cpu(_replacing(question, sql))

    assert _growth(cpu, 120) < BOUND


def test_a_long_in_list_is_matched_in_linear_time() -> None:
    """n numbers of the question against an IN list of 4n others: each number once read the
    whole list (a shared trigram makes the list a candidate for every number)."""

    def cpu(n: int) -> float:
        question = " ".join(str(100 + i) for i in range(n))
        values = ", ".join(str(5000 + i) for i in range(4 * n))
        sql = f"SELECT a FROM t WHERE b IN ({values})"
        spec = sqlspec(sql, "sqlite")
        qs, kinds = question_spec(question, spec, sql, AppRules())
        return _thread_cpu(lambda: match_filters(qs.filters, kinds, spec, sql))

    assert _growth(cpu, 100) < BOUND


_PIECES = [
    "",
    "a",
    "ab",
    "abc",
    "abcd",
    "bcd",
    "2019",
    "2019-07",
    "2019-07-01",
    "q3",
    "3",
    "teacher",
    "teachers",
    "city",
    "cities",
    "acme",
    "acme corp",
    "x\x00y",
    "\x00ac",
]


def _value(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 2)))


def test_a_long_value_list_matches_as_value_by_value() -> None:
    """The lookups over a long list give :func:`_value_match`'s answer, for every kind, on
    values built to meet each of its tests (equal, word forms, prefixes either way, inside
    either way, with a separator character in them)."""
    rng = random.Random(20261128)
    checked = 0
    for _ in range(600):
        values = tuple(_value(rng) for _ in range(rng.randint(_FEW_VALUES + 1, 40)))
        wildcard = rng.random() < 0.5
        predicate = Predicate(
            id=1, lhs="c", op="in", rhs="", text="c IN (...)", values=values, wildcard=wildcard
        )
        listed = _Values(values)
        for _ in range(20):
            kind = rng.choice(["value", "enrichment", "entity", "number", "year", "date"])
            q = QuestionFilter(rhs=_value(rng), kind=kind)
            assert listed.match(q, kind, wildcard) == _value_match(q, kind, predicate), (q, values)
            checked += 1
    assert checked == 12_000
