"""The four production normalization rules, the review flags and the question cues."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stef.models import InputRecord
from stef.rules import AppRules
from stef.stages.normalize import _SUPERLATIVES, _singular_superlative, normalize, question_cues
from stef.stages.sqlspec import sqlspec


def _norm(
    question: str, sql: str, rules: AppRules | None = None, enriched: str | None = "x"
) -> tuple[list[str], list[str]]:
    record = InputRecord(id="1", question=question, sql=sql, enriched_question=enriched)
    n = normalize(record, sqlspec(sql), rules or AppRules())
    return n.normalizations, n.flags


def test_required_group_by_only_when_group_by_covers_plain_columns() -> None:
    names, _ = _norm("total by year", "SELECT year, SUM(x) FROM t GROUP BY year")
    assert "required_group_by" in names
    names, _ = _norm("total by year", "SELECT year, month, SUM(x) FROM t GROUP BY year")
    assert "required_group_by" not in names
    names, _ = _norm("years", "SELECT year FROM t GROUP BY year")
    assert "required_group_by" not in names


def test_benign_group_by_needs_a_single_pinned_value() -> None:
    names, _ = _norm("q", "SELECT c, SUM(x) FROM t WHERE c = 'A' GROUP BY c")
    assert "benign_group_by" in names
    names, _ = _norm("q", "SELECT c, SUM(x) FROM t WHERE c IN ('A', 'B') GROUP BY c")
    assert "benign_group_by" not in names


@pytest.mark.parametrize(
    ("question", "sql", "fires"),
    [
        ("total by year", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY SUM(x) DESC", True),
        ("total by year", "SELECT year, SUM(x) AS s FROM t GROUP BY year ORDER BY s DESC", True),
        ("total by year", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY year", True),
        ("total by year", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY year DESC", False),
        ("total by year", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY SUM(x)", False),
        ("top years by total", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY 2 DESC", False),
        ("total by year, sorted", "SELECT year, SUM(x) FROM t GROUP BY year ORDER BY year", False),
    ],
)
def test_default_order_by(question: str, sql: str, fires: bool) -> None:
    names, _ = _norm(question, sql)
    assert ("default_order_by" in names) is fires


def test_safety_limit_and_limit_below_min() -> None:
    names, flags = _norm("list customers", "SELECT name FROM c LIMIT 1000")
    assert "safety_limit" in names and "limit_below_min" not in flags
    names, flags = _norm("list customers", "SELECT name FROM c LIMIT 999")
    assert "safety_limit" not in names and "limit_below_min" in flags
    names, flags = _norm("list customers", "SELECT name FROM c LIMIT 999", AppRules(limit_min=500))
    assert "safety_limit" in names
    names, flags = _norm("top 5 customers", "SELECT name FROM c LIMIT 5")
    assert "safety_limit" not in names and "limit_below_min" not in flags
    # The number of rows the question lists is no truncation; another number is.
    names, flags = _norm("list 5 customers", "SELECT name FROM c LIMIT 5")
    assert "safety_limit" not in names and "limit_below_min" not in flags
    _, flags = _norm("list 5 customers", "SELECT name FROM c LIMIT 3")
    assert "limit_below_min" in flags


def test_flags() -> None:
    _, flags = _norm(
        "q",
        "WITH a AS (SELECT x FROM t) SELECT x, ROW_NUMBER() OVER (ORDER BY x) "
        "FROM a WHERE x IN (SELECT y FROM u) UNION SELECT 1, 2",
        enriched=None,
    )
    assert {"enrichment_missing", "cte", "subquery", "window_function", "set_operation"} <= set(
        flags
    )
    _, flags = _norm("q", "SELEC nothing FROM (")
    assert "unparsed_sql" in flags


@pytest.mark.parametrize(
    ("question", "ordering", "top_k"),
    [
        ("What are the top 10 countries by spend?", True, 10),
        ("Which store has the highest revenue?", True, 1),
        ("List the five most expensive products", True, 5),
        ("Show customers sorted by name", True, None),
        ("What is the total spend by year?", False, None),
        ("What is the interest rate on loans?", False, None),
        # "the first / the last <thing>" picks one; a name part, a window or a count does not.
        ("In which country was the first European Grand Prix hosted?", True, 1),
        ("Who was the last to edit the post?", True, 1),
        ("List the first name of every user", False, None),
        ("Orders placed in the last three days", False, None),
        ("Revenue in the first quarter", False, None),
        ("Show the first 5 orders", True, 5),
        ("List the first and last name of all employees.", False, None),
        ("How many passengers travelled in the first class?", False, None),
        ("Show the first few orders", False, None),
        ("What is the last known address of the customer?", False, None),
        # A bound or a hedge: "at least 10", "at most 5", "at best".
        ("Which airlines have at least 10 flights?", False, None),
        ("Which airlines have at most 10 flights?", False, None),
        ("Which store sold at least 5 items and had the most sales?", True, 1),
        ("Which product sold the least?", True, 1),
        ("Which patients are at highest risk of readmission?", True, 1),
    ],
)
def test_question_cues(question: str, ordering: bool, top_k: int | None) -> None:
    cues = question_cues(question)
    assert (cues.ordering_requested, cues.top_k) == (ordering, top_k)


# The regex _singular_superlative replaced (a lazy gap from each opener: quadratic), the reference.
_LAZY_GAP = re.compile(
    r"\b(?:the|which|what|who)\b[^.?!]*?(?!(?<=\bat )(?:least|most|best|worst)\b)\b(?:"
    + _SUPERLATIVES
    + r"|\w+est)\b",
    re.I,
)
_WORDS = [
    "the", "The", "WHICH", "what", "who", "whichever", "thest", "highest", "Best", "max", "maxi",
    "interest", "est", "3est", "the_best", "x", "é", ".", "?", "!", ",", "'", "-", " ", "  ",
    "at", "least", "most", "that",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=14).map(" ".join))
def test_singular_superlative_matches_the_lazy_regex(question: str) -> None:
    assert _singular_superlative(question) is (_LAZY_GAP.search(question) is not None)


@pytest.mark.parametrize(
    ("question", "top_k"),
    [
        ("Which store had the highest sales?", 1),
        ("Which store had the sales? Highest first.", None),
        ("Highest sales. Which store?", None),
        ("Who is the best? List the best.", 1),
        ("List stores with the best sales in the region with the most staff", 1),
    ],
)
def test_singular_superlative_stays_in_its_sentence(question: str, top_k: int | None) -> None:
    assert question_cues(question).top_k == top_k


@pytest.mark.parametrize(
    ("question", "rows"),
    [
        ("List 5 customers in Berlin", 5),
        ("List down at least five superpowers of male superheroes.", 5),
        ("Give me 3 examples of refunded orders", 3),
        ("Name two products made in Italy", 2),
        ("Show 3 days of sales", None),  # a window, not a number of rows
        ("List customers in Berlin", None),
    ],
)
def test_rows_asked(question: str, rows: int | None) -> None:
    assert question_cues(question).rows == rows
