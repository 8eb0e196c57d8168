"""What an ordinary question says beyond its literal values (issue 29), read against the SQL spec.

- **Time as intervals.** A year, a month ("March 2024"), a date, a range ("between 2024-03-01 and
  2024-03-31", "since 2022") is a half-open interval of days; so is what the SQL keeps of a date
  column (``>= a AND < b``, ``BETWEEN``, ``<=`` an end of range, ``strftime('%Y', d) = '2023'``,
  ``YEAR(d)``, ``EXTRACT``, ``LIKE '2023%'``, ``date_trunc``, a ``year`` column). Equal intervals
  match, different ones are a wrong filter: the half-open year is the year, the year before is not.
- **Direction.** A comparison's direction (``over 100`` against ``< 100``) and a superlative's
  (``highest`` against ``ORDER BY … ASC LIMIT`` or ``MIN``).
- **Windows relative to now.** ``the last 30 days`` against ``INTERVAL '7 days'``, or against
  ``<= CURRENT_DATE - 30`` (what came before them).
- **Periods relative to now.** "today", "this month", "year to date": the SQL's predicates that
  read now are folded to dates on the day the question was asked (:class:`NowDates`) and read as
  intervals; "this year" is not the year before. Left undecided where the question negates,
  compares or names a date (:func:`undecided`), and for "today".
- **Values named as words.** ``active users`` names the SQL's ``status = 'active'``; a common
  status word with no predicate is a missing filter; ``not cancelled`` against ``= 'cancelled'``
  is inverted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property, lru_cache
from typing import Literal

from sqlglot import exp

from stef.cues import cued
from stef.models import Predicate, QuestionFilter, SqlSpec
from stef.sql.predicates import parse_condition, predicate_of
from stef.sql.suite_dates import NOW, constant_date, constant_year, instant_of, now_at, reads_now

Interval = tuple[date | None, date | None]  # [start, end): None is unbounded

# ------------------------------------------------------------------------------- time intervals

_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTHS = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
_MONTH_YEAR = cued(r"\b(" + "|".join(_MONTHS) + r"),?\s+(\d{4})\b", re.I)
_QUARTER_YEAR = re.compile(r"q([1-4])\s+(\d{4})", re.I)
_PERIOD = re.compile(r"((?:19|20)\d\d)(?:[-/](\d\d)(?:[-/](\d\d))?)?(?:[ t]\d\d:\d\d(?::\d\d)?.*)?")
_YEAR_OF = re.compile(
    r"^(?:strftime\('%y', |year\(|extract\(year from |date_part\('year', |datepart\(year, |"
    r"substr(?:ing)?\([\w.\"`]+, 1, 4\)|to_char\([\w.\"`]+, 'yyyy'\))"
)
_MONTH_OF = re.compile(r"^strftime\('%y-%m', |^substr(?:ing)?\([\w.\"`]+, 1, 7\)")
# The day of a timestamp: ``DATE(d)``, ``SUBSTR(d, 1, 10)``, both nested; the day itself.
_DAY_OF = re.compile(
    r"^(?:date\((?:substr(?:ing)?\()?[\w.\"`]+(?:, 1, 10\))?\)|substr(?:ing)?\([\w.\"`]+, 1, 10\)"
    r"|cast\([\w.\"`]+ as date\))$"
)
_TRUNC = re.compile(r"^date_trunc\('(year|quarter|month|week|day)', ", re.I)
_DATE_NAME = re.compile(r"date|time|day|year|month|_at$|_on$|^dt$|created|updated|born|birth")
_RANGE_OPS = {">", ">=", "<", "<="}


def _add_months(d: date, n: int) -> date:
    months = d.year * 12 + d.month - 1 + n
    return date(months // 12, months % 12 + 1, 1)


def period(value: str, unit: str | None = None) -> tuple[date, date] | None:
    """The days a literal names: ``2023`` a year, ``2023-03`` a month, ``2023-03-01`` (with or
    without a time) a day; ``unit`` widens a day to its truncation unit."""
    m = _PERIOD.fullmatch(value.strip())
    if m is None:
        return None
    try:
        year, month, day = int(m.group(1)), m.group(2), m.group(3)
        if month is None:
            return date(year, 1, 1), date(year + 1, 1, 1)
        start = date(year, int(month), int(day or 1))
    except ValueError:
        return None
    if day is None or unit == "month":
        return start, _add_months(start, 1)
    if unit == "quarter":
        return start, _add_months(start, 3)
    if unit == "year":
        return start, date(start.year + 1, 1, 1)
    return start, start + timedelta(days=7 if unit == "week" else 1)


def bounded(span: tuple[date, date], op: str) -> Interval | None:
    """The interval ``op`` keeps of a period: ``>= 2023`` from its start, ``> 2023`` from its
    end."""
    start, end = span
    return {
        "=": (start, end),
        "like": (start, end),
        ">=": (start, None),
        ">": (end, None),
        "<": (None, start),
        "<=": (None, end),
    }.get(op)


def question_intervals(f: QuestionFilter, kind: str) -> list[Interval]:
    """The intervals a question's year, month or date filter accepts, under its comparison:
    the year of "Q3 2024" is the quarter's days, or the year where a column holds the year
    apart (``fiscal_quarter = 3 AND fiscal_year = 2024``)."""
    if kind not in ("year", "date"):
        return []
    text = f.text or ""
    month = _MONTH_YEAR.search(text)
    quarter = _QUARTER_YEAR.fullmatch(text)
    spans: list[tuple[date, date] | None] = []
    if quarter is not None:
        start = date(int(quarter.group(2)), 3 * int(quarter.group(1)) - 2, 1)
        spans.append((start, _add_months(start, 3)))
    elif month is not None:
        spans.append(period(f"{month.group(2)}-{_MONTHS[month.group(1).casefold()]:02d}"))
    if quarter is not None or month is None:
        spans.append(period(f.rhs))
    out = [bounded(span, f.op) for span in spans if span is not None]
    return [i for i in out if i is not None]


def _unit_of(lhs: str) -> str | None:
    """The period a date expression keeps of its column: ``YEAR(d)`` a year, ``date_trunc``'s
    unit; None for the column itself or its day."""
    if _YEAR_OF.match(lhs):
        return "year"
    if _MONTH_OF.match(lhs):
        return "month"
    trunc = _TRUNC.match(lhs)
    return trunc.group(1).casefold() if trunc is not None else None


def predicate_interval(p: Predicate) -> tuple[str, Interval] | None:
    """(the date column, the interval it keeps) of a predicate on a date, else None."""
    if p.clause not in ("where", "having") or not p.values or len(p.columns) != 1:
        return None
    lhs, column = p.lhs, p.columns[0]
    unit = _unit_of(lhs)
    if unit is None and lhs != column and not _DAY_OF.match(lhs):
        return None
    dated = unit is not None or "-" in p.values[0] or _DATE_NAME.search(column) is not None
    if not dated:
        return None
    if unit is None and re.fullmatch(r"\d{4}", p.values[0]) and not _DATE_NAME.search(column):
        return None  # "points > 2000": a number, not a year
    spans = [period(v, unit if unit != "year" else None) for v in p.values]
    if any(s is None for s in spans):
        return None
    if p.op == "between" and len(spans) == 2:
        lo, hi = spans[0], spans[1]
        assert lo is not None and hi is not None
        return column, (lo[0], hi[1])
    if len(spans) != 1 or spans[0] is None:
        return None
    if p.op == "like" and not p.wildcard:
        return None if "-" not in p.values[0] else (column, spans[0])
    interval = bounded(spans[0], p.op)
    return None if interval is None else (column, interval)


@dataclass(frozen=True)
class DateColumns:
    """The SQL's predicates on date columns, and the interval each column keeps."""

    by_column: dict[str, list[tuple[int, Interval]]]

    @classmethod
    def of(cls, spec: SqlSpec) -> DateColumns:
        by_column: dict[str, list[tuple[int, Interval]]] = {}
        for p in spec.filters:
            found = predicate_interval(p)
            if found is not None:
                by_column.setdefault(found[0], []).append((p.id, found[1]))
        return cls(by_column)

    @property
    def ids(self) -> set[int]:
        return {i for items in self.by_column.values() for i, _ in items}

    def match(
        self, wants: list[Interval]
    ) -> tuple[Literal["matched", "mismatched"], list[int]] | None:
        """``("matched", ids)`` when a date column keeps the bounds one of ``wants`` states,
        else ``("mismatched", ids)`` of the date predicates; None when the SQL has none."""
        if not self.by_column or not wants:
            return None
        wrong: list[int] = []
        for want, items in ((w, i) for w in wants for i in self.by_column.values()):
            los = [i[0] for _, i in items if i[0] is not None]
            his = [i[1] for _, i in items if i[1] is not None]
            lo, hi = (max(los) if los else None), (min(his) if his else None)
            if (want[0] is None or lo == want[0]) and (want[1] is None or hi == want[1]):
                ids = [
                    pid
                    for pid, i in items
                    if (want[0] is not None and i[0] == want[0])
                    or (want[1] is not None and i[1] == want[1])
                ]
                return "matched", sorted(ids)
            wrong += [pid for pid, _ in items]
        return "mismatched", sorted(set(wrong))


