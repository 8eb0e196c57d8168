"""Question reading: the literal values a question names (quoted strings, numbers, years,
quarters, dates, capitalized names) and the spec Sq read from its words (aggregation, grouping,
ordering and top-k requests)."""

from __future__ import annotations

import re

import pytest

from stef import question as question_module
from stef.judges.heuristic.question import question_spec
from stef.models import Aggregation, QuestionFilter, QuestionSpec
from stef.question import glossary_entry, question_literals
from stef.rules import AppRules
from stef.stages.sqlspec import sqlspec

NO_RULES = AppRules()


def _literals(question: str) -> list[tuple[str, str, str, str]]:
    """(kind, value, text, op) of every literal, in the order they were found."""
    return [(f.kind, f.value, f.text, f.op) for f in question_literals(question)]


def _spec(
    question: str, sql: str = "SELECT * FROM t", rules: AppRules = NO_RULES
) -> tuple[QuestionSpec, list[str]]:
    return question_spec(question, sqlspec(sql), sql, rules)


# ------------------------------------------------------------------------------------ literals


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        pytest.param(
            "Orders from 'Acme Corp'", [("value", "acme corp", "Acme Corp", "=")], id="single"
        ),
        pytest.param(
            'Orders from "Big Shop"', [("value", "big shop", "Big Shop", "=")], id="double"
        ),
        pytest.param(
            "Orders from `back office`",
            [("value", "back office", "back office", "=")],
            id="backtick",
        ),
        pytest.param(
            "Orders from 'Q3 2023'", [("value", "q3 2023", "Q3 2023", "=")], id="quote-wins"
        ),
    ],
)
def test_quoted_strings_are_values_with_case_folded(
    question: str, expected: list[tuple[str, str, str, str]]
) -> None:
    """A quoted string is one value, case-folded, its original text kept; what is inside the
    quotes is not read again as a quarter, year or name."""
    assert _literals(question) == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        pytest.param(
            "Orders worth 1,250,000", [("number", "1250000", "1,250,000", "=")], id="comma"
        ),
        pytest.param("Orders worth 3.50", [("number", "3.5", "3.50", "=")], id="decimal"),
        pytest.param("Balance of -7", [("number", "-7", "-7", "=")], id="negative"),
        pytest.param("A discount of 12%", [("number", "12", "12%", "=")], id="percent"),
    ],
)
def test_numbers_are_canonical(question: str, expected: list[tuple[str, str, str, str]]) -> None:
    """Thousands separators go, trailing zeros go, the sign stays; the text keeps what was
    written."""
    assert _literals(question) == expected


def test_numbers_inside_words_are_not_values() -> None:
    assert _literals("Orders with id abc123 on 42nd street rated 5-star") == []


@pytest.mark.parametrize(
    ("question", "op"),
    [
        ("Customers older than 30", ">"),
        ("Orders worth over 100", ">"),
        ("Orders placed after 2020", ">"),
        ("Customers under 18", "<"),
        ("Products cheaper, less than 20", "<"),
        ("Customers with at least 5 orders", ">="),
        ("Carts with at most 10 items", "<="),
        ("Carts with up to 10 items", "<="),
        ("Carts with 10 items", "="),
    ],
)
def test_comparison_words_before_a_number_give_its_operator(question: str, op: str) -> None:
    [found] = question_literals(question)
    assert found.op == op


def test_no_more_than_is_at_most() -> None:
    [found] = question_literals("Customers with no more than 3 orders")
    assert found.op == "<="


def test_no_less_than_is_at_least() -> None:
    [found] = question_literals("Orders with no less than 5 items")
    assert found.op == ">="


def test_or_more_after_a_number_is_at_least() -> None:
    [found] = question_literals("Orders of 50 or more items")
    assert found.op == ">="


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        pytest.param("Orders in 1999", [("year", "1999", "1999", "=")], id="1900s"),
        pytest.param("Orders in 2023", [("year", "2023", "2023", "=")], id="2000s"),
        pytest.param("Orders in 1899", [("number", "1899", "1899", "=")], id="too-early"),
        pytest.param("Orders in 2100", [("number", "2100", "2100", "=")], id="too-late"),
        pytest.param(
            "Revenue in March 2023", [("year", "2023", "March 2023", "=")], id="month-year"
        ),
    ],
)
def test_years(question: str, expected: list[tuple[str, str, str, str]]) -> None:
    """1900-2099 are years; a month before a year keeps the year as the value, the month in the
    text."""
    assert _literals(question) == expected


def test_quarters_with_and_without_a_year() -> None:
    assert _literals("Sales in Q2") == [("quarter", "q2", "Q2", "=")]
    assert _literals("Sales in Q4 2022") == [
        ("quarter", "q4", "Q4", "="),
        ("year", "2022", "2022", "="),
    ]


