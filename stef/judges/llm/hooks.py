"""What observers want to know of the LLM judge's calls, in one seam (as instructor's hooks):
each HTTP attempt (answered, retried or failed, with its time, tokens and cost), each call that
answered, each call that failed after its retries. The metrics and the reported-model watch
listen here; a tracer or a test can too (:attr:`LlmJudge.hooks`). An observer is called on the
thread that made the call and must not raise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from stef.errors import JudgeError
from stef.judges.llm.wire import Completion

AttemptOutcome = Literal["ok", "retry", "error"]


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt: ``ok`` (a completion came back), ``retry`` (backed off or fell back
    to another response format) or ``error`` (the call gives up)."""

    model: str
    outcome: AttemptOutcome
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class Hooks:
    """The observers of one judge's calls, in the order they were added."""

    attempts: list[Callable[[Attempt], None]] = field(default_factory=list)
    completions: list[Callable[[Completion], None]] = field(default_factory=list)
    failures: list[Callable[[JudgeError], None]] = field(default_factory=list)

    def attempt(self, seen: Attempt) -> None:
        for observe in self.attempts:
            observe(seen)

    def completion(self, completion: Completion) -> None:
        for observe in self.completions:
            observe(completion)

    def failure(self, exc: JudgeError) -> None:
        for observe in self.failures:
            observe(exc)
