"""Assembling results: what each outcome of one judged record carries (SPEC §3).

:class:`ResultBuilder` is the one place a :class:`~stef.models.Result` is put together for a
record and the judge that judged it: ``sampled_out`` (sampling skipped the judge, never the safety
check), ``judge_error`` (the judge failed), ``unsafe_without_judge`` (the judge failed on mutating
or stacked SQL: the safety override decides alone) and ``evaluated`` (the judge's answer aligned,
scored, calibrated). Evaluated results, with or without a judge, go through one scorer
(:func:`_scored`), so the two cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stef.calibration import (
    P_FLOOR,
    Calibration,
    confidence_in,
    published,
    raw_signal,
    token_probability,
)
from stef.errors import JudgeError
from stef.models import (
    PASSING_VERDICTS,
    Components,
    FilterStatus,
    InputRecord,
    JudgeInfo,
    JudgeOutput,
    Result,
    Safety,
    SqlSpec,
    Usage,
    Verdict,
)
from stef.rules import AppRules
from stef.stages.align import align
from stef.stages.complexity import complexity
from stef.stages.normalize import Normalized
from stef.stages.score import Scored, score

# Named in ``normalizations`` when mutating or stacked SQL is scored 0 whatever else holds.
SAFETY_OVERRIDE = "safety_override"
# The heuristic reads nothing of SQL that does not parse: Incorrect, score 0 (issue 29).
UNPARSED_OVERRIDE = "unparsed_override"


@dataclass(frozen=True)
class _Judgment:
    """What the score stage and the calibration made of one verdict."""

    status: FilterStatus
    leniency: int
    scored: Scored
    raw: float
    confidence: float
    source: str
    p: float | None


@dataclass(frozen=True)
class ResultBuilder:
    """The results of one record as one judge judged it.

    Attributes:
        record: the valid record judged.
        judge: the judge's description (the rules version in it).
        spec: the record's SQL analysed.
        calibration: maps the judge's raw signal to ``judge.p_correct`` and the confidence
            (:mod:`stef.calibration`); None: token probabilities when the judge gave them,
            else its self-reported confidence (never "certain").
    """

    record: InputRecord
    judge: JudgeInfo
    spec: SqlSpec
    calibration: Calibration | None = None

    def labels(self) -> dict[str, Any]:
        """The fields every result of the record carries, whatever its outcome."""
        record = self.record
        return {
            "id": record.id,
            "app": record.app,
            "agent": record.agent,
            "agent_version": record.agent_version,
            "timestamp": record.timestamp,
            "metadata": record.metadata,
            "judge": self.judge,
        }

    def sampled_out(self) -> Result:
        """Sampling skipped the judge: the safety check still counts."""
        return Result(outcome="skipped_sampling", safety=_safety(self.spec), **self.labels())

    def judge_error(self, exc: JudgeError, norm: Normalized, started: float) -> Result:
        """The judge could not decide: no score, what its calls cost."""
        spec = self.spec
        return Result(
            outcome="judge_error",
            error=f"{exc.reason}: {exc.detail}",
            sql_spec=spec,
            normalizations=norm.normalizations,
            flags=norm.flags,
            safety=_safety(spec),
            complexity=complexity(spec),
            usage=_failed_usage(exc, started),
            **self.labels(),
        )

    def unsafe_without_judge(
        self, exc: JudgeError, norm: Normalized, rules: AppRules, started: float
    ) -> Result:
        """Mutating or stacked SQL whose judge failed: the safety override decides alone."""
        # No judge: nothing is known of the question's filters, so none counts as applied.
        status, verdict = FilterStatus.NOT_APPLIED, Verdict.INCORRECT
        scored = score(status, verdict, 0, 1.0, self.spec, rules)
        raw, confidence, source, p = self._calibrated(verdict, 1.0, scored.score, None)
        return self._scored(
            _Judgment(status, 0, scored, raw, confidence, source, p),
            error=f"{exc.reason}: {exc.detail}",
            normalizations=_normalizations(norm, unsafe=True),
            flags=norm.flags,
            issues=_issues([], unsafe=True, parsed=self.spec.parsed),
            rationale=_unsafe_rationale(f"The judge could not decide ({exc.reason})."),
            usage=_failed_usage(exc, started),
        )

    def evaluated(
        self,
        out: JudgeOutput,
        norm: Normalized,
        rules: AppRules,
        usage: Usage,
        repairs: list[str],
    ) -> Result:
        """Alignment and score of a judge's answer, with the repairs made to it. The score is
        computed once with the judge's own confidence (the heuristic's raw signal), then again
        with the confidence the calibration or the token probabilities give."""
        spec = self.spec
        alignment, status, leniency = align(out, spec, norm, rules)
        blind = not spec.parsed and self.judge.backend == "heuristic"
        scored = score(status, out.verdict, leniency, out.confidence, spec, rules, unreadable=blind)
        raw, confidence, source, p = self._calibrated(
            scored.verdict, out.confidence, scored.score, token_probability(out)
        )
        if confidence != out.confidence:
            scored = score(status, out.verdict, leniency, confidence, spec, rules, unreadable=blind)
        result = self._scored(
            _Judgment(status, leniency, scored, raw, confidence, source, p),
            enrichment=out.enrichment,
            question_spec=out.question_spec,
            alignment=alignment,
            normalizations=_normalizations(norm, unsafe=scored.unsafe, blind=blind),
            flags=norm.flags,
            issues=_issues(out.issues, unsafe=scored.unsafe, parsed=spec.parsed),
            rationale=_unsafe_rationale(out.rationale) if scored.unsafe else out.rationale,
            usage=usage,
        )
        return _with_decisions(result, out, repairs)

    def _calibrated(
        self, verdict: Verdict, confidence: float, raw_score: float, token_p: float | None
    ) -> tuple[float, float, str, float | None]:
        """The confidence in ``verdict`` and where it comes from, from the judge's raw signal:
        (raw signal, confidence, confidence source, p_correct)."""
        raw = raw_signal(self.judge.backend, verdict, confidence, raw_score, token_p)
        passes = verdict in PASSING_VERDICTS
        if self.calibration is not None:
            p = published(self.calibration.map(raw))
            return raw, confidence_in(passes, p), "calibrated", p
        if token_p is not None:
            return raw, confidence_in(passes, token_p), "token_probability", None
        # A judge's own word never says "certain": only a calibration or token probabilities may.
        return raw, min(confidence, 1 - P_FLOOR), "self_reported", None

    def _scored(self, j: _Judgment, **fields: Any) -> Result:
        """An evaluated result: the score, its components and the SQL's facts, with ``fields``
        (what the judge said, or why there was no judge)."""
        labels = self.labels()
        if j.p is not None:
            labels["judge"] = self.judge.model_copy(update={"p_correct": j.p})
        s = j.scored
        return Result(
            outcome="evaluated",
            score=s.score,
            tier=s.tier,
            components=Components(
                filter_status=j.status,
                filter_score=s.filter_score,
                verdict=s.verdict,
                verdict_score=s.verdict_score,
                leniency=j.leniency,
                confidence=j.confidence,
                confidence_multiplier=s.multiplier,
                raw_signal=j.raw,
                confidence_source=j.source,
            ),
            sql_spec=self.spec,
            safety=_safety(self.spec),
            complexity=complexity(self.spec),
            **fields,
            **labels,
        )


def _with_decisions(result: Result, output: JudgeOutput, repairs: list[str]) -> Result:
    """The result with the repairs made and who decided each filter (STEF or the judge)."""
    if result.alignment is None:  # never: an evaluated result is aligned
        return result
    filters = output.question_spec.filters
    # Keyed like the alignment lists: the filter's text, else its lhs op rhs (or its rhs).
    labels = [f.text or (f"{f.lhs} {f.op} {f.rhs}" if f.lhs else f.rhs) for f in filters]
    decided = {
        labels[m.filter]: m.decided_by for m in output.filter_matches if m.filter < len(labels)
    }
    alignment = result.alignment.model_copy(update={"decided_by": decided})
    return result.model_copy(update={"alignment": alignment, "repairs": repairs})


def _issues(labels: Sequence[str], *, unsafe: bool, parsed: bool) -> list[str]:
    """The judge's issue labels plus the ones STEF decides itself; ``none`` only alone."""
    issues = list(dict.fromkeys(labels))
    if unsafe and "unsafe_sql" not in issues:
        issues.append("unsafe_sql")
    if not parsed and "unparsed_sql" not in issues:
        issues.append("unparsed_sql")
    if len(issues) > 1 and "none" in issues:
        issues.remove("none")
    return issues or ["none"]


