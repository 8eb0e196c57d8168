"""The LLM judge backend: one structured chat completion per record (SPEC §2 "Judge").

Matches the question values that are SQL predicate literals itself (:func:`prematch`), renders the
prompt from ``templates/*.j2`` with those listed as settled, asks the endpoint through
:class:`ChatClient` with a schema whose predicate ids are the request's own, repairs what the
reply can still get inconsistent (recorded in ``JudgeOutput.repairs``), re-asks once only when no
usable verdict came back, and caches the result. The deterministic stages (SQL spec,
normalization, verify, alignment, score) stay outside. When the endpoint sends log-probabilities,
the verdict token's probability is kept (``JudgeOutput.token_probability``).

In probability mode (``llm.verdict: probability``, :mod:`stef.judges.llm.probability`) the
heuristic judge reads the record and the model answers one Yes/No token; P(Yes) decides. The
endpoint is probed once at start (:meth:`LlmJudge.preflight`) for the log-probabilities it needs.

:meth:`LlmJudge.judge` raises nothing but :class:`~stef.errors.JudgeError`: whatever the endpoint
answers becomes a reply or a reason, and a bug of ours becomes reason ``internal``, so one
record's failure is that record's ``judge_error`` result and never aborts a replay.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from stef.errors import ConfigError, JudgeError, LlmReplyError, LlmTransportError, ReplyInvalid
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import heuristic
from stef.judges.llm import examples as few_shot
from stef.judges.llm.cache import JudgeCache, cache_key
from stef.judges.llm.client import ChatClient, Completion, Messages, redact
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.examples import Example, Examples, load_examples
from stef.judges.llm.identity import ModelWatch
from stef.judges.llm.logprobs import verdict_probability, yes_probability
from stef.judges.llm.prematch import Settled, settle
from stef.judges.llm.probability import (
    MAX_TOKENS,
    SYSTEM_TEMPLATE,
    TEMPLATES,
    USER_TEMPLATE,
    probability_context,
    probability_output,
)
from stef.judges.llm.reply import StefMatch, parse_reply, reply_schema, to_output
from stef.judges.llm.samples import majority
from stef.metrics import Metrics
from stef.models import JudgeInfo, JudgeOutput, SqlSpec, Usage
from stef.prompts import Prompts

# The one-token probe of probability mode (before any record): it must come back with
# log-probabilities, or the mode cannot work on this endpoint.
_PROBE: Messages = [{"role": "user", "content": "Is 2 + 2 equal to 4? Answer Yes or No."}]

log = structlog.get_logger(__name__)

BACKEND = "llm"

# The detail of a reply that failed twice, by reason.
_FAILED = {
    "empty_reply": "the LLM sent no content",
    "invalid_json": "the LLM reply was not valid JSON",
    "invalid_reply": "the LLM reply failed validation",
    "truncated": "the LLM reply was cut off at the token limit (raise STEF_LLM_MAX_TOKENS)",
}

# The app-rule keys the model needs; tiers, thresholds and sampling never reach the prompt.
_PROMPT_RULE_KEYS = {
    "app",
    "dialect",
    "column_mappings",
    "benign_filters",
    "ignore_filters",
    "limit_min",
    "notes",
}
# Record text, keyed in the cache separately (the SQL up to layout).
_RAW_FIELDS = {"question", "enriched_question", "sql"}
_PROMPT_SPEC_KEYS = {
    "projections",
    "aggregations",
    "group_by",
    "order_by",
    "limit",
    "tables",
    "ctes",
    "statement_type",
    "parsed",
    "parse_error",
    "dialect",
    "mutating",
    "multiple_statements",
    "distinct",
    "has_join",
    "has_subquery",
    "has_window",
    "has_set_operation",
}


def prompt_context(request: JudgeRequest, settled: Settled | None = None) -> dict[str, Any]:
    """The template variables of one request: plain JSON-able data, nothing else.

    Args:
        request: the record and its analysis.
        settled: the question filters STEF matched or found contradicted itself (listed as
            settled in the prompt) and its reading's structural findings (shown as evidence).
    """
    spec: SqlSpec = request.sql_spec
    record = request.record
    stef = settled.matches if settled is not None else ()
    return {
        "stef_matched": [
            {"text": m.filter.text, "predicates": list(m.predicates)}
            for m in stef
            if m.status == "matched"
        ],
        "stef_contradicted": [
            {"text": m.filter.text, "predicates": list(m.predicates)}
            for m in stef
            if m.status == "mismatched"
        ],
        "stef_findings": [
            {"issue": f.issue, "evidence": f.evidence}
            for f in (settled.findings if settled is not None else ())
        ],
        "rules": request.rules.model_dump(mode="json", include=_PROMPT_RULE_KEYS),
        "normalizations": list(request.normalizations),
        "notes": list(request.notes),
        "flags": list(request.flags),
        "sql_spec": spec.model_dump(mode="json", include=_PROMPT_SPEC_KEYS),
        "predicates": [{"id": p.id, "clause": p.clause, "text": p.text} for p in spec.filters],
        "question": record.question,
        "enriched_question": record.enriched_question,
        "sql": record.sql,
    }


class LlmJudge:
    """The :class:`~stef.judges.base.Judge` backed by an OpenAI-compatible endpoint. Thread-safe.

    Args:
        config: endpoint and bounds.
        metrics: optional; LLM calls, tokens, cost and cache hits are observed.
        prompts_dir: template folder (default ``prompts/`` or ``$STEF_PROMPTS_DIR``).
        sleep: how to wait between retries.
        model_watch: the reported-model watch to report to; None makes this judge's own. A
            second judge of the same endpoint (the canary's) shares the first one's, so a swap
            is seen once, in the order the replies came.
        mode: ``structured`` or ``probability``; None: ``config.verdict`` (``cascade`` asks
            the model in structured mode; the cascade itself decides which records reach it).

    Raises:
        TemplateError: a template is missing or does not compile (at construction, not per record).
    """

    def __init__(
        self,
        config: LlmConfig,
        metrics: Metrics | None = None,
        *,
        prompts_dir: str | Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
        model_watch: ModelWatch | None = None,
        mode: str | None = None,
    ) -> None:
        self.config = config
        self.mode = mode or ("probability" if config.verdict == "probability" else "structured")
        if self.mode not in ("structured", "probability"):
            raise ConfigError(f"unknown LLM verdict mode {self.mode!r}")
        self._metrics = metrics
        self._schema_json = json.dumps(reply_schema(), sort_keys=True)
        self.prompts = Prompts.load(prompts_dir, extra_version=self._schema_json)
        self._examples = self._load_examples(config)
        # A judge shown examples is another judge (its calibration is its own): k and the
        # examples template are in its prompt version; without them the version is as before.
        # Which examples a record saw is in its result (judge.examples).
        version = self.prompts.version
        if self._examples is not None:
            version = self.prompts.digest(few_shot.TEMPLATE, f"few_shot={config.few_shot}")
        # The system prompt is static per mode: render both once.
        self._system = {
            "json_schema": self.prompts.render("system.j2", schema_json=""),
            "json_object": self.prompts.render("system.j2", schema_json=self._schema_json),
        }
        self._client = ChatClient(config, metrics, sleep=sleep)
        self._cache = JudgeCache(
            config.cache_size,
            config.cache_path,
            on_failure=metrics.observe_cache_failure if metrics is not None else None,
        )
        if self.mode == "probability":
            self.prompts.require(*TEMPLATES)
        self._info = JudgeInfo(
            backend=BACKEND, model=config.model, prompt_version=version, mode=self.mode
        )
        self._closed = threading.Event()
        self._watch = model_watch or ModelWatch(config.model or "", metrics)
        if metrics is not None:
            metrics.prime_model(config.model or "")
        if config.samples > 1 and config.temperature == 0:
            # Not an error: the vote still runs, but every sample is the same answer.
            log.warning(
                "llm_samples_at_temperature_zero",
                model=config.model,
                samples=config.samples,
                hint="set llm.temperature above 0, or the samples cannot disagree",
            )

    @property
    def info(self) -> JudgeInfo:
        return self._info

    def _load_examples(self, config: LlmConfig) -> Examples | None:
        """The few-shot examples, and a check that the examples template shows them.

        Raises:
            ConfigError: the examples file cannot be used.
            TemplateError: the examples template is missing or does not show them.
        """
        if config.few_shot == 0 or config.few_shot_file is None:
            if config.few_shot_file is not None:
                log.warning(
                    "llm_few_shot_off",
                    path=str(config.few_shot_file),
                    hint="llm.few_shot_file is set and llm.few_shot is 0: no example is shown",
                )
            return None
        few_shot.check_template(self.prompts)
        examples = load_examples(config.few_shot_file)
        log.info(
            "llm_few_shot_loaded",
            path=str(config.few_shot_file),
            k=config.few_shot,
            examples=len(examples),
            too_long=examples.too_long,
            dropped=examples.dropped,
            apps=examples.counts(),
        )
        left_out = (
            (
                "llm_few_shot_too_long",
                examples.too_long,
                f"an example longer than {few_shot.MAX_EXAMPLE_CHARS} characters "
                "(question, enriched question, SQL, note) is not shown",
            ),
            (
                "llm_few_shot_capped",
                examples.dropped,
                f"an app keeps {few_shot.MAX_PER_APP} examples (those the judge got wrong "
                "first, then the latest)",
            ),
        )
        for event, count, hint in left_out:
            if count:
                log.warning(event, path=str(config.few_shot_file), left_out=count, hint=hint)
        if examples.size > few_shot.MAX_FILE_BYTES // 2:
            log.warning(
                "llm_few_shot_file_large",
                path=str(config.few_shot_file),
                size=examples.size,
                limit=few_shot.MAX_FILE_BYTES,
                hint="past the limit STEF will not start; keep the examples of the last months",
            )
        if not len(examples):
            log.warning(
                "llm_few_shot_empty",
                path=str(config.few_shot_file),
                hint="no record is shown an example: the file holds no usable labelled record",
            )
        return examples

    def _shots(self, request: JudgeRequest) -> list[Example]:
        """The examples shown with this request."""
        if self._examples is None:
            return []
        return self._examples.pick(request.record, self.config.few_shot)

    @property
    def response_mode(self) -> str:
        """The structured-output mode this endpoint settled on (``auto`` before the first call)."""
        return self._client.mode

    @property
    def cache(self) -> JudgeCache:
        return self._cache

    @property
    def model_watch(self) -> ModelWatch:
        """The reported-model watch of this judge's configured model."""
        return self._watch

    def preflight(self) -> None:
        """Check, with one call of one token, that the endpoint can serve this judge's mode.

        Structured mode needs nothing checked. Probability mode needs log-probabilities: an
        endpoint that sends none, or refuses the parameters (400/422), is a configuration
        error at start, not a silent fallback. An endpoint that cannot be reached now is
        logged; each record's reply is checked again (reason ``no_logprobs``).

        Raises:
            ConfigError: probability mode, and the endpoint sent no log-probabilities.
        """
        if self.mode != "probability":
            return
        try:
            completion = self._client.complete(
                lambda _mode: _PROBE,
                text=True,
                max_tokens=1,
                top_logprobs=self.config.top_logprobs,
            )
        except LlmTransportError as exc:
            if exc.status_code in (400, 422):
                raise ConfigError(
                    "llm.verdict probability needs log-probabilities; the endpoint refused a "
                    f"one-token request for them: {exc.detail}"
                ) from exc
            log.warning("llm_preflight_skipped", model=self.config.model, reason=exc.reason)
            return
        if completion.logprobs is None or not any(t.top for t in completion.logprobs):
            raise ConfigError(
                f"llm.verdict probability needs log-probabilities, and model "
                f"{self.config.model!r} at {self.config.base_url or 'api.openai.com'} sent none "
                "for a one-token probe (logprobs: true, top_logprobs: "
                f"{self.config.top_logprobs}); use llm.verdict: structured with this endpoint"
            )

    def close(self) -> None:
        """Close the HTTP connection pool and the cache file. Idempotent; later calls of
        :meth:`judge` raise ``JudgeError("closed")``."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._client.close()
        self._cache.close()

    def __enter__(self) -> LlmJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ judge

    def messages(self, request: JudgeRequest, mode: str = "json_schema") -> Messages:
        """The system and user messages for one request."""
        shots = few_shot.render(self.prompts, self._shots(request))
        user = shots + self.prompts.render("user.j2", **prompt_context(request, settle(request)))
        return [
            {"role": "system", "content": self._system[mode]},
            {"role": "user", "content": user},
        ]

    def request_body(self, request: JudgeRequest) -> bytes:
        """The body of the structured request this judge sends for ``request`` (the first call,
        before any re-ask): what ``bench/llm.py``'s plain client sends."""
        schema = reply_schema([p.id for p in request.sql_spec.filters])
        return self._client.request_body(
            self.messages(request), schema, top_logprobs=self.config.top_logprobs
        )

    def judge(self, request: JudgeRequest) -> JudgeReply:
        """Judge one record.

        Raises:
            LlmTransportError: the endpoint kept failing past the retry budget (``timeout``,
                ``connection_error``, ``rate_limited``, ``http_<status>``, ``bad_response``).
            LlmReplyError: the model refused (``refused``), or its reply was still empty
                (``empty_reply``), cut off (``truncated``), not JSON (``invalid_json``) or not
                valid (``invalid_reply``) after one re-ask.
            JudgeError: ``closed`` after :meth:`close`; ``internal`` for any other exception,
                translated here so that nothing else leaves a backend.
        """
        if self._closed.is_set():
            raise JudgeError("closed", "the LLM judge is closed", attempts=0)
        calls: list[Completion] = []
        try:
            return self._judge(request, calls)
        except JudgeError:
            raise
        except Exception as exc:
            attempts = sum(c.attempts for c in calls)
            summary = f"{type(exc).__name__}: {redact(exc, self._client.secrets)}"
            frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "unknown"
            log.error(
                "llm_judge_internal_error",
                model=self.config.model,
                error=summary,
                where=where,
                attempts=attempts,
            )
            raise JudgeError("internal", summary, attempts=attempts) from exc

    def _judge(self, request: JudgeRequest, calls: list[Completion]) -> JudgeReply:
        if self.mode == "probability":
            return self._judge_probability(request, calls)
        started = time.perf_counter()
        settled = settle(request)
        asked = _Asked(
            request=request,
            stef=settled.matches,
            schema=reply_schema([p.id for p in request.sql_spec.filters]),
        )
        shots = self._shots(request)
        context = prompt_context(request, settled)
        # A disabled cache misses anyway (still counted): the key's hashing would be wasted.
        key = self._key(request, context, shots) if self._cache.enabled else ""
        cached = self._cached(key)
        if cached is not None:
            return JudgeReply(output=cached, usage=Usage(cache_hit=True, latency_ms=_ms(started)))
        user = few_shot.render(self.prompts, shots) + self.prompts.render("user.j2", **context)
        output, unanswered = self._vote(user, asked, calls)
        if shots:
            output = output.model_copy(update={"examples": [e.id for e in shots]})
        # The vote is cached, never one sample: a hit serves the whole vote it stands for.
        self._cache.put(key, output)
        return JudgeReply(output=output, usage=self._usage(calls, started, unanswered))

    def probability_messages(self, request: JudgeRequest) -> Messages:
        """The system and user messages of one request in probability mode."""
        return self._probability_prompt(request)[2]

    def _probability_prompt(
        self, request: JudgeRequest
    ) -> tuple[JudgeOutput, dict[str, Any], Messages, list[Example]]:
        """STEF's deterministic reading of a request, the prompt's variables, its messages, and
        the examples shown."""
        reading = heuristic(request)
        context = probability_context(request, reading)
        shots = self._shots(request)
        system = self.prompts.render(SYSTEM_TEMPLATE)
        messages: Messages = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": few_shot.render(self.prompts, shots)
                + self.prompts.render(USER_TEMPLATE, **context),
            },
        ]
        return reading, context, messages, shots

    def _judge_probability(self, request: JudgeRequest, calls: list[Completion]) -> JudgeReply:
        """One record in probability mode: STEF's reading, one Yes/No token, P(Yes).

        Raises:
            LlmReplyError: the reply carried no log-probabilities (``no_logprobs``), or
                neither Yes nor No was among the first tokens' alternatives (``no_yes_no``).
        """
        started = time.perf_counter()
        reading, context, messages, shots = self._probability_prompt(request)
        analysis = {k: v for k, v in context.items() if k not in _RAW_FIELDS}
        if shots:
            analysis["examples"] = few_shot.keyed(shots)
        key = cache_key(
            request,
            prompt_version=f"{self._info.prompt_version}/probability",
            model=self.config.model or "",
            analysis=analysis,
            samples=1,
        )
        cached = self._cached(key)
        if cached is not None:
            return JudgeReply(output=cached, usage=Usage(cache_hit=True, latency_ms=_ms(started)))
        try:
            completion = self._client.complete(
                lambda _mode: messages,
                text=True,
                max_tokens=MAX_TOKENS,
                top_logprobs=self.config.top_logprobs,
            )
        except JudgeError as exc:
            exc.attempts += sum(c.attempts for c in calls)
            raise
        calls.append(completion)
        self._watch.observe(completion.reported_model)
        p = yes_probability(completion.logprobs)
        if p is None:
            reason, said = (
                ("no_logprobs", "the endpoint sent no log-probabilities (llm.verdict probability)")
                if completion.logprobs is None
                else ("no_yes_no", "neither Yes nor No among the first tokens' alternatives")
            )
            raise LlmReplyError(
                reason,
                said,
                attempts=sum(c.attempts for c in calls),
                raw=redact(completion.text or "", self._client.secrets, limit=None),
                prompt_tokens=sum(c.prompt_tokens for c in calls),
                completion_tokens=sum(c.completion_tokens for c in calls),
            )
        output = probability_output(reading, p).model_copy(
            update={
                "reported_model": completion.reported_model,
                "examples": [e.id for e in shots] or None,
            }
        )
        self._cache.put(key, output)
        return JudgeReply(output=output, usage=self._usage(calls, started))

    def _vote(self, user: str, asked: _Asked, calls: list[Completion]) -> tuple[JudgeOutput, int]:
        """Ask ``llm.samples`` times, one after the other; the majority of the answered decides.

        Returns:
            The output (with the vote when more than one sample was asked) and the HTTP attempts
            of failed samples that ``calls`` does not hold (the calls that raised).

        Raises:
            JudgeError: no sample answered; the last failure, with every sample's attempts and
                tokens when more than one was asked.
        """
        n = self.config.samples
        outputs: list[JudgeOutput] = []
        failures: list[JudgeError] = []
        unanswered = 0
        for _ in range(n):
            mine: list[Completion] = []
            try:
                output = self._ask(user, asked, mine)
                reported = mine[-1].reported_model if mine else None
                outputs.append(output.model_copy(update={"reported_model": reported}))
            except JudgeError as exc:
                failures.append(exc)
                unanswered += max(0, exc.attempts - sum(c.attempts for c in mine))
            finally:
                calls.extend(mine)
        if self._metrics is not None:
            self._metrics.observe_samples(self.config.model or "", len(outputs), len(failures))
        if not outputs:
            raise self._none_answered(failures, calls, unanswered)
        if failures:
            log.info(
                "llm_samples_failed",
                model=self.config.model,
                failed=len(failures),
                samples=n,
                reasons=sorted({f.reason for f in failures}),
            )
        return (outputs[0] if n == 1 else majority(outputs, n)), unanswered

    @staticmethod
    def _none_answered(
        failures: list[JudgeError], calls: list[Completion], unanswered: int
    ) -> JudgeError:
        """The error of a judgment whose samples all failed: the last one, costed in full."""
        last = failures[-1]
        if len(failures) > 1:
            last.attempts = sum(c.attempts for c in calls) + unanswered
            last.prompt_tokens = sum(c.prompt_tokens for c in calls)
            last.completion_tokens = sum(c.completion_tokens for c in calls)
        return last

    def _key(
        self, request: JudgeRequest, context: dict[str, Any], shots: Sequence[Example] = ()
    ) -> str:
        """The cache key: the request and the analysis shown to the model, not its raw text,
        and the examples shown (none: the key is as without few-shot)."""
        analysis = {k: v for k, v in context.items() if k not in _RAW_FIELDS}
        if shots:
            analysis["examples"] = few_shot.keyed(shots)
        return cache_key(
            request,
            prompt_version=self._info.prompt_version or "",
            model=self.config.model or "",
            analysis=analysis,
            samples=self.config.samples,
        )

    def _cached(self, key: str) -> JudgeOutput | None:
        """The cached output, the lookup counted as a hit or a miss."""
        cached = self._cache.get(key)
        if self._metrics is not None:
            self._metrics.observe_cache(cached is not None)
        return cached

    def _conversation(self, user: str, extra: Messages) -> Callable[[str], Messages]:
        """The messages for a response_format mode: the system prompt depends on the mode."""

        def messages(mode: str) -> Messages:
            system = {"role": "system", "content": self._system[mode]}
            return [system, {"role": "user", "content": user}, *extra]

        return messages

    def _ask(self, user: str, asked: _Asked, calls: list[Completion]) -> JudgeOutput:
        """The validated output of the model, re-asking once if the first reply is unusable."""
        first = self._call(self._conversation(user, []), asked, calls)
        try:
            return self._validated(first, asked, calls)
        except ReplyInvalid as exc:
            # The re-ask runs inside the handler: its errors chain to the first reply's problem.
            return self._reask(user, first, exc, asked, calls)

    def _reask(
        self,
        user: str,
        first: Completion,
        invalid: ReplyInvalid,
        asked: _Asked,
        calls: list[Completion],
    ) -> JudgeOutput:
        """The second and last try: the first reply and what is wrong with it go back.

        Raises:
            LlmReplyError: the second reply is unusable too.
        """
        model = self.config.model or ""
        log.info(
            "llm_reply_invalid",
            model=model,
            reason=invalid.reason,
            errors=invalid.errors[:5],
            reask=True,
        )
        reask = self.prompts.render("reask.j2", errors=invalid.errors)
        extra: Messages = [
            {"role": "assistant", "content": first.text or ""},
            {"role": "user", "content": reask},
        ]
        second = self._call(self._conversation(user, extra), asked, calls)
        try:
            return self._validated(second, asked, calls, final=True)
        except ReplyInvalid as exc:
            log.warning(
                "llm_reply_invalid",
                model=model,
                reason=exc.reason,
                errors=exc.errors[:5],
                reask=False,
            )
            raise self._failed(exc, second, calls) from exc

    def _failed(
        self, invalid: ReplyInvalid, last: Completion, calls: list[Completion]
    ) -> LlmReplyError:
        """The error of a reply still unusable after the re-ask; endpoint text redacted."""
        secrets = self._client.secrets
        return LlmReplyError(
            invalid.reason,
            f"{_FAILED.get(invalid.reason, 'the LLM reply was unusable')}, after one re-ask: "
            + redact("; ".join(invalid.errors[:5]), secrets),
            attempts=sum(c.attempts for c in calls),
            raw=redact(last.text or "", secrets, limit=None),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
        )

    def _usage(self, calls: list[Completion], started: float, unanswered: int = 0) -> Usage:
        """What the calls of one judged record cost, in tokens, money, time and attempts (every
        sample's, failed ones included: ``unanswered`` attempts got no completion)."""
        prompt_tokens = sum(c.prompt_tokens for c in calls)
        completion_tokens = sum(c.completion_tokens for c in calls)
        return Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=_ms(started),
            cache_hit=False,
            cost_usd=self.config.cost(self.config.model or "", prompt_tokens, completion_tokens),
            attempts=sum(c.attempts for c in calls) + unanswered,
        )

    def _validated(
        self, completion: Completion, asked: _Asked, calls: list[Completion], *, final: bool = False
    ) -> JudgeOutput:
        """The output of one completion (``final``: the re-ask's, the last one asked for).

        Raises:
            LlmReplyError: the model refused; asking again would only cost another refusal.
            ReplyInvalid: worth a re-ask.
        """
        if completion.refusal or completion.finish_reason == "content_filter":
            said = completion.refusal or "the endpoint's content filter stopped the reply"
            log.warning("llm_reply_refused", model=self.config.model, refusal=said)
            raise LlmReplyError(
                "refused",
                f"the model refused to judge: {said}",
                attempts=sum(c.attempts for c in calls),
                raw=redact(completion.text or "", self._client.secrets, limit=None),
            )
        try:
            reply, repairs = parse_reply(completion.text, final=final)
            output = to_output(reply, asked.request, asked.stef, repairs)
            p = verdict_probability(completion.text, completion.logprobs)
            return output if p is None else output.model_copy(update={"token_probability": p})
        except ReplyInvalid as exc:
            if completion.finish_reason == "length":
                raise ReplyInvalid(
                    ["the reply was cut off at the token limit; answer more briefly", *exc.errors],
                    "truncated",
                ) from exc
            raise

    def _call(
        self, build: Callable[[str], Messages], asked: _Asked, calls: list[Completion]
    ) -> Completion:
        try:
            completion = self._client.complete(
                build, asked.schema, top_logprobs=self.config.top_logprobs
            )
        except JudgeError as exc:
            # Count the calls of the first round too, so the result says how many were made.
            exc.attempts += sum(c.attempts for c in calls)
            raise
        calls.append(completion)
        self._watch.observe(completion.reported_model)
        return completion


@dataclass(frozen=True)
class _Asked:
    """One request as asked: STEF's own matches and the reply schema with its predicate ids."""

    request: JudgeRequest
    stef: tuple[StefMatch, ...]
    schema: dict[str, Any]


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
