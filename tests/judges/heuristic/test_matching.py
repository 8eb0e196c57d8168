"""Matching question filters against SQL predicates: the index finds what testing every
predicate found, and its cost grows linearly with the number of values and predicates."""

from __future__ import annotations

import time

from stef.judges.heuristic.judge import match_filters
from stef.judges.heuristic.question import question_spec
from stef.models import FilterMatch
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
