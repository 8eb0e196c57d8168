"""Structured mode: one structured chat completion per record (SPEC §2 "Judge").

Settles what it can itself first (:func:`~stef.judges.llm.prematch.settle`: question values that are
SQL predicate literals, filters its deterministic reading finds contradicted), renders the
prompt from ``templates/*.j2`` with those listed as settled, asks the endpoint with a schema whose
predicate ids are the request's own, repairs what the reply can still get inconsistent (recorded
in ``JudgeOutput.repairs``), re-asks once only when no usable verdict came back, and caches the
result. With ``llm.samples`` above 1 the majority of the samples decides. When the endpoint sends
log-probabilities, the verdict token's probability is kept (``JudgeOutput.token_probability``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from stef.errors import JudgeError, LlmReplyError, ReplyInvalid
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.llm import examples as few_shot
from stef.judges.llm.cache import cache_key
from stef.judges.llm.client import Messages
from stef.judges.llm.examples import Example
from stef.judges.llm.ledger import Ledger, cache_hit_usage
from stef.judges.llm.logprobs import verdict_probability
from stef.judges.llm.parts import JudgeParts, analysis
from stef.judges.llm.prematch import Settled, settle
from stef.judges.llm.reply import StefMatch, parse_reply, reply_schema, to_output
from stef.judges.llm.samples import majority
from stef.judges.llm.wire import Completion
from stef.models import JudgeOutput, SqlSpec
from stef.redact import redact

# Logged under the judge's module name, as before the modes were split out of it.
log = structlog.get_logger("stef.judges.llm.judge")

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


@dataclass(frozen=True)
class _Asked:
    """One request as asked: STEF's own matches and the reply schema with its predicate ids."""

    request: JudgeRequest
    stef: tuple[StefMatch, ...]
    schema: dict[str, Any]


