"""What a judge is asked about one record and what it answers: the request and reply models of
the judge seam (:mod:`stef.judges.base`), on the floor of the rules they carry, so the stages
that check a judge's answer (:mod:`stef.stages.verify`) read them without importing a judge.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from stef.models import InputRecord, JudgeOutput, SqlSpec, Usage
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
