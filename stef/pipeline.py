"""The one record path: raw bytes and their position -> a result or a dead letter (SPEC §2, §3).

Every command goes through :meth:`Pipeline.process`: ``stef run`` for each record of its source,
``stef replay`` (the service on a file), ``stef judge`` for its one record and ``stef calibrate``
for each labelled line. It decodes and validates, samples, judges (the stages chained as plain
typed calls in :meth:`Pipeline.judge_record`) and serializes, inside one guard: whatever a record
makes a stage raise becomes a dead letter with reason ``internal_error``, never a dead thread.
What each outcome's result carries is assembled in :mod:`stef.stages.result`; how records are
read, judged and written, beside the rules and the backend, is :class:`PipelineOptions`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from stef.calibration import Calibration
from stef.errors import CpuBudgetSpent, InvalidInput, JudgeError
from stef.io import Oversized
from stef.io.database import Database
from stef.io.deadletter import DEFAULT_MAX_BYTES, dead_letter, message_key
from stef.judges.base import Judge, JudgeRequest
from stef.metrics import Metrics
from stef.models import (
    PASSING_VERDICTS,
    Backfill,
    InputRecord,
    JudgeOutput,
    Result,
    ResultInput,
    SecondOpinion,
    SqlSpec,
    Verdict,
)
from stef.rules import AppRules, RuleSet
from stef.sql.budget import CpuDeadline
from stef.sql.extract import extract_sql
from stef.sql.safety import is_sql_text
from stef.stages.normalize import Normalized, normalize
from stef.stages.reference import with_reference
from stef.stages.reference_generated import DEFAULT_GENERATED, Generated
from stef.stages.result import ResultBuilder, ms_since, unsafe
from stef.stages.sqlspec import sqlspec
from stef.stages.validate import FieldMapping, Limits, validate
from stef.stages.verify import repair_kind, verify

log = structlog.get_logger(__name__)

# Named when the "SQL" is not SQL at all (no statement keyword): verdict Incorrect.
NOT_SQL_OVERRIDE = "not_sql_override"
# Named when the SQL was taken out of a markdown fence or a "SQL:" label around it.
SQL_EXTRACTED = "sql_extracted"

# The short message of an unexpected exception kept in its dead letter and log line.
_MAX_INTERNAL_MESSAGE = 300


@dataclass(frozen=True)
class Processed:
    """What one record became: a result (``result`` set) or a dead letter (``reason`` set).

    Attributes:
        value: the bytes to write: the result JSON, or the dead-letter JSON.
        key: the message key: the record id for a result, the source's key for a dead letter
            (either cut to its first ``MAX_KEY_BYTES``: :func:`stef.io.deadletter.message_key`).
        result: the result, when the record was judged (any outcome, ``judge_error`` included).
        reason: the dead letter's reason (``not_json``, ``limits_exceeded``, ``internal_error``).
        error: the dead letter's human-readable error.
    """

    value: bytes
    key: bytes | None = None
    result: Result | None = None
    reason: str | None = None
    error: str | None = None

    @property
    def is_result(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class Cascade:
    """The second stage of ``llm.verdict: cascade``: the LLM, called only for records whose
    calibrated heuristic confidence is below ``below``, and for unsafe-looking SQL.

    Attributes:
        backend: the LLM judge.
        calibration: the LLM's calibration (None: its token probabilities, else its own word).
        below: the heuristic confidence under which a record goes to the LLM.
    """

    backend: Judge
    calibration: Calibration | None
    below: float

    def escalates(self, heuristic: Result, spec: SqlSpec) -> bool:
        """The heuristic's result is not sure enough, failed, or the SQL looks unsafe."""
        c = heuristic.components
        return c is None or c.confidence < self.below or unsafe(spec)


