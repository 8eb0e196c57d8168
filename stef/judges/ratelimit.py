"""Per-replica cost control: token buckets on judge requests and LLM tokens that delay, not drop."""

from __future__ import annotations

import threading
import time

from stef.judges.base import Judge, JudgeReply, JudgeRequest
from stef.models import JudgeInfo


class TokenBucket:
    """A token bucket: ``rate`` tokens per second, at most ``burst`` saved up.

    :meth:`take` blocks until the tokens are there. :meth:`debit` charges tokens after the fact
    (an LLM call's token count is known only when it returns); the balance may go negative, and
    later takers wait it off.
    """

    def __init__(self, rate: float, burst: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self._tokens = self.burst
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def take(self, amount: float = 1.0) -> float:
        """Take ``amount`` tokens, sleeping as needed; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= min(amount, self.burst):
                    self._tokens -= amount
                    return waited
                delay = (min(amount, self.burst) - self._tokens) / self.rate
            time.sleep(delay)
            waited += delay

    def debit(self, amount: float) -> None:
        with self._lock:
            self._refill()
            self._tokens -= amount

    def refund(self, amount: float) -> None:
        with self._lock:
            self._refill()
            self._tokens = min(self.burst, self._tokens + amount)


class RateLimitedJudge:
    """A judge backend behind request-rate and token-rate limits (per replica).

    A cache hit gives its request token back and costs no LLM tokens.
    """

    def __init__(
        self,
        backend: Judge,
        *,
        requests_per_s: float | None = None,
        tokens_per_min: float | None = None,
    ) -> None:
        self.backend = backend
        self._requests = TokenBucket(requests_per_s) if requests_per_s else None
        self._tokens = (
            TokenBucket(tokens_per_min / 60.0, burst=tokens_per_min) if tokens_per_min else None
        )

    def sharing(self, backend: Judge) -> RateLimitedJudge:
        """Another backend behind these same buckets: its calls count against the replica's
        budget too (the canary's own judge, which must not raise the replica's spend)."""
        twin = RateLimitedJudge(backend)
        twin._requests, twin._tokens = self._requests, self._tokens
        return twin

    @property
    def info(self) -> JudgeInfo:
        return self.backend.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        if self._requests is not None:
            self._requests.take()
        if self._tokens is not None:
            # Wait while an earlier call's tokens are still being paid off.
            self._tokens.take(0.0)
        reply = self.backend.judge(request)
        usage = reply.usage
        if usage.cache_hit:
            if self._requests is not None:
                self._requests.refund(1.0)
        elif self._tokens is not None:
            self._tokens.debit(usage.prompt_tokens + usage.completion_tokens)
        return reply

    def close(self) -> None:
        self.backend.close()