def test_q5_is_not_a_quarter() -> None:
    assert [f.kind for f in question_literals("Sales in Q5")] != ["quarter"]


@pytest.mark.parametrize(
    ("question", "value"),
    [("Deliveries on 2021-03-04", "2021-03-04"), ("Invoices of 2023-07", "2023-07")],
)
def test_iso_dates_are_one_value_not_numbers(question: str, value: str) -> None:
    assert _literals(question) == [("date", value, value, "=")]


@pytest.mark.parametrize(
    ("question", "value"),
    [
        pytest.param("How many orders did Acme place", "acme", id="one-word"),
        pytest.param("Customers in New York", "new york", id="two-words"),
        pytest.param("Products made by Procter & Gamble", "procter & gamble", id="ampersand"),
        pytest.param("Books by Ludwig van Beethoven", "ludwig van beethoven", id="particle"),
        pytest.param("NASA missions", "nasa", id="acronym-first"),
    ],
)
def test_capitalized_names_are_entities(question: str, value: str) -> None:
    assert [(f.kind, f.value) for f in question_literals(question)] == [("entity", value)]


@pytest.mark.parametrize(
    "question",
    [
        pytest.param("How many orders?", id="question-word"),
        pytest.param("Customers", id="capital-of-the-sentence"),
        pytest.param("What is the total? Paris customers.", id="capital-of-the-second-sentence"),
        pytest.param("Show me the orders", id="starter-word"),
        pytest.param("Revenue in March", id="month"),
    ],
)
def test_capitals_that_are_not_names(question: str) -> None:
    """A capital that only starts a sentence, a question word or a month is not a value."""
    assert _literals(question) == []


@pytest.mark.parametrize(
    "question",
    [
        "Top 10 products",
        "The first 3 stores",
        "5 highest salaries",
        "The 20 largest cities",
    ],
)
def test_top_k_counts_are_not_filters(question: str) -> None:
    assert [f for f in question_literals(question) if f.kind in ("number", "year")] == []


def test_spans_point_at_the_text() -> None:
    question = "Orders from 'Acme' over 500 in Q3 2023 by Globex"
    for found in question_literals(question):
        start, end = found.span
        assert found.text in question[start:end], found


def test_the_returned_list_is_a_copy_of_the_cached_reading() -> None:
    """Readings are cached by text: a caller changing its list must not change the next one."""
    first = question_literals("Sales in 2023")
    first.clear()
    assert _literals("Sales in 2023") == [("year", "2023", "2023", "=")]


# ----------------------------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    ("question", "funcs"),
    [
        ("How many orders?", ["COUNT"]),
        ("The number of orders", ["COUNT"]),
        ("Order counts", ["COUNT"]),
        ("Average order value", ["AVG"]),
        ("Mean salary", ["AVG"]),
        ("Total revenue", ["SUM"]),
        ("Revenue of all stores combined", ["SUM"]),
        ("What did we sell altogether", ["SUM"]),
        ("Maximum price", ["MAX"]),
        ("Minimum price", ["MIN"]),
        ("Total and average revenue, and how many orders", ["COUNT", "AVG", "SUM"]),
        ("List the orders", []),
    ],
)
def test_aggregation_words(question: str, funcs: list[str]) -> None:
    """Each aggregate is named once, over ``*`` (the question does not say which column)."""
    spec, _ = _spec(question)
    assert spec.aggregations == [Aggregation(func=f, column="*") for f in funcs]


@pytest.mark.parametrize("word", ["distinct", "different", "unique"])
def test_distinct_words_make_the_count_distinct(word: str) -> None:
    spec, _ = _spec(f"How many {word} customers and their average spend?")
    assert spec.aggregations == [
        Aggregation(func="COUNT", column="*", distinct=True),
        Aggregation(func="AVG", column="*", distinct=False),
    ]


@pytest.mark.parametrize(
    ("question", "group_by"),
    [
        ("Revenue per region", ["region"]),
        ("Average order value for each country", ["country"]),
        ("For every customer, the count", ["customer"]),
        ("Revenue broken down by month", ["month"]),
        ("Salary grouped by department", ["department"]),
        ("Total per store per month", ["store", "month"]),
        ("Total revenue", []),
    ],
)
def test_grouping_words(question: str, group_by: list[str]) -> None:
    spec, _ = _spec(question)
    assert spec.group_by == group_by


@pytest.mark.parametrize(
    ("question", "ordering", "top_k"),
    [
        ("Top 10 products by sales", True, 10),
        ("Which customer has the highest revenue?", True, 1),
        ("List customers sorted by name", True, None),
        ("List customers", False, None),
    ],
)
def test_ordering_and_top_k(question: str, ordering: bool, top_k: int | None) -> None:
    spec, _ = _spec(question)
    assert (spec.ordering_requested, spec.top_k) == (ordering, top_k)


