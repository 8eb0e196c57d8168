"""Rows of an agent's SQL, fetched within a size as well as a row limit (reference mode's
execution, on the generated databases and on a team's own).

A SELECT can make its values as large as the engine allows: ``randomblob(99999999)`` on each of
a generated table's rows took 4.6 GB and five minutes of one record (the comparison reads every
value as text), ``randomblob(999999999)`` the whole 24 GB of the machine. SQLite refuses any
string or blob past :data:`MAX_VALUE_BYTES` once :func:`limit_values` set it (the statement
fails, as any other that cannot run); :func:`fetch` stops past :data:`MAX_RESULT_BYTES` of text
and blobs in all, a chunk of rows at a time, as it stops past ``max_rows`` rows.
"""

from __future__ import annotations

import sqlite3
from typing import Any

# The longest string or blob SQLite makes on a connection STEF runs an agent's SQL on.
MAX_VALUE_BYTES = 1 << 20
# The most text and blob bytes one statement's rows may hold, in all.
MAX_RESULT_BYTES = 16 << 20
# Rows fetched at a time: the size is checked between chunks.
_CHUNK = 256


def limit_values(conn: sqlite3.Connection) -> None:
    """Make SQLite refuse any string or blob longer than :data:`MAX_VALUE_BYTES` on ``conn``."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)


def fetch(cursor: Any, max_rows: int) -> list[tuple[Any, ...]] | str:
    """At most ``max_rows + 1`` rows of ``cursor`` (one more than allowed says there were too
    many), or why not: a string when their text and blobs pass :data:`MAX_RESULT_BYTES`."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while len(rows) <= max_rows:
        chunk = cursor.fetchmany(min(_CHUNK, max_rows + 1 - len(rows)))
        if not chunk:
            break
        for row in chunk:
            size += sum(len(v) for v in row if isinstance(v, str | bytes | bytearray))
        if size > MAX_RESULT_BYTES:
            return f"more than {MAX_RESULT_BYTES >> 20} MiB of text and blobs in its rows"
        rows.extend(tuple(r) for r in chunk)
    return rows
