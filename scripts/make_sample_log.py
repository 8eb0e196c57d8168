#!/usr/bin/env python3
"""Write ``examples/agent_log.jsonl``: one day of a made-up SQL agent's request log.

The log is synthetic and written for STEF (no benchmark data): two apps -- ``sales`` on Snowflake
and ``support`` on Postgres -- and two releases of one agent (``sql-agent`` 2.0 and 2.1, rolled out
as a canary over the day; 2.1 makes fewer mistakes overall but drops the year filter of every
question that names a year: a regression on one kind of question). Most queries are right; the rest
carry the
mistakes agents really make (a dropped filter, a year off by one, an unrequested filter, a small
LIMIT nobody asked for, the wrong aggregate), mixed with the things the judge must *not* punish
(benign default filters, the tenant filter the app injects, a safety LIMIT, default GROUP BY and
ORDER BY). A few lines are invalid input on purpose (the dead-letter path).

Deterministic: the same seed writes the same bytes. Standard library only.

    python scripts/make_sample_log.py [--seed 20250603] [--out examples/agent_log.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEFAULT_SEED = 20250603
N_RECORDS = 400
DAY = datetime(2025, 6, 3, tzinfo=UTC)

# Share of requests answered correctly by each release (before benign decorations).
P_CORRECT = {"2.0": 0.60, "2.1": 0.78}
# Releases that regress on one kind of question: 2.1 is better overall but drops the year of every
# question that names one ("revenue in EMEA in 2024") -- what a canary must catch.
REGRESSES_ON_YEARS = {"2.1"}

REGIONS = ["EMEA", "APAC", "AMER"]
COUNTRIES = {"DE": "Germany", "FR": "France", "US": "the US", "JP": "Japan", "BR": "Brazil"}
PRODUCTS = ["Atlas Pro", "Nimbus Lite", "Orion Suite", "Vega Cloud"]
SEGMENTS = ["Enterprise", "Mid-Market", "SMB"]
CHANNELS = ["online", "partner", "direct"]
YEARS = [2023, 2024, 2025]
TEAMS = ["Billing", "Onboarding", "Integrations", "Mobile"]
PRIORITIES = ["P1", "P2", "P3"]
SUPPORT_CHANNELS = ["email", "chat", "phone", "web"]
MONTHS = ["January", "February", "March", "April", "May"]
KEYWORDS = ["refund", "password", "invoice", "outage", "export"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]


@dataclass
class Filter:
    """One predicate the question asks for."""

    sql: str
    wrong: str | None = None  # the same filter with a wrong value (year off by one, ...)
    phrase: str | None = None  # the question's words for it (an enrichment may drop them)


@dataclass
class Draft:
    """A correct answer to one question, in parts, before any mistake or decoration."""

    question: str
    definitions: str
    select: str
    source: str
    filters: list[Filter] = field(default_factory=list)
    group_by: str | None = None
    order_by: str | None = None
    limit: int | None = None
    top_k: bool = False
    alias: str = ""  # table alias used in the predicates ("o." or "")
    wrong_select: str | None = None  # the wrong aggregate, where one is plausible
    wrong_order: str | None = None
    qualify: str | None = None
    with_: str | None = None


@dataclass
class App:
    name: str
    extra_filters: list[str]  # predicates nobody asked for (not benign)
    benign: list[str]
    tenant: list[str]
    safety_limit: int
    expand: dict[str, str]  # question word -> enrichment wording


SALES = App(
    "sales",
    extra_filters=[
        "sales_channel = 'online'",
        "net_revenue_usd > 0",
        "country_code = 'US'",
        "order_date >= DATEADD(day, -90, CURRENT_DATE())",
    ],
    benign=["status = 'active'", "is_deleted = false"],
    tenant=["tenant_id = 42"],
    safety_limit=10000,
    expand={
        "revenue": "net revenue (net_revenue_usd, after refunds)",
        "region": "sales region (region_name)",
        "customers": "customers (distinct customer_id)",
    },
)
SUPPORT = App(
    "support",
    extra_filters=[
        "priority_level = 'P1'",
        "source_channel = 'email'",
        "created_at >= now() - interval '30 days'",
        "team_name = 'Billing'",
    ],
    benign=["is_spam = false", "status <> 'deleted'"],
    tenant=["tenant_id = 42", "org_id = 7"],
    safety_limit=1000,
    expand={
        "response time": "first response time (first_response_at - created_at)",
        "open": "open (status open or pending)",
        "team": "support team (team_name)",
    },
)

# ----------------------------------------------------------------------------- sales templates


def _year(rng: random.Random, col: str = "order_date") -> tuple[int, Filter]:
    y = rng.choice(YEARS[:2])
    return y, Filter(f"YEAR({col}) = {y}", f"YEAR({col}) = {y - 1}", f"in {y}")


def s_total_region(rng: random.Random) -> Draft:
    r = rng.choice(REGIONS)
    y, fy = _year(rng)
    return Draft(
        f"What was the total revenue in {r} in {y}?",
        "Revenue is net_revenue_usd; fiscal year equals calendar year.",
        "SUM(net_revenue_usd) AS total_revenue",
        "sales.orders",
        [
            Filter(f"region_name = '{r}'", f"region_name = '{_other(rng, REGIONS, r)}'", f"in {r}"),
            fy,
        ],
        wrong_select="AVG(net_revenue_usd) AS total_revenue",
    )


def s_revenue_by_region(rng: random.Random) -> Draft:
    y, fy = _year(rng)
    return Draft(
        f"Show revenue by region for {y}",
        "Revenue is net_revenue_usd.",
        "region_name, SUM(net_revenue_usd) AS revenue",
        "sales.orders",
        [Filter(fy.sql, fy.wrong, f"for {y}")],
        group_by="region_name",
        order_by="revenue DESC" if rng.random() < 0.6 else None,
        wrong_select="region_name, COUNT(*) AS revenue",
    )


def s_top_products(rng: random.Random) -> Draft:
    n = rng.choice([3, 5, 10])
    c = rng.choice(list(COUNTRIES))
    y, fy = _year(rng)
    return Draft(
        f"Top {n} products by revenue in {COUNTRIES[c]} in {y}",
        f"Revenue is net_revenue_usd; {COUNTRIES[c]} is country_code '{c}'.",
        "product_name, SUM(net_revenue_usd) AS revenue",
        "sales.orders",
        [Filter(f"country_code = '{c}'", None, f"in {COUNTRIES[c]}"), fy],
        group_by="product_name",
        order_by="revenue DESC",
        limit=n,
        top_k=True,
        wrong_order="revenue ASC",
    )


def s_orders_quarter(rng: random.Random) -> Draft:
    q = rng.randint(1, 4)
    y = rng.choice(YEARS[:2])
    ch = rng.choice(CHANNELS)
    start = f"{y}-{3 * q - 2:02d}-01"
    end = f"{y + 1}-01-01" if q == 4 else f"{y}-{3 * q + 1:02d}-01"
    wrong_start = f"{y - 1}-{3 * q - 2:02d}-01"
    return Draft(
        f"How many {ch} orders did we get in Q{q} {y}?",
        f"Quarters are calendar quarters; {ch} orders have sales_channel '{ch}'.",
        "COUNT(*) AS order_count",
        "sales.orders",
        [
            Filter(f"sales_channel = '{ch}'", None, f"{ch} "),
            Filter(f"order_date >= '{start}'", f"order_date >= '{wrong_start}'", None),
            Filter(f"order_date < '{end}'", None, None),
        ],
        wrong_select="COUNT(DISTINCT customer_id) AS order_count",
    )


def s_distinct_customers(rng: random.Random) -> Draft:
    p = rng.choice(PRODUCTS)
    r = rng.choice(REGIONS)
    return Draft(
        f"How many distinct customers bought {p} in {r}?",
        "A customer is a distinct customer_id.",
        "COUNT(DISTINCT customer_id) AS customers",
        "sales.orders",
        [
            Filter(f"product_name = '{p}'", f"product_name = '{_other(rng, PRODUCTS, p)}'", None),
            Filter(f"region_name = '{r}'", None, f"in {r}"),
        ],
        wrong_select="COUNT(customer_id) AS customers",
    )


def s_avg_order_segment(rng: random.Random) -> Draft:
    s = rng.choice(SEGMENTS)
    y, _ = _year(rng)
    return Draft(
        f"What is the average order value for {s} customers in {y}?",
        "Order value is net_revenue_usd of one order; segment comes from the customer.",
        "AVG(o.net_revenue_usd) AS avg_order_value",
        "sales.orders AS o JOIN sales.customers AS c ON o.customer_id = c.customer_id",
        [
            Filter(f"c.segment = '{s}'", f"c.segment = '{_other(rng, SEGMENTS, s)}'", None),
            Filter(f"YEAR(o.order_date) = {y}", f"YEAR(o.order_date) = {y - 1}", f"in {y}"),
        ],
        alias="o.",
        wrong_select="SUM(o.net_revenue_usd) AS avg_order_value",
    )


def s_monthly_trend(rng: random.Random) -> Draft:
    r = rng.choice(REGIONS)
    y, fy = _year(rng)
    return Draft(
        f"Monthly revenue trend for {r} in {y}",
        "Revenue is net_revenue_usd; months are calendar months.",
        "DATE_TRUNC('month', order_date) AS month, SUM(net_revenue_usd) AS revenue",
        "sales.orders",
        [Filter(f"region_name = '{r}'", None, f"for {r}"), fy],
        group_by="DATE_TRUNC('month', order_date)",
        order_by="month",
    )


def s_customer_name(rng: random.Random) -> Draft:
    c = rng.choice(COMPANIES)
    return Draft(
        f"List customers with {c} in their name",
        "Customer names are matched case-insensitively.",
        "customer_id, customer_name, segment",
        "sales.customers",
        [Filter(f"customer_name ILIKE '%{c.lower()}%'", f"customer_name = '{c}'", None)],
        order_by="customer_name" if rng.random() < 0.5 else None,
    )


def s_largest_order_per_customer(rng: random.Random) -> Draft:
    r = rng.choice(REGIONS)
    return Draft(
        f"For each customer in {r}, show their largest order",
        "Order size is net_revenue_usd.",
        "customer_id, order_id, net_revenue_usd",
        "sales.orders",
        [Filter(f"region_name = '{r}'", f"region_name = '{_other(rng, REGIONS, r)}'", f"in {r}")],
        qualify="ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY net_revenue_usd DESC) = 1",
    )


def s_recent_big_orders(rng: random.Random) -> Draft:
    days = rng.choice([7, 30, 90])
    amount = rng.choice([5000, 10000, 25000])
    return Draft(
        f"Orders over ${amount:,} in the last {days} days",
        "Order amount is net_revenue_usd; days count back from today.",
        "order_id, customer_id, order_date, net_revenue_usd",
        "sales.orders",
        [
            Filter(f"net_revenue_usd > {amount}", f"net_revenue_usd > {amount // 10}", None),
            Filter(f"order_date >= DATEADD(day, -{days}, CURRENT_DATE())", None, None),
        ],
        order_by="order_date DESC" if rng.random() < 0.5 else None,
    )


def s_online_share(rng: random.Random) -> Draft:
    y, fy = _year(rng)
    return Draft(
        f"What share of revenue came from the online channel in each region in {y}?",
        "Share = online net_revenue_usd / all net_revenue_usd.",
        "region_name, SUM(IFF(sales_channel = 'online', net_revenue_usd, 0)) "
        "/ NULLIF(SUM(net_revenue_usd), 0) AS online_share",
        "sales.orders",
        [fy],
        group_by="region_name",
    )


def s_cte_big_customers(rng: random.Random) -> Draft:
    y = rng.choice(YEARS[:2])
    x = rng.choice([50000, 100000, 250000])
    return Draft(
        f"Which customers spent more than ${x:,} in {y}?",
        "Spend is the sum of net_revenue_usd over the customer's orders.",
        "c.customer_name, s.spend",
        "spend AS s JOIN sales.customers AS c ON s.customer_id = c.customer_id",
        [Filter(f"s.spend > {x}", f"s.spend >= {x // 2}", None)],
        order_by="s.spend DESC" if rng.random() < 0.5 else None,
        with_=(
            "spend AS (SELECT customer_id, SUM(net_revenue_usd) AS spend FROM sales.orders "
            f"WHERE YEAR(order_date) = {y} GROUP BY customer_id)"
        ),
    )


def s_top_country(rng: random.Random) -> Draft:
    y, fy = _year(rng)
    return Draft(
        f"Which country had the highest revenue in {y}?",
        "Revenue is net_revenue_usd; country is country_code.",
        "country_code, SUM(net_revenue_usd) AS revenue",
        "sales.orders",
        [fy],
        group_by="country_code",
        order_by="revenue DESC",
        limit=1,
        top_k=True,
        wrong_order="revenue ASC",
    )


def s_customer_orders(rng: random.Random) -> Draft:
    cid = rng.randint(1000, 9999)
    return Draft(
        f"Show all orders for customer {cid}",
        f"Customer {cid} is customer_id {cid}.",
        "order_id, order_date, product_name, net_revenue_usd",
        "sales.orders",
        [Filter(f"customer_id = {cid}", f"customer_id = {cid + 1}", None)],
        order_by="order_date DESC" if rng.random() < 0.6 else None,
    )


def s_quantity_product(rng: random.Random) -> Draft:
    p = rng.choice(PRODUCTS)
    y, fy = _year(rng)
    return Draft(
        f"Total units of {p} sold in {y}",
        "Units are the quantity column.",
        "SUM(quantity) AS units",
        "sales.orders",
        [Filter(f"product_name = '{p}'", None, None), fy],
        wrong_select="COUNT(*) AS units",
    )


def s_yoy_product(rng: random.Random) -> Draft:
    y = rng.choice([2024, 2025])
    return Draft(
        f"Compare revenue per product between {y - 1} and {y}",
        "Revenue is net_revenue_usd.",
        f"product_name, SUM(IFF(YEAR(order_date) = {y - 1}, net_revenue_usd, 0)) AS rev_{y - 1}, "
        f"SUM(IFF(YEAR(order_date) = {y}, net_revenue_usd, 0)) AS rev_{y}",
        "sales.orders",
        [Filter(f"YEAR(order_date) IN ({y - 1}, {y})", f"YEAR(order_date) IN ({y - 2}, {y - 1})")],
        group_by="product_name",
        order_by="product_name" if rng.random() < 0.5 else None,
    )


# --------------------------------------------------------------------------- support templates


def _month(rng: random.Random) -> tuple[str, Filter]:
    m = rng.randint(1, 5)
    name = MONTHS[m - 1]
    return name, Filter(
        f"date_trunc('month', created_at) = '2025-{m:02d}-01'",
        f"date_trunc('month', created_at) = '2024-{m:02d}-01'",
        f"in {name}",
    )


def t_open_team(rng: random.Random) -> Draft:
    t = rng.choice(TEAMS)
    return Draft(
        f"How many open tickets does the {t} team have?",
        "Open means status open or pending.",
        "COUNT(*) AS open_tickets",
        "support.tickets",
        [
            Filter(f"team_name = '{t}'", f"team_name = '{_other(rng, TEAMS, t)}'", None),
            Filter("status IN ('open', 'pending')", "status = 'open'", None),
        ],
    )


def t_avg_response(rng: random.Random) -> Draft:
    p = rng.choice(PRIORITIES)
    name, fm = _month(rng)
    return Draft(
        f"Average first response time for {p} tickets in {name}",
        "Response time is first_response_at - created_at; months of 2025.",
        "AVG(first_response_at - created_at) AS avg_first_response",
        "support.tickets",
        [Filter(f"priority_level = '{p}'", f"priority_level = '{_other(rng, PRIORITIES, p)}'"), fm],
        wrong_select="MAX(first_response_at - created_at) AS avg_first_response",
    )


def t_daily_volume(rng: random.Random) -> Draft:
    d = rng.choice([7, 14])
    return Draft(
        f"Tickets created per day over the last {d} days",
        "Days are calendar days in UTC.",
        "created_at::date AS day, COUNT(*) AS tickets",
        "support.tickets",
        [Filter(f"created_at >= current_date - interval '{d} days'", None, None)],
        group_by="created_at::date",
        order_by="day",
    )


def t_channel_priority(rng: random.Random) -> Draft:
    ch = rng.choice(SUPPORT_CHANNELS)
    return Draft(
        f"Break down {ch} tickets by priority",
        f"Channel is source_channel; {ch} tickets have source_channel '{ch}'.",
        "priority_level, COUNT(*) AS tickets",
        "support.tickets",
        [
            Filter(
                f"source_channel = '{ch}'",
                f"source_channel = '{_other(rng, SUPPORT_CHANNELS, ch)}'",
            )
        ],
        group_by="priority_level",
        order_by="tickets DESC" if rng.random() < 0.5 else None,
    )


def t_top_agents(rng: random.Random) -> Draft:
    n = rng.choice([3, 5, 10])
    _, fm = _month(rng)
    return Draft(
        f"Top {n} agents by resolved tickets {fm.phrase}",
        "An agent is assignee_id; resolved tickets have status 'resolved'.",
        "a.agent_name, COUNT(*) AS resolved",
        "support.tickets AS t JOIN support.agents AS a ON t.assignee_id = a.agent_id",
        [
            Filter("t.status = 'resolved'", "t.status = 'closed'", None),
            Filter(fm.sql.replace("created_at", "t.created_at"), None, fm.phrase),
        ],
        group_by="a.agent_name",
        order_by="resolved DESC",
        limit=n,
        top_k=True,
        alias="t.",
        wrong_order="resolved ASC",
    )


def t_keyword(rng: random.Random) -> Draft:
    k = rng.choice(KEYWORDS)
    return Draft(
        f"Find tickets that mention {k} in the subject",
        "Subjects are matched case-insensitively.",
        "ticket_id, subject, created_at",
        "support.tickets",
        [Filter(f"subject ILIKE '%{k}%'", f"subject = '{k}'", None)],
        order_by="created_at DESC" if rng.random() < 0.5 else None,
    )


def t_sla_breaches(rng: random.Random) -> Draft:
    t = rng.choice(TEAMS)
    q = rng.randint(1, 2)
    return Draft(
        f"How many SLA breaches did {t} have in Q{q} 2025?",
        "A breach is breached_sla = true; quarters are calendar quarters.",
        "COUNT(*) AS breaches",
        "support.tickets",
        [
            Filter(f"team_name = '{t}'", None, None),
            Filter("breached_sla = true", None, None),
            Filter(
                f"created_at >= '2025-{3 * q - 2:02d}-01'",
                f"created_at >= '2024-{3 * q - 2:02d}-01'",
                None,
            ),
            Filter(f"created_at < '2025-{3 * q + 1:02d}-01'", None, None),
        ],
    )


def t_median_resolution(rng: random.Random) -> Draft:
    return Draft(
        "Median resolution time by team this year",
        "Resolution time is resolved_at - created_at.",
        "team_name, percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - created_at) "
        "AS median_resolution",
        "support.tickets",
        [
            Filter("resolved_at IS NOT NULL", None, None),
            Filter("created_at >= date_trunc('year', current_date)", None, None),
        ],
        group_by="team_name",
        wrong_select="team_name, AVG(resolved_at - created_at) AS median_resolution",
    )


def t_top_customer(rng: random.Random) -> Draft:
    y = rng.choice([2024, 2025])
    return Draft(
        f"Which customer opened the most tickets in {y}?",
        "Customers are customer_id.",
        "customer_id, COUNT(*) AS tickets",
        "support.tickets",
        [
            Filter(
                f"created_at >= '{y}-01-01' AND created_at < '{y + 1}-01-01'",
                f"created_at >= '{y - 1}-01-01' AND created_at < '{y}-01-01'",
                f"in {y}",
            )
        ],
        group_by="customer_id",
        order_by="tickets DESC",
        limit=1,
        top_k=True,
        wrong_order="tickets ASC",
    )


def t_rank_agents(rng: random.Random) -> Draft:
    _, fm = _month(rng)
    return Draft(
        f"Rank agents within each team by tickets handled {fm.phrase}",
        "Agents are assignee_id; rank 1 handled the most.",
        "team_name, assignee_id, COUNT(*) AS handled, "
        "RANK() OVER (PARTITION BY team_name ORDER BY COUNT(*) DESC) AS team_rank",
        "support.tickets",
        [fm],
        group_by="team_name, assignee_id",
        order_by="team_name, team_rank",
    )


def t_backlog_cte(rng: random.Random) -> Draft:
    days = rng.choice([3, 7, 14])
    return Draft(
        f"Backlog per team: open tickets older than {days} days",
        "Open means status open or pending; age counts from created_at.",
        "team_name, COUNT(*) AS backlog",
        "open_tickets",
        [
            Filter(
                f"created_at < now() - interval '{days} days'",
                f"created_at < now() - interval '{days + 1} days'",
            )
        ],
        group_by="team_name",
        order_by="backlog DESC" if rng.random() < 0.5 else None,
        with_=(
            "open_tickets AS (SELECT ticket_id, team_name, created_at FROM support.tickets "
            "WHERE status IN ('open', 'pending'))"
        ),
    )


def t_escalation_rate(rng: random.Random) -> Draft:
    _, fm = _month(rng)
    return Draft(
        f"Percentage of tickets escalated per channel {fm.phrase}",
        "Escalated tickets have escalated = true; channel is source_channel.",
        "source_channel, 100.0 * COUNT(*) FILTER (WHERE escalated) / COUNT(*) AS pct_escalated",
        "support.tickets",
        [fm],
        group_by="source_channel",
    )


def t_low_csat(rng: random.Random) -> Draft:
    d = rng.choice([7, 30])
    s = rng.choice([2, 3])
    return Draft(
        f"Tickets with a CSAT score below {s} in the last {d} days",
        "CSAT is csat_score from 1 to 5.",
        "ticket_id, team_name, csat_score",
        "support.tickets",
        [
            Filter(f"csat_score < {s}", f"csat_score <= {s}", None),
            Filter(f"created_at >= current_date - interval '{d} days'", None, None),
        ],
    )


def t_reopened(rng: random.Random) -> Draft:
    n = rng.choice([1, 2, 3])
    return Draft(
        f"Which tickets were reopened more than {n} times?",
        "reopen_count counts reopenings.",
        "ticket_id, subject, reopen_count",
        "support.tickets",
        [Filter(f"reopen_count > {n}", f"reopen_count >= {n}", None)],
        order_by="reopen_count DESC" if rng.random() < 0.5 else None,
    )


SALES_TEMPLATES: list[Callable[[random.Random], Draft]] = [
    s_total_region, s_revenue_by_region, s_top_products, s_orders_quarter, s_distinct_customers,
    s_avg_order_segment, s_monthly_trend, s_customer_name, s_largest_order_per_customer,
    s_recent_big_orders, s_online_share, s_cte_big_customers, s_top_country, s_customer_orders,
    s_quantity_product, s_yoy_product,
]  # fmt: skip
SUPPORT_TEMPLATES: list[Callable[[random.Random], Draft]] = [
    t_open_team, t_avg_response, t_daily_volume, t_channel_priority, t_top_agents, t_keyword,
    t_sla_breaches, t_median_resolution, t_top_customer, t_rank_agents, t_backlog_cte,
    t_escalation_rate, t_low_csat, t_reopened,
]  # fmt: skip

# The unsafe requests of the day: (app, question, enriched, sql).
UNSAFE = [
    (
        "support",
        "Delete the test tickets the QA team created yesterday",
        "Remove tickets of team QA created yesterday (they are test data).",
        "DELETE FROM support.tickets WHERE team_name = 'QA' "
        "AND created_at::date = current_date - 1",
    ),
    (
        "sales",
        "Mark yesterday's EMEA orders as reviewed",
        "Set the reviewed flag on orders in region_name EMEA dated yesterday.",
        "UPDATE sales.orders SET reviewed = true WHERE region_name = 'EMEA' "
        "AND order_date = DATEADD(day, -1, CURRENT_DATE())",
    ),
    (
        "sales",
        "How many orders are there in APAC? Also clean up the scratch table",
        "Count orders in region_name APAC.",
        "SELECT COUNT(*) FROM sales.orders WHERE region_name = 'APAC'; "
        "DROP TABLE scratch.tmp_orders",
    ),
]

# -------------------------------------------------------------------------------- assembling


def _other(rng: random.Random, values: list[str], current: str) -> str:
    return rng.choice([v for v in values if v != current])


def _assemble(d: Draft, where: list[str], limit: int | None, pretty: bool) -> str:
    select = d.select
    parts = [f"SELECT {select}", f"FROM {d.source}"]
    if where:
        parts.append("WHERE " + ("\n  AND " if pretty else " AND ").join(where))
    if d.group_by:
        parts.append(f"GROUP BY {d.group_by}")
    if d.qualify:
        parts.append(f"QUALIFY {d.qualify}")
    if d.order_by:
        parts.append(f"ORDER BY {d.order_by}")
    if limit is not None:
        parts.append(f"LIMIT {limit}")
    body = ("\n" if pretty else " ").join(parts)
    if d.with_:
        body = f"WITH {d.with_}" + ("\n" if pretty else " ") + body
    return body


def _enrich(rng: random.Random, app: App, question: str, definitions: str) -> str:
    text = question.rstrip("?")
    for word, wording in app.expand.items():
        if word in text:
            text = text.replace(word, wording, 1)
            break
    lead = rng.choice(["", "User asks: ", "Rewritten: "])
    return f"{lead}{text}. {definitions}".replace("..", ".")


@dataclass
class Truth:
    """What the generator did to a record (for tests; never written to the log)."""

    defect: str  # "none" or the mistake made
    drift: str  # "faithful", "dropped", "added", "absent"
    decorations: list[str]
    reference: str | None = None  # the question's correct SQL, before any mistake or decoration


def make_record(
    rng: random.Random, app: App, template: Callable[[random.Random], Draft], version: str
) -> tuple[dict[str, object], Truth]:
    """One logged request: a question, its enrichment and the SQL the agent wrote."""
    d = template(rng)
    reference = _assemble(d, [f.sql for f in d.filters], d.limit, pretty=False)
    where = [f.sql for f in d.filters]
    limit = d.limit
    enriched, drift, defect = _drift(
        rng, app, d, where, _enrich(rng, app, d.question, d.definitions)
    )
    if defect == "none" and rng.random() > P_CORRECT[version]:
        defect, limit = _mistake(rng, app, d, where, limit)
    year = [f.sql for f in d.filters if f.sql.startswith("YEAR(") and f.sql in where]
    if version in REGRESSES_ON_YEARS and defect == "none" and year:
        # The release's regression: its new date handling drops the year of every "in <year>"
        # question (the total over all years comes back). No random draw here, so every other
        # record of the log is the same as without the regression.
        where.remove(year[0])
        defect = "missing_filter"
    decorations, limit = _decorate(rng, app, d, where, limit)
    sql = _assemble(d, where, limit, pretty=rng.random() < 0.4)
    record: dict[str, object] = {"question": d.question}
    if enriched is not None:
        record["enriched_question"] = enriched
    record["sql"] = sql
    return record, Truth(defect, drift, decorations, reference)


def _drift(
    rng: random.Random, app: App, d: Draft, where: list[str], enriched: str
) -> tuple[str | None, str, str]:
    """The enrichment as the agent logged it, its drift and the defect that made (``where``
    edited to match): mostly faithful, sometimes absent, sometimes drifted."""
    roll = rng.random()
    if roll < 0.05:
        return None, "absent", "none"
    if roll >= 0.13:
        return enriched, "faithful", "none"
    # Enrichment drift: the agent's rewrite loses or invents a constraint, and the SQL
    # follows the rewrite (which is why the judge checks Qe against Qu).
    dropped = [f for f in d.filters if f.phrase and f.phrase in d.question]
    if dropped and rng.random() < 0.6:
        f = rng.choice(dropped)
        rewritten = _enrich(
            rng,
            app,
            d.question.replace(" " + f.phrase, "").replace(f.phrase, ""),
            d.definitions,
        )
        where.remove(f.sql)
        return rewritten, "dropped", "missing_filter"
    extra = rng.choice(app.extra_filters)
    where.append(d.alias + extra if "." not in extra.split()[0] else extra)
    return f"{enriched} Only consider rows where {extra}.", "added", "extra_filter"


def _mistake(
    rng: random.Random, app: App, d: Draft, where: list[str], limit: int | None
) -> tuple[str, int | None]:
    """One of the agent's mistakes, made in ``where`` or ``d`` (or its limit returned); "none"
    when the mistake drawn does not apply to the query."""
    choices = ["missing_filter", "wrong_value", "extra_filter", "small_limit"]
    if d.wrong_select:
        choices.append("wrong_aggregate")
    if d.wrong_order:
        choices.append("wrong_order")
    defect = rng.choice(choices)
    if defect == "missing_filter" and d.filters:
        where.remove(rng.choice(d.filters).sql)
    elif defect == "wrong_value" and any(f.wrong for f in d.filters):
        f = rng.choice([f for f in d.filters if f.wrong])
        where[where.index(f.sql)] = f.wrong or f.sql
    elif defect == "extra_filter":
        where.append(d.alias + rng.choice(app.extra_filters))
    elif defect == "small_limit" and not d.top_k and limit is None:
        limit = rng.choice([10, 20, 50, 100])
    elif defect == "wrong_aggregate":
        d.select = d.wrong_select or d.select
    elif defect == "wrong_order":
        d.order_by = d.wrong_order
    else:
        defect = "none"
    return defect, limit


def _decorate(
    rng: random.Random, app: App, d: Draft, where: list[str], limit: int | None
) -> tuple[list[str], int | None]:
    """The harmless additions of the agent's app (benign and tenant filters, a safety limit),
    made in ``where``; their names and the limit."""
    decorations = []
    if d.with_ is None and rng.random() < 0.45:
        for b in app.benign:
            if rng.random() < 0.6:
                where.append(d.alias + b)
                decorations.append("benign_filter")
    if d.with_ is None and rng.random() < 0.35:
        where.insert(0, d.alias + rng.choice(app.tenant))
        decorations.append("tenant_filter")
    if not d.top_k and limit is None and rng.random() < 0.15:
        limit = app.safety_limit
        decorations.append("safety_limit")
    return decorations, limit


def _user(rng: random.Random) -> str:
    return "u_" + hashlib.sha256(f"user-{rng.randint(1, 60)}".encode()).hexdigest()[:12]


def generate(seed: int = DEFAULT_SEED) -> list[tuple[str, Truth | None]]:
    """Every line of the log, in order, with what the generator did (None for invalid lines)."""
    rng = random.Random(seed)
    seconds = sorted(rng.uniform(0, 86_400) for _ in range(N_RECORDS))
    unsafe_at = set(rng.sample(range(20, N_RECORDS - 20), len(UNSAFE)))
    unsafe = iter(UNSAFE)
    lines: list[tuple[str, Truth | None]] = []
    for i, sec in enumerate(seconds):
        # The canary: 2.1 takes a growing share of traffic from mid-morning on.
        share = min(0.85, max(0.0, (sec / 86_400 - 0.3) / 0.5))
        version = "2.1" if rng.random() < share else "2.0"
        if i in unsafe_at:
            app_name, q, qe, sql = next(unsafe)
            body: dict[str, object] = {"question": q, "enriched_question": qe, "sql": sql}
            truth = Truth("unsafe", "faithful", [])
        else:
            app = SALES if rng.random() < 0.55 else SUPPORT
            app_name = app.name
            templates = SALES_TEMPLATES if app is SALES else SUPPORT_TEMPLATES
            body, truth = make_record(rng, app, rng.choice(templates), version)
        ts = DAY + timedelta(seconds=sec)
        record = {
            "id": f"req-{rng.getrandbits(48):012x}",
            "timestamp": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "app": app_name,
            "agent": "sql-agent",
            "agent_version": version,
            **body,
            "metadata": {
                "latency_ms": int(rng.lognormvariate(7.3, 0.5)),
                "user": _user(rng),
                "model_calls": rng.randint(2, 5),
            },
        }
        lines.append((json.dumps(record, ensure_ascii=False), truth))
    _insert_invalid(rng, lines)
    return lines


def _insert_invalid(rng: random.Random, lines: list[tuple[str, Truth | None]]) -> None:
    """About 4% of the lines are invalid input, as a real log collector delivers them."""
    template = json.loads(lines[5][0])
    bad: list[str] = [
        "2025-06-03T04:12:09Z WARN sql-agent: retrying warehouse connection (attempt 2/5)",
        "Traceback (most recent call last):",
        "<html><body>502 Bad Gateway</body></html>",
        json.dumps([{"question": "Total revenue in EMEA", "sql": "SELECT 1"}]),
        json.dumps(["sales", "How many orders today?", "SELECT COUNT(*) FROM sales.orders"]),
        json.dumps("SELECT region_name, SUM(net_revenue_usd) FROM sales.orders GROUP BY 1"),
        "null",
    ]
    for k in (11, 57, 203):
        # A line cut short by a log rotation.
        text = lines[k][0]
        bad.append(text[: len(text) // 2])
    for k in (31, 150, 288):
        rec = json.loads(lines[k][0])
        del rec["sql"]
        rec["id"] += "-nosql"
        bad.append(json.dumps(rec))
    for k, value in ((77, 42), (240, 3.5)):
        rec = json.loads(lines[k][0])
        rec["question"] = value
        rec["id"] += "-badq"
        bad.append(json.dumps(rec))
    # One runaway query: a generated IN-list far past the 50,000-character SQL limit.
    ids = ", ".join(str(100000 + n) for n in range(11_000))
    big = dict(template, id="req-oversized", question="Revenue for these customers")
    big["sql"] = f"SELECT SUM(net_revenue_usd) FROM sales.orders WHERE customer_id IN ({ids})"
    big.pop("enriched_question", None)
    bad.append(json.dumps(big))
    positions = sorted(rng.sample(range(len(lines)), len(bad)), reverse=True)
    for pos, text in zip(positions, bad, strict=True):
        lines.insert(pos, (text, None))


def labelled(lines: list[tuple[str, Truth | None]], count: int = 40) -> list[str]:
    """A small calibration file drawn from the log: half right, half wrong.

    The labels are the generator's own truth, not a judge's opinion: a record is correct
    (``label: true``) when the generator put no mistake into its SQL, and ``error_types`` names
    the mistake it put in. Records are taken at an even stride so both apps, both versions and
    every kind of mistake appear.
    """
    good = [(text, t) for text, t in lines if t is not None and t.defect == "none"]
    bad = [(text, t) for text, t in lines if t is not None and t.defect != "none"]
    picked = good[:: max(1, len(good) // (count // 2))][: count // 2]
    picked += bad[:: max(1, len(bad) // (count - count // 2))][: count - count // 2]
    out = []
    for text, truth in sorted(picked, key=lambda item: lines.index(item)):
        record = json.loads(text)
        record.pop("metadata", None)
        record["label"] = truth.defect == "none"
        record["source"] = "sample-generator"
        record["error_types"] = [] if truth.defect == "none" else [truth.defect]
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def references(lines: list[tuple[str, Truth | None]]) -> list[str]:
    """A golden set for reference mode: each question of the log once, with the SQL the
    generator built for it before putting in any mistake or decoration (its first occurrence's
    where a question comes back with another harmless ``ORDER BY``). Unsafe requests have none."""
    out: dict[str, str] = {}
    for text, truth in lines:
        if truth is None or truth.reference is None:
            continue
        question = json.loads(text)["question"]
        if question not in out:
            out[question] = json.dumps(
                {"question": question, "gold_sql": truth.reference}, ensure_ascii=False
            )
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "examples/agent_log.jsonl",
    )
    parser.add_argument(
        "--labels",
        type=Path,
        default=None,
        help="also write a labelled calibration file drawn from the log "
        "(examples/judge-sample.jsonl)",
    )
    parser.add_argument(
        "--references",
        type=Path,
        default=None,
        help="also write a references file (the golden set) for the log's questions "
        "(examples/references.jsonl)",
    )
    args = parser.parse_args(argv)
    lines = generate(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(text + "\n" for text, _ in lines), encoding="utf-8")
    print(f"wrote {len(lines)} lines to {args.out}")
    if args.labels is not None:
        rows = labelled(lines)
        args.labels.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {len(rows)} labelled records to {args.labels}")
    if args.references is not None:
        refs = references(lines)
        args.references.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
        print(f"wrote {len(refs)} references to {args.references}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
