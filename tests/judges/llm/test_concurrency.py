"""Many worker threads share one judge: in-flight calls are bounded, every result is right."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.testing.fake_server import FakeLlmServer
from tests.judges.llm.conftest import make_record


def test_calls_in_flight_never_exceed_max_concurrency(
    server_factory: Callable[..., FakeLlmServer],
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    srv = server_factory(latency_s=0.05)
    judge = judge_factory(srv, max_concurrency=3)
    pipeline = pipeline_for(judge)
    records = [
        make_record(id=f"r{i}", question=f"Total spend in APAC for 2023, batch {i}?")
        for i in range(24)
    ]
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(pipeline.judge_record, records))
    assert [r.id for r in results] == [r.id for r in records]
    assert all(r.outcome == "evaluated" and r.score == 80.0 for r in results)
    assert len(srv.chat_requests()) == 24
    assert 2 <= srv.peak_inflight <= 3


def test_the_wait_for_a_concurrency_slot_is_bounded(
    server: FakeLlmServer,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    """Before: a record waited for ever while every slot was held."""
    judge = judge_factory(server, max_concurrency=1, timeout_s=0.3, max_retries=1)
    pipeline = pipeline_for(judge)
    slots = judge._client._slots
    slots.acquire()  # the one slot, held past the record's whole budget
    results = []
    worker = threading.Thread(
        target=lambda: results.append(pipeline.judge_record(make_record())), daemon=True
    )
    try:
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), "the record is still waiting for a slot"
    finally:
        slots.release()
    [result] = results
    assert result.outcome == "judge_error"
    assert (result.error or "").startswith("timeout")
    assert server.chat_requests() == []
