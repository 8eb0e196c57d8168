"""Bench sections through a real local Kafka-protocol broker (Tansu on 127.0.0.1).

``kafka``: ``stef run`` from a topic to result/dead-letter topics with the heuristic judge, against
the baseline of a plain kafka-python consume + produce of the same records (no judging, no
validation) in the same run.

``memory``: peak RSS (VmHWM) of ``stef run`` while a 100,000-record backlog drains: the backlog
waits in the topic, fetching pauses at the in-flight bound, so memory must stay flat.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.brokers import FAST_GROUP, free_port, tansu_broker

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


def _payloads(corpus: list[dict[str, Any]], n: int) -> list[bytes]:
    out = []
    for i in range(n):
        rec = dict(corpus[i % len(corpus)])
        rec["id"] = f"bench-{i}"
        out.append(json.dumps(rec).encode())
    return out


def metric_samples(port: int) -> dict[str, float]:
    """Every sample of a live /metrics, keyed by name and sorted labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def rss_mib(pid: int, field: str) -> float:
    """A memory field of /proc/PID/status (VmRSS, VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _raw_copy(bootstrap: str, source: str, sink: str, n: int) -> float:
    """Records/s of consume + produce with no judging: the transport's own ceiling."""
    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{time.time()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST_GROUP,
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    try:
        seen = 0
        started = None
        while seen < n:
            batch = consumer.poll(timeout_ms=500)
            for msgs in batch.values():
                if started is None:
                    started = time.perf_counter()
                for m in msgs:
                    producer.send(sink, key=m.key, value=m.value)
                    seen += 1
            if batch:
                consumer.commit()
        producer.flush(timeout=60)
        return n / (time.perf_counter() - (started or time.perf_counter()))
    finally:
        producer.close(timeout=5)
        consumer.close()


def stef_run_until_drained(
    bootstrap: str,
    source: str,
    results: str,
    dead: str,
    n: int,
    concurrency: int,
    *,
    log_level: str = "warning",
) -> dict[str, float]:
    """Run ``stef run`` from ``source`` until ``n`` records are counted and every partition's lag
    is zero; then SIGTERM it. Returns records/s (from its first record), peak and final RSS,
    the highest in-flight count seen and the exit code."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    env["STEF_KAFKA_CONSUMER"] = json.dumps(FAST_GROUP)
    env["STEF_AUTO_OFFSET_RESET"] = "earliest"  # the records are produced before it joins
    cmd = [
        str(ROOT / ".venv" / "bin" / "stef"), "run",
        "--source", f"kafka://{bootstrap}/{source}?group=bench-{time.time()}",
        "--results", f"kafka://{bootstrap}/{results}",
        "--dead-letters", f"kafka://{bootstrap}/{dead}",
        "--rules", str(ROOT / "rules"),
        "--concurrency", str(concurrency), "--metrics-port", str(port), "--log-level", log_level,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = first = None
        peak_inflight = 0.0
        while True:
            time.sleep(0.25)
            if proc.poll() is not None:
                raise RuntimeError(f"stef run exited with {proc.returncode}")
            try:
                m = metric_samples(port)
            except OSError:
                continue
            done = sum(v for k, v in m.items() if k.startswith("stef_records_total{"))
            peak_inflight = max(peak_inflight, m.get("stef_inflight{}", 0.0))
            if started is None and done > 0:
                started, first = time.perf_counter(), done
            lags = [v for k, v in m.items() if k.startswith("stef_consumer_lag{")]
            if done >= n and lags and not any(lags):
                elapsed = time.perf_counter() - (started or time.perf_counter())
                break
        peak = rss_mib(proc.pid, "VmHWM")
        now = rss_mib(proc.pid, "VmRSS")
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return {
        "per_s": (n - (first or 0)) / elapsed,
        "seconds": elapsed,
        "peak_rss_mb": peak,
        "rss_at_end_mb": now,
        "peak_inflight": peak_inflight,
        "exit_code": rc,
    }


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    n = 20_000
    payloads = _payloads(corpus, n)
    with tansu_broker() as broker:
        source = broker.create_topic("bench-in", PARTITIONS)
        broker.produce(source, payloads)
        raw_sink = broker.create_topic("bench-raw-out", PARTITIONS)
        raw = _raw_copy(broker.bootstrap, source, raw_sink, n)
        results = broker.create_topic("bench-results", PARTITIONS)
        dead = broker.create_topic("bench-dead", 1)
        e2e = stef_run_until_drained(broker.bootstrap, source, results, dead, n, concurrency=8)
    return {
        "records": n,
        "partitions": PARTITIONS,
        "kafka_e2e_per_s": round(e2e["per_s"], 1),
        "kafka_raw_per_s": round(raw, 1),
        "e2e_vs_raw_ratio": round(e2e["per_s"] / raw, 3),
        "stef_exit_code": e2e["exit_code"],
    }


def run_memory(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    n = args.backlog
    small = 5_000
    with tansu_broker() as broker:
        out: dict[str, Any] = {}
        for label, count in (("baseline_5k", small), ("backlog", n)):
            source = broker.create_topic(f"mem-in-{label}", PARTITIONS)
            broker.produce(source, _payloads(corpus, count))
            results = broker.create_topic(f"mem-results-{label}", PARTITIONS)
            dead = broker.create_topic(f"mem-dead-{label}", 1)
            r = stef_run_until_drained(
                broker.bootstrap, source, results, dead, count, concurrency=8
            )
            out[label] = r
    return {
        "backlog_records": n,
        "peak_rss_mb": round(out["backlog"]["peak_rss_mb"], 1),
        "peak_rss_mb_5k_backlog": round(out["baseline_5k"]["peak_rss_mb"], 1),
        "rss_ratio_backlog_vs_5k": round(
            out["backlog"]["peak_rss_mb"] / out["baseline_5k"]["peak_rss_mb"], 3
        ),
        "drain_per_s": round(out["backlog"]["per_s"], 1),
    }


if __name__ == "__main__":
    sys.exit("run through bench/run.py")
