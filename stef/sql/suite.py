"""Two queries run on small generated databases and their results compared (reference mode's
execution without a database: the test-suite accuracy of Zhong, Yu and Klein, EMNLP 2020, with
the schema inferred from the two queries).

:func:`run_suite` infers the tables and columns both queries read (:mod:`stef.sql.infer`),
generates ``n`` databases (:mod:`stef.sql.gendb`) in in-memory SQLite, runs both queries there
read-only with a time and a row limit, and compares the results as bags of rows (as lists when
``ordered``), column order ignored, numbers within 1e-6. Each database is built twice, its rows
in two orders: a query whose result changes with the order of the rows (ties under a LIMIT, a
LIMIT without ORDER BY) says nothing on that database, which is skipped. A database on which
the two results differ is a counterexample; a query that cannot be read or run is an outcome
with its reason, never an exception.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.sql.budget import NO_DEADLINE, CpuDeadline
from stef.sql.dialects import dialect_of
from stef.sql.fetch import fetch, limit_generated
from stef.sql.gendb import Crowd, Pool, Table, crowds, generate, pools
from stef.sql.infer import InferenceError, Schema, infer_schema, parse_one
from stef.sql.suite_dates import now_at, portable, register

Status = Literal["different", "duplicates", "same", "undecided", "not_run"]
# Progress-handler period, in SQLite virtual-machine instructions.
_CHECK_EVERY = 1_000
# The rows of a counterexample kept in the result, per table and per output, and the characters
# of one value (a query can make values of 1 MiB: one record's result was 6 MB).
_SHOWN_ROWS = 8
_SHOWN_CHARS = 200
# Databases with crowds (:func:`stef.sql.gendb.crowds`), half with named values.
_CROWDED = 4


@dataclass(frozen=True)
class Counterexample:
    """A database on which the two queries differ: its tables and both outputs (trimmed)."""

    tables: dict[str, list[list[Any]]]
    columns: dict[str, list[str]]
    generated: list[list[Any]]
    reference: list[list[Any]]


@dataclass(frozen=True)
class SuiteOutcome:
    """What running both queries on the generated databases gave.

    Attributes:
        status: ``different`` (a counterexample), ``same`` (the same result on every database
            that could tell), ``undecided`` (no database could tell: every result empty or
            order-dependent), ``not_run`` (the queries could not be read or run: ``detail``).
        databases: databases generated.
        informative: databases on which the reference returned a value other than NULL and 0
            and both results were independent of row order.
    """

    status: Status
    detail: str = ""
    databases: int = 0
    informative: int = 0
    counterexample: Counterexample | None = None
    elapsed_ms: float = 0.0
    notes: list[str] = field(default_factory=list)


def seed_of(generated: str, reference: str) -> int:
    """The seed of a record's databases: its two queries' text (deterministic per record)."""
    digest = hashlib.sha256(f"{generated}\x00{reference}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def run_suite(
    generated: str,
    reference: str,
    dialect: str | None,
    *,
    ordered: bool,
    n: int,
    timeout_s: float,
    max_rows: int,
    deadline: CpuDeadline = NO_DEADLINE,
    now: str | None = None,
) -> SuiteOutcome:
    """Run ``generated`` and ``reference`` on ``n`` clean generated databases (no NULLs, no
    repeated rows), ``n // 4`` with both, ``n // 2`` clean and focused, and 4 with crowds when a
    count is compared with a number (:func:`_plan`), and compare them. A difference on a clean
    database is ``different``; one of repeated rows only, or only on a database with NULLs and
    repeated rows, is ``duplicates`` (what real data with keys and few NULLs seldom shows).

    ``timeout_s`` bounds the wall time of all the databases' queries; ``deadline`` the
    thread's CPU, in SQLite's steps and in the Python work between them. ``now``: :func:`_prepare`.

    Raises:
        CpuBudgetSpent: ``deadline`` passed: no outcome.
    """
    started = time.perf_counter()
    prepared = _prepare(generated, reference, dialect, deadline, now)
    if isinstance(prepared, SuiteOutcome):
        return prepared
    schema, pooled, (gen_sql, ref_sql) = prepared.schema, prepared.pooled, prepared.queries
    ordered = ordered and prepared.ordered
    seed = seed_of(generated, reference)
    ends, informative = time.monotonic() + timeout_s, 0
    minor: SuiteOutcome | None = None
    plan = _plan(n, crowds(schema, pooled) if schema.counts else {})
    for index, (clean, focused, crowd, decides) in enumerate(plan):
        deadline.check()
        tables = generate(schema, pooled, seed, index, clean=clean, focused=focused, crowd=crowd)
        seen = _compared(tables, (gen_sql, ref_sql), ends, deadline, max_rows, ordered)
        if isinstance(seen, str):  # on a crowd's database, the others' outcome stands
            if crowd:
                break
            return SuiteOutcome("not_run", detail=seen, databases=index, elapsed_ms=_ms(started))
        if seen is None:
            continue  # the result depends on the order of the rows: this database cannot tell
        gen_a, ref_a, same = seen
        if telling(ref_a) and not crowd:  # a crowd's few groups prove no agreement
            informative += 1
        if same:
            continue
        found = SuiteOutcome(
            "different",
            databases=index + 1,
            informative=informative,
            counterexample=_counterexample(tables, gen_a, ref_a),
        )
        if decides and _decisive(gen_a, ref_a, ordered, prepared.limits, deadline):
            return replace(found, elapsed_ms=_ms(started))
        # Repeated rows only, or only with NULLs and repeats: what real data seldom shows.
        minor = minor or replace(found, status="duplicates")
    return _ended(minor, len(plan), informative, _ms(started))


def _ended(
    minor: SuiteOutcome | None, total: int, informative: int, elapsed_ms: float
) -> SuiteOutcome:
    """The outcome once every database agreed or only ``minor`` differences were found."""
    if minor is not None:
        return replace(minor, databases=total, informative=informative, elapsed_ms=elapsed_ms)
    status: Status = "same" if informative else "undecided"
    detail = "" if informative else "no generated database gave the reference rows"
    return SuiteOutcome(
        status, detail=detail, databases=total, informative=informative, elapsed_ms=elapsed_ms
    )


def _compared(
    tables: list[Table],
    queries: tuple[str, str],
    ends: float,
    deadline: CpuDeadline,
    max_rows: int,
    ordered: bool,
) -> tuple[Rows, Rows, bool] | str | None:
    """Both queries' rows on one database and whether they are the same: ``(generated,
    reference, same)``; None when either result changed with the order of the tables' rows
    (this database cannot tell); why they could not run, as text."""
    deadline.check()  # after the database's generation
    runs = _run_both_orders(tables, queries, ends, deadline, max_rows)
    if isinstance(runs, str):
        return runs
    # Each result keyed once: 9,000 rows of 20 columns take 0.4 s a key.
    keys = [[rows_key(rows, ordered, deadline) for rows in pair] for pair in runs]
    if any(a != b for a, b in keys):
        return None
    (gen_a, _), (ref_a, _) = runs
    return gen_a, ref_a, keys[0][0] == keys[1][0]


@dataclass(frozen=True)
class _Prepared:
    """The schema both queries read and its columns' value pools, each query as SQLite runs
    it, whether both have an ORDER BY, and whether both have a LIMIT and their numbers
    differ."""

    schema: Schema
    pooled: dict[tuple[str, str], Pool]
    queries: tuple[str, str]
    ordered: bool
    limits: bool


def _plan(n: int, crowded: dict[str, Crowd]) -> list[tuple[bool, bool, bool, bool]]:
    """Each database's (clean, focused, crowd, decides): ``n`` clean, ``n // 4`` with NULLs and
    repeats, ``n // 2`` clean and focused, and with ``crowded`` (a count compared with a
    number) 4 clean focused ones with crowds, which can only find a counterexample (in that
    order, so the first ones stay as they were). A difference decides (``different``) on a
    clean database, but where a crowd's own column alone keeps rows apart: they repeat what
    the queries read."""
    plan = [(True, False)] * n + [(False, False)] * (n // 4) + [(True, True)] * (n // 2)
    crowd = [(True, True)] * (_CROWDED if crowded and n else 0)
    hidden = any(c.own for c in crowded.values())
    return [(c, f, False, c) for c, f in plan] + [(c, f, True, not hidden) for c, f in crowd]


def _prepare(
    generated: str, reference: str, dialect: str | None, deadline: CpuDeadline, now: str | None
) -> _Prepared | SuiteOutcome:
    """Both queries read and written for SQLite, "now" in them and a date column's ordinary
    days at ``now`` (:func:`stef.sql.suite_dates.now_at`); ``not_run`` when they cannot be
    read."""
    with now_at(now):
        return _prepared(generated, reference, dialect, deadline)


def _prepared(
    generated: str, reference: str, dialect: str | None, deadline: CpuDeadline
) -> _Prepared | SuiteOutcome:
    try:
        gen_tree = parse_one(generated, dialect)
        deadline.check()
        ref_tree = parse_one(reference, dialect)
        deadline.check()
        schema, _ = infer_schema([ref_tree.copy(), gen_tree.copy()])
        deadline.check()
        queries = (_sqlite_text(gen_tree, dialect), _sqlite_text(ref_tree, dialect))
        deadline.check()
    except InferenceError as exc:
        return SuiteOutcome("not_run", detail=f"cannot infer the schema: {exc}")
    limits = [_limits(gen_tree), _limits(ref_tree)]
    return _Prepared(
        schema,
        pools(schema),
        queries,
        _orders(gen_tree) and _orders(ref_tree),
        all(limits) and limits[0] != limits[1],
    )


def _limits(tree: exp.Expr) -> list[str]:
    """The LIMIT and OFFSET numbers of a query, anywhere in it, sorted."""
    return sorted(
        str(n.args["expression"])
        for n in tree.find_all(exp.Limit, exp.Offset)
        if isinstance(n.args.get("expression"), exp.Literal)
    )


def _decisive(
    generated: Rows, reference: Rows, ordered: bool, limits: bool, deadline: CpuDeadline
) -> bool:
    """Whether a difference on a clean database is a counterexample: more than repeated rows,
    or, between queries whose LIMITs differ, another number of rows (LIMIT 2 repeating the
    row LIMIT 1 shows is still two rows)."""
    if not _repeats_only(generated, reference, ordered, deadline):
        return True
    return limits and len(generated) != len(reference)


def telling(rows: Sequence[Sequence[object]]) -> bool:
    """Whether a reference result can tell queries apart: some value in it other than NULL
    and 0 (a COUNT of 0 or a SUM of nothing says no row passed the filters)."""
    return any(v is not None and v != 0 for row in rows for v in row)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _orders(tree: exp.Query) -> bool:
    return tree.args.get("order") is not None


def _sqlite_text(tree: exp.Query, dialect: str | None) -> str:
    """The query, read in ``dialect``, as SQLite runs it on the generated tables, which are
    named without their schema or catalog (``sales.orders`` is the table ``orders``)."""
    try:
        tree = tree.copy()
        for table in tree.find_all(exp.Table):
            table.set("db", None)
            table.set("catalog", None)
        return portable(tree, dialect).sql(dialect=dialect_of("sqlite"))
    except (SqlglotError, RecursionError, ValueError) as exc:
        raise InferenceError(f"cannot be written for SQLite: {type(exc).__name__}") from exc


Rows = list[tuple[Any, ...]]


def _run_both_orders(
    tables: list[Table],
    queries: tuple[str, str],
    ends: float,
    deadline: CpuDeadline,
    max_rows: int,
) -> tuple[tuple[Rows, Rows], tuple[Rows, Rows]] | str:
    """Each query's rows on ``tables`` as generated and with every table's rows reversed; a
    string saying why when a query fails. ``ends`` is the wall-clock end (time.monotonic) of
    the record's queries.

    Raises:
        CpuBudgetSpent: ``deadline`` passed (SQLite's steps are stopped by it too).
    """
    results: list[list[Rows]] = [[], []]
    for reverse in (False, True):
        conn = _database(tables, reverse)
        try:
            for i, sql in enumerate(queries):
                rows = _run(conn, sql, ends, deadline, max_rows)
                if isinstance(rows, str):
                    who = "generated" if i == 0 else "reference"
                    return f"the {who} SQL failed on a generated database: {rows}"
                results[i].append(rows)
        finally:
            conn.close()
    return (results[0][0], results[0][1]), (results[1][0], results[1][1])


def _date_part(start: int, end: int) -> Callable[[object], int | None]:
    """A SQLite function reading a part of an ISO date text (the generated dates are ISO)."""

    def part(value: object) -> int | None:
        text = str(value)[start:end] if value is not None else ""
        return int(text) if text.isdigit() else None

    return part


def _quarter(value: object) -> int | None:
    month = _date_part(5, 7)(value)
    return None if month is None else (month - 1) // 3 + 1


# Date functions other engines have and SQLite lacks (YEAR(d) in Snowflake, MySQL, T-SQL).
_DATE_FUNCTIONS: dict[str, Callable[[object], int | None]] = {
    "YEAR": _date_part(0, 4),
    "MONTH": _date_part(5, 7),
    "DAY": _date_part(8, 10),
    "QUARTER": _quarter,
}


def _database(tables: list[Table], reverse: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for name, function in _DATE_FUNCTIONS.items():
        conn.create_function(name, 1, function, deterministic=True)
    register(conn)
    for table in tables:
        columns = ", ".join(f"{_quoted(c)} {affinity}" for c, affinity in table.columns)
        conn.execute(f"CREATE TABLE {_quoted(table.name)} ({columns})")
        marks = ", ".join("?" for _ in table.columns)
        rows = list(reversed(table.rows)) if reverse else list(table.rows)
        conn.executemany(f"INSERT INTO {_quoted(table.name)} VALUES ({marks})", rows)
    conn.execute("PRAGMA query_only = ON")
    limit_generated(conn)  # after the tables: only what a query makes is bounded
    return conn


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _run(
    conn: sqlite3.Connection, sql: str, ends: float, deadline: CpuDeadline, max_rows: int
) -> Rows | str:
    conn.set_progress_handler(
        lambda: int(time.monotonic() > ends or deadline.passed()), _CHECK_EVERY
    )
    try:
        rows = fetch(conn.execute(sql), max_rows)
    except (sqlite3.Error, OverflowError, ValueError) as exc:
        deadline.check()
        if time.monotonic() > ends:
            return "timed out"
        return f"{type(exc).__name__}: {exc}"[:200]
    if isinstance(rows, str):
        return rows
    if len(rows) > max_rows:
        return f"more than {max_rows} rows"
    return rows


def _cell(value: Any) -> tuple[int, Any]:
    """One cell as compared: numbers (and strings that read as numbers) as floats rounded to
    6 decimals, other text as itself; NULL apart."""
    if value is None:
        return (0, "")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return (2, value)
    if isinstance(value, bool | int | float | Decimal):
        number = float(value)
        if math.isfinite(number):
            return (1, round(number, 6) + 0.0)
    return (2, str(value))


def rows_key(
    rows: Sequence[Sequence[Any]], ordered: bool, deadline: CpuDeadline = NO_DEADLINE
) -> object:
    """Rows as compared: each row the sorted multiset of its cells (column order ignored), the
    rows a list when ``ordered``, else a bag.

    Raises:
        CpuBudgetSpent: ``deadline`` passed.
    """
    keyed = list(_keyed(rows, deadline))
    return keyed if ordered else Counter(keyed)


# Cells keyed between two looks at the deadline (a few ms): 10,000 rows of 256 columns took
# 6.8 s to key, 256 of them 0.19 s.
_CELLS_A_CHECK = 4096


def _keyed(
    rows: Sequence[Sequence[Any]], deadline: CpuDeadline
) -> Iterator[tuple[tuple[int, Any], ...]]:
    """Each row as the sorted multiset of its cells, the deadline checked as they go."""
    cells = 0
    for row in rows:
        cells += len(row)
        if cells >= _CELLS_A_CHECK:
            deadline.check()
            cells = 0
        yield tuple(sorted(_cell(v) for v in row))


def _rows_set(
    rows: Sequence[Sequence[Any]], deadline: CpuDeadline
) -> frozenset[tuple[tuple[int, Any], ...]]:
    """Rows as a set, rows with a NULL left out: what duplicates and NULLs do not change."""
    return frozenset(row for row in _keyed(rows, deadline) if all(tag for tag, _ in row))


def _repeats_only(generated: Rows, reference: Rows, ordered: bool, deadline: CpuDeadline) -> bool:
    """The two results differ only by repeated rows or rows with NULLs (not by the order of
    the same rows, when order counts)."""
    if _rows_set(generated, deadline) != _rows_set(reference, deadline):
        return False
    return not (
        ordered and rows_key(generated, False, deadline) == rows_key(reference, False, deadline)
    )


def touched(generated: str, reference: str, dialect: str | None) -> frozenset[str]:
    """The components in which the two queries' LIMITs and ORDER BYs differ, anywhere in them
    (a subquery's too): ``limit`` when their LIMIT and OFFSET numbers differ, ``order_by`` when
    their sort directions do."""
    try:
        trees = [parse_one(generated, dialect), parse_one(reference, dialect)]
    except InferenceError:
        return frozenset()
    limits = [_limits(tree) for tree in trees]
    orders = [[bool(o.args.get("desc")) for o in tree.find_all(exp.Ordered)] for tree in trees]
    found = {"limit"} if limits[0] != limits[1] else set()
    return frozenset(found | ({"order_by"} if orders[0] != orders[1] else set()))


def perturbed(sql: str, dialect: str | None, components: frozenset[str]) -> str | None:
    """``sql`` with each of ``components`` changed as a wrong query would change it: every
    ``ORDER BY`` direction flipped (``order_by``), every LIMIT and OFFSET number one more
    (``limit``). None when it does not parse or has nothing to change."""
    try:
        tree = parse_one(sql, dialect)
    except InferenceError:
        return None
    changed = False
    if "order_by" in components:
        for ordered in tree.find_all(exp.Ordered):
            ordered.set("desc", not ordered.args.get("desc"))
            changed = True
    if "limit" in components:
        for node in tree.find_all(exp.Limit, exp.Offset):
            value = node.args.get("expression")
            if isinstance(value, exp.Literal) and value.is_int:
                value.replace(exp.Literal.number(int(value.this) + 1))
                changed = True
    if not changed:
        return None
    try:
        return tree.sql(dialect=dialect_of(dialect))
    except (SqlglotError, RecursionError, ValueError):
        return None


def _counterexample(tables: list[Table], generated: Rows, reference: Rows) -> Counterexample:
    return Counterexample(
        tables={t.name: [[_shown(v) for v in r] for r in t.rows[:_SHOWN_ROWS]] for t in tables},
        columns={t.name: [c for c, _ in t.columns] for t in tables},
        generated=[[_shown(v) for v in r] for r in generated[:_SHOWN_ROWS]],
        reference=[[_shown(v) for v in r] for r in reference[:_SHOWN_ROWS]],
    )


def _shown(value: Any) -> Any:
    """A value as the counterexample shows it: a blob as its SQLite literal (``X'FF00'``): the
    result is JSON, which has no bytes (``SELECT X'FF'`` was an internal_error); text and blobs
    past :data:`_SHOWN_CHARS` characters cut, with ``…``."""
    if isinstance(value, bytes):
        # Whole within the characters shown (a cut one lost its closing quote).
        shown = (_SHOWN_CHARS - 3) // 2
        cut = "…" if len(value) > shown else ""
        return f"X'{value[:shown].hex().upper()}'{cut}"
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return value[:_SHOWN_CHARS] + "…"
    return value