def sampled_in(record_id: str, rate: float) -> bool:
    """Deterministic sampling on the record id, so every replica takes the same decision."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = int.from_bytes(hashlib.sha256(record_id.encode()).digest()[:8], "big")
    return h / 2**64 < rate


@dataclass(frozen=True)
class PipelineOptions:
    """How the record path reads, judges and writes a record, beside its rules and backend.

    Attributes:
        mapping: where STEF's fields are in the agent's log record.
        limits: size and shape limits beyond which a record is invalid input.
        dead_letter_max_bytes: the largest dead letter written (the payload is capped to fit).
        guess_dialect: try other dialects when none is named and the generic one fails.
        second_opinion: a backend that also judges every record the backend evaluated (the
            heuristic beside the LLM); its verdict goes in ``judge.second_opinion`` and never
            changes the result. None asks no one else.
        backfill: the range of the ``stef backfill`` run, set on every result it writes;
            None for every other command.
        calibration: maps the judge's raw signal to ``judge.p_correct`` and the confidence
            Γ is taken from (:mod:`stef.calibration`); None: token probabilities when the
            judge gave them, else its self-reported confidence.
        review_below: a result whose confidence is below this gets ``needs_review``; None:
            never.
        cascade: ``llm.verdict: cascade``: the backend (the heuristic, with ``calibration``)
            judges first, and the cascade's LLM only the records it escalates. None: one
            backend judges every record.
        include_input: every result carries the record's question, enriched question and SQL
            (``input``), so a reviewer can read what was judged.
        references: reference SQL by question (:func:`stef.stages.reference.question_key`),
            from the ``references`` file; a record's own ``gold_sql`` wins.
        reference_db: where a record's SQL and its reference both run (``reference.execute``);
            None: on generated databases (``reference_generated``).
        reference_generated: the databases generated per record for both queries
            (``reference.generate``): without ``reference_db``, or where its rows told nothing;
            None compares structure only (or ``reference_db``'s rows alone).
    """

    mapping: FieldMapping = field(default_factory=FieldMapping)
    limits: Limits = field(default_factory=Limits)
    dead_letter_max_bytes: int = DEFAULT_MAX_BYTES
    guess_dialect: bool = True
    second_opinion: Judge | None = None
    backfill: Backfill | None = None
    calibration: Calibration | None = None
    review_below: float | None = None
    cascade: Cascade | None = None
    include_input: bool = True
    references: Mapping[str, str] = field(default_factory=dict)
    reference_db: Database | None = None
    reference_generated: Generated | None = DEFAULT_GENERATED


class Pipeline:
    """The judge of one record. Thread-safe; the rules can be swapped while it runs.

    Args:
        rules: the rules in force, or a callable returning them (hot reload).
        backend: the judge backend (LLM or heuristic).
        options: how records are read, judged and written; None: the defaults.
        metrics: where outcomes are counted; None counts nothing.
    """

    def __init__(
        self,
        rules: RuleSet | Callable[[], RuleSet],
        backend: Judge,
        options: PipelineOptions | None = None,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self._rules = rules if callable(rules) else (lambda: rules)
        self.backend = backend
        self.options = options or PipelineOptions()
        self.metrics = metrics

    @property
    def rules(self) -> RuleSet:
        return self._rules()

    def process(
        self,
        payload: bytes,
        position: dict[str, Any],
        key: bytes | None = None,
        *,
        oversized: Oversized | None = None,
        invalid: tuple[str, str] | None = None,
    ) -> Processed:
        """One raw record -> its result or its dead letter. Never raises (but for interrupts).

        Args:
            payload: the record's bytes as they arrived.
            position: where it came from (``{"topic", "partition", "offset"}`` or
                ``{"file", "line"}``), kept in a dead letter as ``source``.
            key: the source's message key, kept on a dead letter.
            oversized: the source kept only ``payload``, a prefix of this longer record: it is
                dead-lettered as ``too_large`` with the whole record's length and sha256.
            invalid: the source found the record unjudgeable (``(reason, error)``): it is
                dead-lettered as such (OTLP messages that do not decode, traces without SQL).
        """
        if oversized is not None:
            return self._too_large(payload, position, key, oversized)
        if invalid is not None:
            if self.metrics is not None:
                self.metrics.observe_invalid(None, invalid[0])
            return self._dead(invalid[0], invalid[1], position, payload, key)
        try:
            return self._judged(payload, position, key)
        except Exception as exc:  # the one guard of the record path: no record stops a command
            message = str(exc).replace("\n", " ")[:_MAX_INTERNAL_MESSAGE]
            log.error(
                "record_internal_error", error_type=type(exc).__name__, error=message, **position
            )
            if self.metrics is not None:
                self.metrics.observe_internal_error(self._app_of(payload))
            return self._dead(
                "internal_error", f"{type(exc).__name__}: {message}", position, payload, key
            )

    def _judged(self, payload: bytes, position: dict[str, Any], key: bytes | None) -> Processed:
        """Validate and judge one record: its result, or the dead letter of invalid input."""
        try:
            record = validate(payload, self.options.mapping, self.options.limits)
        except InvalidInput as exc:
            if self.metrics is not None:
                self.metrics.observe_invalid(self._app_of(payload), exc.reason)
            return self._dead(exc.reason, exc.detail, position, payload, key)
        try:
            result = self.judge_record(record)
        except InvalidInput as exc:  # past the CPU budget: judged, but too costly to keep
            if self.metrics is not None:
                self.metrics.observe_invalid(record.app, exc.reason)
            return self._dead(exc.reason, exc.detail, position, payload, key)
        if self.options.backfill is not None:
            result = result.model_copy(update={"backfill": self.options.backfill})
        if self.options.include_input:
            result = result.model_copy(update={"input": _input_of(record)})
        value = result.to_json().encode("utf-8")
        if self.metrics is not None:
            self.metrics.observe_result(result)
        # The id may be as long as the record allows: the key is bounded, the value has it all.
        return Processed(value=value, key=message_key(result.id.encode("utf-8")), result=result)

    def _dead(
        self,
        reason: str,
        error: str,
        position: dict[str, Any],
        payload: bytes,
        key: bytes | None,
    ) -> Processed:
        letter = dead_letter(
            reason, error, position, payload, max_bytes=self.options.dead_letter_max_bytes, key=key
        )
        return Processed(value=letter, key=message_key(key), reason=reason, error=error)

    def _too_large(
        self, prefix: bytes, position: dict[str, Any], key: bytes | None, whole: Oversized
    ) -> Processed:
        limit = whole.limit if whole.limit is not None else self.options.limits.max_record_bytes
        error = f"record is {whole.size} bytes; the limit is {limit}"
        if self.metrics is not None:
            self.metrics.observe_invalid(None, "too_large")
        letter = dead_letter(
            "too_large",
            error,
            position,
            prefix,
            max_bytes=self.options.dead_letter_max_bytes,
            whole=whole,
        )
        return Processed(value=letter, key=key, reason="too_large", error=error)

    def _app_of(self, payload: bytes) -> str | None:
        """The app a bad record names, for the metric label only (bounded by the metrics)."""
        if len(payload) > self.options.limits.max_record_bytes:
            return None
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        app = obj.get(self.options.mapping.source_of("app"))
        return app if isinstance(app, str) else None

    def judge_record(self, record: InputRecord) -> Result:
        """Judge one valid record. Judge failures become outcome ``judge_error``, never a score.

        Raises:
            InvalidInput: ``limits_exceeded`` when the record has cost more CPU than
                ``limits.max_record_cpu_s`` (checked after the analysis and after the judge,
                and in reference mode until its structural comparison is done).
        """
        started = time.perf_counter()
        cpu_started = time.thread_time()
        ruleset = self.rules
        rules = ruleset.for_app(record.app)
        info = self.backend.info.model_copy(update={"rules_version": ruleset.version})
        options = self.options
        if not sampled_in(record.id, rules.sampling_rate):
            # Sampling saves the judge, never the safety check: an unsampled DELETE still counts.
            sql = extract_sql(record.sql) or record.sql
            spec = sqlspec(sql, record.dialect or rules.dialect, guess=options.guess_dialect)
            return ResultBuilder(record, info, spec).sampled_out()
        request, norm = judge_request(record, rules, guess_dialect=options.guess_dialect)
        self._within_budget(cpu_started)
        cascade = options.cascade
        builder = ResultBuilder(record, info, request.sql_spec, options.calibration)
        result = self._judge_by(
            self.backend,
            builder,
            request,
            norm,
            started,
            cpu_started,
            count_repairs=cascade is None,
        )
        if cascade is None:
            return self._referenced(result, record, request, rules, cpu_started)
        escalate = cascade.escalates(result, request.sql_spec)
        if self.metrics is not None:
            self.metrics.observe_cascade(record.app, escalate)
        if not escalate:
            return self._referenced(result, record, request, rules, cpu_started)
        # The heuristic could not tell (or the SQL looks unsafe): the LLM decides.
        info = cascade.backend.info.model_copy(update={"rules_version": ruleset.version})
        builder = ResultBuilder(record, info, request.sql_spec, cascade.calibration)
        result = self._judge_by(
            cascade.backend, builder, request, norm, time.perf_counter(), cpu_started
        )
        return self._referenced(result, record, request, rules, cpu_started)

    def _judge_by(
        self,
        backend: Judge,
        builder: ResultBuilder,
        request: JudgeRequest,
        norm: Normalized,
        started: float,
        cpu_started: float,
        count_repairs: bool = True,
    ) -> Result:
        """One backend's judgment of the request, scored, with its calibration applied."""
        spec, rules = request.sql_spec, request.rules
        try:
            reply = backend.judge(request)
        except JudgeError as exc:
            if unsafe(spec):
                # Safety never depends on the judge: it holds when the reply fails.
                return self._reviewed(builder.unsafe_without_judge(exc, norm, rules, started))
            return builder.judge_error(exc, norm, started)
        usage = reply.usage
        if not usage.latency_ms:
            usage = usage.model_copy(update={"latency_ms": ms_since(started)})
        # The judge's claims are checked whatever the backend; repairs go with the result.
        output, verified = verify(reply.output, request)
        self._within_budget(cpu_started)
        repairs = [*output.repairs, *verified]
        if self.metrics is not None and repairs and count_repairs:
            self.metrics.observe_repairs([repair_kind(r) for r in repairs])
        if not spec.parsed and not is_sql_text(request.record.sql):
            # Prose in place of SQL (an apology, the question echoed) answers nothing.
            output = output.model_copy(update={"verdict": Verdict.INCORRECT})
            norm = replace(norm, normalizations=[*norm.normalizations, NOT_SQL_OVERRIDE])
        result = builder.evaluated(output, norm, rules, usage, repairs)
        return self._reviewed(self._with_judge_details(result, reply.output, request))

    def _referenced(
        self,
        result: Result,
        record: InputRecord,
        request: JudgeRequest,
        rules: AppRules,
        cpu_started: float,
    ) -> Result:
        """The result held against the record's reference SQL, when it has one (reference
        mode): the SQL judged (out of its fence) with the reference the judge was not shown.
        The comparison has what is left of the record's CPU budget: past it, the execution on
        generated databases stops (the structure decides) and a structural comparison not yet
        done makes the record a ``limits_exceeded`` dead letter."""
        sql = request.record.sql
        judged = record if record.sql == sql else record.model_copy(update={"sql": sql})
        try:
            referenced = with_reference(
                result,
                judged,
                rules,
                self.options.references,
                self.options.reference_db,
                self.options.reference_generated,
                CpuDeadline(cpu_started + self.options.limits.max_record_cpu_s),
            )
        except CpuBudgetSpent:
            raise self._past_budget(cpu_started) from None
        if referenced.reference is None or referenced.reference.p_correct is None:
            return referenced
        # The reference set the confidence: the review flag follows it.
        return self._reviewed(referenced.model_copy(update={"needs_review": False}))

    def _reviewed(self, result: Result) -> Result:
        """``needs_review`` when the result's confidence is below the bound."""
        c = result.components
        if (
            self.options.review_below is None
            or c is None
            or c.confidence >= self.options.review_below
        ):
            return result
        return result.model_copy(update={"needs_review": True})

    def _within_budget(self, cpu_started: float) -> None:
        if time.thread_time() - cpu_started > self.options.limits.max_record_cpu_s:
            raise self._past_budget(cpu_started)

    def _past_budget(self, cpu_started: float) -> InvalidInput:
        """The dead letter's error of a record past its CPU budget."""
        used = time.thread_time() - cpu_started
        return InvalidInput(
            "limits_exceeded",
            f"cpu_seconds: {used:.2f} > {self.options.limits.max_record_cpu_s:g} "
            "(the record path's CPU budget for one record)",
        )

    def _with_judge_details(
        self, result: Result, answer: JudgeOutput, request: JudgeRequest
    ) -> Result:
        """The result's ``judge`` with what this judgment reported: the model the endpoint
        named, the sample vote, and the second opinion."""
        update: dict[str, Any] = {
            "reported_model": answer.reported_model,
            "samples": answer.samples,
            "examples": answer.examples,
        }
        if self.options.second_opinion is not None and result.components is not None:
            update["second_opinion"] = self._second_opinion(
                self.options.second_opinion, request, result.components.verdict
            )
        judge = result.judge
        if all(getattr(judge, name) == value for name, value in update.items()):
            return result  # nothing reported (the heuristic): no copy of the whole result
        return result.model_copy(update={"judge": judge.model_copy(update=update)})

    def _second_opinion(
        self, backend: Judge, request: JudgeRequest, verdict: Verdict
    ) -> SecondOpinion | None:
        """Another backend's verdict on the same request, compared with ``verdict`` (the result's,
        after the overrides) on pass/fail. Its failure is logged and counted, and the result
        stands without it."""
        try:
            answer = backend.judge(request).output
            theirs = _overridden(answer.verdict, request)
            return SecondOpinion(
                backend=backend.info.backend,
                verdict=theirs,
                confidence=answer.confidence,
                agrees=(theirs in PASSING_VERDICTS) == (verdict in PASSING_VERDICTS),
            )
        except Exception as exc:  # a second opinion must never cost the record its result
            log.warning(
                "second_opinion_failed",
                id=request.record.id,
                error_type=type(exc).__name__,
                error=str(exc).replace("\n", " ")[:_MAX_INTERNAL_MESSAGE],
            )
            if self.metrics is not None:
                self.metrics.observe_second_opinion_error()
            return None


def judge_request(
    record: InputRecord, rules: AppRules, *, guess_dialect: bool = True
) -> tuple[JudgeRequest, Normalized]:
    """What a backend is asked about one record: its SQL analysed in the record's (or the
    app's) dialect and normalized under the app's rules; the normalization with it. SQL logged
    inside a markdown fence or after a ``SQL:`` label is taken out first (``sql_extracted``)."""
    extracted = extract_sql(record.sql)
    if extracted is not None:
        record = record.model_copy(update={"sql": extracted})
    spec = sqlspec(record.sql, record.dialect or rules.dialect, guess=guess_dialect)
    norm = normalize(record, spec, rules)
    if extracted is not None:
        norm = replace(norm, normalizations=[SQL_EXTRACTED, *norm.normalizations])
    request = JudgeRequest(
        # A reference-free judge never sees the reference: only reference mode reads it.
        record=record.model_copy(update={"gold_sql": None}) if record.gold_sql else record,
        sql_spec=spec,
        normalizations=norm.normalizations,
        notes=norm.notes,
        flags=norm.flags,
        rules=rules,
    )
    return request, norm


def _overridden(verdict: Verdict, request: JudgeRequest) -> Verdict:
    """A second opinion's verdict under the overrides the result's verdict went through: unsafe
    SQL and text that is not SQL are Incorrect whatever a judge says."""
    spec = request.sql_spec
    if unsafe(spec) or (not spec.parsed and not is_sql_text(request.record.sql)):
        return Verdict.INCORRECT
    return verdict


def _input_of(record: InputRecord) -> ResultInput:
    return ResultInput(
        question=record.question, enriched_question=record.enriched_question, sql=record.sql
    )