class StructuredJudge:
    """The structured mode of :class:`~stef.judges.llm.judge.LlmJudge`.

    Args:
        parts: the judge's client, prompts, cache and watch.
        system: the system prompt of each response_format mode (``json_schema``,
            ``json_object``), rendered once.
    """

    def __init__(self, parts: JudgeParts, system: dict[str, str]) -> None:
        self._parts = parts
        self._system = system

    def messages(self, request: JudgeRequest, mode: str = "json_schema") -> Messages:
        """The system and user messages for one request."""
        prompts = self._parts.prompts
        shots = few_shot.render(prompts, self._parts.shots(request))
        user = shots + prompts.render("user.j2", **prompt_context(request, settle(request)))
        return [
            {"role": "system", "content": self._system[mode]},
            {"role": "user", "content": user},
        ]

    def request_body(self, request: JudgeRequest) -> bytes:
        """The body of the first structured request for ``request`` (before any re-ask)."""
        schema = reply_schema([p.id for p in request.sql_spec.filters])
        return self._parts.client.request_body(
            self.messages(request), schema, top_logprobs=self._parts.config.top_logprobs
        )

    def judge(self, request: JudgeRequest, ledger: Ledger) -> JudgeReply:
        """One record: from the cache, else the vote of ``llm.samples`` asks."""
        parts = self._parts
        started = time.perf_counter()
        settled = settle(request)
        asked = _Asked(
            request=request,
            stef=settled.matches,
            schema=reply_schema([p.id for p in request.sql_spec.filters]),
        )
        shots = parts.shots(request)
        context = prompt_context(request, settled)
        # A disabled cache misses anyway (still counted): the key's hashing would be wasted.
        key = self._key(request, context, shots) if parts.cache.enabled else ""
        cached = parts.cached(key)
        if cached is not None:
            return JudgeReply(output=cached, usage=cache_hit_usage(parts.config, started))
        user = few_shot.render(parts.prompts, shots) + parts.prompts.render("user.j2", **context)
        output = self._vote(user, asked, ledger)
        if shots:
            output = output.model_copy(update={"examples": [e.id for e in shots]})
        # The vote is cached, never one sample: a hit serves the whole vote it stands for.
        parts.cache.put(key, output)
        return JudgeReply(output=output, usage=ledger.usage(parts.config, started))

    def _key(self, request: JudgeRequest, context: dict[str, Any], shots: Sequence[Example]) -> str:
        """The cache key: the request, the analysis shown to the model and the examples."""
        return cache_key(
            request,
            prompt_version=self._parts.info.prompt_version or "",
            model=self._parts.model,
            analysis=analysis(context, shots),
            samples=self._parts.config.samples,
        )

    def _vote(self, user: str, asked: _Asked, ledger: Ledger) -> JudgeOutput:
        """Ask ``llm.samples`` times, one after the other; the majority of the answered decides
        (the vote is in the output when more than one sample was asked). The attempts of failed
        samples that no completion holds go to ``ledger.unanswered``.

        Raises:
            JudgeError: no sample answered; the last failure, with every sample's attempts and
                tokens when more than one was asked.
        """
        n = self._parts.config.samples
        outputs: list[JudgeOutput] = []
        failures: list[JudgeError] = []
        for _ in range(n):
            mine = Ledger()
            try:
                output = self._ask(user, asked, mine)
                outputs.append(output.model_copy(update={"reported_model": mine.last_model}))
            except JudgeError as exc:
                failures.append(exc)
                ledger.unanswered += max(0, exc.attempts - mine.attempts)
            finally:
                ledger.absorb(mine)
        self._observe_vote(n, len(outputs), failures)
        if not outputs:
            last = failures[-1]
            if len(failures) > 1:
                ledger.total(last)
            raise last
        return outputs[0] if n == 1 else majority(outputs, n)

    def _observe_vote(self, n: int, answered: int, failures: list[JudgeError]) -> None:
        parts = self._parts
        if parts.metrics is not None:
            parts.metrics.observe_samples(parts.model, answered, len(failures))
        if answered and failures:
            log.info(
                "llm_samples_failed",
                model=parts.config.model,
                failed=len(failures),
                samples=n,
                reasons=sorted({f.reason for f in failures}),
            )

    def _conversation(self, user: str, extra: Messages) -> Callable[[str], Messages]:
        """The messages for a response_format mode: the system prompt depends on the mode."""

        def messages(mode: str) -> Messages:
            system = {"role": "system", "content": self._system[mode]}
            return [system, {"role": "user", "content": user}, *extra]

        return messages

    def _ask(self, user: str, asked: _Asked, ledger: Ledger) -> JudgeOutput:
        """The validated output of the model, re-asking once if the first reply is unusable."""
        first = self._call(self._conversation(user, []), asked, ledger)
        try:
            return self._validated(first, asked, ledger)
        except ReplyInvalid as exc:
            # The re-ask runs inside the handler: its errors chain to the first reply's problem.
            return self._reask(user, first, exc, asked, ledger)

    def _reask(
        self, user: str, first: Completion, invalid: ReplyInvalid, asked: _Asked, ledger: Ledger
    ) -> JudgeOutput:
        """The second and last try: the first reply and what is wrong with it go back.

        Raises:
            LlmReplyError: the second reply is unusable too.
        """
        model = self._parts.model
        log.info(
            "llm_reply_invalid",
            model=model,
            reason=invalid.reason,
            errors=invalid.errors[:5],
            reask=True,
        )
        reask = self._parts.prompts.render("reask.j2", errors=invalid.errors)
        extra: Messages = [
            {"role": "assistant", "content": first.text or ""},
            {"role": "user", "content": reask},
        ]
        second = self._call(self._conversation(user, extra), asked, ledger)
        try:
            return self._validated(second, asked, ledger, final=True)
        except ReplyInvalid as exc:
            log.warning(
                "llm_reply_invalid",
                model=model,
                reason=exc.reason,
                errors=exc.errors[:5],
                reask=False,
            )
            raise self._failed(exc, second, ledger) from exc

    def _failed(self, invalid: ReplyInvalid, last: Completion, ledger: Ledger) -> LlmReplyError:
        """The error of a reply still unusable after the re-ask; endpoint text redacted."""
        secrets = self._parts.client.secrets
        return LlmReplyError(
            invalid.reason,
            f"{_FAILED.get(invalid.reason, 'the LLM reply was unusable')}, after one re-ask: "
            + redact("; ".join(invalid.errors[:5]), secrets),
            raw=redact(last.text or "", secrets, limit=None),
            **ledger.spent(),
        )

    def _validated(
        self, completion: Completion, asked: _Asked, ledger: Ledger, *, final: bool = False
    ) -> JudgeOutput:
        """The output of one completion (``final``: the re-ask's, the last one asked for).

        Raises:
            LlmReplyError: the model refused; asking again would only cost another refusal.
            ReplyInvalid: worth a re-ask.
        """
        refused = self._parts.refused(completion, ledger)
        if refused is not None:
            raise refused
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

    def _call(self, build: Callable[[str], Messages], asked: _Asked, ledger: Ledger) -> Completion:
        parts = self._parts
        return parts.call(
            ledger, build, schema=asked.schema, top_logprobs=parts.config.top_logprobs
        )
