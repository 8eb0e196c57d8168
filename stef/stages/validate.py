"""First stage: raw bytes of one logged request -> a valid :class:`InputRecord`, or InvalidInput.

Agent logs rarely use STEF's field names, so a :class:`FieldMapping` maps them (``user_query`` ->
``question``, ``payload.sql`` -> ``sql``: dotted paths reach into nested objects).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stef.errors import InvalidInput
from stef.models import InputRecord

FIELDS = (
    "id",
    "question",
    "sql",
    "enriched_question",
    "app",
    "agent",
    "agent_version",
    "dialect",
    "timestamp",
    "metadata",
)
REQUIRED = ("question", "sql")
_STRINGS = tuple(f for f in FIELDS if f != "metadata")


class FieldMapping(BaseModel):
    """STEF field name -> the field's path in the agent's log record (dotted for nesting)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fields: dict[str, str] = Field(default_factory=dict)

    def source_of(self, name: str) -> str:
        return self.fields.get(name, name)


class Limits(BaseModel):
    """Size limits beyond which a record is invalid input rather than a slow judge call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_record_bytes: int = Field(262_144, ge=1)
    max_question_chars: int = Field(4_000, ge=1)
    max_sql_chars: int = Field(50_000, ge=1)


def _lookup(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def record_id(app: str | None, question: str, enriched: str | None, sql: str) -> str:
    """A stable id for records that carry none: a hash of (app, Qu, Qe, S)."""
    key = json.dumps([app, question, enriched, sql], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def validate(
    payload: bytes | str | dict[str, Any],
    mapping: FieldMapping | None = None,
    limits: Limits | None = None,
) -> InputRecord:
    """Parse and check one record.

    Raises:
        InvalidInput: not UTF-8 JSON, not an object, a required field missing or empty, a field of
            the wrong type, or a size limit exceeded. ``reason`` is one of ``not_utf8``,
            ``not_json``, ``not_object``, ``missing_field``, ``wrong_type``, ``too_large``.
    """
    mapping = mapping or FieldMapping()
    limits = limits or Limits()
    if isinstance(payload, dict):
        obj: Any = payload
    else:
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
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InvalidInput("not_json", f"record is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InvalidInput("not_object", f"record is a JSON {type(obj).__name__}, not an object")

    values: dict[str, Any] = {}
    for name in FIELDS:
        value = _lookup(obj, mapping.source_of(name))
        if value is None:
            continue
        if name == "metadata":
            if not isinstance(value, dict):
                raise InvalidInput("wrong_type", "field 'metadata' must be an object")
        elif (
            name in ("id", "agent_version", "timestamp")
            and isinstance(value, int | float)
            and (not isinstance(value, bool))
        ):
            value = str(value)
        elif not isinstance(value, str):
            raise InvalidInput(
                "wrong_type",
                f"field {name!r} (from {mapping.source_of(name)!r}) must be a string, "
                f"not {type(value).__name__}",
            )
        values[name] = value
    for name, value in values.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidInput(
                    "not_utf8", f"field {name!r} holds text that is not valid Unicode: {exc}"
                ) from exc
    for name in REQUIRED:
        if not str(values.get(name) or "").strip():
            raise InvalidInput(
                "missing_field",
                f"required field {name!r} (from {mapping.source_of(name)!r}) is missing or empty",
            )
    if (
        len(values["question"]) > limits.max_question_chars
        or len(values.get("enriched_question") or "") > limits.max_question_chars
    ):
        raise InvalidInput(
            "too_large", f"question is longer than {limits.max_question_chars} characters"
        )
    if len(values["sql"]) > limits.max_sql_chars:
        raise InvalidInput(
            "too_large",
            f"sql is {len(values['sql'])} characters; the limit is {limits.max_sql_chars}",
        )
    for name in _STRINGS:
        if name in values and not values[name].strip() and name not in REQUIRED:
            del values[name]
    if "id" not in values:
        values["id"] = record_id(
            values.get("app"), values["question"], values.get("enriched_question"), values["sql"]
        )
    return InputRecord(**values)