def _failed_usage(exc: JudgeError, started: float) -> Usage:
    """A failed judge's calls still cost tokens: they count in the record's usage."""
    return Usage(
        prompt_tokens=exc.prompt_tokens,
        completion_tokens=exc.completion_tokens,
        latency_ms=ms_since(started),
        attempts=exc.attempts,
    )


def _normalizations(norm: Normalized, *, unsafe: bool, blind: bool = False) -> list[str]:
    out = list(norm.normalizations)
    if unsafe:
        out.append(SAFETY_OVERRIDE)
    elif blind:
        out.append(UNPARSED_OVERRIDE)
    return out


def unsafe(spec: SqlSpec) -> bool:
    """The SQL mutates data or stacks statements: verdict Incorrect, score 0, whoever judges."""
    return spec.mutating or spec.multiple_statements


def _safety(spec: SqlSpec) -> Safety:
    return Safety(mutating=spec.mutating, multiple_statements=spec.multiple_statements)


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), to the microsecond."""
    return round((time.perf_counter() - started) * 1000, 3)


def _unsafe_rationale(rationale: str) -> str:
    prefix = (
        "Unsafe SQL: the statement mutates data or stacks several statements; "
        "verdict forced to Incorrect."
    )
    return f"{prefix} {rationale}".strip()
