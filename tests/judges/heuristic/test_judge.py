"""Heuristic judge: question literals, matching, enrichment, and no formatting as evidence."""

from __future__ import annotations

import re

import pytest
import sqlglot

from stef.judges.heuristic.enrichment import enrichment
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import EnrichmentStatus
from stef.pipeline import Pipeline
from stef.question import question_literals
from stef.rules import AppRules, RuleSet
from stef.stages.validate import validate

PIPE = Pipeline(RuleSet(AppRules()), HeuristicJudge())


def _judge(question: str, sql: str, **extra: str) -> dict[str, object]:
    return PIPE.judge_record(validate({"question": question, "sql": sql, **extra})).model_dump(
        mode="json"
    )


def test_literals() -> None:
    found = {
        (f.kind, f.value, f.op)
        for f in question_literals(
            "How many orders from 'Acme Corp' in New York were over 500 in Q3 2023 "
            "or on 2024-01-05?"
        )
    }
    assert ("value", "acme corp", "=") in found
    assert ("entity", "new york", "=") in found
    assert ("number", "500", ">") in found
    assert ("quarter", "q3", "=") in found
    assert ("year", "2023", "=") in found
    assert ("date", "2024-01-05", "=") in found
    assert not any(f.value == "how" for f in question_literals("How many?"))


def test_top_k_count_is_not_a_filter() -> None:
    assert [f.value for f in question_literals("Top 10 products in 2023")] == ["2023"]


def test_backend_is_labelled_heuristic() -> None:
    r = _judge("How many customers?", "SELECT COUNT(*) FROM customers")
    assert r["judge"] == {
        "backend": "heuristic",
        "model": None,
        "prompt_version": None,
        "rules_version": RuleSet(AppRules()).version,
    }


def test_missing_and_wrong_values() -> None:
    r = _judge("Total revenue in EMEA in 2023?", "SELECT SUM(rev) FROM s WHERE region = 'EMEA'")
    assert r["components"]["filter_status"] == "partially_applied"  # type: ignore[index]
    assert "filters_missing" in r["issues"]  # type: ignore[operator]
    r = _judge("Total revenue in 2023?", "SELECT SUM(rev) FROM s WHERE year = 2022")
    assert r["components"]["filter_status"] == "not_applied"  # type: ignore[index]
    assert "filters_incorrect" in r["issues"]  # type: ignore[operator]


def test_value_used_in_case_arm_counts_as_applied() -> None:
    r = _judge(
        "What share of patients are 'F'?",
        "SELECT CAST(SUM(CASE WHEN sex = 'F' THEN 1 ELSE 0 END) AS REAL) / COUNT(*) FROM p",
    )
    assert r["components"]["filter_status"] == "fully_applied"  # type: ignore[index]


def test_enrichment() -> None:
    rules = AppRules()
    assert enrichment("q in 2023", None, rules).status is EnrichmentStatus.MISSING
    assert (
        enrichment("Sales in 2023", "Total sales for year 2023", rules).status
        is EnrichmentStatus.FAITHFUL
    )
    drop = enrichment("Sales in 2023 for 'EMEA'", "Total sales for 'EMEA'", rules)
    assert drop.status is EnrichmentStatus.MAJOR_DRIFT and drop.dropped == ["2023"]
    add = enrichment("Sales in 2023", "Sales in 2023 for region 'APAC'", rules)
    assert add.status is EnrichmentStatus.MINOR_DRIFT and add.added == ["APAC"]


CORPUS = [
    ("How many customers are in APAC?", "SELECT COUNT(*) FROM customers WHERE region = 'APAC'"),
    (
        "What is the average salary of employees hired after 2015?",
        "SELECT AVG(salary) FROM employees WHERE hire_year > 2015",
    ),
    (
        "List the top 3 products by revenue in 2023",
        "SELECT product, SUM(revenue) AS r FROM sales WHERE year = 2023 GROUP BY product "
        "ORDER BY r DESC LIMIT 3",
    ),
    (
        "Which customers never ordered?",
        "SELECT name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.cid = c.id)",
    ),
]


def _reformat(sql: str, upper: bool) -> str:
    pretty = sqlglot.transpile(sql, pretty=True)[0]
    keywords = (
        r"\b(select|from|where|group by|order by|limit|and|not|exists|as|desc|avg|sum|count)\b"
    )
    return re.sub(
        keywords, lambda m: m.group(0).upper() if upper else m.group(0).lower(), pretty, flags=re.I
    )


@pytest.mark.parametrize(("question", "sql"), CORPUS)
def test_formatting_is_not_evidence(question: str, sql: str) -> None:
    """Keyword case, whitespace and identifier quoting never change the verdict or score."""
    base = _judge(question, sql)
    for variant in (
        _reformat(sql, True),
        _reformat(sql, False),
        " ".join(sql.split()).lower(),
        sql.replace("customers", '"customers"'),
    ):
        other = _judge(question, variant)
        assert other["score"] == base["score"], variant
        assert other["components"] == base["components"], variant
        assert other["issues"] == base["issues"], variant


@pytest.mark.parametrize(
    ("sql", "status"),
    [
        (
            "SELECT COUNT(*) FROM d WHERE closed >= '2024-07-01' AND closed < '2024-10-01'",
            "fully_applied",
        ),
        ("SELECT COUNT(*) FROM d WHERE fiscal_quarter = 3 AND fiscal_year = 2024", "fully_applied"),
        (
            "SELECT COUNT(*) FROM d WHERE fiscal_quarter = 'Q3' AND fiscal_year = 2024",
            "fully_applied",
        ),
        ("SELECT COUNT(*) FROM d WHERE fiscal_year = 2024", "partially_applied"),
    ],
)
def test_quarter_matches_quarter_columns_and_date_ranges(sql: str, status: str) -> None:
    r = _judge("How many deals closed in Q3 2024?", sql)
    assert r["components"]["filter_status"] == status  # type: ignore[index]
