"""What the LLM judge's two modes share: the endpoint's client, the prompts, the cache, the
reported-model watch, the few-shot examples and the judge's identity (:class:`JudgeParts`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from stef.errors import JudgeError, LlmReplyError
from stef.judges.base import JudgeRequest
from stef.judges.llm import examples as few_shot
from stef.judges.llm.cache import JudgeCache
from stef.judges.llm.client import ChatClient, Messages
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.examples import Example, Examples
from stef.judges.llm.hooks import Hooks
from stef.judges.llm.identity import ModelWatch
from stef.judges.llm.ledger import Ledger
from stef.judges.llm.wire import Completion
from stef.metrics import Metrics
from stef.models import JudgeInfo, JudgeOutput
from stef.prompts import Prompts
from stef.redact import redact

log = structlog.get_logger("stef.judges.llm.judge")

# Record text, keyed in the cache separately (the SQL up to layout).
_RAW_FIELDS = {"question", "enriched_question", "sql"}


@dataclass
class JudgeParts:
    """The pieces one :class:`~stef.judges.llm.judge.LlmJudge` builds once, for either mode."""

    config: LlmConfig
    metrics: Metrics | None
    prompts: Prompts
    client: ChatClient
    cache: JudgeCache
    watch: ModelWatch
    info: JudgeInfo
    examples: Examples | None
    hooks: Hooks

    @property
    def model(self) -> str:
        return self.config.model or ""

    def shots(self, request: JudgeRequest) -> list[Example]:
        """The examples shown with this request."""
        if self.examples is None:
            return []
        return self.examples.pick(request.record, self.config.few_shot)

    def cached(self, key: str) -> JudgeOutput | None:
        """The cached output, the lookup counted as a hit or a miss."""
        cached = self.cache.get(key)
        if self.metrics is not None:
            self.metrics.observe_cache(cached is not None)
        return cached

    def call(self, ledger: Ledger, build: Callable[[str], Messages], **options: Any) -> Completion:
        """One completion (:meth:`ChatClient.complete` with ``options``), charged to ``ledger``
        whether it answers or fails, and told to the hooks (the watch reads its model there).

        Raises:
            JudgeError: the call failed; its attempts are in ``ledger``.
        """
        try:
            completion = self.client.complete(build, **options)
        except JudgeError as exc:
            # Counted too, so the result says how many calls were made.
            ledger.charge(exc)
            self.hooks.failure(exc)
            raise
        ledger.add(completion)
        self.hooks.completion(completion)
        return completion

    def refused(self, completion: Completion, ledger: Ledger) -> LlmReplyError | None:
        """The error of a completion the model refused (its ``refusal``, or the endpoint's
        content filter), logged; None when it did not. Either mode ends there: asking again
        would only cost another refusal, and a refusal's first token is no Yes or No (probability
        mode called it ``no_logprobs``, the endpoint's fault, when the refusal came without
        log-probabilities)."""
        if not completion.refusal and completion.finish_reason != "content_filter":
            return None
        said = completion.refusal or "the endpoint's content filter stopped the reply"
        log.warning("llm_reply_refused", model=self.config.model, refusal=said)
        return LlmReplyError(
            "refused",
            f"the model refused to judge: {said}",
            raw=redact(completion.text or "", self.client.secrets, limit=None),
            **ledger.spent(),  # a refusal costs its tokens as any failed reply does
        )


def analysis(context: dict[str, Any], shots: Sequence[Example]) -> dict[str, Any]:
    """What the cache key holds of a prompt's variables: the analysis shown to the model, not
    the record's raw text, and the examples shown (none: the key is as without few-shot)."""
    shown = {k: v for k, v in context.items() if k not in _RAW_FIELDS}
    if shots:
        shown["examples"] = few_shot.keyed(shots)
    return shown
