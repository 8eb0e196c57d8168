"""Date truncation and interval arithmetic for queries run on generated SQLite databases
(:mod:`stef.sql.suite`), which SQLite lacks: ``DATE_TRUNC('month', d)``, ``d - INTERVAL '7
days'``, ``DATEADD(day, -7, d)``, ``DATE_SUB(d, INTERVAL 7 DAY)``, ``EXTRACT(YEAR FROM d)``.

:func:`portable` rewrites them into calls of two functions :func:`register` adds to a
connection: ``STEF_TRUNC(unit, value)`` and ``STEF_SHIFT(value, count, unit)``, both over the
ISO date texts the generated databases hold (a value that is not one gives NULL); and
``EXTRACT`` into SQLite's own ``STRFTIME``.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.sql.dialects import dialect_of
from stef.sql.fetch import limit_generated

_UNITS = {"day", "week", "month", "quarter", "year", "hour", "minute", "second"}
# EXTRACT's units as STRFTIME formats (``dow``: 0 for Sunday, as PostgreSQL has it).
_PARTS = {
    "year": "%Y",
    "month": "%m",
    "day": "%d",
    "hour": "%H",
    "minute": "%M",
    "second": "%S",
    "doy": "%j",
    "dayofyear": "%j",
    "dow": "%w",
    "epoch": "%s",
}


# The instant "now" stands for on the generated databases (``CURRENT_DATE``, ``DATE('now')``,
# ``DATETIME()``) when the record does not say when it was asked (:func:`now_at`): their dates
# centre on 2020, and a pinned instant gives a record the same rows whatever the day it runs
# (an age, ``STRFTIME('%Y', 'now') - STRFTIME('%Y', birthday)``, grew by one every year).
NOW = "2020-06-15 12:00:00"
_now: ContextVar[str] = ContextVar("stef_suite_now", default=NOW)
_NOW_NODES: dict[type[exp.Expr], slice] = {
    exp.CurrentTimestamp: slice(None),
    exp.CurrentDatetime: slice(None),
    exp.CurrentDate: slice(None, 10),
    exp.CurrentTime: slice(11, None),
}
# SQLite's date functions that read "now" without an argument, or as their first, and the
# nodes sqlglot reads the others as (``STRFTIME('%Y', 'now')``, ``DATE('now')``).
_NOW_FUNCTIONS = {"date", "datetime", "time", "julianday", "unixepoch"}
_TIME_READERS = (exp.TsOrDsToTimestamp, exp.TsOrDsToDate, exp.Date, exp.Cast, exp.TimeStrToTime)


def instant_of(timestamp: str | None) -> str | None:
    """A record's ``timestamp`` (ISO 8601, as validation leaves it) as the instant "now"
    stands for, ``YYYY-MM-DD HH:MM:SS`` on its own clock; None when it is none."""
    if not timestamp:
        return None
    try:
        when = dt.datetime.fromisoformat(timestamp.strip())
    except ValueError:
        return None
    return when.strftime("%Y-%m-%d %H:%M:%S") if 1000 <= when.year <= 9999 else None


@contextmanager
def now_at(instant: str | None) -> Iterator[None]:
    """Within the block, "now" is ``instant`` (:func:`instant_of`; None: :data:`NOW`) for
    :func:`portable`, :func:`constant_date` and :func:`constant_year`: a query's "the last 90
    days" or "this year" read on the day its question was asked."""
    token = _now.set(instant or NOW)
    try:
        yield
    finally:
        _now.reset(token)


def plain_days() -> tuple[str, str, str]:
    """Ordinary days of a generated date column: New Year's Day of "now"'s year, "now"'s day,
    and 1 March of the next year (with :data:`NOW`: 2020-01-01, 2020-06-15, 2021-03-01), so
    that a query's "the last 30 days" keeps some rows whenever the question was asked."""
    today = dt.date.fromisoformat(_now.get()[:10])
    return f"{today.year:04d}-01-01", today.isoformat(), f"{today.year + 1:04d}-03-01"


def register(conn: sqlite3.Connection) -> None:
    """``STEF_TRUNC`` and ``STEF_SHIFT`` on ``conn``."""
    conn.create_function("STEF_TRUNC", 2, _trunc, deterministic=True)
    conn.create_function("STEF_SHIFT", 3, _shift, deterministic=True)


# Engines where a date plus or minus a whole number is a date that many days away
# (``CURRENT_DATE - 30``); elsewhere (MySQL, SQLite) it is a number.
_DAY_ARITHMETIC = {"postgres", "redshift", "snowflake", "duckdb", "oracle"}


