"""The request parameters sent to a model and their adaptation: a reasoning model gets
``max_completion_tokens`` and no temperature, and a parameter a server refuses by name is changed
for that model (:class:`Params`, :func:`refused_param`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stef.judges.llm.config import LlmConfig

# Statuses some servers answer to a response_format they do not support.
REJECT_STATUSES = frozenset({400, 422})

# Request parameters a server may refuse for a model (GPT-5 and the o-series refuse
# ``temperature`` and ``max_tokens``): a 400 naming one makes the client adapt, once per model.
_ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "reasoning_effort")
# Words of a refusal of a parameter itself (not of its value being too large, say).
_UNSUPPORTED = re.compile(
    r"unsupported|not supported|does not support|unrecognized|unknown|not permitted|"
    r"not allowed|extra (?:inputs|fields)",
    re.IGNORECASE,
)
# Reasoning models by name: they take max_completion_tokens and only the default temperature.
# ``gpt-5-chat`` is GPT-5's non-reasoning variant, which takes a temperature.
_REASONING = re.compile(r"^(?:o\d|gpt-5)(?!.*-chat)", re.IGNORECASE)
# The completion cap of a reasoning model when none is set: its reasoning counts against the cap,
# and 1024 tokens often end in reasoning, with no content.
REASONING_MAX_TOKENS = 8192


@dataclass
class Params:
    """The sampling and length parameters sent to one model, as adapted so far (the client's
    lock guards it).

    Attributes:
        token_key: ``max_tokens`` or ``max_completion_tokens``.
        max_tokens: the completion cap (None: not sent).
        temperature: None when the model takes only its default.
        reasoning_effort: None when not configured or refused.
    """

    token_key: str
    max_tokens: int | None
    temperature: float | None
    reasoning_effort: str | None

    @classmethod
    def of(cls, config: LlmConfig) -> Params:
        reasoning = bool(config.model and _REASONING.match(config.model.rsplit("/", 1)[-1]))
        key = config.token_param
        if key == "auto":
            key = "max_completion_tokens" if reasoning else "max_tokens"
        cap = config.max_tokens
        if reasoning and "max_tokens" not in config.model_fields_set:
            cap = REASONING_MAX_TOKENS
        return cls(
            token_key=key,
            max_tokens=cap,
            temperature=None if reasoning else config.temperature,
            reasoning_effort=config.reasoning_effort,
        )

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out[self.token_key] = self.max_tokens
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        return out

    def adapt(self, param: str) -> str:
        """Stop sending ``param`` in the refused form; returns what changed, for the log."""
        if param in ("max_tokens", "max_completion_tokens"):
            other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
            self.token_key = other
            return f"{param} sent as {other}"
        if param == "temperature":
            self.temperature = None
        else:
            self.reasoning_effort = None
        return f"{param} no longer sent"


def refused_param(body: object, message: str, sent: dict[str, Any]) -> str | None:
    """The request parameter a 400 refuses, if it names one that was sent: OpenAI's error
    ``param`` field, else a sent parameter's name in a message that says it is unsupported."""
    err = body.get("error", body) if isinstance(body, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    if isinstance(param, str) and param in sent and param in _ADAPTABLE:
        return param
    if not _UNSUPPORTED.search(message):
        return None
    named = [
        (m.start(), p)
        for p in _ADAPTABLE
        if p in sent and (m := re.search(rf"\b{p}\b", message)) is not None
    ]
    return min(named)[1] if named else None


def rejects_logprobs(status: int, message: str) -> bool:
    """The endpoint refused the ``logprobs`` / ``top_logprobs`` parameters themselves."""
    return status in REJECT_STATUSES and "logprob" in message.lower()
