"""Rows of an agent's SQL, fetched within a size as well as a row limit (reference mode's
execution, on the generated databases and on a team's own).

A SELECT can make its values as large as the engine allows: ``randomblob(99999999)`` on each of
a generated table's rows took 4.6 GB and five minutes of one record (the comparison reads every
value as text), ``randomblob(999999999)`` the whole 24 GB of the machine. On a generated
database SQLite refuses any string or blob past :data:`MAX_VALUE_BYTES`, and a row of more than
:data:`MAX_COLUMNS` columns, once :func:`limit_generated` set them (the statement fails, as any
other that cannot run): a row is at most 16 MiB. A team's database gets neither (its own values
may be larger: a query reading one would fail). :func:`fetch` stops past
:data:`MAX_RESULT_BYTES` of text and blobs in all, a row at a time, as it stops past ``max_rows``
rows. DuckDB's lists, structs and maps count what they hold: a list of 100,000 strings of 1,000
characters (100 MB) came through whole, as did a 100 MB string in a struct (only a row's own
strings and blobs were counted). DuckDB has no limit of its own on a value (``memory_limit``
let a 200 MB string through at 64 MB): a value is counted once it is converted.
"""

from __future__ import annotations

import sqlite3
from typing import Any

# The longest string or blob SQLite makes on a generated database (its own values are short).
MAX_VALUE_BYTES = 64 * 1024
# The most columns of a row (or a table, an index, a GROUP BY) there.
MAX_COLUMNS = 256
# The most characters of text and bytes of blobs one statement's rows may hold, in all.
MAX_RESULT_BYTES = 16 << 20
# What an element of a nested value that is neither text nor a blob counts: its size in a
# DuckDB vector (a list of 20,000,000 integers holds no text, and took 3 GB to convert).
_ELEMENT_BYTES = 8


def limit_generated(conn: sqlite3.Connection) -> None:
    """Make SQLite refuse, on ``conn``, a string or blob longer than :data:`MAX_VALUE_BYTES` and
    a row of more than :data:`MAX_COLUMNS` columns: a row is then at most 16 MiB."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)


def fetch(cursor: Any, max_rows: int, chunk: int = 1) -> list[tuple[Any, ...]] | str:
    """At most ``max_rows + 1`` rows of ``cursor`` (one more than allowed says there were too
    many), or why not: a string once their text and blobs pass :data:`MAX_RESULT_BYTES`.
    Fetched ``chunk`` rows at a time: a row at a time (SQLite's steps) holds at most one row
    past the limit; a driver that converts whole chunks (DuckDB) is asked for more."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while len(rows) <= max_rows:
        got = cursor.fetchmany(min(chunk, max_rows + 1 - len(rows)))
        if not got:
            break
        for row in got:
            # A text or blob counted in place: through _size, 180,000 strings took 0.23 s of
            # CPU to fetch, not 0.13 s, in the record's budget.
            size += sum(
                len(v) if isinstance(v, _TEXT) else _size(v) for v in row if isinstance(v, _COUNTED)
            )
            if size > MAX_RESULT_BYTES:
                return f"more than {MAX_RESULT_BYTES >> 20} MiB of values in its rows"
            rows.append(tuple(row))
    return rows


_TEXT = (str, bytes, bytearray)
_NESTED = (list, tuple, dict)
_COUNTED = (*_TEXT, *_NESTED)


def _size(value: Any) -> int:
    """The bytes ``value`` counts: a text or blob its length; a list, struct or map (DuckDB's,
    converted) :data:`_ELEMENT_BYTES` for each thing it holds (a map's keys too), plus the
    bytes of those that are text, blobs or nested in turn. A stack, not a recursion (nesting may
    be deep); a value past :data:`MAX_RESULT_BYTES` by its length alone is not walked."""
    size = 0
    stack = [value]
    while stack and size <= MAX_RESULT_BYTES:
        item = stack.pop()
        if isinstance(item, _TEXT):
            size += len(item)
            continue
        size += _ELEMENT_BYTES * len(item) * (2 if isinstance(item, dict) else 1)
        if size <= MAX_RESULT_BYTES:
            held = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            # DuckDB's lists hold one type: a list of numbers is passed over at C speed (a
            # walk of 2,000,000 integers took 1.1 s, with the set of their types first 0.1 s).
            if any(issubclass(kind, _COUNTED) for kind in set(map(type, held))):
                stack.extend(x for x in held if isinstance(x, _COUNTED))
    return size