def portable(tree: exp.Expr, dialect: str | None = None) -> exp.Expr:
    """``tree`` (changed in place; a query, whose root is never replaced) with "now" pinned
    (:func:`now_at`, else :data:`NOW`), and date truncation and interval arithmetic as calls of
    the registered functions; in a ``dialect`` where it means days (:data:`_DAY_ARITHMETIC`),
    today plus or minus a number (``CURRENT_DATE - 30``) too."""
    if dialect in _DAY_ARITHMETIC:
        _today_arithmetic(tree, dialect)
    _pin_now(tree)
    for node in list(tree.find_all(exp.TimestampTrunc, exp.DateTrunc)):
        unit = _unit(node.args.get("unit"))
        if unit is not None:
            node.replace(exp.Anonymous(this="STEF_TRUNC", expressions=[_text(unit), node.this]))
    for node in list(tree.find_all(exp.DateAdd, exp.DateSub)):
        count, unit = node.expression, _unit(node.args.get("unit")) or "day"
        if isinstance(node, exp.DateSub):
            count = exp.Neg(this=count.copy())
        node.replace(exp.Anonymous(this="STEF_SHIFT", expressions=[node.this, count, _text(unit)]))
    for arithmetic in list(tree.find_all(exp.Add, exp.Sub)):
        if isinstance(arithmetic, exp.Add | exp.Sub):
            _interval_arithmetic(arithmetic)
    for extract in reversed(list(tree.find_all(exp.Extract))):  # the innermost first
        part = _part(extract.this.name.casefold(), extract.expression)
        if part is not None:
            extract.replace(part)
    return tree


def _pin_now(tree: exp.Expr) -> None:
    """Every place ``tree`` reads "now" (:func:`_now_reads`) as the pinned instant (in place)."""
    now = _now.get()
    for node in _now_reads(tree):
        if isinstance(node, exp.Anonymous):
            node.set("expressions", [exp.Literal.string(now)])
        else:
            node.replace(exp.Literal.string(now[_NOW_NODES.get(type(node), slice(None))]))


def reads_now(node: exp.Expr) -> bool:
    """Whether ``node`` reads "now" the way :func:`portable` pins it."""
    return bool(_now_reads(node))


def _now_reads(tree: exp.Expr) -> list[exp.Expr]:
    """Where ``tree`` reads "now": ``CURRENT_DATE``, ``CURRENT_TIMESTAMP``, a ``'now'`` a date
    function reads as its time, and SQLite's date functions called without an argument."""
    found: list[exp.Expr] = list(tree.find_all(*_NOW_NODES))
    found += [
        v
        for v in tree.find_all(exp.Literal)
        if v.is_string and str(v.this).strip().casefold() == "now" and _read_by_function(v)
    ]
    found += [
        c
        for c in tree.find_all(exp.Anonymous)
        if c.name.casefold() in _NOW_FUNCTIONS and not c.expressions
    ]
    return found


def _read_by_function(literal: exp.Literal) -> bool:
    """Whether a date function reads ``literal`` as its time (``DATE('now')``,
    ``STRFTIME('%Y', 'now')``, ``julianday('now')``), not a text function as a string."""
    parent = literal.parent
    if isinstance(parent, exp.Anonymous):
        return parent.name.casefold() in _NOW_FUNCTIONS and parent.expressions[:1] == [literal]
    return isinstance(parent, _TIME_READERS) and parent.this is literal


def _part(unit: str, value: exp.Expr) -> exp.Expr | None:
    """``EXTRACT(unit FROM value)`` (``DATE_PART``, ``DATEPART``) as SQLite computes it with
    ``STRFTIME``: an integer; None for a unit SQLite has no format for."""

    def number(code: str) -> exp.Expr:
        text = exp.Anonymous(this="STRFTIME", expressions=[_text(code), value.copy()])
        return exp.Cast(this=text, to=exp.DataType.build("INTEGER"))

    if unit in _PARTS:
        return number(_PARTS[unit])
    if unit == "dayofweek":  # BigQuery's and MySQL's: 1 for Sunday
        return exp.Paren(this=exp.Add(this=number("%w"), expression=exp.Literal.number(1)))
    if unit == "quarter":
        months = exp.Add(this=number("%m"), expression=exp.Literal.number(2))
        # An integer division, as SQLite divides integers.
        quarter = exp.Div(this=exp.Paren(this=months), expression=exp.Literal.number(3), typed=True)
        return exp.Paren(this=quarter)
    return None


def constant_date(node: exp.Expr) -> str | None:
    """The ISO date a column-free date expression gives (``CURRENT_DATE - INTERVAL '7 days'``,
    ``DATEADD(day, -7, '2020-06-15')``), evaluated by SQLite; None when it gives none."""
    value = _evaluated(node)
    return value if isinstance(value, str) and _parse(value) is not None else None


def constant_year(node: exp.Expr) -> int | None:
    """The year a column-free expression gives (``STRFTIME('%Y', 'now')``: 2020 when "now" is
    :data:`NOW`), evaluated by SQLite; None when it gives no number from 1000 to 9999."""
    value = _evaluated(node)
    try:
        year = int(value) if isinstance(value, int | str) else None
    except ValueError:
        return None
    return year if year is not None and 1000 <= year <= 9999 else None


