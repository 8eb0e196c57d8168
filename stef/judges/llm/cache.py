"""The judge cache: identical requests are answered once (SPEC §2 "Judge", §4 cost control).

Two levels: an in-process LRU and, optionally, a SQLite file that survives restarts and can be
shared by ``stef replay`` runs. Keys hash (prompt version, model, app rules, dialect, Qu, Qe,
normalized SQL, and the sample count when above 1); values are the validated
:class:`~stef.models.JudgeOutput` as JSON (with ``llm.samples`` > 1, the majority's output and
the vote).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from stef.errors import ConfigError
from stef.judges.base import JudgeRequest
from stef.models import JudgeOutput
from stef.sql.canonical import SQL_STRING

log = structlog.get_logger(__name__)

# SQL string literals, quoted identifiers and comments are kept verbatim; only whitespace between
# tokens is folded, so two SQL texts share a key only when they differ in layout alone. A line
# comment keeps its newline: folding it would comment out the rest of the statement. Only group 0
# is read, so the capturing group of SQL_STRING changes nothing (nor the key of a stored entry).
_SQL_TOKENS = re.compile(
    SQL_STRING.pattern + r"""|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|--[^\n]*\n?|/\*.*?\*/|\s+""",
    re.S,
)


def normalize_sql(sql: str) -> str:
    """The SQL with whitespace runs folded to one space and trailing semicolons dropped."""

    def fold(m: re.Match[str]) -> str:
        token = m.group(0)
        return " " if token.isspace() else token

    return _SQL_TOKENS.sub(fold, sql).strip().rstrip(";").strip()


def cache_key(
    request: JudgeRequest,
    *,
    prompt_version: str,
    model: str,
    analysis: Any = None,
    samples: int = 1,
) -> str:
    """The key of one request: everything that changes what the model is shown.

    Args:
        request: the record, its rules and its SQL spec.
        prompt_version: hash of the templates and the reply schema.
        model: the model name.
        analysis: the deterministic analysis shown to the model (spec, numbered predicates,
            normalizations, flags). Keyed too, so a cached answer's predicate ids always refer
            to the predicates of the current analysis, even after an upgrade of the SQL parser.
        samples: how many samples voted for the cached verdict. The entry is the vote's
            outcome, so one sample's answer is never served as a three-sample majority (nor the
            other way round); 1 leaves the key as it was before samples existed.
    """
    record = request.record
    payload = json.dumps(
        [
            prompt_version,
            model,
            request.rules.model_dump(mode="json"),
            record.dialect,
            record.question,
            record.enriched_question,
            normalize_sql(record.sql),
            analysis,
            *([{"samples": samples}] if samples > 1 else []),
        ],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class JudgeCache:
    """Thread-safe LRU in front of an optional SQLite file.

    A write to the file that fails after it opened (a full disk, an I/O error) drops the file
    level for the rest of the process: the run goes on with the in-process level, the failure
    is logged and counted (``on_failure``), and no record is lost to it.

    Args:
        size: LRU entries (0: no in-process level).
        path: SQLite file (created if absent), or None.
        on_failure: called once when the file level is dropped (a metric).

    Raises:
        ConfigError: the file cannot be opened as a SQLite cache (not SQLite, a directory,
            unwritable), at start.
    """

    def __init__(
        self,
        size: int = 10_000,
        path: str | Path | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self._size = size
        self._path = path
        self._on_failure = on_failure
        self._lru: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0
        if path is not None:
            self._db = _open(Path(path))

    @property
    def enabled(self) -> bool:
        """Whether anything is kept: with neither level every lookup misses, and its key need
        not be computed."""
        return self._size > 0 or self._db is not None

    def get(self, key: str) -> JudgeOutput | None:
        """The cached output, counting a hit or a miss."""
        with self._lock:
            text = self._lru.get(key)
            if text is not None:
                self._lru.move_to_end(key)
            elif self._db is not None:
                row = self._db.execute(
                    "SELECT value FROM judge_cache WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    text = str(row[0])
                    self._remember(key, text)
            if text is None:
                self.misses += 1
                return None
            try:
                output = JudgeOutput.model_validate_json(text)
            except ValidationError:
                # An entry written by an older, incompatible version: judge the record again.
                self._lru.pop(key, None)
                self.misses += 1
                log.warning("judge_cache_entry_invalid", key=key[:12])
                return None
            self.hits += 1
        return output

    def put(self, key: str, output: JudgeOutput) -> None:
        if not self.enabled:
            return
        text = output.model_dump_json()
        with self._lock:
            self._remember(key, text)
            if self._db is not None:
                try:
                    self._db.execute(
                        "INSERT OR REPLACE INTO judge_cache (key, value, created) VALUES (?, ?, ?)",
                        (key, text, time.time()),
                    )
                except sqlite3.Error as exc:
                    self._drop_file(exc)

    def _drop_file(self, exc: sqlite3.Error) -> None:
        """Go on without the file (the lock is held): a full disk must not fail every record."""
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):  # given up: closing it is best effort
                db.close()
        log.warning("judge_cache_file_dropped", path=str(self._path), error=str(exc))
        if self._on_failure is not None:
            self._on_failure()

    def _remember(self, key: str, text: str) -> None:
        if self._size <= 0:
            return
        self._lru[key] = text
        self._lru.move_to_end(key)
        while len(self._lru) > self._size:
            self._lru.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _open(path: Path) -> sqlite3.Connection:
    """The cache file, created if absent, its table ready.

    Raises:
        ConfigError: not a SQLite database, a directory, or not writable.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the worker threads, serialized by the lock.
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"LLM cache {path}: cannot be opened: {exc}") from exc
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS judge_cache "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )
    except sqlite3.Error as exc:
        db.close()
        raise ConfigError(
            f"LLM cache {path}: not a usable SQLite cache ({exc}); remove it or set another path"
        ) from exc
    return db