# ------------------------------------------------------------------------------------ direction


def direction(op: str) -> int:
    """+1 for a lower bound (``>``, ``>=``), -1 for an upper bound, 0 otherwise."""
    return 1 if op in (">", ">=") else -1 if op in ("<", "<=") else 0


def flipped(q_op: str, p_op: str) -> bool:
    """A question comparison and a predicate that bound opposite sides."""
    return direction(q_op) * direction(p_op) == -1


_DESC = (
    r"highest|most|largest|biggest|greatest|maximum|max|top|longest|heaviest|tallest|richest|"
    r"priciest|most expensive|latest|newest|most recent|best[- ]selling|busiest|"
    r"most popular|most common"
)
_ASC = (
    r"lowest|least|fewest|smallest|minimum|min|bottom|shortest|lightest|cheapest|poorest|"
    r"least expensive|earliest|least common|least popular"
)
# "at least 3", "at most 5" are comparisons, not superlatives.
_SUPERLATIVE = cued(
    r"(?<!at )(?<!\bno )\b(?:(?P<desc>" + _DESC + r")|(?P<asc>" + _ASC + r"))\b", re.I
)
_AGE = re.compile(r"(?<![a-z])age(?![a-z])")
_CHRONO = cued(r"\b(oldest|youngest)\b", re.I)
# "fastest" is the shortest time and the highest speed.
_PACE = cued(r"\b(fastest|quickest|slowest)\b", re.I)
_DURATION = re.compile(r"time|duration|millis|seconds|minutes|(?<![a-z])ms(?![a-z])")
_SPEED = re.compile(r"speed|velocity|pace|rate")
# An enrichment's "refers to MAX(dob)": the end of the ranked column it means.
_NAMED_EXTREME = cued(r"\b(max|min)\s*\(\s*([^()]{1,80}?)\s*\)", re.I)
_NAME_PART = re.compile(r"[a-z0-9_-]+")


