"""Record -> result: the stages chained as plain typed calls (SPEC §2)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from stef.errors import JudgeError
from stef.judges.base import Judge, JudgeRequest
from stef.models import (
    Components,
    InputRecord,
    JudgeInfo,
    Result,
    Safety,
    Usage,
)
from stef.rules import RuleSet
from stef.stages.align import align
from stef.stages.complexity import complexity
from stef.stages.normalize import normalize
from stef.stages.score import score
from stef.stages.sqlspec import sqlspec


def sampled_in(record_id: str, rate: float) -> bool:
    """Deterministic sampling on the record id, so every replica takes the same decision."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = int.from_bytes(hashlib.sha256(record_id.encode()).digest()[:8], "big")
    return h / 2**64 < rate


class Pipeline:
    """The judge of one record. Thread-safe; the rules can be swapped while it runs.

    Args:
        rules: the rules in force, or a callable returning them (hot reload).
        backend: the judge backend (LLM or heuristic).
    """

    def __init__(self, rules: RuleSet | Callable[[], RuleSet], backend: Judge) -> None:
        self._rules = rules if callable(rules) else (lambda: rules)
        self.backend = backend

    @property
    def rules(self) -> RuleSet:
        return self._rules()

    def judge_record(self, record: InputRecord) -> Result:
        """Judge one valid record. Judge failures become outcome ``judge_error``, never a score."""
        started = time.perf_counter()
        ruleset = self.rules
        rules = ruleset.for_app(record.app)
        info = self.backend.info.model_copy(update={"rules_version": ruleset.version})
        base = {
            "id": record.id,
            "app": record.app,
            "agent": record.agent,
            "agent_version": record.agent_version,
            "timestamp": record.timestamp,
            "metadata": record.metadata,
            "judge": info,
        }
        if not sampled_in(record.id, rules.sampling_rate):
            return Result(outcome="skipped_sampling", **base)

        spec = sqlspec(record.sql, record.dialect or rules.dialect)
        norm = normalize(record, spec, rules)
        request = JudgeRequest(
            record=record,
            sql_spec=spec,
            normalizations=norm.normalizations,
            notes=norm.notes,
            flags=norm.flags,
            rules=rules,
        )
        safety = Safety(mutating=spec.mutating, multiple_statements=spec.multiple_statements)
        try:
            reply = self.backend.judge(request)
        except JudgeError as exc:
            return Result(
                outcome="judge_error",
                error=f"{exc.reason}: {exc.detail}",
                sql_spec=spec,
                normalizations=norm.normalizations,
                flags=norm.flags,
                safety=safety,
                complexity=complexity(spec),
                usage=Usage(
                    latency_ms=round((time.perf_counter() - started) * 1000, 3),
                    attempts=exc.attempts,
                ),
                **base,
            )
        out = reply.output
        alignment, status, leniency = align(out, spec, norm, rules)
        scored = score(status, out.verdict, leniency, out.confidence, spec, rules)
        issues = list(dict.fromkeys(out.issues))
        if scored.unsafe and "unsafe_sql" not in issues:
            issues.append("unsafe_sql")
        if not spec.parsed and "unparsed_sql" not in issues:
            issues.append("unparsed_sql")
        if len(issues) > 1 and "none" in issues:
            issues.remove("none")
        if not issues:
            issues = ["none"]
        usage = reply.usage
        if not usage.latency_ms:
            usage = usage.model_copy(
                update={"latency_ms": round((time.perf_counter() - started) * 1000, 3)}
            )
        return Result(
            outcome="evaluated",
            score=scored.score,
            tier=scored.tier,
            components=Components(
                filter_status=status,
                filter_score=scored.filter_score,
                verdict=scored.verdict,
                verdict_score=scored.verdict_score,
                leniency=leniency,
                confidence=out.confidence,
                confidence_multiplier=scored.multiplier,
            ),
            enrichment=out.enrichment,
            question_spec=out.question_spec,
            sql_spec=spec,
            alignment=alignment,
            normalizations=norm.normalizations,
            flags=norm.flags,
            issues=issues,
            safety=safety,
            complexity=complexity(spec),
            rationale=out.rationale
            if not scored.unsafe
            else _unsafe_rationale(spec, out.rationale),
            usage=usage,
            **base,
        )


def _unsafe_rationale(spec: object, rationale: str) -> str:
    prefix = (
        "Unsafe SQL: the statement mutates data or stacks several statements; "
        "verdict forced to Incorrect."
    )
    return f"{prefix} {rationale}".strip()


def make_info(backend: str, model: str | None, prompt_version: str | None) -> JudgeInfo:
    return JudgeInfo(backend=backend, model=model, prompt_version=prompt_version)
