"""The service with the real LLM judge (stef.judges.llm) against the local OpenAI-compatible
test server: a flaky endpoint loses nothing, and /metrics shows every contract metric with the
right values."""

from __future__ import annotations

import json
import random
import shutil
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stef.testing.fake_server import Delay, Error, FakeLlmServer, Received, Step, judge_like
from tests.brokers import Broker
from tests.service.conftest import (
    ROOT,
    ServiceProcess,
    caught_up,
    kafka_config,
    make_log,
    valid_record,
)

pytestmark = pytest.mark.integration

API_KEY = "sk-test-0b9d-not-a-real-key"


class Flaky:
    """Fails a seeded 30% of calls: 429 with Retry-After, 500, or an answer past the timeout."""

    def __init__(self, rate: float = 0.3, seed: int = 7) -> None:
        self.rate = rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.failures = 0
        self.calls = 0

    def __call__(self, received: Received) -> Step:
        with self._lock:
            self.calls += 1
            roll = self._rng.random()
            if roll >= self.rate:
                return judge_like(received)
            self.failures += 1
            kind = self._rng.randrange(3)
        if kind == 0:
            return Error(429, "slow down", retry_after=0.05)
        if kind == 1:
            return Error(500, "upstream exploded")
        return Delay(1.5)  # the client times out after 0.5 s


@pytest.fixture
def flaky() -> Iterator[tuple[FakeLlmServer, Flaky]]:
    behaviour = Flaky()
    with FakeLlmServer(default=behaviour) as server:
        yield server, behaviour


def _llm(server: FakeLlmServer, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": server.base_url,
        "model": "fake-judge",
        "timeout_s": 0.5,
        "max_retries": 8,
        "backoff_base_s": 0.02,
        "backoff_max_s": 0.2,
        "max_total_retry_s": 60,
        **extra,
    }


def test_flaky_llm_endpoint_loses_nothing(
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    flaky: tuple[FakeLlmServer, Flaky],
) -> None:
    server, behaviour = flaky
    log = make_log(300)
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"in-{tag}", 2)
    results = kafka_broker.create_topic(f"res-{tag}", 1)
    dead = kafka_broker.create_topic(f"dead-{tag}", 1)
    kafka_broker.produce(source, log.payloads)
    proc = service_factory(
        "--source",
        kafka_broker.url(source, f"g-{tag}"),
        "--results",
        kafka_broker.url(results),
        "--dead-letters",
        kafka_broker.url(dead),
        "--concurrency",
        "8",
        # No cache: every valid record makes its own calls to the flaky endpoint.
        config=kafka_config(llm=_llm(server, cache_size=0)),
        env={"STEF_LLM_API_KEY": API_KEY},
    )
    proc.wait_ready()
    proc.wait_for(lambda: caught_up(proc, 2), timeout_s=240, what="every record judged")
    out = [json.loads(m.value) for m in kafka_broker.consume_all(results, expect=270)]
    letters = kafka_broker.consume_all(dead, expect=len(log.invalid))
    samples = proc.metrics()
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0

    assert {r["id"] for r in out} == log.valid_ids  # nothing lost
    assert len(letters) == len(log.invalid)
    assert behaviour.calls >= len(log.valid_ids)
    assert behaviour.failures >= 0.2 * behaviour.calls  # the endpoint really was flaky
    outcomes = [r["outcome"] for r in out]
    # Retries absorb the failures: a record only gives up after 9 failed calls in a row.
    assert outcomes.count("judge_error") <= 2
    assert all(r["judge"]["backend"] != "heuristic" for r in out)
    retried = sum(
        v
        for (name, labels), v in samples.items()
        if name == "stef_llm_request_duration_seconds_count" and ("outcome", "ok") not in labels
    )
    assert retried > 0  # failed calls are measured, not hidden
    assert API_KEY not in proc.log_text()  # the key is never logged


