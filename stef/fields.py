"""The record's fields (SPEC §1) and where an agent's log keeps them (ground floor).

Agent logs rarely use STEF's field names, so a :class:`FieldMapping` maps them (``user_query`` ->
``question``, ``payload.sql`` -> ``sql``): dotted paths reach into nested objects, ``[N]`` into
lists. The validate stage reads a log record through it, the OTLP reader lays span attributes out
along it, the settings check it at start.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    "gold_sql",
)
# The fields a record cannot do without (input-record.md): every other is optional.
REQUIRED = ("question", "sql")


class FieldMapping(BaseModel):
    """STEF field name -> the field's path in the agent's log record: dotted for nesting, with
    list indexes in brackets (``request.messages[0].content``, ``turns[-1].sql``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fields: dict[str, str] = Field(default_factory=dict)

    @field_validator("fields")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value.values():
            path_parts(path)  # a path that cannot be read is a settings error, not silence
        return value

    def source_of(self, name: str) -> str:
        return self.fields.get(name, name)


# A field path: keys joined by dots, each optionally followed by bracketed list indexes.
_PATH = re.compile(r"[^.\[\]]+(?:\[-?\d{1,6}\])*(?:\.[^.\[\]]+(?:\[-?\d{1,6}\])*)*")
_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


@lru_cache(maxsize=256)
def path_parts(path: str) -> tuple[str | int, ...]:
    """The steps of a field path: keys (text) and list indexes (integers).

    Raises:
        ValueError: the path is not keys joined by dots with optional ``[N]`` list indexes.
    """
    if _PATH.fullmatch(path) is None:
        raise ValueError(
            f"field path {path[:80]!r} is not keys joined by dots with optional [N] list "
            "indexes (as in request.messages[0].content)"
        )
    return tuple(m[1] if m[1] is not None else int(m[2]) for m in _PATH_STEP.finditer(path))
