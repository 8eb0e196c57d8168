"""First stage: raw bytes of one logged request -> a valid :class:`InputRecord`, or InvalidInput.

Agent logs rarely use STEF's field names, so a :class:`FieldMapping` maps them (``user_query`` ->
``question``, ``payload.sql`` -> ``sql``: dotted paths reach into nested objects, ``[N]`` into
lists). An epoch ``timestamp`` (seconds or milliseconds) becomes ISO 8601 UTC text.

Validation is also the cost guard of the pipeline: parsing and judging hold the GIL, so one
pathological record (thousands of nested subqueries, a chain of CTEs, unclosed comments) would
freeze every worker, the health endpoint and the Kafka heartbeats. :class:`Limits` rejects such
records with cheap counts (no sqlglot, no backtracking regex) before any later stage reads the text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stef.errors import InvalidInput
from stef.fields import FIELDS as FIELDS  # re-exported: pipeline, settings, calibrate
from stef.fields import REQUIRED
from stef.fields import FieldMapping as FieldMapping
from stef.fields import path_parts as path_parts
from stef.models import InputRecord
from stef.sql.dialects import dialect_names, is_dialect
from stef.sql.nesting import MAX_CALL_NESTING, call_nesting

_STRINGS = tuple(f for f in FIELDS if f != "metadata")
_TEXTS = ("question", "enriched_question", "sql", "gold_sql")


class Limits(BaseModel):
    """Limits beyond which a record is invalid input rather than a slow judge call.

    The defaults keep every accepted record under about a second of CPU through the whole
    pipeline (measured with ``scripts/slowest_record.py``) while staying far above what real agent
    SQL reaches (in the dev and sample logs: parenthesis depth 6, one CTE, no block comment, 366
    tokens, 11-digit numbers, 218-character questions, 664-character enrichments).

    Attributes:
        max_record_bytes: size of the raw record.
        max_question_chars: length of the user's question Qu (the question's values are matched
            against the SQL's predicates; at 4,000 characters the costliest question measured
            0.63 s of CPU).
        max_enriched_question_chars: length of the agent's rewrite Qe.
        max_sql_chars: length of the SQL.
        max_json_depth: nesting of objects and arrays in the record, metadata included (the
            record itself is depth 1).
        max_sql_nesting: parenthesis depth of the SQL (subqueries, function calls, groups);
            parsing and analysis recurse once per level.
        max_sql_call_nesting: how deep the SQL nests function calls (``f(g(x))`` is 2): the
            parser's time doubles or triples with each level of some calls (``DATE(``,
            ``DIV0(``), so 20 levels took seconds to hours within the parenthesis bound
            (:mod:`stef.sql.nesting`).
        max_sql_comments: ``/*`` comment openers in the SQL.
        max_sql_ctes: CTE definitions in the SQL, counted as ``AS (``.
        max_sql_tokens: words and punctuation marks in the SQL (bounds IN lists, AND/OR chains,
            joins, UNIONs, CASE arms and projections together).
        max_digit_run: digits in one number: a JSON integer, or a run of digits in the question,
            its rewrite or the SQL. Python refuses to convert integers of more than 4300 digits
            to or from text, so this stays well below that.
        max_record_cpu_s: CPU seconds the record path may spend on one record (analysis,
            judge, checks; waiting for an LLM is not CPU). The counts above keep every record
            known under half of the default; a record past it is a dead letter
            (``limits_exceeded``, detail ``cpu_seconds``), so no shape the counts miss can
            hold a worker (and the GIL) for long.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_record_bytes: int = Field(262_144, ge=1)
    max_question_chars: int = Field(4_000, ge=1)
    max_enriched_question_chars: int = Field(4_000, ge=1)
    max_sql_chars: int = Field(50_000, ge=1)
    max_json_depth: int = Field(32, ge=2, le=200)
    max_sql_nesting: int = Field(64, ge=1)
    max_sql_call_nesting: int = Field(MAX_CALL_NESTING, ge=1)
    max_sql_comments: int = Field(64, ge=0)
    max_sql_ctes: int = Field(64, ge=0)
    max_sql_tokens: int = Field(8_000, ge=1)
    max_digit_run: int = Field(100, ge=1, le=4_000)
    max_record_cpu_s: float = Field(1.0, gt=0)


def _lookup(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path_parts(path):
        if isinstance(part, int):
            if not isinstance(cur, list) or not -len(cur) <= part < len(cur):
                return None
        elif not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


# Epoch numbers by magnitude: seconds up to year 5138, then milli-, micro- and nanoseconds.
_EPOCH_SCALES = ((1e11, 1.0), (1e14, 1e3), (1e17, 1e6), (1e20, 1e9))


def epoch_time(value: int | float) -> str | None:
    """An epoch number (seconds, milliseconds, microseconds or nanoseconds, told apart by their
    magnitude) as ISO 8601 UTC text; None when it is none of those (negative, too large)."""
    if value < 0:
        return None
    for bound, per_second in _EPOCH_SCALES:
        if value < bound:
            when = datetime.fromtimestamp(value / per_second, tz=UTC)
            whole = value % per_second == 0
            return when.isoformat(timespec="seconds" if whole else "milliseconds")
    return None


def record_id(app: str | None, question: str, enriched: str | None, sql: str) -> str:
    """A stable id for records that carry none: a hash of (app, Qu, Qe, S)."""
    key = json.dumps([app, question, enriched, sql], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


# --------------------------------------------------------------------------------- the checks

# Zero-width characters that are not whitespace to str.isspace (all of Unicode category Cf).
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
# Linear: every alternative consumes at least one character and none overlaps another.
_DIGITS = re.compile(r"\d+")
_CTE = re.compile(r"\bAS\s*\(", re.I)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_PAREN_STEP = {"(": 1, ")": -1}


def _exceeded(name: str, value: int, limit: int) -> InvalidInput:
    return InvalidInput("limits_exceeded", f"{name}: {value} > {limit}")


def is_blank(text: str) -> bool:
    """Nothing left once whitespace, zero-width and control characters are removed."""
    # all() stops at the first visible character, so ordinary text costs one step.
    return all(
        c.isspace() or c in _ZERO_WIDTH or unicodedata.category(c) in ("Cc", "Cf") for c in text
    )


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            "not_utf8", f"{where} holds text that is not valid Unicode: {exc}"
        ) from exc


def _digit_count(value: int) -> int:
    if value.bit_length() < 14_000:  # below Python's 4300-digit int-to-text limit
        return len(str(abs(value)))
    return int(value.bit_length() * math.log10(2)) + 1  # exact or one short


def _check_tree(obj: Any, limits: Limits) -> None:
    """Every value of the record: JSON types only, bounded depth, valid Unicode in keys and
    strings, finite numbers, integers that print. Iterative, so no depth exhausts the stack (a
    dict handed in by code may even be cyclic: the depth limit ends the walk)."""
    too_big = 10**limits.max_digit_run
    stack: list[tuple[Any, int, str]] = [(obj, 1, "record")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, dict | list | tuple):
            if depth > limits.max_json_depth:
                raise _exceeded("json_depth", depth, limits.max_json_depth)
            stack.extend(_children(value, depth, where))
        else:
            _check_scalar(value, where, too_big, limits)


def _children(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int, where: str
) -> list[tuple[Any, int, str]]:
    """The items of a container, each with its depth and where it sits; keys checked."""
    if not isinstance(value, dict):
        inside = f"{where}[]"[:200]
        return [(item, depth + 1, inside) for item in value]
    items = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidInput(
                "wrong_type", f"{where} has a {type(key).__name__} key, not a string"
            )
        _check_text(key, f"a key of {where}")
        items.append((item, depth + 1, f"{where}.{key}"[:200]))
    return items


def _check_scalar(value: Any, where: str, too_big: int, limits: Limits) -> None:
    """A value that is neither text nor a container: null, a boolean or a printable number."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) >= too_big:
            raise _exceeded("digit_run", _digit_count(value), limits.max_digit_run)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput("not_json", f"{where} is {value}, not a finite number")
    else:
        raise InvalidInput("wrong_type", f"{where} is a {type(value).__name__}, not a JSON value")


def _parse_int(text: str, limits: Limits) -> int:
    digits = len(text.lstrip("-"))
    if digits > limits.max_digit_run:
        # Before int(): Python raises ValueError past 4300 digits, and converting is quadratic.
        raise _exceeded("digit_run", digits, limits.max_digit_run)
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf, which no JSON writer can write back
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse(payload: bytes | str, limits: Limits) -> Any:
    raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    if len(raw) > limits.max_record_bytes:
        raise InvalidInput(
            "too_large", f"record is {len(raw)} bytes; the limit is {limits.max_record_bytes}"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("not_utf8", f"record is not UTF-8: {exc}") from exc
    try:
        return json.loads(
            text,
            parse_int=lambda s: _parse_int(s, limits),
            parse_float=_parse_float,
            parse_constant=_reject_constant,
        )
    except InvalidInput:
        raise
    except RecursionError as exc:
        raise InvalidInput("not_json", "record is not JSON: nested too deeply to parse") from exc
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, a number out of range
        raise InvalidInput("not_json", f"record is not JSON: {exc}") from exc


def _check_limits(values: dict[str, Any], limits: Limits) -> None:
    """Cheap counts over Qu, Qe and S, each linear in the text; the first limit exceeded wins."""
    for name in _TEXTS:
        text = values.get(name)
        # A run is no longer than its text: a text within the bound needs no count.
        if text and len(text) > limits.max_digit_run:
            run = max(map(len, _DIGITS.findall(text)), default=0)
            if run > limits.max_digit_run:
                raise _exceeded("digit_run", run, limits.max_digit_run)
    # The reference SQL is parsed too (reference mode): the same bounds hold for it.
    for name in ("sql", "gold_sql"):
        if name in values:
            _check_sql_limits(values[name], limits)


def _check_sql_limits(sql: str, limits: Limits) -> None:
    comments = sql.count("/*")
    if comments > limits.max_sql_comments:
        raise _exceeded("sql_comments", comments, limits.max_sql_comments)
    # Each count below is at most a cheaper one (an opener a level, an opener a CTE, a
    # character a token): a SQL within the cheaper bound needs no exact count.
    openers = sql.count("(")
    parens = re.sub(r"[^()]+", "", sql) if openers > limits.max_sql_nesting else ""
    if parens:
        # Clamped at zero so stray closing parentheses cannot hide the openers after them.
        steps = map(_PAREN_STEP.__getitem__, parens)
        nesting = max(accumulate(steps, lambda depth, step: max(depth + step, 0)))
        if nesting > limits.max_sql_nesting:
            raise _exceeded("sql_nesting", nesting, limits.max_sql_nesting)
    calls = call_nesting(sql) if openers > limits.max_sql_call_nesting else 0
    if calls > limits.max_sql_call_nesting:
        raise _exceeded("sql_call_nesting", calls, limits.max_sql_call_nesting)
    ctes = len(_CTE.findall(sql)) if openers > limits.max_sql_ctes else 0
    if ctes > limits.max_sql_ctes:
        raise _exceeded("sql_ctes", ctes, limits.max_sql_ctes)
    tokens = len(_TOKEN.findall(sql)) if len(sql) > limits.max_sql_tokens else 0
    if tokens > limits.max_sql_tokens:
        raise _exceeded("sql_tokens", tokens, limits.max_sql_tokens)


def _check_dialect(value: str) -> str:
    name = value.strip().lower()
    if not is_dialect(name):
        raise InvalidInput(
            "unknown_dialect",
            f"dialect {value[:60]!r} is not a sqlglot dialect; valid: {', '.join(dialect_names())}",
        )
    return name


def validate(
    payload: bytes | str | dict[str, Any],
    mapping: FieldMapping | None = None,
    limits: Limits | None = None,
) -> InputRecord:
    """Parse and check one record.

    A record this accepts can be judged within the CPU budget of :class:`Limits`, and serialized
    back to UTF-8 JSON (metadata included) without error.

    Raises:
        InvalidInput: the only exception it raises. ``reason`` is one of ``not_utf8`` (not
            UTF-8, or a lone surrogate in any string or key), ``not_json`` (including ``NaN``,
            ``Infinity`` and numbers out of range), ``not_object``, ``missing_field`` (absent, or
            nothing but whitespace, zero-width and control characters), ``wrong_type``,
            ``too_large`` (bytes or characters), ``limits_exceeded`` (the detail names the
            limit: ``json_depth``, ``digit_run``, ``sql_comments``, ``sql_nesting``,
            ``sql_ctes``, ``sql_tokens``), ``unknown_dialect``, ``unreadable`` (anything else
            that broke reading the record).
    """
    try:
        return _validate(payload, mapping or FieldMapping(), limits or Limits())
    except InvalidInput:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        # Belt and braces: a record must never crash the worker that reads it.
        raise InvalidInput(
            "unreadable", f"record could not be read: {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc


def _validate(
    payload: bytes | str | dict[str, Any], mapping: FieldMapping, limits: Limits
) -> InputRecord:
    obj = payload if isinstance(payload, dict) else _parse(payload, limits)
    if not isinstance(obj, dict):
        raise InvalidInput("not_object", f"record is a JSON {type(obj).__name__}, not an object")
    _check_tree(obj, limits)
    # The required fields first: a log in other field names is missing them, and that (with the
    # field_mapping hint) is what to say, not a type error of an optional field such as a
    # nested `agent` object.
    _check_required(obj, mapping)
    values = _fields(obj, mapping)
    _check_lengths(values, limits)
    for name in _STRINGS:
        if name in values and name not in REQUIRED and is_blank(values[name]):
            del values[name]
    _check_limits(values, limits)
    if "dialect" in values:
        values["dialect"] = _check_dialect(values["dialect"])
    if "id" not in values:
        values["id"] = record_id(
            values.get("app"), values["question"], values.get("enriched_question"), values["sql"]
        )
    return InputRecord(**values)


def _check_required(obj: dict[str, Any], mapping: FieldMapping) -> None:
    values = {name: _lookup(obj, mapping.source_of(name)) for name in REQUIRED}
    missing = [name for name, value in values.items() if value is None]
    if not missing:
        for name, value in values.items():
            if isinstance(value, str) and is_blank(value):
                raise InvalidInput(
                    "missing_field",
                    f"required field {name!r} (from {mapping.source_of(name)!r}) is empty "
                    "(nothing but whitespace, zero-width or control characters)",
                )
        return
    names = " and ".join(repr(n) for n in missing)
    sources = ", ".join(repr(mapping.source_of(n)) for n in missing)
    one = len(missing) == 1
    unmapped = all(mapping.source_of(n) == n for n in missing)
    hint = (
        "; if the log names it otherwise, map it with field_mapping (docs/input-record.md)"
        if unmapped
        else "; is field_mapping right for this log? (docs/input-record.md)"
    )
    if not one:
        hint = hint.replace("names it", "names them").replace("map it", "map them")
    where = "" if unmapped else f" (from {sources})"
    raise InvalidInput(
        "missing_field",
        f"required field{'' if one else 's'} {names}{where} {'is' if one else 'are'} missing{hint}",
    )


def _fields(obj: dict[str, Any], mapping: FieldMapping) -> dict[str, Any]:
    """STEF's fields, found through the mapping and type-checked (numbers as ids become text)."""
    values: dict[str, Any] = {}
    for name in FIELDS:
        value = _lookup(obj, mapping.source_of(name))
        if value is None:
            continue
        if name == "metadata":
            if not isinstance(value, dict):
                raise InvalidInput("wrong_type", "field 'metadata' must be an object")
        elif name == "timestamp" and isinstance(value, int | float) and not isinstance(value, bool):
            # Epoch numbers are times: as text they would not parse as one (the freshness gauge).
            value = epoch_time(value) or str(value)
        elif (
            name in ("id", "agent_version")
            and isinstance(value, int | float)
            and (not isinstance(value, bool))
        ):
            value = str(value)
        elif not isinstance(value, str):
            source = mapping.source_of(name)
            inside = (
                f"; map a string inside it with field_mapping ({name}: {source}.<key>)"
                if isinstance(value, dict | list)
                else ""
            )
            raise InvalidInput(
                "wrong_type",
                f"field {name!r} (from {source!r}) must be a string, "
                f"not {type(value).__name__}{inside}",
            )
        values[name] = value
    return values


def _check_lengths(values: dict[str, Any], limits: Limits) -> None:
    for name, limit in (
        ("question", limits.max_question_chars),
        ("enriched_question", limits.max_enriched_question_chars),
        ("sql", limits.max_sql_chars),
        ("gold_sql", limits.max_sql_chars),
    ):
        size = len(values.get(name) or "")
        if size > limit:
            raise InvalidInput("too_large", f"{name} is {size} characters; the limit is {limit}")
