"""Small databases generated for two queries (reference mode's execution without a database).

From the inferred schema (:mod:`stef.sql.infer`) each column gets a pool of values: the literals
the queries compare it with and their neighbours (±1, the day before and after, other case,
zero-padded and unpadded spellings, strings that match and miss each LIKE pattern), and a few
ordinary values. Columns tied by a join share one pool, so joins match and a filtering join
filters. Each database has a handful of rows per table; a table's own key (``id``, ``<table>_id``)
is unique; the clean databases have no repeated rows and no NULLs (but in the columns the queries
test with ``IS NULL``), the others some. Where the queries compare a count with a number
(``HAVING COUNT(*) > 5``), databases with ``crowd`` hold groups of that many rows and one more
(:func:`crowds`). Everything is drawn from one seed: the same queries give the same databases.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import random
import re
from dataclasses import dataclass

from stef.sql.equivalences import table_key
from stef.sql.infer import ColumnFacts, Kind, Schema
from stef.sql.suite_dates import plain_days

Value = int | float | str | None
# Rows per table of one generated database.
_MIN_ROWS, _MAX_ROWS = 2, 5
# The share of cells drawn from the values the queries name, from their neighbours (the rest:
# ordinary values), and the most rows of a table whose own key others point to.
_EXACT_SHARE, _NEAR_SHARE = 0.45, 0.2
# A focused database draws mostly named values and their neighbours: more rows pass the
# filters (an aggregate over two rows, not one) and more sit on a boundary (``> 50``, ``> 51``).
_FOCUSED_SHARES = (0.5, 0.4)
# The share of a focused database's rows that take a named value in every column with one.
_HIT_SHARE = 0.4
_MAX_KEYED_ROWS = 8
# The most rows the crowded tables of a database (:class:`Crowd`) can join to, each table's
# rows to the power of its reads (cross joined, 177 rows read three times ran past the record's
# time), and the most numbers a crowd has groups for (the largest).
_MAX_CROWD_JOINED = 50_000
_MAX_CROWD_NUMBERS = 3
# The first of a crowd's own values for a shared column (``_distinct``), past its free columns'.
_FRESH = 1000
# A query with a LIMIT gets tables with more rows than it (up to this many).
_MAX_LIMITED_ROWS = 12
_NULL_SHARE = 0.15
# SQLite's integers: 64 bits. A number past them is stored, and read in a query, as a REAL.
_INTEGERS = range(-(1 << 63), 1 << 63)
# A day, and a time on a day (``2014-09-18 19:39:08``, ``2014-09-18 19:39:08.0``).
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)")
_MIDNIGHT = re.compile(r" ?00:00(?::00(?:\.0+)?)?")
_AFFINITY = {"int": "INTEGER", "real": "REAL", "text": "TEXT", "date": "TEXT"}
_PLAIN: dict[Kind, list[Value]] = {
    "int": [1, 2, 3],
    "real": [0.5, 1.0, 2.5],
    "text": ["a", "b", "c"],
}


def _plain(kind: Kind) -> list[Value]:
    """A column's ordinary values; a date column's are days around "now"
    (:func:`stef.sql.suite_dates.plain_days`)."""
    return list(plain_days()) if kind == "date" else _PLAIN[kind]


@dataclass(frozen=True)
class Table:
    """One generated table: its columns with their SQLite affinity, and its rows."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[Value, ...], ...]


@dataclass(frozen=True)
class Pool:
    """The values of one column: those the queries name (``exact``), their neighbours
    (``near``) and ordinary ones (``plain``); ``key``: a table's own key is in the group, whose
    table holds every value of the pool (so each reference to it finds its row)."""

    kind: Kind
    exact: tuple[Value, ...]
    near: tuple[Value, ...]
    plain: tuple[Value, ...]
    ranked: bool = False
    linked: bool = False
    owner: tuple[str, str] | None = None
    nullable: bool = False
    odd: tuple[Value, ...] = ()
    group_by: bool = False

    def every(self) -> list[Value]:
        return list(dict.fromkeys([*self.exact, *self.near, *self.plain]))


