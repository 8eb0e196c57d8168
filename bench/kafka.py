"""Bench sections through a real local Kafka-protocol broker (Tansu on 127.0.0.1).

``kafka``: ``stef run`` (at the production log level, ``info``) from a topic to result/dead-letter
topics with the heuristic judge, against the baseline of a plain kafka-python consume + produce of
the same records (no judging, no validation) that writes messages of the results' size with the
same producer settings and in-flight bounds; the two alternate in two rounds.

``memory_inflight``: peak RSS against the bytes in flight, records of 1 KB to 48 KB of SQL
(the largest valid by default).

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
import threading
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import stef.io.kafka
from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.settings import Settings
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


def _producer_options() -> dict[str, Any]:
    """The producer settings of STEF's Kafka sink, so both sides write alike."""
    defaults = getattr(stef.io.kafka, "PRODUCER_DEFAULTS", None)
    if defaults is None:  # before the sink's defaults were named
        defaults = {"compression_type": "lz4", "acks": "all", "linger_ms": 5, "retries": 5}
    return dict(defaults)


def inflight_bounds(concurrency: int) -> tuple[int, int | None]:
    """The records and bytes in-flight bounds ``stef run`` gets by default."""
    settings = Settings(concurrency=concurrency)
    return settings.inflight_bound, getattr(settings, "inflight_bytes_bound", None)


def _raw_copy(
    bootstrap: str,
    source: str,
    sink: str,
    results: dict[bytes, bytes],
    bound: tuple[int, int | None],
) -> float:
    """Records/s of consume + produce with no judging: the transport's own ceiling. Each record
    is answered with a message of its result's size (the result STEF writes for it), with the
    same producer settings and the same in-flight bounds (records, and bytes when STEF has one)
    as ``stef run``."""
    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{time.time_ns()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST_GROUP,
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, **_producer_options())
    max_records, max_bytes = bound
    cv = threading.Condition()
    inflight = [0, 0]  # records, bytes

    def done(size: int) -> None:
        with cv:
            inflight[0] -= 1
            inflight[1] -= size
            cv.notify_all()

    def full() -> bool:
        return inflight[0] >= max_records or (max_bytes is not None and inflight[1] >= max_bytes)

    n = len(results)
    try:
        seen = 0
        started = None
        next_commit = time.monotonic()
        while seen < n:
            batch = consumer.poll(timeout_ms=200, max_records=max_records)
            for msgs in batch.values():
                if started is None:
                    started = time.perf_counter()
                for m in msgs:
                    size = len(m.value)
                    with cv:
                        cv.wait_for(lambda: not full())
                        inflight[0] += 1
                        inflight[1] += size
                    future = producer.send(sink, key=m.key, value=results[m.value])
                    future.add_both(lambda _r, size=size: done(size))
                    seen += 1
            if time.monotonic() >= next_commit:
                consumer.commit()
                next_commit = time.monotonic() + 0.5
        producer.flush(timeout=60)
        return n / (time.perf_counter() - (started or time.perf_counter()))
    finally:
        producer.close(timeout=5)
        consumer.close()


def result_sizes(payloads: list[bytes]) -> dict[bytes, bytes]:
    """For each payload, a message as long as the result STEF writes for it."""
    rules = load_rules(ROOT / "rules")
    pipeline = Pipeline(lambda: rules, HeuristicJudge())
    out = {}
    for payload in payloads:
        processed = pipeline.process(payload, {"line": 0})
        out[payload] = b"r" * len(processed.value)
    return out


def stef_run_until_drained(
    bootstrap: str,
    source: str,
    results: str,
    dead: str,
    n: int,
    concurrency: int,
    *,
    log_level: str = "info",
    extra: list[str] | None = None,
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
        *(extra or []),
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
    """``stef run`` and the raw copy over the same records, alternating in two rounds."""
    n = 10_000
    concurrency = 8
    payloads = _payloads(corpus, n)
    results = result_sizes(payloads)
    bound = inflight_bounds(concurrency)
    raw_s = e2e_s = 0.0
    e2e_n = 0.0
    codes = []
    with tansu_broker() as broker:
        source = broker.create_topic("bench-in", PARTITIONS)
        broker.produce(source, payloads)
        for round_ in range(2):
            for side in ("raw", "stef") if round_ == 0 else ("stef", "raw"):
                if side == "raw":
                    sink = broker.create_topic(f"bench-raw-out-{round_}", PARTITIONS)
                    raw_s += n / _raw_copy(broker.bootstrap, source, sink, results, bound)
                    continue
                out = broker.create_topic(f"bench-results-{round_}", PARTITIONS)
                dead = broker.create_topic(f"bench-dead-{round_}", 1)
                e2e = stef_run_until_drained(broker.bootstrap, source, out, dead, n, concurrency)
                e2e_s += e2e["seconds"]
                e2e_n += e2e["per_s"] * e2e["seconds"]
                codes.append(e2e["exit_code"])
    raw_rate, e2e_rate = 2 * n / raw_s, e2e_n / e2e_s
    return {
        "records": 2 * n,
        "partitions": PARTITIONS,
        "concurrency": concurrency,
        "inflight_bound_records": bound[0],
        "inflight_bound_bytes": bound[1],
        "log_level": "info",
        "result_bytes_mean": round(sum(len(v) for v in results.values()) / n),
        "kafka_e2e_per_s": round(e2e_rate, 1),
        "kafka_raw_per_s": round(raw_rate, 1),
        "e2e_vs_raw_ratio": round(e2e_rate / raw_rate, 3),
        "stef_exit_codes": codes,
    }


def _padded(corpus: list[dict[str, Any]], n: int, sql_bytes: int) -> list[bytes]:
    """Records whose SQL carries a string literal that makes it about ``sql_bytes`` long."""
    out = []
    for i in range(n):
        rec = dict(corpus[i % len(corpus)])
        rec["id"] = f"pad-{sql_bytes}-{i}"
        pad = max(0, sql_bytes - len(rec["sql"]) - 40)
        rec["sql"] = f"SELECT note FROM notes WHERE id = {i} AND note <> '{'x' * pad}'"
        out.append(json.dumps(rec).encode())
    return out


def run_memory_inflight(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Peak RSS of ``stef run`` against the bytes in flight: records of growing SQL size drain
    a backlog at the default bounds."""
    rows = []
    concurrency = 8
    with tansu_broker() as broker:
        for sql_bytes in (1_000, 8_000, 24_000, 48_000):
            n = 1_500
            payloads = _padded(corpus, n, sql_bytes)
            source = broker.create_topic(f"rss-in-{sql_bytes}", PARTITIONS)
            broker.produce(source, payloads)
            out = broker.create_topic(f"rss-out-{sql_bytes}", PARTITIONS)
            dead = broker.create_topic(f"rss-dead-{sql_bytes}", 1)
            r = stef_run_until_drained(broker.bootstrap, source, out, dead, n, concurrency)
            record_bytes = sum(map(len, payloads)) / n
            rows.append(
                {
                    "record_kb": round(record_bytes / 1024, 1),
                    "peak_inflight_records": int(r["peak_inflight"]),
                    "peak_inflight_mb": round(r["peak_inflight"] * record_bytes / 2**20, 1),
                    "peak_rss_mb": round(r["peak_rss_mb"], 1),
                    "records_per_s": round(r["per_s"], 1),
                }
            )
    bound = inflight_bounds(concurrency)
    return {
        "concurrency": concurrency,
        "inflight_bound_records": bound[0],
        "inflight_bound_bytes": bound[1],
        "rss_by_inflight_bytes": rows,
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