_SORT_WORDS = cued(
    r"\b(?:(?P<asc>ascending|alphabetical(?:ly)?|a to z|chronological(?:ly)?)|"
    r"(?P<desc>descending|reverse (?:alphabetical|chronological) order|z to a))\b",
    re.I,
)


def asked_directions(
    question: str, order_expr: str | None, enriched: str | None = None
) -> set[str]:
    """The sort directions a question asks for (``desc``, ``asc``): the enrichment's MAX/MIN
    of the ranked column when it names one, else the question's explicit order words ("in
    alphabetical order"), else its superlatives; "oldest" is the earliest date, or the highest
    age; "fastest" the shortest time, or the highest speed."""
    named = _enrichment_direction(enriched, order_expr)
    if named is not None:
        return {named}
    explicit = {("desc" if m.group("desc") else "asc") for m in _SORT_WORDS.finditer(question)}
    if explicit:
        return explicit
    out = {("desc" if m.group("desc") else "asc") for m in _SUPERLATIVE.finditer(question)}
    if order_expr is None:
        return out
    ranked = order_expr.casefold()
    for m in _CHRONO.finditer(question):
        older = m.group(1).casefold() == "oldest"
        if _AGE.search(ranked):
            out.add("desc" if older else "asc")
        elif _DATE_NAME.search(ranked) or "birth" in ranked or "dob" in ranked:
            out.add("asc" if older else "desc")
    for m in _PACE.finditer(question):
        slower = m.group(1).casefold() == "slowest"
        if _SPEED.search(ranked):
            out.add("asc" if slower else "desc")
        elif _DURATION.search(ranked):
            out.add("desc" if slower else "asc")
    return out