def pools(schema: Schema) -> dict[tuple[str, str], Pool]:
    """One value pool per column; columns a join ties share one (a ranked key has more values
    than the LIMIT asks for)."""
    out: dict[tuple[str, str], Pool] = {}
    for members in _groups(schema).values():
        facts = ColumnFacts()
        for table, column in members:
            one = schema.tables[table][column]
            facts.kinds |= one.kinds
            facts.literals |= one.literals
            facts.patterns |= one.patterns
            facts.years |= one.years
            facts.ranked |= one.ranked
            facts.nullable |= one.nullable
            facts.grouped |= one.grouped
            facts.group_by |= one.group_by
            facts.boolean |= one.boolean
        kind = _kind(facts, [c for _, c in members])
        exact, near, odd = _named(facts, kind)
        # A boolean (``WHERE active``, ``= TRUE``): 0 and 1 only, as SQLite stores them.
        boolean = facts.boolean and kind == "int" and set(exact) <= {0, 1}
        linked = len(members) > 1
        # A column only shown by a query with a LIMIT takes distinct values: LIMIT k and k + 1
        # then show different rows.
        shown = schema.limit > 0 and not (exact or near or facts.grouped)
        ranked = facts.ranked or shown
        plain = _plain(kind) if linked or not ranked else _wide(kind, exact)
        clock = _midnight_clock(exact) if kind == "date" else None
        if clock is not None:
            exact, near, odd, plain = _stamped((exact, near, odd, plain), clock)
        if not linked and not ranked and kind in ("int", "real"):
            plain = _around(exact) or plain
        if linked and facts.ranked and kind == "int" and schema.limit:
            plain = list(range(1, min(schema.limit + 3, _MAX_KEYED_ROWS) + 1))
        if boolean:
            exact, near, odd, plain = [0, 1], [], [], [0, 1]
        exact, near, odd, plain = ([_stored(v) for v in vs] for vs in (exact, near, odd, plain))
        owner = _owner(members)
        pool = Pool(
            kind,
            tuple(exact),
            tuple(near),
            tuple(plain),
            ranked,
            linked,
            owner,
            facts.nullable,
            tuple(odd),
            facts.group_by,
        )
        for member in members:
            out[member] = pool
    return out


def _stored(value: Value) -> Value:
    """A value as SQLite stores it: an integer past 64 bits as a REAL (``amount = 1e99`` named
    an integer that no INSERT takes)."""
    if isinstance(value, int) and value not in _INTEGERS:
        try:
            return float(value)
        except OverflowError:  # past the largest float (about 1.8e308): as SQLite reads it
            return math.copysign(math.inf, value)
    return value