def test_filters_carry_their_kind_and_operator() -> None:
    spec, kinds = _spec("Orders from Acme over 500 in 2023")
    assert spec.filters == [
        QuestionFilter(op=">", rhs="500", text="500", kind="number"),
        QuestionFilter(op="=", rhs="2023", text="2023", kind="year"),
        QuestionFilter(op="=", rhs="acme", text="Acme", kind="entity"),
    ]
    assert kinds == ["number", "year", "entity"]
    assert spec.outputs == []


def test_a_name_the_sql_uses_as_a_table_or_column_is_not_a_filter() -> None:
    sql = "SELECT region, SUM(x) FROM Sales GROUP BY region"
    spec, kinds = _spec("Show Sales by region", sql)
    assert spec.filters == [] and kinds == []


def test_a_name_the_sql_uses_as_a_string_stays_a_filter() -> None:
    """String literals are cut out of the SQL before names are looked up in it."""
    sql = "SELECT * FROM orders WHERE customer = 'Acme'"
    spec, _ = _spec("Orders from Acme", sql)
    assert [f.rhs for f in spec.filters] == ["acme"]


def test_a_mapped_term_next_to_a_value_names_its_column() -> None:
    rules = AppRules(column_mappings={"region": "RegionName"})
    near, _ = _spec("Customers in the APAC region", rules=rules)
    plural, _ = _spec("Customers in APAC, by regions", rules=rules)
    far, _ = _spec("Customers in APAC who bought the most in a single quarter region", rules=rules)
    assert [f.lhs for f in near.filters] == ["regionname"]
    assert [f.lhs for f in plural.filters] == ["regionname"]
    assert [f.lhs for f in far.filters] == [None]


def test_no_mappings_no_column() -> None:
    spec, _ = _spec("Customers in the APAC region")
    assert [f.lhs for f in spec.filters] == [None]


def test_a_name_does_not_run_across_a_full_stop() -> None:
    values = [f.value for f in question_literals("Revenue of Acme. Customers in Berlin")]
    assert not any(". " in v for v in values), values


@pytest.mark.parametrize(
    ("question", "value", "text"),
    [
        pytest.param("Orders in the last 30 days", "30 day", "last 30 days", id="last-n-days"),
        pytest.param("Signups in the past three months", "3 month", "past three months", id="word"),
        pytest.param("Revenue in the previous quarter", "1 quarter", "previous quarter", id="one"),
        pytest.param("Sales during the first 6 weeks", "6 week", "first 6 weeks", id="first-n"),
    ],
)
def test_time_windows_are_filters_not_top_k(question: str, value: str, text: str) -> None:
    """A window relative to now is a date filter; its count is neither a number nor a top-k."""
    assert _literals(question) == [("window", value, text, ">=")]
    spec, kinds = _spec(question)
    assert (spec.top_k, spec.ordering_requested, kinds) == (None, False, ["window"])


def test_the_first_day_is_not_a_window() -> None:
    assert _literals("Orders on the first day") == []


@pytest.mark.parametrize(
    ("question", "sql", "group_by"),
    [
        pytest.param(
            "Revenue by region",
            "SELECT region, SUM(x) FROM s GROUP BY region",
            ["region"],
            id="by-grouped-column",
        ),
        pytest.param(
            "Orders by customers",
            "SELECT c.customer_id, COUNT(*) FROM o GROUP BY c.customer_id",
            ["customers"],
            id="by-plural-inside-a-column",
        ),
        pytest.param("Revenue by region", "SELECT SUM(x) FROM s", [], id="by-without-group-by"),
        pytest.param(
            "Products sorted by name",
            "SELECT name, COUNT(*) FROM p GROUP BY name",
            [],
            id="sorted-by",
        ),
        pytest.param(
            "Books written by Tolkien",
            "SELECT title, COUNT(*) FROM b GROUP BY title",
            [],
            id="by-an-agent",
        ),
    ],
)
def test_by_a_grouped_column_is_a_grouping(question: str, sql: str, group_by: list[str]) -> None:
    """ "by X" asks for a grouping only when the SQL groups by X's column: "by" also names sort
    keys and agents."""
    spec, _ = _spec(question, sql)
    assert spec.group_by == group_by


# ------------------------------------------------------------------- slash dates, numbered names


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("votes on 2010/7/19", [("date", "2010-07-19", "2010/7/19", "=")]),
        ("badges on 7/19/2010 7:39:08 PM", [("date", "2010-07-19", "7/19/2010", "=")]),
        ("born on 31/12/1990", [("date", "1990-12-31", "31/12/1990", "=")]),
        ("race No. 161", [("number", "161", "No. 161", "=")]),
        ("lap time 0:01:27 in 2009", [("year", "2009", "2009", "=")]),
    ],
)
def test_slash_dates_clock_times_and_numbered_names(
    question: str, expected: list[tuple[str, str, str, str]]
) -> None:
    assert _literals(question) == expected