def _enrichment_direction(enriched: str | None, order_expr: str | None) -> str | None:
    """``desc`` when the enrichment names MAX() of the column the SQL ranks by, ``asc`` for
    MIN(); None when it names neither, or both."""
    if not enriched or order_expr is None:
        return None
    ranked = set(_NAME_PART.findall(order_expr.casefold()))
    ways = set()
    for m in _NAMED_EXTREME.finditer(enriched):
        names = [n for n in _NAME_PART.findall(m.group(2).casefold()) if len(n) > 1]
        column = names[-1] if names else None
        if column is not None and column in ranked:
            ways.add("desc" if m.group(1).casefold() == "max" else "asc")
    return next(iter(ways)) if len(ways) == 1 else None


EXTREME_SUBQUERY = re.compile(r"\(\s*select\s+(?:max|min)\s*\(([^()]{1,80})\)", re.I)


def first_ranked(spec: SqlSpec) -> str | None:
    """The expression the SQL ranks by: its first ranked SELECT's, else its ORDER BY's, else
    the column a comparison's MAX/MIN subquery picks (``age = (SELECT MIN(age) ...)``)."""
    if spec.ranked:
        return spec.ranked[0].expr
    if spec.order_by:
        return spec.order_by[0].expr
    for p in spec.filters:
        m = EXTREME_SUBQUERY.search(p.rhs)
        if m is not None:
            return m.group(1).strip()
    return None


def sql_extremes(spec: SqlSpec, limit_min: int) -> list[tuple[str, str]]:
    """(direction, evidence) of each way the SQL picks an extreme: the first ORDER BY term under
    a LIMIT (in any scope), MAX/MIN in a comparison's subquery or as the only aggregate."""
    out: list[tuple[str, str]] = []
    for term in spec.ranked:
        if term.limit < limit_min:
            out.append((term.direction, f"ORDER BY {term.expr} {term.direction.upper()}"))
    for p in spec.filters:
        for func, way in (("max", "desc"), ("min", "asc")):
            if re.search(r"\(\s*select\s+" + func + r"\(", p.rhs):
                out.append((way, f"{func.upper()}() in {p.text}"))
    funcs = {a.func for a in spec.aggregations}
    if not spec.order_by and len(funcs & {"MAX", "MIN"}) == 1:
        func = next(iter(funcs & {"MAX", "MIN"}))
        out.append(("desc" if func == "MAX" else "asc", f"{func}()"))
    return out


# ----------------------------------------------------------------------------- windows (now - N)

_DAYS = {"second": 0, "minute": 0, "hour": 0, "day": 1, "week": 7, "month": 30, "quarter": 91}
_DAYS |= {"year": 365, "decade": 3650}
_SQL_SPAN = re.compile(
    r"(?<![\d.])(\d+)\s*'?\s*(second|minute|hour|day|week|month|quarter|year)s?\b"
    r"|\b(second|minute|hour|day|week|month|quarter|year)s?\s*,\s*-?\s*(\d+)",
    re.I,
)


def window_days(count: str, unit: str) -> int | None:
    """A window's days; None for one shorter than a day ("the last 48 hours" is 2 days, read as
    unknown) or not a number of units."""
    days = _DAYS.get(unit.casefold().removesuffix("s"))
    return None if not days or not count.isdigit() else int(count) * days


