"""Bench section ``scaleout``: replicas of ``stef run`` in one consumer group on a real local
broker (Tansu, 4 partitions), judging through the fake LLM endpoint at 200 ms per answer.

Three runs over the same records, each with its own group and result topic: 1 replica; 2
replicas started together; 1 replica joined by a second one mid-stream (a rebalance with records
in flight). Throughput counts from the first result to the last. The mid-stream run consumes
its result topic and reports records lost (must be 0) and duplicates (bounded by the records in
flight at the rebalance: at most ``max_inflight`` per replica).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.kafka import metric_samples
from stef.testing.fake_server import FakeLlmServer
from tests.brokers import FAST_GROUP, Broker, free_port, tansu_broker

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4
RECORDS = 480
CONCURRENCY = 4
LATENCY_S = 0.2


def _payloads(n: int) -> list[bytes]:
    regions = ["EMEA", "APAC", "Americas", "Nordics", "Iberia"]
    return [
        json.dumps(
            {
                "id": f"so-{i}",
                "app": "sales",
                "question": f"How many customers are in {regions[i % 5]} since {1900 + i}?",
                "sql": f"SELECT COUNT(*) FROM customers WHERE region = '{regions[i % 5]}' "
                f"AND since >= {1900 + i}",
            }
        ).encode()
        for i in range(n)
    ]


class _Replica:
    def __init__(self, config: Path, broker: Broker, topic: str, group: str, results: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
        cmd = [
            str(ROOT / ".venv" / "bin" / "stef"), "run", "--config", str(config),
            "--source", broker.url(topic, group), "--results", broker.url(results),
            "--dead-letters", broker.url(results), "--concurrency", str(CONCURRENCY),
            "--metrics-port", str(self.port), "--log-level", "warning",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def samples(self) -> dict[str, float]:
        try:
            return metric_samples(self.port)
        except OSError:
            return {}

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()


def _done(replicas: list[_Replica]) -> tuple[float, bool]:
    """Records judged by all replicas, and whether every partition is caught up."""
    total, lags = 0.0, {}
    for r in replicas:
        s = r.samples()
        total += sum(v for k, v in s.items() if k.startswith("stef_records_total{"))
        for k, v in s.items():
            if k.startswith("stef_consumer_lag{"):
                lags[k] = v
    return total, len(lags) == PARTITIONS and not any(lags.values())


def _run(
    config: Path, broker: Broker, topic: str, replicas: int, *, join_at: float | None = None
) -> dict[str, Any]:
    tag = f"{replicas}-{'join' if join_at else 'start'}-{time.time_ns()}"
    results = broker.create_topic(f"so-results-{tag}", PARTITIONS)
    group = f"so-{tag}"
    running = [_Replica(config, broker, topic, group, results) for _ in range(replicas)]
    first = None
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            total, caught_up = _done(running)
            if first is None and total > 0:
                first, first_count = time.perf_counter(), total
            if join_at is not None and len(running) == 1 and total >= join_at * RECORDS:
                running.append(_Replica(config, broker, topic, group, results))
            if total >= RECORDS and caught_up:
                break
        else:
            raise RuntimeError(f"scaleout run {tag} did not finish")
        elapsed = time.perf_counter() - (first or time.perf_counter())
        shares = [
            sum(v for k, v in r.samples().items() if k.startswith("stef_records_total{"))
            for r in running
        ]
    finally:
        codes = [r.stop() for r in running]
    ids = Counter(json.loads(m.value)["id"] for m in broker.consume_all(results, expect=RECORDS))
    return {
        "per_s": (RECORDS - first_count) / elapsed,
        "lost": RECORDS - len(ids),
        "duplicates": sum(c - 1 for c in ids.values()),
        "exit_codes": codes,
        "per_replica": [int(x) for x in shares],
    }


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    server = FakeLlmServer(latency_s=LATENCY_S).start()
    try:
        with tempfile.TemporaryDirectory() as tmp, tansu_broker() as broker:
            config = Path(tmp) / "stef.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "kafka_consumer": dict(FAST_GROUP),
                        "auto_offset_reset": "earliest",
                        "commit_interval_s": 0.2,
                        "llm": {
                            "base_url": server.base_url,
                            "model": "fake-judge",
                            "cache_size": 0,
                        },
                    }
                )
            )
            topic = broker.create_topic("so-in", PARTITIONS)
            broker.produce(topic, _payloads(RECORDS))
            one = _run(config, broker, topic, 1)
            two = _run(config, broker, topic, 2)
            joined = _run(config, broker, topic, 1, join_at=0.3)
    finally:
        server.close()
    return {
        "records": RECORDS,
        "partitions": PARTITIONS,
        "llm_latency_s": LATENCY_S,
        "concurrency_per_replica": CONCURRENCY,
        "one_replica_per_s": round(one["per_s"], 1),
        "two_replicas_per_s": round(two["per_s"], 1),
        "two_vs_one_ratio": round(two["per_s"] / one["per_s"], 3),
        "lost_one_two": one["lost"] + two["lost"],
        "mid_stream_join_lost": joined["lost"],
        "mid_stream_join_duplicates": joined["duplicates"],
        "mid_stream_join_per_s": round(joined["per_s"], 1),
        "mid_stream_join_per_replica": joined["per_replica"],
        "two_replicas_per_replica": two["per_replica"],
        "exit_codes": one["exit_codes"] + two["exit_codes"] + joined["exit_codes"],
    }
