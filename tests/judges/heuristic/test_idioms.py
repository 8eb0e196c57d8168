"""Heuristic judge: the acceptance idioms of issue 29, judged through STEF's public record path.

Every case goes through the pipeline ``stef judge`` builds (default settings, default rules, the
heuristic judge with its shipped calibration). The issue's table is one titled test per row; then
pairs of ordinary production questions with a right and a wrong SQL (the wrong one changes one
thing the question names) assert that the right one scores strictly higher and that the wrong one
carries the evidence; "equal" pairs are rewrites that keep the meaning and must score the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

import pytest

from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import Result, Verdict
from stef.rules import load_rules
from stef.service.wiring import build_pipeline
from stef.settings import Settings

PIPELINE = build_pipeline(Settings(), load_rules(None), HeuristicJudge())

ALIGNMENT_FIELDS = ("matched", "missing", "mismatched", "extras")


@cache
def record_result(question: str, sql: str, enriched: str | None = None) -> Result:
    """One record through the record path, as ``stef judge`` reads it; any outcome."""
    record = {"question": question, "sql": sql}
    if enriched is not None:
        record["enriched_question"] = enriched
    processed = PIPELINE.process(json.dumps(record).encode(), {"file": "idioms", "line": 1})
    assert processed.result is not None, processed.error
    return processed.result


def judged(question: str, sql: str, enriched: str | None = None) -> Result:
    """One record judged: evaluated, with a score, components and an alignment."""
    result = record_result(question, sql, enriched)
    assert result.outcome == "evaluated", (result.outcome, result.error)
    assert result.score is not None and result.components is not None
    assert result.alignment is not None
    return result


def listed(result: Result, field: str) -> list[str]:
    """An alignment list (matched, missing, mismatched, extras) or the issue labels."""
    if field == "issues":
        return list(result.issues)
    assert field in ALIGNMENT_FIELDS, field
    assert result.alignment is not None
    return list(getattr(result.alignment, field))


def shows(result: Result, evidence: str) -> bool:
    """Whether ``result`` carries ``evidence``: ``field:needle`` alternatives joined by ``|``.

    ``issues:label`` is an exact issue label; ``matched:text`` (and missing, mismatched, extras)
    is a case-insensitive substring of one entry of that alignment list.
    """
    for alternative in evidence.split("|"):
        field, _, needle = alternative.strip().partition(":")
        entries = listed(result, field)
        if field == "issues":
            if needle in entries:
                return True
        elif any(needle.lower() in entry.lower() for entry in entries):
            return True
    return False


def summary(result: Result) -> str:
    """What a failure message shows of a result."""
    assert result.components is not None and result.alignment is not None
    a = result.alignment
    return (
        f"score={result.score} verdict={result.components.verdict.value} "
        f"filter_status={result.components.filter_status.value} issues={result.issues} "
        f"matched={a.matched} missing={a.missing} mismatched={a.mismatched} extras={a.extras}"
    )


# ------------------------------------------------------------------------------ the issue's table

ORDERS_2023 = "How many orders in 2023?"
HALF_OPEN_2023 = (
    "SELECT COUNT(*) FROM orders WHERE order_date >= '2023-01-01' AND order_date < '2024-01-01'"
)
HALF_OPEN_2022 = (
    "SELECT COUNT(*) FROM orders WHERE order_date >= '2022-01-01' AND order_date < '2023-01-01'"
)
ACTIVE_USERS = "How many active users are there?"
ACTIVE_FILTERED = "SELECT COUNT(*) FROM users WHERE status = 'active'"


def test_half_open_year_is_the_year() -> None:
    r = judged(ORDERS_2023, HALF_OPEN_2023)
    assert shows(r, "matched:2023"), summary(r)
    assert not shows(r, "extras:2024-01-01"), summary(r)
    assert not shows(r, "mismatched:2023"), summary(r)
    assert "filters_extra" not in r.issues, summary(r)


def test_wrong_half_open_year_is_mismatched_and_scores_below() -> None:
    right, wrong = judged(ORDERS_2023, HALF_OPEN_2023), judged(ORDERS_2023, HALF_OPEN_2022)
    assert shows(wrong, "mismatched:2023"), summary(wrong)
    assert not shows(wrong, "matched:2023"), summary(wrong)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


def test_active_users_is_status_active() -> None:
    r = judged(ACTIVE_USERS, ACTIVE_FILTERED)
    assert shows(r, "matched:active"), summary(r)
    assert not shows(r, "extras:active"), summary(r)


def test_active_users_without_the_filter_is_missing_and_scores_below() -> None:
    right = judged(ACTIVE_USERS, ACTIVE_FILTERED)
    wrong = judged(ACTIVE_USERS, "SELECT COUNT(*) FROM users")
    assert shows(wrong, "missing:active"), summary(wrong)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


def test_enriched_closed_month_matches_half_open_month() -> None:
    r = judged(
        "List overdue invoices from March 2024",
        "SELECT * FROM invoices WHERE status = 'overdue' "
        "AND issued_at >= '2024-03-01' AND issued_at < '2024-04-01'",
        "List invoices with status 'overdue' issued between 2024-03-01 and 2024-03-31",
    )
    assert shows(r, "matched:overdue"), summary(r)
    assert shows(r, "matched:2024"), summary(r)
    assert r.alignment is not None
    assert (r.alignment.missing, r.alignment.mismatched, r.alignment.extras) == ([], [], []), (
        summary(r)
    )


def test_top_5_ascending_is_ordering_wrong() -> None:
    question = "Top 5 products by revenue"
    sql = (
        "SELECT product_id, SUM(amount) AS r FROM order_items GROUP BY product_id "
        "ORDER BY r {} LIMIT 5"
    )
    right, wrong = judged(question, sql.format("DESC")), judged(question, sql.format("ASC"))
    assert "ordering_wrong" in wrong.issues, summary(wrong)
    assert "ordering_wrong" not in right.issues, summary(right)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


def test_over_100_dollars_with_less_than_is_mismatched() -> None:
    question = "Orders over 100 dollars"
    right = judged(question, "SELECT * FROM orders WHERE amount > 100")
    wrong = judged(question, "SELECT * FROM orders WHERE amount < 100")
    assert shows(wrong, "mismatched:100"), summary(wrong)
    assert not shows(right, "mismatched:100"), summary(right)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


def test_last_30_days_with_7_day_interval_is_mismatched() -> None:
    question = "Orders in the last 30 days"
    sql = "SELECT * FROM orders WHERE order_date >= CURRENT_DATE - INTERVAL '{} days'"
    right, wrong = judged(question, sql.format(30)), judged(question, sql.format(7))
    assert shows(wrong, "mismatched:30"), summary(wrong)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


def test_unparsable_sql_is_never_correct_and_scores_below_valid_sql() -> None:
    """Evaluated as not Correct, or a distinct outcome without a score; below the right SQL and
    never above any valid one."""
    broken = record_result(ORDERS_2023, "SELEC COUNT(* FROM orders")
    assert "unparsed_sql" in broken.issues, (broken.outcome, broken.issues)
    if broken.outcome != "evaluated":
        assert broken.score is None, (broken.outcome, broken.score)
        return
    assert broken.score is not None and broken.components is not None
    assert broken.components.verdict is not Verdict.CORRECT, summary(broken)
    right = judged(ORDERS_2023, HALF_OPEN_2023)
    assert broken.score < right.score, (summary(broken), summary(right))  # type: ignore[operator]
    for valid in (HALF_OPEN_2022, "SELECT COUNT(*) FROM orders", "SELECT * FROM orders"):
        other = judged(ORDERS_2023, valid)
        assert broken.score <= other.score, (summary(broken), valid, summary(other))  # type: ignore[operator]


def test_revenue_by_currency_without_group_by_is_grouping_wrong() -> None:
    question = "Revenue by currency"
    right = judged(question, "SELECT currency, SUM(amount) FROM payments GROUP BY currency")
    wrong = judged(question, "SELECT SUM(amount) FROM payments")
    assert "grouping_wrong" in wrong.issues, summary(wrong)
    assert "grouping_wrong" not in right.issues, summary(right)
    assert wrong.score < right.score, (summary(right), summary(wrong))  # type: ignore[operator]


# ---------------------------------------------------------------------------- right/wrong pairs


@dataclass(frozen=True)
class Pair:
    """A question, a right SQL and a wrong one that changes one thing the question names.

    ``evidence`` is what the wrong one's result shows and the right one's does not (see
    :func:`shows`).
    """

    id: str
    question: str
    right: str
    wrong: str
    evidence: str
    enriched: str | None = None


COMPARATIVES = [
    Pair(
        "over-100-dollars",
        "How many orders were over 100 dollars?",
        "SELECT COUNT(*) FROM orders WHERE amount > 100",
        "SELECT COUNT(*) FROM orders WHERE amount < 100",
        "mismatched:100",
    ),
    Pair(
        "more-than-5-orders",
        "List customers with more than 5 orders",
        "SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) > 5",
        "SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) < 5",
        "mismatched:5",
    ),
    Pair(
        "above-dollar-500",
        "Show payments above $500",
        "SELECT * FROM payments WHERE amount > 500",
        "SELECT * FROM payments WHERE amount <= 500",
        "mismatched:500",
    ),
    Pair(
        "exceeding-10k",
        "Which open invoices are exceeding 10k?",
        "SELECT id FROM invoices WHERE status = 'open' AND total > 10000",
        "SELECT id FROM invoices WHERE status = 'open' AND total > 1000",
        "mismatched:10 | missing:10",
    ),
    Pair(
        "at-least-five-words",
        "How many employees have at least five years of tenure?",
        "SELECT COUNT(*) FROM employees WHERE tenure_years >= 5",
        "SELECT COUNT(*) FROM employees WHERE tenure_years < 5",
        "mismatched:5 | mismatched:five",
    ),
    Pair(
        "under-20-dollars",
        "Products priced under $20",
        "SELECT name, price FROM products WHERE price < 20",
        "SELECT name, price FROM products WHERE price > 20",
        "mismatched:20",
    ),
    Pair(
        "below-50-units",
        "Which warehouses have stock below 50 units?",
        "SELECT warehouse_id FROM inventory WHERE quantity < 50",
        "SELECT warehouse_id FROM inventory WHERE quantity >= 50",
        "mismatched:50",
    ),
    Pair(
        "less-than-30-seconds",
        "Sessions that lasted less than 30 seconds",
        "SELECT * FROM sessions WHERE duration_seconds < 30",
        "SELECT * FROM sessions WHERE duration_seconds > 30",
        "mismatched:30",
    ),
    Pair(
        "at-most-3-replies",
        "Tickets with at most 3 replies",
        "SELECT id FROM tickets WHERE reply_count <= 3",
        "SELECT id FROM tickets WHERE reply_count > 3",
        "mismatched:3",
    ),
    Pair(
        "no-more-than-10-days",
        "Employees with no more than 10 sick days",
        "SELECT name FROM employees WHERE sick_days <= 10",
        "SELECT name FROM employees WHERE sick_days >= 10",
        "mismatched:10",
    ),
    Pair(
        "between-50-and-200",
        "Orders between $50 and $200",
        "SELECT * FROM orders WHERE amount BETWEEN 50 AND 200",
        "SELECT * FROM orders WHERE amount BETWEEN 50 AND 100",
        "mismatched:200 | missing:200",
    ),
    Pair(
        "greater-than-decimal",
        "Count transactions with a fee greater than 2.5",
        "SELECT COUNT(*) FROM transactions WHERE fee > 2.5",
        "SELECT COUNT(*) FROM transactions WHERE fee < 2.5",
        "mismatched:2.5",
    ),
    Pair(
        "less-than-twenty-words",
        "Which products have less than twenty units in stock?",
        "SELECT name FROM products WHERE units_in_stock < 20",
        "SELECT name FROM products WHERE units_in_stock > 20",
        "mismatched:20 | mismatched:twenty",
    ),
]

TOP_N = [
    Pair(
        "top-10-limit-5",
        "Top 10 customers by total spend",
        "SELECT customer_id, SUM(amount) AS spend FROM orders GROUP BY customer_id "
        "ORDER BY spend DESC LIMIT 10",
        "SELECT customer_id, SUM(amount) AS spend FROM orders GROUP BY customer_id "
        "ORDER BY spend DESC LIMIT 5",
        "mismatched:10 | missing:10 | issues:ordering_wrong",
    ),
    Pair(
        "highest-salary-asc",
        "Which employee has the highest salary?",
        "SELECT name FROM employees ORDER BY salary DESC LIMIT 1",
        "SELECT name FROM employees ORDER BY salary ASC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "highest-salary-min-subquery",
        "Which employee has the highest salary?",
        "SELECT name FROM employees WHERE salary = (SELECT MAX(salary) FROM employees)",
        "SELECT name FROM employees WHERE salary = (SELECT MIN(salary) FROM employees)",
        "issues:ordering_wrong | issues:aggregation_wrong",
    ),
    Pair(
        "most-orders-asc",
        "Which 3 customers placed the most orders?",
        "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id "
        "ORDER BY n DESC LIMIT 3",
        "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id ORDER BY n ASC LIMIT 3",
        "issues:ordering_wrong",
    ),
    Pair(
        "5-largest-limit-3",
        "What are the 5 largest invoices?",
        "SELECT id, total FROM invoices ORDER BY total DESC LIMIT 5",
        "SELECT id, total FROM invoices ORDER BY total DESC LIMIT 3",
        "mismatched:5 | missing:5 | issues:ordering_wrong",
    ),
    Pair(
        "lowest-price-desc",
        "Which product has the lowest price?",
        "SELECT name, price FROM products ORDER BY price ASC LIMIT 1",
        "SELECT name, price FROM products ORDER BY price DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "least-units-desc",
        "Which 3 categories sold the least units?",
        "SELECT category, SUM(quantity) AS units FROM order_items GROUP BY category "
        "ORDER BY units LIMIT 3",
        "SELECT category, SUM(quantity) AS units FROM order_items GROUP BY category "
        "ORDER BY units DESC LIMIT 3",
        "issues:ordering_wrong",
    ),
    Pair(
        "fewest-tickets-desc",
        "Which support agent closed the fewest tickets?",
        "SELECT agent_id, COUNT(*) AS closed FROM tickets WHERE status = 'closed' "
        "GROUP BY agent_id ORDER BY closed ASC LIMIT 1",
        "SELECT agent_id, COUNT(*) AS closed FROM tickets WHERE status = 'closed' "
        "GROUP BY agent_id ORDER BY closed DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "10-smallest-desc",
        "Show the 10 smallest orders",
        "SELECT id, amount FROM orders ORDER BY amount ASC LIMIT 10",
        "SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 10",
        "issues:ordering_wrong",
    ),
    Pair(
        "earliest-signup-desc",
        "Who was the earliest user to sign up?",
        "SELECT name, created_at FROM users ORDER BY created_at ASC LIMIT 1",
        "SELECT name, created_at FROM users ORDER BY created_at DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "latest-20-asc",
        "Show the latest 20 support tickets",
        "SELECT * FROM tickets ORDER BY created_at DESC LIMIT 20",
        "SELECT * FROM tickets ORDER BY created_at ASC LIMIT 20",
        "issues:ordering_wrong",
    ),
    Pair(
        "5-newest-limit-50",
        "What are the 5 newest products?",
        "SELECT name, launched_at FROM products ORDER BY launched_at DESC LIMIT 5",
        "SELECT name, launched_at FROM products ORDER BY launched_at DESC LIMIT 50",
        "mismatched:5 | missing:5 | issues:ordering_wrong",
    ),
    Pair(
        "oldest-by-birth-date-desc",
        "Who is the oldest employee?",
        "SELECT first_name, last_name FROM employees ORDER BY birth_date ASC LIMIT 1",
        "SELECT first_name, last_name FROM employees ORDER BY birth_date DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
]

TIME = [
    Pair(
        "enrichment-closed-range-half-open-sql",
        "List emails of people who paid more than 20 dollars from 9/10/2019 to 11/19/2019.",
        "SELECT DISTINCT email FROM expense WHERE DATE(SUBSTRING(expense_date, 1, 10)) >= "
        "'2019-09-10' AND DATE(SUBSTRING(expense_date, 1, 10)) < '2019-11-20' AND cost > 20",
        "SELECT DISTINCT email FROM expense WHERE DATE(SUBSTRING(expense_date, 1, 10)) >= "
        "'2019-09-10' AND DATE(SUBSTRING(expense_date, 1, 10)) < '2019-12-20' AND cost > 20",
        "mismatched:11/19/2019",
        enriched="List emails of people who paid more than 20 dollars from 9/10/2019 to "
        "11/19/2019. Definitions: expense_date BETWEEN '2019-09-10' and '2019-11-19'; cost > 20",
    ),
    Pair(
        "strftime-year",
        "How many orders were placed in 2023?",
        "SELECT COUNT(*) FROM orders WHERE strftime('%Y', created_at) = '2023'",
        "SELECT COUNT(*) FROM orders WHERE strftime('%Y', created_at) = '2022'",
        "mismatched:2023",
    ),
    Pair(
        "extract-year",
        "Total revenue in 2023",
        "SELECT SUM(amount) FROM payments WHERE EXTRACT(YEAR FROM paid_at) = 2023",
        "SELECT SUM(amount) FROM payments WHERE EXTRACT(YEAR FROM paid_at) = 2024",
        "mismatched:2023",
    ),
    Pair(
        "mysql-year",
        "Number of employees hired in 2021",
        "SELECT COUNT(*) FROM employees WHERE YEAR(hire_date) = 2021",
        "SELECT COUNT(*) FROM employees WHERE YEAR(hire_date) = 2020",
        "mismatched:2021",
    ),
    Pair(
        "like-year",
        "List invoices issued in 2023",
        "SELECT * FROM invoices WHERE issued_at LIKE '2023%'",
        "SELECT * FROM invoices WHERE issued_at LIKE '2022%'",
        "mismatched:2023",
    ),
    Pair(
        "closed-year-between",
        "Invoices from 2022",
        "SELECT * FROM invoices WHERE issued_on BETWEEN '2022-01-01' AND '2022-12-31'",
        "SELECT * FROM invoices WHERE issued_on BETWEEN '2021-01-01' AND '2021-12-31'",
        "mismatched:2022",
    ),
    Pair(
        "month-half-open",
        "How many orders in March 2024?",
        "SELECT COUNT(*) FROM orders "
        "WHERE created_at >= '2024-03-01' AND created_at < '2024-04-01'",
        "SELECT COUNT(*) FROM orders "
        "WHERE created_at >= '2024-02-01' AND created_at < '2024-03-01'",
        "mismatched:2024 | mismatched:march",
    ),
    Pair(
        "month-date-trunc",
        "Revenue in March 2024",
        "SELECT SUM(amount) FROM payments WHERE date_trunc('month', paid_at) = '2024-03-01'",
        "SELECT SUM(amount) FROM payments WHERE date_trunc('month', paid_at) = '2024-04-01'",
        "mismatched:2024 | mismatched:march",
    ),
    Pair(
        "quarter-half-open",
        "How many tickets were opened in Q1 2023?",
        "SELECT COUNT(*) FROM tickets WHERE opened_at >= '2023-01-01' AND opened_at < '2023-04-01'",
        "SELECT COUNT(*) FROM tickets WHERE opened_at >= '2023-01-01' AND opened_at < '2023-07-01'",
        "mismatched:q1 | mismatched:2023",
    ),
    Pair(
        "iso-date",
        "Orders placed on 2024-05-17",
        "SELECT * FROM orders WHERE order_date = '2024-05-17'",
        "SELECT * FROM orders WHERE order_date = '2024-05-18'",
        "mismatched:2024-05-17",
    ),
    Pair(
        "between-dates-closed-end",
        "Sessions between 2024-01-01 and 2024-01-31",
        "SELECT * FROM sessions WHERE started_at >= '2024-01-01' AND started_at <= '2024-01-31'",
        "SELECT * FROM sessions WHERE started_at >= '2024-01-01' AND started_at <= '2024-12-31'",
        "mismatched:2024-01",
    ),
    Pair(
        "since-year",
        "How many users signed up since 2022?",
        "SELECT COUNT(*) FROM users WHERE created_at >= '2022-01-01'",
        "SELECT COUNT(*) FROM users WHERE created_at < '2022-01-01'",
        "mismatched:2022",
    ),
    Pair(
        "before-year",
        "Employees hired before 2020",
        "SELECT name FROM employees WHERE hire_date < '2020-01-01'",
        "SELECT name FROM employees WHERE hire_date >= '2020-01-01'",
        "mismatched:2020",
    ),
    Pair(
        "last-7-days-months",
        "Payments in the last 7 days",
        "SELECT * FROM payments WHERE paid_at >= CURRENT_DATE - INTERVAL '7 days'",
        "SELECT * FROM payments WHERE paid_at >= CURRENT_DATE - INTERVAL '7 months'",
        "mismatched:7",
    ),
    Pair(
        "last-2-weeks-days",
        "How many sessions in the last 2 weeks?",
        "SELECT COUNT(*) FROM sessions WHERE started_at >= CURRENT_DATE - INTERVAL '2 weeks'",
        "SELECT COUNT(*) FROM sessions WHERE started_at >= CURRENT_DATE - INTERVAL '2 days'",
        "mismatched:2",
    ),
    Pair(
        "last-6-months",
        "New customers in the last 6 months",
        "SELECT COUNT(*) FROM customers WHERE signup_date >= CURRENT_DATE - INTERVAL '6 months'",
        "SELECT COUNT(*) FROM customers WHERE signup_date >= CURRENT_DATE - INTERVAL '3 months'",
        "mismatched:6",
    ),
]

VALUES = [
    Pair(
        "enrichment-plural-names-the-value",
        "How many users have a teacher badge?",
        "SELECT COUNT(DISTINCT UserId) FROM badges WHERE Name = 'Teacher'",
        "SELECT COUNT(DISTINCT UserId) FROM badges WHERE Name = 'Student'",
        "mismatched:teacher | missing:Teachers",
        enriched='How many users have a teacher badge? Definitions: "Teachers" is the Name of '
        "the badge",
    ),
    Pair(
        "enrichment-doubled-apostrophe",
        "Which set has the card named Ancestor's Chosen?",
        "SELECT setCode FROM cards WHERE name = 'Ancestor''s Chosen'",
        "SELECT setCode FROM cards WHERE name = 'Angel of Mercy'",
        "missing:Ancestor's Chosen | mismatched:Ancestor's Chosen",
        enriched="Which set has the card named Ancestor's Chosen? Definitions: the card refers "
        "to name = 'Ancestor''s Chosen'",
    ),
    Pair(
        "enrichment-definition-with-commas-inside-a-call",
        "Identify the percentage of teenage users.",
        "SELECT CAST(SUM(IIF(Age BETWEEN 13 AND 18, 1, 0)) AS REAL) * 100 / COUNT(Id) FROM users",
        "SELECT CAST(SUM(IIF(Age BETWEEN 13 AND 17, 1, 0)) AS REAL) * 100 / COUNT(Id) FROM users",
        "missing:18",
        enriched="Identify the percentage of teenage users. Definitions: DIVIDE(COUNT(Id where "
        "Age BETWEEN 13 and 18), COUNT(Id)) as percentage;",
    ),
    Pair(
        "active-subscriptions-dropped",
        "How many active subscriptions do we have?",
        "SELECT COUNT(*) FROM subscriptions WHERE status = 'active'",
        "SELECT COUNT(*) FROM subscriptions",
        "missing:active",
    ),
    Pair(
        "unpaid-invoices-paid",
        "Total amount of unpaid invoices",
        "SELECT SUM(amount) FROM invoices WHERE status = 'unpaid'",
        "SELECT SUM(amount) FROM invoices WHERE status = 'paid'",
        "mismatched:unpaid | missing:unpaid",
    ),
    Pair(
        "cancelled-orders-dropped",
        "How many cancelled orders were there?",
        "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'",
        "SELECT COUNT(*) FROM orders",
        "missing:cancelled",
    ),
    Pair(
        "in-progress-underscore",
        "List tickets in progress",
        "SELECT * FROM tickets WHERE status = 'in_progress'",
        "SELECT * FROM tickets WHERE status = 'open'",
        "mismatched:progress | missing:progress | extras:'open'",
    ),
    Pair(
        "refunds-plural",
        "How many refunds were issued?",
        "SELECT COUNT(*) FROM transactions WHERE type = 'refund'",
        "SELECT COUNT(*) FROM transactions WHERE type = 'charge'",
        "mismatched:refund | missing:refund | extras:'charge'",
    ),
    Pair(
        "part-time-hyphen",
        "How many part-time employees are there?",
        "SELECT COUNT(*) FROM employees WHERE employment_type = 'part_time'",
        "SELECT COUNT(*) FROM employees WHERE employment_type = 'full_time'",
        "mismatched:part | missing:part | extras:'full_time'",
    ),
    Pair(
        "failed-payments-succeeded",
        "Show failed payments",
        "SELECT * FROM payments WHERE status = 'failed'",
        "SELECT * FROM payments WHERE status = 'succeeded'",
        "mismatched:failed | missing:failed",
    ),
    Pair(
        "premium-customers-dropped",
        "Average order value for premium customers",
        "SELECT AVG(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id "
        "WHERE c.tier = 'premium'",
        "SELECT AVG(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id",
        "missing:premium",
    ),
    Pair(
        "shipped-orders-delivered",
        "How many shipped orders do we have?",
        "SELECT COUNT(*) FROM orders WHERE status = 'shipped'",
        "SELECT COUNT(*) FROM orders WHERE status = 'delivered'",
        "mismatched:shipped | missing:shipped",
    ),
    Pair(
        "high-priority-low",
        "Open high priority tickets",
        "SELECT id FROM tickets WHERE status = 'open' AND priority = 'high'",
        "SELECT id FROM tickets WHERE status = 'open' AND priority = 'low'",
        "mismatched:high | missing:high | extras:'low'",
    ),
    Pair(
        "mobile-sessions-desktop",
        "Number of mobile sessions",
        "SELECT COUNT(*) FROM sessions WHERE device_type = 'mobile'",
        "SELECT COUNT(*) FROM sessions WHERE device_type = 'desktop'",
        "mismatched:mobile | missing:mobile | extras:'desktop'",
    ),
    Pair(
        "trial-accounts-dropped",
        "List the trial accounts",
        "SELECT id, name FROM accounts WHERE plan = 'trial'",
        "SELECT id, name FROM accounts",
        "missing:trial",
    ),
    Pair(
        "enriched-churned-active",
        "How many churned customers?",
        "SELECT COUNT(*) FROM customers WHERE status = 'churned'",
        "SELECT COUNT(*) FROM customers WHERE status = 'active'",
        "mismatched:churned | missing:churned",
        enriched="Count the customers with status 'churned'",
    ),
    Pair(
        "over-inside-iif",
        "What percentage of customers consumed more than 528.3?",
        "SELECT SUM(IIF(consumption > 528.3, 1, 0)) * 100.0 / COUNT(*) FROM usage",
        "SELECT SUM(IIF(consumption < 528.3, 1, 0)) * 100.0 / COUNT(*) FROM usage",
        "mismatched:528.3",
    ),
    Pair(
        "youngest-by-age-column",
        "Find the weight of the youngest dog",
        "SELECT weight FROM pets ORDER BY pet_age ASC LIMIT 1",
        "SELECT weight FROM pets ORDER BY pet_age DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "youngest-by-min-subquery",
        "What is the id of the youngest user?",
        "SELECT id FROM users WHERE age = (SELECT MIN(age) FROM users)",
        "SELECT id FROM users WHERE age = (SELECT MAX(age) FROM users)",
        "mismatched:ordering",
    ),
    Pair(
        "fastest-lap-time",
        "What is the fastest lap time ever recorded?",
        "SELECT lap_time FROM laps ORDER BY lap_time ASC LIMIT 1",
        "SELECT lap_time FROM laps ORDER BY lap_time DESC LIMIT 1",
        "issues:ordering_wrong",
    ),
    Pair(
        "enrichment-names-min",
        "Which publisher published the slowest hero?",
        "SELECT publisher FROM heroes ORDER BY speed_value ASC LIMIT 1",
        "SELECT publisher FROM heroes ORDER BY speed_value DESC LIMIT 1",
        "issues:ordering_wrong",
        enriched="the slowest hero refers to MIN(speed_value)",
    ),
    Pair(
        "average-divided-by-count",
        "What was the average rating of players taller than 170?",
        "SELECT CAST(SUM(rating) AS REAL) / COUNT(id) FROM players WHERE height > 170",
        "SELECT CAST(AVG(rating) AS REAL) / COUNT(id) FROM players WHERE height > 170",
        "issues:aggregation_wrong",
    ),
    Pair(
        "average-total-price",
        "What is the average total price of the orders in January, 2012?",
        "SELECT AVG(price) FROM orders WHERE order_date LIKE '2012-01%'",
        "SELECT SUM(price) FROM orders WHERE order_date LIKE '2012-01%'",
        "issues:aggregation_wrong",
    ),
    Pair(
        "slash-date-day",
        "How many votes did user No.58 cast on 2010/7/19?",
        "SELECT COUNT(*) FROM votes WHERE user_id = 58 AND created = '2010-07-19'",
        "SELECT COUNT(*) FROM votes WHERE user_id = 58 AND created = '2010-07-20'",
        "mismatched:2010/7/19 | missing:2010/7/19",
    ),
    Pair(
        "numbered-user",
        "How many votes did user No.58 cast on 7/19/2010?",
        "SELECT COUNT(*) FROM votes WHERE user_id = 58 AND created = '2010-07-19'",
        "SELECT COUNT(*) FROM votes WHERE user_id = 59 AND created = '2010-07-19'",
        "mismatched:No.58 | missing:No.58",
    ),
    Pair(
        "full-name-half-dropped",
        "Which events did Maya Mclean attend?",
        "SELECT e.name FROM events e JOIN members m ON e.member_id = m.id"
        " WHERE m.first_name = 'Maya' AND m.last_name = 'Mclean'",
        "SELECT e.name FROM events e JOIN members m ON e.member_id = m.id"
        " WHERE m.first_name = 'Maya'",
        "mismatched:Maya Mclean",
    ),
    Pair(
        "enrichment-quotes-question-word",
        "List the teams whose speed class is fast",
        "SELECT name FROM teams WHERE speed_class = 'Fast'",
        "SELECT name FROM teams",
        "missing:Fast",
        enriched="List the teams whose speed class is fast. speed class refers to"
        " speed_class = 'Fast'",
    ),
]

NEGATION = [
    Pair(
        "not-cancelled-inverted",
        "How many orders were not cancelled?",
        "SELECT COUNT(*) FROM orders WHERE status != 'cancelled'",
        "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'",
        "mismatched:cancelled",
    ),
    Pair(
        "not-refunded-dropped",
        "How many orders were not refunded?",
        "SELECT COUNT(*) FROM orders WHERE status <> 'refunded'",
        "SELECT COUNT(*) FROM orders",
        "missing:refunded",
    ),
    Pair(
        "excluding-refunds-inverted",
        "Total revenue excluding refunds",
        "SELECT SUM(amount) FROM transactions WHERE type <> 'refund'",
        "SELECT SUM(amount) FROM transactions WHERE type = 'refund'",
        "mismatched:refund",
    ),
    Pair(
        "other-than-sales-inverted",
        "Employees in departments other than Sales",
        "SELECT name FROM employees WHERE department != 'Sales'",
        "SELECT name FROM employees WHERE department = 'Sales'",
        "mismatched:sales",
    ),
    Pair(
        "without-phone-inverted",
        "Customers without a phone number",
        "SELECT id, email FROM customers WHERE phone IS NULL",
        "SELECT id, email FROM customers WHERE phone IS NOT NULL",
        "mismatched:phone | issues:filters_incorrect",
    ),
    Pair(
        "except-shipped-delivered-in",
        "List orders except shipped and delivered ones",
        "SELECT * FROM orders WHERE status NOT IN ('shipped', 'delivered')",
        "SELECT * FROM orders WHERE status IN ('shipped', 'delivered')",
        "mismatched:shipped | mismatched:delivered",
    ),
    Pair(
        "never-logged-in-inverted",
        "Users who never logged in",
        "SELECT id, email FROM users WHERE last_login_at IS NULL",
        "SELECT id, email FROM users WHERE last_login_at IS NOT NULL",
        "mismatched:log | issues:filters_incorrect",
    ),
    Pair(
        "not-electronics-inverted",
        "Products not in the Electronics category",
        "SELECT name FROM products WHERE category <> 'Electronics'",
        "SELECT name FROM products WHERE category = 'Electronics'",
        "mismatched:electronics",
    ),
    Pair(
        "excluding-spam-inverted",
        "Count tickets excluding spam",
        "SELECT COUNT(*) FROM tickets WHERE category != 'spam'",
        "SELECT COUNT(*) FROM tickets WHERE category = 'spam'",
        "mismatched:spam",
    ),
    Pair(
        "other-than-credit-card-inverted",
        "Payments made with a method other than credit card",
        "SELECT * FROM payments WHERE method != 'credit_card'",
        "SELECT * FROM payments WHERE method = 'credit_card'",
        "mismatched:credit",
    ),
    Pair(
        "not-paid-inverted",
        "How many invoices are not paid?",
        "SELECT COUNT(*) FROM invoices WHERE status != 'paid'",
        "SELECT COUNT(*) FROM invoices WHERE status = 'paid'",
        "mismatched:paid",
    ),
    Pair(
        "not-london-like-inverted",
        "Employees not based in London",
        "SELECT name FROM employees WHERE office NOT LIKE 'London%'",
        "SELECT name FROM employees WHERE office LIKE 'London%'",
        "mismatched:london",
    ),
]

AGGREGATES = [
    Pair(
        "how-many-no-count",
        "How many customers are in Germany?",
        "SELECT COUNT(*) FROM customers WHERE country = 'Germany'",
        "SELECT * FROM customers WHERE country = 'Germany'",
        "issues:aggregation_missing | issues:aggregation_wrong",
    ),
    Pair(
        "number-of-max",
        "What is the number of open tickets?",
        "SELECT COUNT(*) FROM tickets WHERE status = 'open'",
        "SELECT MAX(id) FROM tickets WHERE status = 'open'",
        "issues:aggregation_wrong",
    ),
    Pair(
        "average-sum",
        "What is the average order value?",
        "SELECT AVG(amount) FROM orders",
        "SELECT SUM(amount) FROM orders",
        "issues:aggregation_wrong",
    ),
    Pair(
        "mean-max",
        "Mean session duration on mobile",
        "SELECT AVG(duration_seconds) FROM sessions WHERE device_type = 'mobile'",
        "SELECT MAX(duration_seconds) FROM sessions WHERE device_type = 'mobile'",
        "issues:aggregation_wrong",
    ),
    Pair(
        "total-avg",
        "Total revenue from subscriptions",
        "SELECT SUM(amount) FROM subscription_payments",
        "SELECT AVG(amount) FROM subscription_payments",
        "issues:aggregation_wrong",
    ),
    Pair(
        "sum-count",
        "What is the sum of all refunds?",
        "SELECT SUM(amount) FROM refunds",
        "SELECT COUNT(amount) FROM refunds",
        "issues:aggregation_wrong",
    ),
    Pair(
        "maximum-min",
        "What is the maximum salary in Engineering?",
        "SELECT MAX(salary) FROM employees WHERE department = 'Engineering'",
        "SELECT MIN(salary) FROM employees WHERE department = 'Engineering'",
        "issues:aggregation_wrong",
    ),
    Pair(
        "minimum-max",
        "What is the minimum price of any product?",
        "SELECT MIN(price) FROM products",
        "SELECT MAX(price) FROM products",
        "issues:aggregation_wrong",
    ),
    Pair(
        "unique-no-distinct",
        "How many unique customers placed orders?",
        "SELECT COUNT(DISTINCT customer_id) FROM orders",
        "SELECT COUNT(customer_id) FROM orders",
        "issues:aggregation_wrong | issues:columns_wrong",
    ),
    Pair(
        "distinct-no-distinct",
        "How many distinct countries do our users come from?",
        "SELECT COUNT(DISTINCT country) FROM users",
        "SELECT COUNT(country) FROM users",
        "issues:aggregation_wrong | issues:columns_wrong",
    ),
    Pair(
        "average-per-department-sum",
        "Average salary per department",
        "SELECT department, AVG(salary) FROM employees GROUP BY department",
        "SELECT department, SUM(salary) FROM employees GROUP BY department",
        "issues:aggregation_wrong",
    ),
    Pair(
        "for-each-status-no-group",
        "Number of orders for each status",
        "SELECT status, COUNT(*) FROM orders GROUP BY status",
        "SELECT COUNT(*) FROM orders",
        "issues:grouping_wrong",
    ),
]

# A named value replaced by one nobody named, where another named value is already missed: the
# replacement is evidence of its own (a tie with the right SQL before).
REPLACED = [
    Pair(
        "colour-replaced-beside-a-miss",
        "List the heroes with blue eyes and blond hair.",
        "SELECT h.name FROM hero AS h JOIN colour AS e ON h.eye_colour_id = e.id "
        "JOIN colour AS c ON h.hair_colour_id = c.id "
        "WHERE e.colour = 'Blue' AND c.colour = 'Blond'",
        "SELECT h.name FROM hero AS h JOIN colour AS e ON h.eye_colour_id = e.id "
        "JOIN colour AS c ON h.hair_colour_id = c.id "
        "WHERE e.colour = 'Amber' AND c.colour = 'Blond'",
        "mismatched:Blue",
        enriched="List the heroes with blue eyes and blond hair. Definitions: blue eyes refers "
        "to colour = 'Blue'; blond hair refers to colour = 'Blond'; the power Agility refers "
        "to power_name = 'Agility'",
    ),
    Pair(
        "enriched-bound-replaced",
        "How many male patients have a normal cholesterol level?",
        'SELECT COUNT(*) FROM lab WHERE "T-CHO" < 250',
        'SELECT COUNT(*) FROM lab WHERE "T-CHO" < 249',
        "mismatched:250",
        enriched="How many male patients have a normal cholesterol level? Definitions: male refers "
        "to SEX = 'M'; normal cholesterol refers to `T-CHO` < 250",
    ),
    Pair(
        "enriched-quoted-bound-flipped",
        "How many male patients have elevated total bilirubin?",
        "SELECT COUNT(*) FROM patient AS p JOIN lab AS l ON p.id = l.id "
        "WHERE p.sex = 'M' AND l.\"T-BIL\" >= 2.0",
        "SELECT COUNT(*) FROM patient AS p JOIN lab AS l ON p.id = l.id "
        "WHERE p.sex = 'M' AND l.\"T-BIL\" <= 2.0",
        "mismatched:2.0",
        enriched="How many male patients have elevated total bilirubin? Definitions: male "
        "refers to SEX = 'M'; elevated total bilirubin refers to `T-BIL` >= '2.0'",
    ),
    Pair(
        "the-first-one-is-top-1",
        "In which country was the first European Grand Prix hosted?",
        "SELECT c.country FROM races AS r JOIN circuits AS c ON r.circuit_id = c.id "
        "WHERE r.name = 'European Grand Prix' ORDER BY r.date ASC LIMIT 1",
        "SELECT c.country FROM races AS r JOIN circuits AS c ON r.circuit_id = c.id "
        "WHERE r.name = 'European Grand Prix' ORDER BY r.date ASC LIMIT 3",
        "mismatched:top 1",
    ),
    Pair(
        "an-average-asked-is-not-a-comparison-with-one",
        "What is the average price of the products in the 'Toys' category?",
        "SELECT AVG(price) FROM products WHERE category = 'Toys'",
        "SELECT name FROM products WHERE category = 'Toys' "
        "AND price > (SELECT AVG(price) FROM products)",
        "issues:aggregation_wrong",
    ),
    Pair(
        "above-the-average-is-avg",
        "List the products priced above the average price.",
        "SELECT name FROM products WHERE price > (SELECT AVG(price) FROM products)",
        "SELECT name FROM products WHERE price > (SELECT SUM(price) FROM products)",
        "issues:aggregation_wrong",
    ),
]

# Known limits, kept visible: the heuristic ties a question word to a column only by its spelling
# ("phone" -> phone), not by another form of the word ("logged in" -> last_login_at).
KNOWN_LIMITS = {
    "never-logged-in-inverted": "'logged in' names last_login_at by another word form",
}

PAIRS = [
    pytest.param(
        pair,
        id=f"{category}-{pair.id}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_LIMITS[pair.id])]
        if pair.id in KNOWN_LIMITS
        else [],
    )
    for category, pairs in (
        ("comparative", COMPARATIVES),
        ("top-n", TOP_N),
        ("time", TIME),
        ("value", VALUES),
        ("negation", NEGATION),
        ("aggregate", AGGREGATES),
        ("replaced", REPLACED),
    )
    for pair in pairs
]


@pytest.mark.parametrize("pair", PAIRS)
def test_right_scores_above_wrong_with_evidence(pair: Pair) -> None:
    right = judged(pair.question, pair.right, pair.enriched)
    wrong = judged(pair.question, pair.wrong, pair.enriched)
    problems = []
    if not wrong.score < right.score:  # type: ignore[operator]
        problems.append("the wrong SQL does not score below the right one")
    if not shows(wrong, pair.evidence):
        problems.append(f"the wrong SQL does not show {pair.evidence!r}")
    if shows(right, pair.evidence):
        problems.append(f"the right SQL shows {pair.evidence!r} too")
    assert not problems, "; ".join(problems) + f"\nright: {summary(right)}\nwrong: {summary(wrong)}"


# ----------------------------------------------------------------------------------- equal pairs


@dataclass(frozen=True)
class Same:
    """A question and two SQL texts that mean the same: they must be judged the same."""

    id: str
    question: str
    one: str
    other: str


EQUAL = [
    Same(
        "reformatted-recased",
        "How many orders were placed in 2023?",
        "SELECT COUNT(*) FROM orders WHERE strftime('%Y', created_at) = '2023'",
        "select count(*)\n  from orders\n where strftime('%Y', created_at) = '2023'",
    ),
    Same(
        "number-operand-swapped",
        "How many tickets have priority 1?",
        "SELECT COUNT(*) FROM tickets WHERE priority = 1",
        "SELECT COUNT(*) FROM tickets WHERE 1 = priority",
    ),
    Same(
        "string-operand-swapped",
        "How many active users are there?",
        "SELECT COUNT(*) FROM users WHERE status = 'active'",
        "SELECT COUNT(*) FROM users WHERE 'active' = status",
    ),
    Same(
        "comparison-operand-swapped",
        "Orders over 100 dollars",
        "SELECT * FROM orders WHERE amount > 100",
        "SELECT * FROM orders WHERE 100 < amount",
    ),
    Same(
        "and-swapped",
        "Open high priority tickets",
        "SELECT id FROM tickets WHERE status = 'open' AND priority = 'high'",
        "SELECT id FROM tickets WHERE priority = 'high' AND status = 'open'",
    ),
    Same(
        "and-swapped-with-range",
        "Paid invoices in March 2024",
        "SELECT * FROM invoices WHERE status = 'paid' "
        "AND issued_at >= '2024-03-01' AND issued_at < '2024-04-01'",
        "SELECT * FROM invoices WHERE issued_at >= '2024-03-01' "
        "AND issued_at < '2024-04-01' AND status = 'paid'",
    ),
    Same(
        "between-numbers",
        "Orders between $50 and $200",
        "SELECT * FROM orders WHERE amount BETWEEN 50 AND 200",
        "SELECT * FROM orders WHERE amount >= 50 AND amount <= 200",
    ),
    Same(
        "between-dates",
        "Sessions between 2024-01-01 and 2024-01-31",
        "SELECT * FROM sessions WHERE started_at BETWEEN '2024-01-01' AND '2024-01-31'",
        "SELECT * FROM sessions WHERE started_at >= '2024-01-01' AND started_at <= '2024-01-31'",
    ),
    Same(
        "half-open-year-closed",
        "How many orders in 2023?",
        HALF_OPEN_2023,
        "SELECT COUNT(*) FROM orders WHERE order_date >= '2023-01-01' "
        "AND order_date <= '2023-12-31'",
    ),
    Same(
        "half-open-month-closed",
        "Revenue in March 2024",
        "SELECT SUM(amount) FROM payments WHERE paid_at >= '2024-03-01' AND paid_at < '2024-04-01'",
        "SELECT SUM(amount) FROM payments WHERE paid_at >= '2024-03-01' "
        "AND paid_at <= '2024-03-31'",
    ),
    Same(
        "top-n-recased",
        "Top 5 products by revenue",
        "SELECT product_id, SUM(amount) AS revenue FROM order_items GROUP BY product_id "
        "ORDER BY revenue DESC LIMIT 5",
        "select product_id, sum(amount) as revenue\nfrom order_items\ngroup by product_id\n"
        "order by revenue desc\nlimit 5",
    ),
    Same(
        "hyphen-range-between-split",
        "What are the colors of the cards with ID 1-20?",
        "SELECT colors FROM cards WHERE id BETWEEN 1 AND 20",
        "SELECT colors FROM cards WHERE id >= 1 AND id <= 20",
    ),
    Same(
        "hyphen-year-range-between-split",
        "List the drivers born between 1980-1985.",
        "SELECT name FROM drivers WHERE STRFTIME('%Y', dob) BETWEEN '1980' AND '1985'",
        "SELECT name FROM drivers WHERE STRFTIME('%Y', dob) >= '1980' "
        "AND STRFTIME('%Y', dob) <= '1985'",
    ),
    Same(
        "not-equal-spellings",
        "How many orders were not cancelled?",
        "SELECT COUNT(*) FROM orders WHERE status != 'cancelled'",
        "SELECT COUNT(*) FROM orders WHERE status <> 'cancelled'",
    ),
]


@pytest.mark.parametrize("same", [pytest.param(s, id=s.id) for s in EQUAL])
def test_rewrites_that_keep_the_meaning_score_the_same(same: Same) -> None:
    one, other = judged(same.question, same.one), judged(same.question, same.other)
    assert one.components is not None and other.components is not None
    assert (one.score, one.components.verdict, one.components.filter_status) == (
        other.score,
        other.components.verdict,
        other.components.filter_status,
    ), f"\none:   {summary(one)}\nother: {summary(other)}"


def test_each_value_missed_or_contradicted_is_evidence_of_its_own() -> None:
    """One question value wrong is Potentially Incorrect; two are Incorrect, in one finding."""
    question = "How many orders from customer 42 in 2023 were over 100 dollars?"
    one = judged(
        question,
        "SELECT COUNT(*) FROM orders WHERE customer_id = 42 AND amount > 100"
        " AND order_date >= '2022-01-01' AND order_date < '2023-01-01'",
    )
    two = judged(
        question,
        "SELECT COUNT(*) FROM orders WHERE customer_id = 43 AND amount > 100"
        " AND order_date >= '2022-01-01' AND order_date < '2023-01-01'",
    )
    assert one.components is not None and two.components is not None
    assert str(one.components.verdict) == "Potentially Incorrect"
    assert str(two.components.verdict) == "Incorrect"
    assert two.score is not None and one.score is not None and two.score < one.score


def test_a_status_word_followed_by_an_amount_is_a_verb() -> None:
    # "paid more than 100" says how much, not that a payment status is 'paid'.
    verb = judged(
        "Which customers paid more than 100 dollars?",
        "SELECT customer_id FROM payments GROUP BY customer_id HAVING SUM(amount) > 100",
    )
    assert "paid" not in listed(verb, "missing"), summary(verb)
    status = judged("How many invoices are paid?", "SELECT COUNT(*) FROM invoices")
    assert "paid" in listed(status, "missing"), summary(status)
