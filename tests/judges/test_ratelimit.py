"""The per-replica rate limits: the request bucket delays and never drops, LLM tokens are paid
after the call, a cache hit gives its request back, close() reaches the wrapped judge.

The buckets read the real clock (no injection seam), so the tests use small real waits and
bounds with wide margins both ways.
"""

from __future__ import annotations

import threading
import time

from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.ratelimit import RateLimitedJudge
from stef.models import (
    Enrichment,
    EnrichmentStatus,
    JudgeInfo,
    JudgeOutput,
    QuestionSpec,
    Usage,
    Verdict,
)
from tests.judges.llm.conftest import request_for

REQUEST = request_for(
    {"question": "How many customers are there?", "sql": "SELECT COUNT(*) FROM c"}
)
OUTPUT = JudgeOutput(
    question_spec=QuestionSpec(),
    filter_matches=[],
    enrichment=Enrichment(status=EnrichmentStatus.FAITHFUL),
    verdict=Verdict.CORRECT,
    confidence=0.9,
)


class Canned:
    """A backend that answers at once with a fixed usage and counts its calls."""

    def __init__(self, usage: Usage | None = None) -> None:
        self.usage = usage or Usage(prompt_tokens=10, completion_tokens=5)
        self.calls = 0
        self.closed = False
        self._lock = threading.Lock()

    @property
    def info(self) -> JudgeInfo:
        return JudgeInfo(backend="canned", model="m")

    def judge(self, request: JudgeRequest) -> JudgeReply:
        with self._lock:
            self.calls += 1
        return JudgeReply(output=OUTPUT, usage=self.usage)

    def close(self) -> None:
        self.closed = True


def _timed(judge: RateLimitedJudge, calls: int) -> tuple[float, list[JudgeReply]]:
    start = time.monotonic()
    replies = [judge.judge(REQUEST) for _ in range(calls)]
    return time.monotonic() - start, replies


def test_request_bucket_delays_beyond_the_burst_and_never_drops() -> None:
    backend = Canned()
    judge = RateLimitedJudge(backend, requests_per_s=20)  # a burst of 20, then one per 50 ms
    elapsed, replies = _timed(judge, 30)
    assert len(replies) == 30 and backend.calls == 30  # every request answered
    assert all(r.output == OUTPUT for r in replies)
    # The 10 past the burst wait 10 / 20 = 0.5 s for tokens.
    assert 0.4 <= elapsed < 5.0


def test_concurrent_callers_are_all_served() -> None:
    backend = Canned()
    judge = RateLimitedJudge(backend, requests_per_s=20)
    answered: list[JudgeReply] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(6):
            reply = judge.judge(REQUEST)
            with lock:
                answered.append(reply)

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    elapsed = time.monotonic() - start
    assert len(answered) == 30 and backend.calls == 30
    assert 0.4 <= elapsed < 5.0  # the same 0.5 s of waiting, shared among the callers


def test_tokens_are_debited_after_the_call() -> None:
    # 6,000 tokens a minute: 100 a second, 6,000 saved up. One call costs 6,030.
    backend = Canned(Usage(prompt_tokens=6000, completion_tokens=30))
    judge = RateLimitedJudge(backend, tokens_per_min=6000)
    first, _ = _timed(judge, 1)
    # The cost was unknown before the call: the first one went at once, overdrawing by 30.
    assert first < 0.2
    second, _ = _timed(judge, 1)
    # The next call waits off the 30-token deficit: 0.3 s at 100 tokens a second.
    assert 0.25 <= second < 3.0
    assert backend.calls == 2


def test_cache_hits_give_their_request_back() -> None:
    backend = Canned(Usage(cache_hit=True))
    judge = RateLimitedJudge(backend, requests_per_s=10)
    elapsed, replies = _timed(judge, 25)
    assert len(replies) == 25 and backend.calls == 25
    assert elapsed < 0.75  # without the refund the 15 past the burst would wait 1.5 s


def test_cache_hits_cost_no_tokens() -> None:
    # 600 tokens a minute: 10 a second, 600 saved up. Charged, a hit's 610 tokens would hold
    # the next call for 1 s.
    backend = Canned(Usage(prompt_tokens=600, completion_tokens=10, cache_hit=True))
    judge = RateLimitedJudge(backend, tokens_per_min=600)
    elapsed, _ = _timed(judge, 2)
    assert elapsed < 0.5


def test_misses_with_the_same_limits_do_wait() -> None:
    backend = Canned(Usage(prompt_tokens=0, completion_tokens=0, cache_hit=False))
    judge = RateLimitedJudge(backend, requests_per_s=10)
    elapsed, _ = _timed(judge, 15)
    assert 0.4 <= elapsed < 5.0  # the 5 past the burst: 0.5 s


def test_close_closes_the_wrapped_judge_and_info_passes_through() -> None:
    backend = Canned()
    judge = RateLimitedJudge(backend, requests_per_s=5, tokens_per_min=600)
    assert judge.info == JudgeInfo(backend="canned", model="m")
    judge.close()
    assert backend.closed


def test_no_limits_means_no_waiting() -> None:
    backend = Canned(Usage(prompt_tokens=10**6))
    elapsed, replies = _timed(RateLimitedJudge(backend), 50)
    assert len(replies) == 50 and elapsed < 1.0