def test_metrics_endpoint_exposes_every_contract_metric_with_values(
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    sales = [valid_record(i) for i in range(4)]
    duplicate = {**sales[0], "id": "dup-of-0"}  # same request again: served from the cache
    unknown_app = valid_record(10, app="mystery")
    unsafe = {**valid_record(11), "id": "unsafe-1", "sql": "DELETE FROM orders WHERE year = 2011"}
    records = [*sales, duplicate, unknown_app, unsafe]
    payloads = [json.dumps(r).encode() for r in records]
    payloads += [b"not json at all", json.dumps({"app": "sales", "question": "q"}).encode()]

    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"in-{tag}", 1)
    kafka_broker.produce(source, payloads)
    results = tmp_path / "results.jsonl"
    with FakeLlmServer() as server:
        proc = service_factory(
            "--source",
            kafka_broker.url(source, f"g-{tag}"),
            "--results",
            f"file:{results}",
            "--dead-letters",
            f"file:{tmp_path / 'dead.jsonl'}",
            "--rules",
            str(rules),
            "--concurrency",
            "1",  # in order, so the duplicate finds the first one cached
            config=kafka_config(llm=_llm(server), known_agents=["sql-agent@2.1"]),
            env={"STEF_LLM_API_KEY": API_KEY},
        )
        proc.wait_ready()
        proc.wait_for(lambda: caught_up(proc, 1), timeout_s=60, what="the known input")
        calls = len(server.chat_requests())
        assert proc.get("/healthz")[0] == 200
        assert proc.get("/readyz")[0] == 200
        families = proc.families()
        m = proc.metrics()
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0

    out = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(out) == 7

    def v(name: str, **labels: str) -> float:
        return m.get((name, tuple(sorted(labels.items()))), 0.0)

    def total(name: str, **labels: str) -> float:
        return sum(
            val
            for (n, lbls), val in m.items()
            if n == name and all((k, x) in lbls for k, x in labels.items())
        )

    contract = {
        "stef_records",
        "stef_score",
        "stef_evaluations",
        "stef_confidence",
        "stef_enrichment",
        "stef_issues",
        "stef_unsafe_sql",
        "stef_llm_request_duration_seconds",
        "stef_llm_tokens",
        "stef_cache_hits",
        "stef_inflight",
        "stef_consumer_lag",
        "stef_rules_reload",
    }
    assert contract <= families
    assert v("stef_records_total", app="sales", outcome="evaluated") == 6
    assert v("stef_records_total", app="unknown", outcome="evaluated") == 1  # not configured
    assert v("stef_records_total", app="sales", outcome="invalid") == 1
    assert v("stef_records_total", app="default", outcome="invalid") == 1  # no app in a non-JSON
    assert v("stef_score_count", app="sales", agent="sql-agent@2.1") == 6
    assert total("stef_score_sum") == pytest.approx(sum(r["score"] for r in out))
    assert total("stef_evaluations_total") == 7
    for r in out:
        c = r["components"]
        assert (
            v(
                "stef_evaluations_total",
                app="unknown" if r["app"] == "mystery" else r["app"],
                agent="sql-agent@2.1",
                tier=r["tier"],
                verdict=c["verdict"],
                filter_status=c["filter_status"],
            )
            >= 1
        )
    assert total("stef_confidence_count") == 7
    assert total("stef_enrichment_total") == 7
    assert total("stef_issues_total") == sum(len(r["issues"]) for r in out)
    assert v("stef_unsafe_sql_total", app="sales") == 1
    assert v("stef_cache_hits_total") == 1
    assert total("stef_llm_request_duration_seconds_count", outcome="ok") == calls == 6
    assert total("stef_llm_tokens_total", kind="prompt") == sum(
        r["usage"]["prompt_tokens"] for r in out if not r["usage"]["cache_hit"]
    )
    assert v("stef_inflight") == 0
    assert v("stef_consumer_lag", topic=source, partition="0") == 0
    assert v("stef_rules_reload_total", outcome="success") == 0
    assert v("stef_rules_reload_total", outcome="error") == 0


def test_drain_deadline_and_second_signal(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text("".join(json.dumps(valid_record(i)) + "\n" for i in range(20)))
    args = ["--source", f"file:{log}", "--follow", "--results", f"file:{tmp_path / 'r.jsonl'}"]
    args += ["--dead-letters", f"file:{tmp_path / 'd.jsonl'}", "--concurrency", "4"]
    with FakeLlmServer(latency_s=10.0) as server:  # every call outlasts the drain deadline
        config = {"llm": _llm(server, timeout_s=30), "drain_timeout_s": 1.0}
        env = {"STEF_LLM_API_KEY": API_KEY}
        slow = service_factory(*args, config=config, env=env)
        slow.wait_ready()
        slow.wait_for(lambda: slow.total("stef_inflight") > 0, what="calls in flight")
        slow.signal(signal.SIGTERM)
        assert slow.wait(15) == 0  # gave up on the in-flight calls at the deadline, cleanly
        (timeout,) = slow.events("drain_timeout")
        assert timeout["abandoned"] > 0

        stuck = service_factory(*args, config={**config, "drain_timeout_s": 60}, env=env)
        stuck.wait_ready()
        stuck.wait_for(lambda: stuck.total("stef_inflight") > 0, what="calls in flight")
        stuck.signal(signal.SIGTERM)
        stuck.wait_for(lambda: bool(stuck.events("shutdown_requested")), what="the first signal")
        stuck.signal(signal.SIGTERM)  # the second signal does not wait for the drain
        assert stuck.wait(5) == 128 + signal.SIGTERM