def same_span(want: int, spans: Iterable[int]) -> bool:
    """Whether a window of ``want`` days is one of ``spans``, within a day or a thirtieth:
    "the past quarter" is ``INTERVAL '90 days'``, "the last 12 months" ``INTERVAL '1 year'``."""
    return any(abs(days - want) <= max(1, want // 30) for days in spans)


def sql_window_days(text: str) -> set[int]:
    """The lengths, in days, of the intervals a predicate subtracts from now."""
    out = set()
    for m in _SQL_SPAN.finditer(text):
        count, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        days = window_days(count, unit)
        if days:
            out.add(days)
    return out


# ------------------------------------------------------------------------- values named as words

# Status and category words that, in an analytics question, name a value of some column.
STATUS_WORDS = frozenset(
    [
        "premium",
        "trial",
        "active",
        "inactive",
        "pending",
        "overdue",
        "unpaid",
        "paid",
        "cancelled",
        "canceled",
        "completed",
        "shipped",
        "delivered",
        "refunded",
        "approved",
        "rejected",
        "expired",
        "failed",
        "successful",
        "resolved",
        "archived",
        "suspended",
        "verified",
        "unverified",
        "enabled",
        "disabled",
        "returned",
        "churned",
        "subscribed",
        "unsubscribed",
        "fulfilled",
        "unfulfilled",
        "declined",
        "disputed",
        "abandoned",
        "escalated",
        "unassigned",
        "unresolved",
    ]
)
NEGATING_OPS = frozenset({"!=", "not in", "not like", "not between", "is null"})
# A negation and at most two words, or a list ("except shipped, pending or delivered"), before a
# value.
_NEGATION_BEFORE = re.compile(
    r"\b(?:not|never|excluding|exclude|except|other\s+than|without|non|no)[\s-]+"
    r"(?:[\w']+(?:\s*,\s*|\s+(?:and|or|nor)\s+|[\s-]+)){0,2}$",
    re.I,
)


def fold_words(text: str) -> str:
    """``text`` case-folded, with every run of white space, ``_`` and ``-`` one space, and none
    at either end (split on white space: the characters ``\\s`` matches, at a fifth of the
    time of a regex substitution on a question)."""
    return " ".join(text.casefold().replace("_", " ").replace("-", " ").split())


def _forms(value: str) -> Iterable[str]:
    """A value and its singular/plural forms ("refund", "refunds"; "category", "categories")."""
    yield value
    if value.endswith("ies"):
        yield value[:-3] + "y"
    elif value.endswith("es"):
        yield value[:-2]
    if value.endswith("s"):
        yield value[:-1]
    else:
        yield value + "s"
        yield value[:-1] + "ies" if value.endswith("y") else value + "es"


@lru_cache(maxsize=4096)
def same_word_forms(value: str) -> frozenset[str]:
    """``value`` in the singular and the plural (``_forms``), as a set."""
    return frozenset(_forms(value))


def named_at(value: str, text: str) -> int | None:
    """Where ``text`` (folded) names ``value`` (folded) as whole words, in any number."""
    for form in _forms(value):
        if len(form) < 2 or form not in text:
            continue  # the substring test first: most values are not in the question at all
        for m in re.finditer(r"(?<!\w)" + re.escape(form) + r"(?!\w)", text):
            return m.start()
    return None


def negated_at(text: str, start: int) -> bool:
    """Whether the words just before ``start`` negate what follows ("not", "excluding")."""
    return _NEGATION_BEFORE.search(text[max(0, start - 30) : start]) is not None


def is_word_value(value: str) -> bool:
    """A string literal that could be named as a word: letters, not a number or a date."""
    return bool(re.search(r"[a-z]", value)) and not _PERIOD.fullmatch(value) and len(value) <= 40


# ------------------------------------------------------------------ dates relative to now

# What a predicate that may read now holds: a clock, or date arithmetic.
RELATIVE_DATE = cued(
    r"\b(now|current_date|current_timestamp|getdate|sysdate|today|interval|dateadd|date_add|"
    r"date_sub|datediff|julianday|add_months|date_trunc)\b|'now'",
    re.I,
)

_WEEK_STARTS = (0, 6)  # Monday (ISO, DATE_TRUNC's) and Sunday
# The years a record's timestamp is read in: a period's days stay dates either side.
_YEARS = (1001, 9998)
# A predicate longer than this is no period or window (an OR chain): it is not folded; nor are
# the predicates of an SQL with more than 8 that read now, nor past 16 expressions that read
# now (each folding parses its predicate again, and SQLite evaluates each expression: 32
# predicates of ``IN (SYSDATE, ...)`` cost 0.5 s before these bounds, 0.06 s with them).
_MAX_FOLDED = 1000
_MAX_RELATIVE = 8
_MAX_VALUES = 16


def asked_day(asked_at: str | None) -> tuple[str, date, bool]:
    """(the instant "now" stands for, its day, whether the record said it): the record's
    ``timestamp``, else the fixed day of the generated databases (:data:`NOW`)."""
    instant = instant_of(asked_at)
    if instant is None or not _YEARS[0] <= int(instant[:4]) <= _YEARS[1]:
        return NOW, date.fromisoformat(NOW[:10]), False
    return instant, date.fromisoformat(instant[:10]), True


def period_starts(value: str, today: date) -> tuple[list[date], date] | None:
    """The days a question's period relative to now (``today``, ``this month``) may start on,
    and the day after it ends (None for a value that is no period)."""
    if value == "today":
        return [today], today + timedelta(days=1)
    if value == "yesterday":
        return [today - timedelta(days=1)], today
    unit = value.removeprefix("this ")
    if unit == "week":
        starts = [today - timedelta(days=(today.weekday() - s) % 7) for s in _WEEK_STARTS]
        return starts, min(starts) + timedelta(days=7)
    if unit == "month":
        return [today.replace(day=1)], _add_months(today.replace(day=1), 1)
    if unit == "quarter":
        start = date(today.year, 3 * ((today.month - 1) // 3) + 1, 1)
        return [start], _add_months(start, 3)
    if unit == "year":
        return [date(today.year, 1, 1)], date(today.year + 1, 1, 1)
    return None


# What leaves a question's period or window undecided: a negation ("not ordered in the last 90
# days" keeps the days before them), a comparison or a duration ("compared to last year",
# "older than the past 180 days", "for the past 5 years", "expiring this year"), a calendar of
# the team's own (fiscal, academic) or a date the enrichment names.
_UNDECIDED = cued(
    r"\b(?:not|never|no|without|except|excluding|inactive|neither|nor|none|compared?|"
    r"comparing|comparison|vs|versus|than|against|prior|before|after|since|until|older|younger|"
    r"expir\w*|due|upcoming|remaining|rest|later|anniversar\w*|birthdays?|turns?|or more|"
    r"at least|fiscal|academic|snapshot|for the (?:past|last))\b|n't\b|\b(?:19|20)\d\d\b",
    re.I,
)
# The days a period's unit spans, and how far from its start another start is still "near":
# the period before or a rolling window, an agent's usual slip, not another question's date.
_UNIT_DAYS = {"today": 1, "yesterday": 1, "week": 7, "month": 31, "quarter": 92, "year": 366}


def undecided(text: str) -> bool:
    """Whether the question and its enrichment (``text``) leave a period or window undecided
    (:data:`_UNDECIDED`)."""
    return _UNDECIDED.search(text) is not None


def near_start(lo: date, starts: list[date], value: str) -> int:
    """0 when ``lo`` is a start of the period ``value`` (or, for a week or longer, the day
    after: ``> DATE_TRUNC('year', NOW())``), 1 when it is within two of the period's units of
    one, 2 when farther."""
    unit = _UNIT_DAYS[value.removeprefix("this ")]
    if any(0 <= (lo - s).days <= (1 if unit > 1 else 0) for s in starts):
        return 0
    return 1 if any(abs((lo - s).days) <= 2 * unit for s in starts) else 2


def current_start(unit: str, today: date) -> list[date]:
    """The days the current ``unit`` (week, month, quarter, year) may start on."""
    found = period_starts(f"this {unit}", today)
    return found[0] if found is not None else []


def now_intervals(
    spec: SqlSpec, ids: Iterable[int], instant: str
) -> dict[str, list[tuple[int, Interval]]]:
    """The interval each date column keeps under the predicates ``ids``, which read now, with
    "now" at ``instant`` (``created_at >= DATE_TRUNC('year', CURRENT_DATE)``: from New Year's
    Day of its year); a predicate whose now cannot be folded to a date or a year is left out."""
    by_id = {p.id: p for p in spec.filters}
    out: dict[str, list[tuple[int, Interval]]] = {}
    values: dict[str, exp.Expr | None] = {}  # each expression's value, evaluated once
    with now_at(instant):
        for i in ids:
            folded = _folded(by_id[i], spec.dialect, values)
            found = predicate_interval(folded) if folded is not None else None
            if found is not None:
                out.setdefault(found[0], []).append((i, found[1]))
    return out


def _folded(
    p: Predicate, dialect: str | None, values: dict[str, exp.Expr | None]
) -> Predicate | None:
    """``p`` with every column-free part that reads now as the date or year it gives. Its text
    is read in the SQL's dialect (``DATEADD(DAY, -90, CURRENT_DATE)`` is Snowflake's), else in
    the generic one it is written in."""
    if len(p.text) > _MAX_FOLDED:
        return None
    node = parse_condition(p.text, dialect) or parse_condition(p.text)
    try:
        read = predicate_of(node, dialect) if node is not None and _fold(node, values) else None
    except RecursionError:  # parentheses nested hundreds deep
        return None
    if read is None:
        return None
    return p.model_copy(
        update={
            "lhs": read.lhs,
            "op": read.op,
            "rhs": read.rhs,
            "columns": tuple(read.columns),
            "values": tuple(read.values),
        }
    )


def _fold(node: exp.Expr, values: dict[str, exp.Expr | None]) -> bool:
    """Fold, in place, each largest column-free part of ``node`` that reads now; False when
    one gives no date or year, or past :data:`_MAX_VALUES` expressions of the record (each is
    evaluated by SQLite; ``d IN (SYSDATE, SYSDATE, ...)`` repeats one)."""
    if node.find(exp.Column) is None and reads_now(node):
        key = node.sql()
        if key not in values:
            if len(values) >= _MAX_VALUES:
                return False
            values[key] = _now_value(node)
        value = values[key]
        if value is None or node.parent is None:
            return False  # no value, or the whole condition: nothing compared with a column
        node.replace(value.copy())
        return True
    return all(_fold(child, values) for child in list(node.iter_expressions()))


def _now_value(node: exp.Expr) -> exp.Expr | None:
    """The literal a column-free expression reading now gives: a date, else a number (a year).
    ``CURRENT_DATE - 1`` (PostgreSQL's date less days) is the day before; ``YEAR(...)``, which
    SQLite lacks, the year of the date inside."""
    value = _now_of(node)
    if isinstance(value, str):
        return exp.Literal.string(value)
    return exp.Literal.number(value) if value is not None else None


_PARTS: dict[type[exp.Expr], Callable[[date], int]] = {
    exp.Year: lambda d: d.year,
    exp.Month: lambda d: d.month,
    exp.Day: lambda d: d.day,
    exp.Quarter: lambda d: (d.month - 1) // 3 + 1,
}


def _now_of(node: exp.Expr) -> str | int | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if (
        isinstance(node, exp.Add | exp.Sub)
        and not node.expression.is_int
        and not isinstance(node.expression, exp.Interval)
        and _day(_now_of(node.this)) is not None
    ):
        # A date less a number of days SQLite reads as a year (``CURRENT_DATE -
        # EXTRACT(DOW FROM CURRENT_DATE)::int``): no value.
        return None
    if isinstance(node, exp.Add | exp.Sub) and node.expression.is_int:
        base, count = _now_of(node.this), int(node.expression.name)
        count = count if isinstance(node, exp.Add) else -count
        if isinstance(base, int):
            return base + count
        day = _day(base)
        if day is None:
            return None
        try:
            return (day + timedelta(days=count)).isoformat()
        except OverflowError:
            return None
    part = _PARTS.get(type(node))
    if part is not None:
        day = _day(_now_of(node.this))
        return part(day) if day is not None else None
    return constant_date(node) or constant_year(node)


def _day(value: str | int | None) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


class NowDates:
    """The SQL's date predicates on the day the question was asked (``asked_at``, the record's
    timestamp, else the fixed day of :func:`asked_day`), read once a question's period or
    window asks for them: the interval each date column keeps under the predicates that read
    now (``relative``), those whose now cannot be folded, and the literal dates' intervals
    (``dates``), which tell only when the record says when it was asked."""

    def __init__(
        self,
        spec: SqlSpec,
        relative: list[int],
        dates: DateColumns,
        asked_at: str | None,
        sql: str,
        decisive: bool = True,
    ) -> None:
        self.spec, self.relative, self.dates, self.asked_at = spec, relative, dates, asked_at
        self.sql, self.decisive = sql, decisive

    @property
    def read_elsewhere(self) -> bool:
        """Whether the SQL reads now outside its filters (a CASE arm, a statement whose
        filters are not read)."""
        return RELATIVE_DATE.search(self.sql) is not None

    @cached_property
    def _asked(self) -> tuple[str, date, bool]:
        return asked_day(self.asked_at)

    @property
    def today(self) -> date:
        return self._asked[1]

    @property
    def known(self) -> bool:
        """Whether the record said when it was asked."""
        return self._asked[2]

    @cached_property
    def folded(self) -> dict[str, list[tuple[int, Interval]]]:
        """Each date column's intervals under the predicates that read now."""
        if not self.relative or len(self.relative) > _MAX_RELATIVE:
            return {}
        return now_intervals(self.spec, self.relative, self._asked[0])

    @property
    def unfolded(self) -> list[int]:
        """The predicates that read now in a way no interval was read from."""
        done = {i for items in self.folded.values() for i, _ in items}
        return [i for i in self.relative if i not in done]

    def comparisons(self, days: int | None) -> list[tuple[int, str]] | None:
        """(id, operator) of each predicate that reads now and names a span of ``days``, as a
        date column (or its day) compared with a moment relative to now (``created_at <=
        CURRENT_DATE - INTERVAL '30 days'``): read without folding; None when one is not of
        that form."""
        by_id = {p.id: p for p in self.spec.filters}
        out = []
        for i in self.relative:
            p = by_id[i]
            if days is None or not same_span(days, sql_window_days(p.text)):
                continue
            plain = p.columns == (p.lhs,) or _DAY_OF.match(p.lhs) is not None
            if not plain or RELATIVE_DATE.search(p.rhs) is None or p.op not in _RANGE_OPS:
                return None
            out.append((i, p.op))
        return out

    def columns(self) -> dict[str, list[tuple[int, Interval]]]:
        """The intervals of :attr:`folded`, with the literal dates' when the day is known."""
        out = {c: list(items) for c, items in self.folded.items()}
        if self.known:
            # A literal inside a predicate that reads now (T-SQL's YEAR(GETDATE()) holds a
            # default 1900-01-01) is read by folding, not as a date of its own.
            relative = set(self.relative)
            for column, items in self.dates.by_column.items():
                kept = [(i, span) for i, span in items if i not in relative]
                if kept:
                    out.setdefault(column, []).extend(kept)
        return out


def bounds(items: list[tuple[int, Interval]]) -> Interval:
    """The interval a column keeps under all its predicates: the latest start, earliest end."""
    los = [i[0] for _, i in items if i[0] is not None]
    his = [i[1] for _, i in items if i[1] is not None]
    return (max(los) if los else None), (min(his) if his else None)
