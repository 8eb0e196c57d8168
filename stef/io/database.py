"""The database of reference mode's execution (opt-in): run a SELECT read-only, bounded in time
and rows, and return its rows or why it failed.

``reference.execute`` names it: ``sqlite:///file.db`` (the standard library's sqlite3, opened
read-only with ``mode=ro``) or ``duckdb:///file.duckdb`` (the ``duckdb`` package, an optional
extra: ``pip install 'stef[duckdb]'``, opened ``read_only``); three slashes and a relative path,
four for an absolute one (``sqlite:////srv/golden.db``), as SQLAlchemy reads them. A statement
runs at most ``timeout_s`` (or a shorter bound its caller gives) and fetches at most
``max_rows`` rows holding at most 16 MiB of text and blobs (:mod:`stef.sql.fetch`); a
failure, a timeout, too many rows or too many bytes, or running out of memory
(``out_of_memory``: STEF's process, not the query, hit a bound) is an :class:`Execution`
outcome, never an exception. Nothing here decides what may run: the reference stage only sends
statements STEF's own safety check calls a plain SELECT.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from stef.errors import ConfigError
from stef.models import Database, Execution
from stef.sql.fetch import fetch

# Database and Execution live in the ground floor (the reference stage reads them); re-exported.
__all__ = ["Database", "DuckDbDatabase", "Execution", "SqliteDatabase", "open_database"]


# A statement that ran this process out of memory: the host's bound, not a finding on the
# query (the same statement may run on a larger host); the reference stage runs nothing more.
_OUT_OF_MEMORY = Execution("out_of_memory", detail="the statement ran STEF out of memory")

# Progress-handler period, in SQLite virtual-machine instructions: often enough to stop a
# runaway query within milliseconds, rarely enough to cost nothing measurable.
_SQLITE_CHECK_EVERY = 10_000


class SqliteDatabase:
    """A SQLite file opened read-only; one connection per statement (thread-safe by design)."""

    def __init__(self, path: str, *, timeout_s: float, max_rows: int) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        # Fail at start, not on the first record, when the file is not a readable database.
        probe = self._connect()
        try:
            probe.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise ConfigError(f"reference.execute: {path} is not a SQLite database: {exc}") from exc
        finally:
            probe.close()

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise ConfigError(f"reference.execute: cannot open {self.path}: {exc}") from exc

    def run(self, sql: str, timeout_s: float | None = None) -> Execution:
        conn = self._connect()
        bound = _bound(self.timeout_s, timeout_s)
        deadline = time.monotonic() + bound
        # A non-zero return makes SQLite abort the statement ("interrupted").
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _SQLITE_CHECK_EVERY)
        try:
            rows = fetch(conn.execute(sql), self.max_rows)
        except MemoryError:
            # sqlite3 raises it for SQLITE_NOMEM, as Python does for the rows it converts.
            return _OUT_OF_MEMORY
        except sqlite3.Error as exc:
            if time.monotonic() > deadline:
                return Execution("timeout", detail=f"over {bound:g} s")
            return Execution("error", detail=f"{type(exc).__name__}: {exc}"[:300])
        finally:
            conn.close()
        return _capped(rows, self.max_rows)

    def close(self) -> None:
        return None


class DuckDbDatabase:
    """A DuckDB file opened read-only; statements serialised on one connection."""

    def __init__(self, path: str, *, timeout_s: float, max_rows: int) -> None:
        try:
            import duckdb  # noqa: PLC0415 -- an optional extra, imported only when configured
        except ImportError as exc:
            raise ConfigError(
                "reference.execute: duckdb:// needs the duckdb package (pip install duckdb)"
            ) from exc
        self._error: type[Exception] = duckdb.Error
        self._out_of_memory: type[Exception] = duckdb.OutOfMemoryException
        try:
            self._conn = duckdb.connect(path, read_only=True)
        except duckdb.Error as exc:
            raise ConfigError(f"reference.execute: cannot open {path}: {exc}") from exc
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self._lock = threading.Lock()

    def run(self, sql: str, timeout_s: float | None = None) -> Execution:
        bound = _bound(self.timeout_s, timeout_s)
        with self._lock:
            fired = threading.Event()

            def interrupt() -> None:
                fired.set()
                self._conn.interrupt()

            timer = threading.Timer(bound, interrupt)
            timer.start()
            try:
                rows = fetch(self._conn.execute(sql), self.max_rows, chunk=64)
            except (MemoryError, self._out_of_memory):
                # DuckDB's own (its buffers, or the rows it converts) or Python's, in fetch.
                return _OUT_OF_MEMORY
            except self._error as exc:
                if fired.is_set():
                    return Execution("timeout", detail=f"over {bound:g} s")
                return Execution("error", detail=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                timer.cancel()
                timer.join()
        return _capped(rows, self.max_rows)

    def close(self) -> None:
        self._conn.close()


def _bound(own: float, asked: float | None) -> float:
    """A statement's time bound: the database's own, or a shorter one the caller asks for."""
    return own if asked is None else max(0.0, min(own, asked))


def _capped(rows: Sequence[Sequence[Any]] | str, max_rows: int) -> Execution:
    if isinstance(rows, str):
        return Execution("too_large", detail=rows)
    if len(rows) > max_rows:
        return Execution("too_many_rows", detail=f"more than {max_rows} rows")
    return Execution("ok", rows=tuple(tuple(r) for r in rows))


def open_database(url: str, *, timeout_s: float, max_rows: int) -> Database:
    """The database ``url`` names (``sqlite:///path`` or ``duckdb:///path``).

    Raises:
        ConfigError: another scheme, a missing file, or duckdb not installed.
    """
    for scheme, kind in (("sqlite:///", SqliteDatabase), ("duckdb:///", DuckDbDatabase)):
        if url.startswith(scheme):
            # As SQLAlchemy reads it: sqlite:///x.db is relative, sqlite:////tmp/x.db absolute.
            path = url[len(scheme) :]
            db: Database = kind(path, timeout_s=timeout_s, max_rows=max_rows)
            return db
    raise ConfigError(f"reference.execute: {url!r} is neither sqlite:///path nor duckdb:///path")
