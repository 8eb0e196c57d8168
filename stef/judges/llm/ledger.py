"""What the calls of one judged record cost: the :class:`Ledger` a judgment carries through its
calls, so that a reply or an error says how many calls were made and what they spent."""

from __future__ import annotations

import time
from typing import Any

from stef.errors import JudgeError
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.wire import Completion
from stef.models import Usage


class Ledger:
    """The calls of one judgment (one sample, or every sample of a vote).

    Attributes:
        calls: the completions that came back, in order.
        unanswered: HTTP attempts of failed samples that no completion holds.
    """

    def __init__(self) -> None:
        self.calls: list[Completion] = []
        self.unanswered = 0

    def add(self, completion: Completion) -> None:
        self.calls.append(completion)

    def absorb(self, other: Ledger) -> None:
        """Another ledger's calls into this one (a sample's into its vote's)."""
        self.calls.extend(other.calls)

    @property
    def attempts(self) -> int:
        """HTTP attempts behind the completions (the unanswered ones not included)."""
        return sum(c.attempts for c in self.calls)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def last_model(self) -> str | None:
        """The model the last completion named (None before any)."""
        return self.calls[-1].reported_model if self.calls else None

    def spent(self) -> dict[str, Any]:
        """The attempts and tokens of an error raised for these calls."""
        return {
            "attempts": self.attempts,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }

    def charge(self, exc: JudgeError) -> None:
        """An error of a call made after these: their attempts are counted in it too."""
        exc.attempts += self.attempts

    def total(self, exc: JudgeError) -> None:
        """The error costed in full: every call's attempts (unanswered ones too) and tokens."""
        exc.attempts = self.attempts + self.unanswered
        exc.prompt_tokens = self.prompt_tokens
        exc.completion_tokens = self.completion_tokens

    def usage(self, config: LlmConfig, started: float) -> Usage:
        """What the calls of one judged record cost, in tokens, money, time and attempts (every
        sample's, failed ones included)."""
        prompt_tokens = self.prompt_tokens
        completion_tokens = self.completion_tokens
        return Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=ms_since(started),
            cache_hit=False,
            cost_usd=config.cost(config.model or "", prompt_tokens, completion_tokens),
            attempts=self.attempts + self.unanswered,
        )


def cache_hit_usage(config: LlmConfig, started: float) -> Usage:
    """A reply from the cache: no call, no tokens, and no cost (0, not unknown, when the model
    has a price: a run's summary adds it up)."""
    return Usage(
        cache_hit=True, latency_ms=ms_since(started), cost_usd=config.cost(config.model or "", 0, 0)
    )


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), rounded to the microsecond."""
    return round((time.perf_counter() - started) * 1000, 3)