def test_an_impossible_slash_date_is_not_a_date() -> None:
    assert all(kind != "date" for kind, *_ in _literals("on 2024/2/30"))


# ------------------------------------------------------------------------- enrichment glossary

GLOSSARY = "Definitions: element = 'cl' means Chlorine; chlorine refers to element = 'cl'; x = 5"


@pytest.mark.parametrize(
    ("question", "clause", "expected"),
    [
        # A definition of a word the question never uses: a glossary line, no constraint.
        ("Name the elements of bond TR001", "element = 'cl' means", True),
        # The question uses the defined word: a constraint.
        ("How much chlorine is there?", "chlorine refers to", False),
        # A bare predicate says nothing of what it defines: kept.
        ("Name the elements of bond TR001", "x = 5", False),
    ],
)
def test_glossary_entries_of_an_enrichment(question: str, clause: str, expected: bool) -> None:
    start = GLOSSARY.index(clause)
    value = GLOSSARY.index("'cl'", start) if "'cl'" in clause or "refers" in clause else start + 4
    assert glossary_entry(GLOSSARY, (value, value + 4), question) is expected


def test_a_heading_is_not_part_of_the_first_clause() -> None:
    # "Definitions:" opens the enrichment; it is no word of the clause "male = SEX = 'M'".
    enriched = "Definitions: male = SEX = 'M'; albumin refers to ALB"
    value = enriched.index("'M'")
    assert glossary_entry(enriched, (value, value + 3), "Sort male patients by birthday") is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cards with ID 1-20?", [("1", ">="), ("20", "<=")]),
        ("drivers born between 1980-1985.", [("1980", ">="), ("1985", "<=")]),
        # A year and month, a decimal after the hyphen, a descending pair: no range.
        ("orders in 2019-09", [("2019-09", "=")]),
        ("a score of 1-2.5", [("2.5", "=")]),
        ("won 10-5", [("5", "=")]),
        ("sales in 03-2019", [("2019", "=")]),
    ],
)
def test_a_hyphen_range_gives_both_bounds(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(f.value, f.op) for f in question_literals(text)] == expected


def test_a_hyphen_between_very_long_numbers_is_no_range() -> None:
    # Beyond Python's digit limit for int(): read as before, not raised.
    assert question_literals("1-" + "9" * 5000)


def test_a_glossary_line_written_with_a_colon_stays_one() -> None:
    # "male: SEX = 'M'" defines a word the question never uses: no constraint of this question.
    enriched = "Definitions: high GPT: GPT >= 40; male: SEX = 'M'"
    value = enriched.index("'M'")
    question = "How many patients born after 1950 have an abnormal GPT level?"
    assert glossary_entry(enriched, (value, value + 3), question) is True


_ANY_START = re.compile(
    r"[`\"]?[\w.-]+[`\"]?\s*(?:=|!=|<>|<=|>=|<|>|\bin\b|\blike\b|\bbetween\b)|'[^']*'", re.I
)


@pytest.mark.parametrize(
    "clause",
    [
        "element = 'cl' means Chlorine",
        "`U-PRO` > 0 refers to abnormal urine protein",
        'x`name` = 1 and "Quoted"=2 mean the name',
        "T1.height_cm between 180 and 190 refers to tall players",
        "don't = 'it''s' stands for a contraction",
        "a=b=c means chained assignments of values",
        "status in ('open', 'closed') for statuses that are whatever",
        "averylongwordwithoutanyoperatorbesideit " * 20,
    ],
)
def test_a_clause_keeps_the_words_of_a_search_from_any_letter(clause: str) -> None:
    # Names beside an operator are tried from the start of a word only: the words left are the
    # same as when every letter is a start.
    assert question_module._clause_stems(clause) == question_module._stems(
        _ANY_START.sub(" ", clause)
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Revenue this year", [("this year", "this year")]),
        ("Tickets for the current quarter", [("this quarter", "current quarter")]),
        ("Sales year-to-date by rep", [("this year", "year-to-date")]),
        ("YTD revenue", [("this year", "YTD")]),
        ("MTD signups", [("this month", "MTD")]),
        ("What is today's total?", [("today", "today")]),
        ("Orders yesterday", [("yesterday", "yesterday")]),
        # "up to today" ends a window: the window is the filter.
        ("Orders in the last 7 days up to today", [("7 day", "last 7 days")]),
    ],
)
def test_periods_relative_to_now_are_one_value_each(
    question: str, expected: list[tuple[str, str]]
) -> None:
    found = [f for f in question_literals(question) if f.kind in ("period", "window")]
    assert [(f.value, f.text) for f in found] == expected