def _owner(members: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The one column of a join group that is its table's own key: ``<table>_id`` first, then
    the first ``id`` (of the reference's tables first); the others point to it."""
    named = [(t, c) for t, c in members if table_key(t, c) and c != "id"]
    plain = [(t, c) for t, c in members if c == "id"]
    found = named or plain
    return found[0] if found else None


def _owns(pools_of: dict[tuple[str, str], Pool], table: str, column: str) -> bool:
    pool = pools_of.get((table, column))
    return pool is not None and pool.owner == (table, column)


def _around(exact: list[Value]) -> list[Value]:
    """Ordinary values on both sides of the numbers a column is compared with, farther than
    their neighbours (``Views > 1000`` keeps some rows and drops others)."""
    numbers = [v for v in exact if isinstance(v, int | float) and not isinstance(v, bool)]
    return list(dict.fromkeys(v + step for v in numbers[:3] for step in (-7, 7, 30)))


def _wide(kind: Kind, exact: list[Value]) -> list[Value]:
    """Ordinary values for a column ranked by ORDER BY, MAX or MIN: many, so ties are rare,
    around the number the queries compare it with (both sides of ``height > 180``)."""
    centre = next((v for v in exact if isinstance(v, int | float)), None)
    if kind == "int":
        low = 1 if centre is None or centre in (math.inf, -math.inf) else int(centre) - 20
        return list(range(low, low + 40))
    if kind == "real":
        return [i + 0.25 for i in range(1, 40)]
    if kind == "date":
        return [f"20{10 + i // 12:02d}-{i % 12 + 1:02d}-1{i % 9}" for i in range(40)]
    return [f"{chr(97 + i % 26)}{i}" for i in range(40)]


def _groups(schema: Schema) -> dict[tuple[str, str], list[tuple[str, str]]]:
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in schema.links:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, columns in schema.tables.items():
        for column in columns:
            groups.setdefault(find((table, column)), []).append((table, column))
    return groups


def _kind(facts: ColumnFacts, names: list[str]) -> Kind:
    numeric = {"int", "real"} & facts.kinds
    if numeric and "text" in facts.kinds and _quoted_numbers(facts):
        # Compared with numbers and with quoted numbers (``Date BETWEEN 201101 AND 201112``,
        # ``Date = '201201'``): a numeric column, which SQLite compares with both as numbers.
        return "real" if "real" in numeric else "int"
    for kind in ("date", "text", "real", "int"):
        if kind in facts.kinds:
            return kind
    if facts.years:
        return "date"
    if any(_key_like(n) for n in names):
        return "int"
    return "text"


def _quoted_numbers(facts: ColumnFacts) -> bool:
    """Whether every string the column is compared with reads as a number (and it is matched
    against no LIKE pattern, read as a date or as a year)."""
    if facts.patterns or facts.years or "date" in facts.kinds:
        return False
    texts = [v for v in facts.literals if isinstance(v, str)]
    return bool(texts) and all(re.fullmatch(r"-?\d+(\.\d+)?", t) for t in texts)


def _key_like(name: str) -> bool:
    return name == "id" or name.endswith("id") or name.endswith("_no") or name.endswith("key")


def _named(facts: ColumnFacts, kind: Kind) -> tuple[list[Value], list[Value], list[Value]]:
    """The values the queries name (as the column stores them), their neighbours, and the
    neighbours that differ from a named value only by case (``odd``: on the databases with
    NULLs and repeats only, real data seldom spells one value two ways)."""
    exact: list[Value] = []
    near: list[Value] = []
    for value in sorted(facts.literals, key=repr):
        first, *rest = _neighbours(value, kind)
        exact.append(first)
        near.extend(rest)
    for year in sorted(facts.years):
        first, *rest = _year_dates(year)
        exact.append(first)
        near.extend(rest)
    for pattern in sorted(facts.patterns):
        first, *rest = _pattern_values(pattern, kind)
        exact.append(first)
        near.extend(rest)
    exact = list(dict.fromkeys(exact))
    folded = {v.casefold() for v in exact if isinstance(v, str)}
    named = set(exact)  # sets, not the lists: 3,980 strings took 2.2 s of lookups
    near = [v for v in dict.fromkeys(near) if v not in named]
    odd: list[Value] = [v for v in near if isinstance(v, str) and v.casefold() in folded]
    spelled = set(odd)
    return exact, [v for v in near if v not in spelled], odd


def _neighbours(value: object, kind: Kind) -> list[Value]:
    if isinstance(value, bool):
        return [int(value)]
    if isinstance(value, int | float):
        if kind in ("text", "date"):
            return [str(value)]
        step = 1 if isinstance(value, int) else 0.5
        return [value, value - step, value + step]
    text = str(value)
    dated = _date_neighbours(text) if kind == "date" else None
    if dated is not None:
        return dated
    if kind in ("int", "real"):
        return _number_neighbours(text)
    variants: list[Value] = [text, text.upper(), text.lower(), text + "x"]
    if text.isdigit():
        # A number kept as text ('225', '201201'): its unpadded and padded spellings, and the
        # numbers either side at its width.
        number = int(text)
        variants += [text.lstrip("0") or "0", "0" + text]
        variants += [str(number + 1).zfill(len(text)), str(max(number - 1, 0)).zfill(len(text))]
    return variants


def _date_neighbours(text: str) -> list[Value] | None:
    """A year (``SUBSTR(d, 1, 4) = '2019'``: dates of that year), a month, or a day with the
    days either side and a time on it; None for text that reads as none of them."""
    if re.fullmatch(r"\d{4}", text):
        return _year_dates(int(text))
    if re.fullmatch(r"\d{4}-\d{2}", text):
        return [f"{text}-15", f"{text}-01", f"{text}-28"]
    stamp = _STAMP.fullmatch(text)
    if stamp is not None:
        # A time on a day: the same time the days either side, and another time that day.
        head, clock = stamp.group(1), text[len(stamp.group(1)) :]
        days = _date_neighbours(head)
        if days is None or len(days) < 3:
            return [text]
        other = " 12:00:00" if _MIDNIGHT.fullmatch(clock) else " 00:00:00"
        return [text, f"{days[1]}{clock}", f"{days[2]}{clock}", f"{head}{other}"]
    if not _DAY.fullmatch(text):
        return None
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return [text]
    # The first and last days a date can hold have one neighbour: the day itself stands in.
    before, after = (_shifted(day, step) or text for step in (-1, 1))
    return [text, before, after, f"{text} 12:00:00"]


def _shifted(day: dt.date, days: int) -> str | None:
    """The ISO day ``days`` from ``day``; None past the range of dates."""
    try:
        return (day + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def _midnight_clock(exact: list[Value]) -> str | None:
    """The clock of a column the queries compare with a time at midnight and no other time
    (``date = '2014-09-18 00:00:00'``: ``00:00:00``, as the first such value writes it): it
    holds days as timestamps at midnight. None for any other column."""
    clocks = [m.group(2) for v in exact if isinstance(v, str) and (m := _STAMP.fullmatch(v))]
    if not clocks or not all(_MIDNIGHT.fullmatch(c) for c in clocks):
        return None
    return clocks[0]


def _stamped(
    pools: tuple[list[Value], list[Value], list[Value], list[Value]], clock: str
) -> tuple[list[Value], list[Value], list[Value], list[Value]]:
    """A midnight-stamped column's (exact, near, odd, plain) values in its one format: each day
    written as a timestamp at midnight (``clock``), another time of day only on the databases
    with NULLs and repeats (``odd``: real data seldom mixes formats in one column, and such a
    column holds its days at midnight)."""

    def at_midnight(values: list[Value]) -> list[Value]:
        out = [f"{v} {clock}" if isinstance(v, str) and _DAY.fullmatch(v) else v for v in values]
        return list(dict.fromkeys(out))

    def timed(v: Value) -> bool:
        m = _STAMP.fullmatch(v) if isinstance(v, str) else None
        return m is not None and not _MIDNIGHT.fullmatch(m.group(2))

    exact, near, odd, plain = (at_midnight(values) for values in pools)
    named = set(exact)
    near = [v for v in near if v not in named]
    moved = {v for v in [*near, *plain] if timed(v) and v not in named}
    near = [v for v in near if v not in moved]
    plain = [v for v in plain if v not in moved] or at_midnight(_plain("date"))
    return exact, near, list(dict.fromkeys([*odd, *sorted(moved, key=str)])), plain


def _number_neighbours(text: str) -> list[Value]:
    try:
        number = float(text)
    except ValueError:
        return [text]
    base = int(number) if number.is_integer() else number
    return [base, base - 1, base + 1]


def _month_dates(year: int, month: int) -> list[Value]:
    """Days of a month (its first, middle and last), the last day of the month before and the
    first of the month after (those a date can hold)."""
    head = f"{year:04d}-{month:02d}"
    if not 1 <= year <= 9999:
        return [f"{head}-15", f"{head}-01", f"{head}-28"]
    last = calendar.monthrange(year, month)[1]
    first = dt.date(year, month, 1)
    outside = (_shifted(first, -1), _shifted(first, last))
    return [f"{head}-15", f"{head}-01", f"{head}-{last:02d}", *(d for d in outside if d)]


def _year_dates(year: int) -> list[Value]:
    return [
        f"{year}-01-01",
        f"{year}-06-15",
        f"{year}-12-31",
        f"{year - 1}-12-31",
        f"{year + 1}-01-01",
    ]


def _pattern_values(pattern: str, kind: Kind) -> list[Value]:
    """Strings that match ``pattern`` (``%`` as nothing and as text, ``_`` as one letter) and
    one that misses it by its first character."""
    if kind == "date":
        # A day or a month (``LIKE '2015-05-01%'``, ``LIKE '2015-05%'``): dates in it and either
        # side of it; a year: dates of that year and either side.
        day = re.match(r"^(\d{4}-\d{2}-\d{2})%$", pattern)
        dated = _date_neighbours(day.group(1)) if day is not None else None
        if dated is not None and len(dated) > 1:
            return dated
        month = re.match(r"^(\d{4})-(\d{2})%$", pattern)
        if month is not None and 1 <= int(month.group(2)) <= 12:
            return _month_dates(int(month.group(1)), int(month.group(2)))
        head = re.match(r"^(\d{4})", pattern)
        if head is not None:
            return _year_dates(int(head.group(1)))
    bare = pattern.replace("%", "").replace("_", "a")
    filled = pattern.replace("%", "z").replace("_", "a")
    missed = ("q" + filled[1:]) if filled else "q"
    return [bare, filled, missed, bare.upper()]


def generate(
    schema: Schema,
    pools_of: dict[tuple[str, str], Pool],
    seed: int,
    index: int,
    *,
    clean: bool,
    focused: bool = False,
    crowd: bool = False,
) -> list[Table]:
    """The ``index``-th database of ``seed``; ``clean``: without NULLs or repeated rows;
    ``focused``: named values and their neighbours drawn more often, some rows named in every
    column with named values, a referenced table holding only the keys others point to;
    ``crowd`` (on a focused database): each table's crowd in front (:func:`crowds`)."""
    rng = random.Random(f"{seed}:{index}")
    crowded = crowds(schema, pools_of, index) if crowd else {}
    tables = []
    for name, columns in schema.tables.items():
        names = list(columns) or ["stef_row"]
        keys = [
            c for c in names if (name, c) in pools_of and pools_of[(name, c)].owner == (name, c)
        ]
        column_pools = [pools_of.get((name, c)) for c in names]
        table_crowd = crowded.get(name)
        if table_crowd is not None and table_crowd.own:
            names.append(_own_column(names))
            column_pools.append(None)
        count = _row_count(schema, pools_of, (name, keys), rng, focused)
        if table_crowd is not None:
            count = max(count, table_crowd.rows_needed)
        shares = _FOCUSED_SHARES if focused else (_EXACT_SHARE, _NEAR_SHARE)
        cells = [
            _column_values(name, c, pool, count, rng, (clean, shares))
            for c, pool in zip(names, column_pools, strict=True)
        ]
        rows = [tuple(col[i] for col in cells) for i in range(count)]
        if focused:
            rows = _hit_rows(rows, column_pools, keys, names, rng)
        if table_crowd is not None:
            rows = table_crowd.rows(rows, column_pools, rng)
        if not clean and rows and not keys:
            rows.append(rng.choice(rows))
        affinities = tuple(
            (c, _AFFINITY[pool.kind] if pool is not None else "TEXT")
            for c, pool in zip(names, column_pools, strict=True)
        )
        tables.append(Table(name, affinities, tuple(rows)))
    return tables


def crowds(
    schema: Schema, pools_of: dict[tuple[str, str], Pool], index: int = 0
) -> dict[str, Crowd]:
    """Each table's crowd on the ``index``-th database, for queries comparing a count with a
    number (:class:`Crowd`); none when the crowded tables, each of its rows as many times as
    a query reads it, could join to more than ``_MAX_CROWD_JOINED`` rows (cross joined: a
    table of 177 rows read three times ran past the record's time)."""
    crowded = {}
    for name, columns in schema.tables.items():
        names = list(columns)
        column_pools = [pools_of.get((name, c)) for c in names]
        is_key = [
            p is not None and p.owner == (name, c) for c, p in zip(names, column_pools, strict=True)
        ]
        found = Crowd.of(schema, column_pools, is_key, named=index % 2 == 0)
        if found is not None:
            crowded[name] = found
    joined = math.prod(c.rows_needed ** schema.reads.get(name, 1) for name, c in crowded.items())
    return crowded if joined <= _MAX_CROWD_JOINED else {}


def _row_count(
    schema: Schema,
    pools_of: dict[tuple[str, str], Pool],
    table: tuple[str, list[str]],
    rng: random.Random,
    focused: bool,
) -> int:
    """A table's rows: a handful, more than a LIMIT asks for; a table a reference points to
    holds every value of its key's pool, and on a focused database no more (each of its rows
    then has rows pointing to it)."""
    name, keys = table
    count = max(rng.randint(_MIN_ROWS, _MAX_ROWS), min(3 * schema.limit + 2, _MAX_LIMITED_ROWS))
    if not keys:
        return count
    values = min(len(pools_of[(name, keys[0])].every()), _MAX_KEYED_ROWS)
    if focused and not schema.limit and values >= _MIN_ROWS:
        return values
    return max(count, values)


def _hit_rows(
    rows: list[tuple[Value, ...]],
    column_pools: list[Pool | None],
    keys: list[str],
    names: list[str],
    rng: random.Random,
) -> list[tuple[Value, ...]]:
    """Some rows with a named value in every column the queries name values of (a row that
    passes ``forename = 'Lewis' AND surname = 'Hamilton'``), when that repeats no row."""
    named = [
        i
        for i, pool in enumerate(column_pools)
        if pool is not None and pool.exact and not pool.ranked and names[i] not in keys
    ]
    if len(named) < 2:
        return rows
    out = list(rows)
    for r, row in enumerate(rows):
        if rng.random() >= _HIT_SHARE:
            continue
        cells = list(row)
        for i in named:
            cells[i] = rng.choice(column_pools[i].exact)  # type: ignore[union-attr]
        hit = tuple(cells)
        if hit not in out:
            out[r] = hit
    return out


@dataclass(frozen=True)
class Crowd:
    """A table's crowd, for queries comparing a count with numbers (``HAVING COUNT(*) > 5``):
    groups of rows sharing one value in every column grouped by or joined on (``shared``), of
    each number's size and one more (``sizes``: 6 and 5; ``> 5`` and ``>= 5`` then differ),
    whose ``free`` columns (compared with no value, joined to nothing) take values apart (the
    crowd repeats nothing but the shared values), kept apart by them or the table's own key, or
    (``own``) by a column of the crowd's own; with ``named``, the crowd's rows take named
    values in the other columns the queries name values of and do not rank (they pass ``year
    BETWEEN 1990 AND 2000``)."""

    sizes: tuple[int, ...]
    shared: tuple[int, ...]
    named: tuple[int, ...]
    free: tuple[int, ...]
    own: bool = False

    @property
    def rows_needed(self) -> int:
        """The table's rows with its crowd in front: the groups and one more."""
        return sum(self.sizes) + 1

    @classmethod
    def of(
        cls, schema: Schema, column_pools: list[Pool | None], is_key: list[bool], named: bool
    ) -> Crowd | None:
        """The crowd of a table whose columns have these pools; None without a number, a
        column grouped by or joined on, or a free column or key to keep its rows apart (a
        column of its own, after the others, where no query reads columns it does not name)."""
        shared = tuple(
            i
            for i, pool in enumerate(column_pools)
            if pool is not None and not is_key[i] and (pool.linked or pool.group_by)
        )
        free = tuple(
            i
            for i, pool in enumerate(column_pools)
            if i not in shared
            and not is_key[i]
            and pool is not None
            and not (pool.linked or pool.exact)
        )
        own = not free and not any(is_key) and not schema.unnamed
        if own:
            free = (len(column_pools),)
        if not schema.counts or not shared or not (free or any(is_key)):
            return None
        values = tuple(
            i
            for i, pool in enumerate(column_pools)
            if named
            and i not in shared
            and not is_key[i]
            and pool is not None
            and pool.exact
            and not pool.ranked
        )
        numbers = sorted(schema.counts, reverse=True)[:_MAX_CROWD_NUMBERS]
        sizes = tuple(size for n in numbers for size in (n + 1, n))
        return cls(sizes, shared, values, free, own)

    def rows(
        self, rows: list[tuple[Value, ...]], column_pools: list[Pool | None], rng: random.Random
    ) -> list[tuple[Value, ...]]:
        """``rows`` with the crowd's groups in front (as many as the shared columns have
        values for); a row past them takes another value of the pool where there is one (else
        it joins a group); a row repeating another is left out."""
        values = [self._values(column_pools[i], rng) for i in self.shared]
        groups = min(len(self.sizes), *(len(v) for v in values))
        owner = [g for g in range(groups) for _ in range(self.sizes[g])]
        out: list[tuple[Value, ...]] = []
        seen: set[tuple[Value, ...]] = set()
        for r, row in enumerate(rows):
            cells = list(row)
            if r < len(owner):
                for i, shared in zip(self.shared, values, strict=True):
                    cells[i] = shared[owner[r]]
                for i in self.named:
                    cells[i] = rng.choice(column_pools[i].exact)  # type: ignore[union-attr]
                for i in self.free:
                    cells[i] = _distinct(column_pools[i], r)
            else:
                for i, shared in zip(self.shared, values, strict=True):
                    if cells[i] in shared[:groups]:
                        cells[i] = _outside(column_pools[i], shared, cells[i])
            if tuple(cells) not in seen:
                seen.add(tuple(cells))
                out.append(tuple(cells))
        return out

    def _values(self, pool: Pool | None, rng: random.Random) -> list[Value]:
        """One value of a shared column per group (a named one first; past the pool's values,
        values of its own where the column is joined to nothing and not a boolean)."""
        every = _pool(pool).every()
        first = rng.choice(_pool(pool).exact or every)
        rest = [v for v in every if v != first]
        rng.shuffle(rest)
        values = [first, *rest]
        if not _pool(pool).linked and not set(every) <= {0, 1}:
            values += [_distinct(pool, _FRESH + g) for g in range(len(self.sizes))]
        return values[: len(self.sizes)]


def _outside(pool: Pool | None, taken: list[Value], value: Value) -> Value:
    """A value of a shared column's pool in no group; ``value`` when there is none."""
    return next((v for v in _pool(pool).every() if v not in taken), value)


def _own_column(names: list[str]) -> str:
    """A crowd's column of its own, named as no column of its table is."""
    return next(
        f"stef_row{i or ''}" for i in range(len(names) + 1) if f"stef_row{i or ''}" not in names
    )


def _pool(pool: Pool | None) -> Pool:
    assert pool is not None  # the crowd's columns have pools
    return pool


def _distinct(pool: Pool | None, r: int) -> Value:
    """The ``r``-th of a free column's values, apart from one another."""
    kind = pool.kind if pool is not None else "text"
    if kind == "int":
        return 9001 + r
    if kind == "real":
        return 9001.5 + r
    if kind == "date":
        return (dt.date(1999, 1, 1) + dt.timedelta(days=r)).isoformat()
    return f"stef{r}"


def _column_values(
    table: str,
    column: str,
    pool: Pool | None,
    count: int,
    rng: random.Random,
    drawn: tuple[bool, tuple[float, float]],
) -> list[Value]:
    """``count`` cells of a column; ``drawn``: whether the database is clean, and the shares
    of named values and of their neighbours."""
    clean = drawn[0]
    if pool is None:
        return [rng.choice(_PLAIN["text"]) for _ in range(count)]
    if pool.owner == (table, column):
        choices = pool.every()
        rng.shuffle(choices)
        extra = [len(choices) + i + 1 for i in range(count)]
        return [*choices, *extra][:count]
    plain = list(pool.plain)
    if pool.ranked and not pool.linked:
        rng.shuffle(plain)  # distinct ordinary values: no ties on what is ranked
    out = [_cell(pool, plain, i, rng, drawn) for i in range(count)]
    if pool.odd and not clean and out:
        out[rng.randrange(len(out))] = rng.choice(pool.odd)  # each such database spells one
    return out


def _cell(
    pool: Pool,
    plain: list[Value],
    i: int,
    rng: random.Random,
    drawn: tuple[bool, tuple[float, float]],
) -> Value:
    """The ``i``-th cell of a column: NULL, a named value, a neighbour or an ordinary one."""
    clean, (exact_share, near_share) = drawn
    draw = rng.random()
    # A ranked column mostly takes ordinary values: a top-k needs more rows than k to pass.
    exact_share = _EXACT_SHARE / 3 if pool.ranked else exact_share
    near_share = _NEAR_SHARE if pool.ranked else near_share
    if (pool.nullable or not clean) and draw < _NULL_SHARE:
        return None
    if pool.exact and draw < exact_share:
        return rng.choice(pool.exact)
    if pool.odd and not clean and draw < exact_share + near_share:
        return rng.choice(pool.odd)
    if pool.near and draw < exact_share + near_share:
        return rng.choice(pool.near)
    if pool.ranked and not pool.linked:
        return plain[i % len(plain)]
    return rng.choice(plain)
