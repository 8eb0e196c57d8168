"""The references file of reference mode: one JSON object a line, a question and its reviewed SQL.

    {"question": "How many bonds does TR006 have?", "gold_sql": "SELECT COUNT(*) FROM bond ..."}

Read once at start; a record is matched on its normalised question
(:func:`stef.question.question_key`). A bad line fails the start loudly, with its number: one
that is not an object with both strings, a gold_sql longer than a record's own may be, or a
question already given another gold_sql. Other keys are passed over; a ``dialect`` among them is
said in a warning (a reference is read in its record's dialect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from stef.errors import ConfigError, FileError
from stef.files import iter_jsonl, regular_file
from stef.question import question_key
from stef.sql.nesting import MAX_CALL_NESTING, call_nesting

log = structlog.get_logger(__name__)


def max_line_bytes(max_sql_chars: int, max_question_chars: int) -> int:
    """The longest line a references file may have: its question and gold_sql at their limits,
    every character written as JSON's longest escape (12 bytes: a surrogate pair of ``\\uXXXX``),
    and 64 KiB for the keys, the spaces and other fields. A longer line cannot hold a gold_sql
    STEF would take, so it is refused once that much of it is read (reading a 200 MB line whole
    to find its gold_sql too long took 700 MB); with the default limits it is 713,536 bytes."""
    return 12 * (max_sql_chars + max_question_chars) + _SLACK_BYTES


_SLACK_BYTES = 64 * 1024


def load_references(
    path: Path,
    max_sql_chars: int,
    *,
    max_question_chars: int,
    max_call_nesting: int = MAX_CALL_NESTING,
) -> dict[str, str]:
    """Normalised question -> reference SQL, from the JSONL file at ``path``.

    Args:
        max_sql_chars: the longest gold_sql (``limits.max_sql_chars``, the bound on a record's
            own): a 1 MB gold_sql took 45 s of the comparison for each record asking its question.
        max_question_chars: a record's longest question (``limits.max_question_chars``); with
            ``max_sql_chars`` it bounds a line (:func:`max_line_bytes`).
        max_call_nesting: how deep a gold_sql may nest calls (``limits.max_sql_call_nesting``:
            the parse of some calls doubles with each level, :mod:`stef.sql.nesting`).

    Raises:
        ConfigError: the file cannot be read, a line is longer than :func:`max_line_bytes`, is
            not an object with the strings ``question`` and ``gold_sql``, its gold_sql is longer
            than ``max_sql_chars``, or it gives a question of an earlier line another gold_sql
            (which one a record was judged against would depend on the order of the lines); the
            message names the line.
    """
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    dialect_line: int | None = None
    bound = max_line_bytes(max_sql_chars, max_question_chars)
    too_long = (
        f", more than a line needs for a gold_sql of {max_sql_chars} characters "
        f"(limits.max_sql_chars) and a question of {max_question_chars} (limits.max_question_chars)"
    )
    try:
        regular_file(path, None)  # read at start: a FIFO would block the start for ever
        for n, obj in iter_jsonl(path, max_line_bytes=bound, too_long=too_long):
            question, gold = _pair(f"references {path}:{n}", obj, max_sql_chars, max_call_nesting)
            key = question_key(question)
            if key in out and out[key] != gold:
                raise ConfigError(
                    f"references {path}:{n}: the question of line {first[key]} again, with "
                    "another gold_sql: keep one"
                )
            first.setdefault(key, n)
            out[key] = gold
            if dialect_line is None and "dialect" in obj:
                dialect_line = n
    except FileError as exc:
        raise ConfigError(f"references {exc}") from exc
    _say(path, empty=not out, dialect_line=dialect_line)
    return out


def _pair(where: str, obj: dict[str, Any], max_sql_chars: int, max_calls: int) -> tuple[str, str]:
    """A line's question and gold_sql, within the bounds a record's own SQL has.

    Raises:
        ConfigError: either is missing or not a string, or the gold_sql is out of bounds.
    """
    question, gold = obj.get("question"), obj.get("gold_sql")
    if not isinstance(question, str) or not isinstance(gold, str) or not gold.strip():
        raise ConfigError(f"{where}: needs the strings 'question' and 'gold_sql'")
    if len(gold) > max_sql_chars:
        raise ConfigError(
            f"{where}: gold_sql is {len(gold)} characters; the limit is {max_sql_chars} "
            "(limits.max_sql_chars)"
        )
    calls = call_nesting(gold)
    if calls > max_calls:
        raise ConfigError(
            f"{where}: gold_sql nests function calls {calls} deep; the limit is {max_calls} "
            "(limits.max_sql_call_nesting)"
        )
    return question, gold


def _say(path: Path, *, empty: bool, dialect_line: int | None) -> None:
    """The warnings of a file that loaded: empty, or a line with a ``dialect`` (said once: a file
    written with a dialect usually has one on every line)."""
    if empty:
        log.warning("references_empty", path=str(path), hint="no record is judged against one")
    if dialect_line is not None:
        log.warning(
            "references_dialect_ignored",
            path=str(path),
            line=dialect_line,
            hint="a reference is read in its record's dialect (the record's own, else its "
            "app's rules): set the app's dialect",
        )
