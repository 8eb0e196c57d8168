"""Probability mode of the LLM judge (``llm.verdict: probability``, prompts and reading in
:mod:`stef.judges.llm.probability`): the heuristic judge reads the record, the model answers one
Yes/No token, and P(Yes) decides. The endpoint is probed once at start (:meth:`preflight`) for
the log-probabilities the mode needs."""

from __future__ import annotations

import time
from typing import Any

import structlog

from stef.errors import ConfigError, LlmReplyError, LlmTransportError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import heuristic
from stef.judges.llm import examples as few_shot
from stef.judges.llm.cache import cache_key
from stef.judges.llm.client import Messages
from stef.judges.llm.examples import Example
from stef.judges.llm.ledger import Ledger, cache_hit_usage
from stef.judges.llm.logprobs import yes_probability
from stef.judges.llm.parts import JudgeParts, analysis
from stef.judges.llm.probability import (
    MAX_TOKENS,
    SYSTEM_TEMPLATE,
    USER_TEMPLATE,
    probability_context,
    probability_output,
)
from stef.judges.llm.wire import Completion
from stef.models import JudgeOutput
from stef.redact import redact

# Logged under the judge's module name, as before the modes were split out of it.
log = structlog.get_logger("stef.judges.llm.judge")

# The one-token probe of probability mode (before any record): it must come back with
# log-probabilities, or the mode cannot work on this endpoint.
_PROBE: Messages = [{"role": "user", "content": "Is 2 + 2 equal to 4? Answer Yes or No."}]


class ProbabilityJudge:
    """The probability mode of :class:`~stef.judges.llm.judge.LlmJudge`."""

    def __init__(self, parts: JudgeParts) -> None:
        self._parts = parts

    def preflight(self) -> None:
        """Check, with one call of one token, that the endpoint sends log-probabilities: an
        endpoint that sends none, or refuses the parameters (400/422), is a configuration
        error at start, not a silent fallback. An endpoint that cannot be reached now is
        logged; each record's reply is checked again (reason ``no_logprobs``).

        Raises:
            ConfigError: the endpoint sent no log-probabilities.
        """
        config = self._parts.config
        try:
            completion = self._parts.client.complete(
                lambda _mode: _PROBE, text=True, max_tokens=1, top_logprobs=config.top_logprobs
            )
        except LlmTransportError as exc:
            if exc.status_code in (400, 422):
                raise ConfigError(
                    "llm.verdict probability needs log-probabilities; the endpoint refused a "
                    f"one-token request for them: {exc.detail}"
                ) from exc
            log.warning("llm_preflight_skipped", model=config.model, reason=exc.reason)
            return
        if completion.logprobs is None or not any(t.top for t in completion.logprobs):
            raise ConfigError(
                f"llm.verdict probability needs log-probabilities, and model "
                f"{config.model!r} at {config.base_url or 'api.openai.com'} sent none "
                "for a one-token probe (logprobs: true, top_logprobs: "
                f"{config.top_logprobs}); use llm.verdict: structured with this endpoint"
            )

    def messages(self, request: JudgeRequest) -> Messages:
        """The system and user messages of one request."""
        return self._prompt(request)[2]

    def _prompt(
        self, request: JudgeRequest
    ) -> tuple[JudgeOutput, dict[str, Any], Messages, list[Example]]:
        """STEF's deterministic reading of a request, the prompt's variables, its messages, and
        the examples shown."""
        prompts = self._parts.prompts
        reading = heuristic(request)
        context = probability_context(request, reading)
        shots = self._parts.shots(request)
        system = prompts.render(SYSTEM_TEMPLATE)
        messages: Messages = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": few_shot.render(prompts, shots)
                + prompts.render(USER_TEMPLATE, **context),
            },
        ]
        return reading, context, messages, shots

    def judge(self, request: JudgeRequest, ledger: Ledger) -> JudgeReply:
        """One record: STEF's reading, one Yes/No token, P(Yes).

        Raises:
            LlmReplyError: the model refused (``refused``), the reply carried no
                log-probabilities (``no_logprobs``), or neither Yes nor No was among the first
                tokens' alternatives (``no_yes_no``).
        """
        parts = self._parts
        started = time.perf_counter()
        reading, context, messages, shots = self._prompt(request)
        key = cache_key(
            request,
            prompt_version=f"{parts.info.prompt_version}/probability",
            model=parts.model,
            analysis=analysis(context, shots),
            samples=1,
        )
        cached = parts.cached(key)
        if cached is not None:
            return JudgeReply(output=cached, usage=cache_hit_usage(parts.config, started))
        completion = self._call(messages, ledger)
        refused = parts.refused(completion, ledger)
        if refused is not None:
            raise refused
        p = yes_probability(completion.logprobs)
        if p is None:
            raise self._no_probability(completion, ledger)
        output = probability_output(reading, p).model_copy(
            update={
                "reported_model": completion.reported_model,
                "examples": [e.id for e in shots] or None,
            }
        )
        parts.cache.put(key, output)
        return JudgeReply(output=output, usage=ledger.usage(parts.config, started))

    def _call(self, messages: Messages, ledger: Ledger) -> Completion:
        parts = self._parts
        return parts.call(
            ledger,
            lambda _mode: messages,
            text=True,
            max_tokens=MAX_TOKENS,
            top_logprobs=parts.config.top_logprobs,
        )

    def _no_probability(self, completion: Completion, ledger: Ledger) -> LlmReplyError:
        """The error of a reply that gave no P(Yes)."""
        reason, said = (
            ("no_logprobs", "the endpoint sent no log-probabilities (llm.verdict probability)")
            if completion.logprobs is None
            else ("no_yes_no", "neither Yes nor No among the first tokens' alternatives")
        )
        return LlmReplyError(
            reason,
            said,
            raw=redact(completion.text or "", self._parts.client.secrets, limit=None),
            **ledger.spent(),
        )