# The SQLite steps (virtual machine instructions) a column-free expression is evaluated in, a
# count, not a time, so every build reads it alike: DATE('now', '-7 days') takes a few dozen, and
# a recursive CTE inside one counted to 10^9 past the record's CPU budget (it is not checked
# inside SQLite). Its values are held as the generated databases' are (randomblob(10^9): 1 GB).
_MAX_STEPS = 100_000
_STEP = 1_000


def _evaluated(node: exp.Expr) -> object:
    """What SQLite gives for a column-free expression (None when it has a column or fails)."""
    if node.find(exp.Column) is not None:
        return None
    try:
        sql = portable(exp.select(node.copy())).sql(dialect=dialect_of("sqlite"))
        conn = sqlite3.connect(":memory:")
    except (SqlglotError, RecursionError, ValueError, sqlite3.Error):
        return None
    try:
        register(conn)
        limit_generated(conn)
        steps = [0]

        def counted() -> int:  # SQLite aborts the statement when this returns non-zero
            steps[0] += _STEP
            return int(steps[0] > _MAX_STEPS)

        conn.set_progress_handler(counted, _STEP)
        row = conn.execute(sql).fetchone()
    except (sqlite3.Error, OverflowError, ValueError):
        return None
    finally:
        conn.close()
    return row[0] if row else None


def _today_arithmetic(tree: exp.Expr, dialect: str) -> None:
    """``CURRENT_DATE - 30`` (Oracle's ``SYSDATE - 30``) as ``DATE_ADD`` of -30 days."""
    today_nodes = exp.CurrentDate | exp.CurrentTimestamp if dialect == "oracle" else exp.CurrentDate
    for node in list(tree.find_all(exp.Add, exp.Sub)):
        today = node.this
        if not isinstance(today, today_nodes):
            continue
        if not node.expression.is_int:
            continue
        days = int(node.expression.name) * (-1 if isinstance(node, exp.Sub) else 1)
        shifted = exp.DateAdd(this=today.copy(), expression=exp.Literal.number(days))
        shifted.set("unit", exp.var("day"))
        node.replace(shifted)


def _interval_arithmetic(node: exp.Add | exp.Sub) -> None:
    """``d + INTERVAL '7 days'`` (either side for ``+``) as ``STEF_SHIFT(d, 7, 'day')``."""
    sides = [node.this, node.expression]
    interval = next((s for s in sides if isinstance(s, exp.Interval)), None)
    if interval is None or (isinstance(node, exp.Sub) and interval is node.this):
        return
    other = sides[1] if interval is sides[0] else sides[0]
    text = interval.this.name if interval.this is not None else ""
    match = re.fullmatch(r"\s*(-?\d+)\s*([a-zA-Z]*)\s*", text)
    if match is None:
        return
    unit = _unit(interval.args.get("unit")) or _unit(exp.var(match.group(2) or "day"))
    if unit is None:
        return
    count = int(match.group(1)) * (-1 if isinstance(node, exp.Sub) else 1)
    shift = [other, exp.Literal.number(count), _text(unit)]
    node.replace(exp.Anonymous(this="STEF_SHIFT", expressions=shift))


def _unit(node: exp.Expr | None) -> str | None:
    """A unit (``MONTH``, ``'month'``, ``days``) as one of ``_UNITS``; None for anything else."""
    if node is None:
        return None
    name = node.name.casefold().removesuffix("s")
    return name if name in _UNITS else None


def _text(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def _parse(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _render(when: dt.datetime, like: object) -> str:
    """``when`` written as ``like`` was: a date text stays a date text."""
    return when.date().isoformat() if len(str(like)) <= 10 else when.isoformat(sep=" ")


def _trunc(unit: object, value: object) -> str | None:
    when = _parse(value)
    name = _unit(exp.var(str(unit)))
    if when is None or name is None:
        return None
    day = when.replace(hour=0, minute=0, second=0, microsecond=0)
    starts = {
        "year": day.replace(month=1, day=1),
        "quarter": day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1),
        "month": day.replace(day=1),
        "week": day - dt.timedelta(days=day.weekday()),
        "day": day,
        "hour": when.replace(minute=0, second=0, microsecond=0),
        "minute": when.replace(second=0, microsecond=0),
        "second": when.replace(microsecond=0),
    }
    return _render(starts[name], value)


def _shift(value: object, count: object, unit: object) -> str | None:
    when = _parse(value)
    name = _unit(exp.var(str(unit)))
    try:
        n = int(float(str(count)))
    except ValueError:
        return None
    if when is None or name is None:
        return None
    if name in ("month", "quarter", "year"):
        months = n * {"month": 1, "quarter": 3, "year": 12}[name]
        index = when.year * 12 + when.month - 1 + months
        year, month = divmod(index, 12)
        if not 1 <= year <= 9999:
            return None
        days_in = calendar.monthrange(year, month + 1)[1]
        return _render(when.replace(year=year, month=month + 1, day=min(when.day, days_in)), value)
    seconds = {"day": 86400, "week": 604800, "hour": 3600, "minute": 60, "second": 1}[name]
    try:
        return _render(when + dt.timedelta(seconds=n * seconds), value)
    except OverflowError:
        return None
