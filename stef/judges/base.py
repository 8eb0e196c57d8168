"""The judge seam: what every backend (LLM or heuristic) receives and must return (SPEC §2)."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from stef.models import InputRecord, JudgeInfo, JudgeOutput, SqlSpec, Usage
from stef.rules import AppRules


class JudgeRequest(BaseModel):
    """Everything a judge may look at for one record.

    Attributes:
        record: the validated input record (Qu, Qe, S and labels).
        sql_spec: the deterministic SQL spec with numbered predicates.
        normalizations: production rules that already fired (SPEC §2), by name.
        notes: one human-readable sentence per fired rule or flag, for the prompt.
        flags: conditions worth a look (``limit_below_min``, ``unparsed_sql`` ...).
        rules: the app rules in force for this record.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    record: InputRecord
    sql_spec: SqlSpec
    normalizations: list[str]
    notes: list[str]
    flags: list[str]
    rules: AppRules


class JudgeReply(BaseModel):
    """A backend's answer plus what it cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output: JudgeOutput
    usage: Usage


class Judge(Protocol):
    """A judge backend. Thread-safe: the service calls it from several workers at once."""

    @property
    def info(self) -> JudgeInfo:
        """Backend name, model and prompt version for every result (rules_version comes later)."""
        ...

    def judge(self, request: JudgeRequest) -> JudgeReply:
        """Judge one record.

        Raises:
            JudgeError: the backend could not decide; the record's outcome becomes ``judge_error``.
        """
        ...

    def close(self) -> None:
        """Release what the backend holds (HTTP connections, a cache file); idempotent."""
        ...


def judge(backend: Judge, request: JudgeRequest) -> JudgeReply:
    """Run one backend on one request (the stage function; kept for symmetry with other stages)."""
    return backend.judge(request)
