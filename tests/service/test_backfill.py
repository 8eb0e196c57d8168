"""``stef backfill`` on the real broker: a time range of a topic is judged exactly (nothing before
it, nothing after it), the live consumer group's offsets are not touched, every result carries
its ``backfill`` range, results written to Kafka carry a ``stef-backfill`` header, and its
``/metrics`` has the ``stef_backfill_*`` families only, never the live ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
import warnings
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stef.testing.fake_server import FakeLlmServer
from tests.brokers import Broker
from tests.service.conftest import ROOT, read_jsonl, valid_record

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = pytest.mark.integration


def _produce_singly(broker: Broker, topic: str, ids: range) -> None:
    """One record per batch: Tansu's end offsets are wrong after a batch of several records."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks="all")
    try:
        for i in ids:
            producer.send(topic, value=json.dumps(valid_record(i)).encode()).get(timeout=30)
    finally:
        producer.close(timeout=5)


def _instant() -> datetime:
    time.sleep(1.1)  # record timestamps are in milliseconds: keep the windows apart
    now = datetime.now(UTC)
    time.sleep(0.1)
    return now


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    return {**env, **extra}


def _backfill(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = _env()
    return subprocess.run(
        [sys.executable, "-m", "stef.cli", "backfill", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_backfill_judges_exactly_the_records_of_the_range(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    topic = kafka_broker.create_topic(f"bf-{uuid.uuid4().hex[:8]}", 3)
    _produce_singly(kafka_broker, topic, range(0, 6))  # before the range
    start = _instant()
    _produce_singly(kafka_broker, topic, range(6, 15))  # in it
    end = _instant()
    _produce_singly(kafka_broker, topic, range(15, 20))  # after it

    # A live group that has committed part of the topic: the backfill must not move it.
    group = f"live-{uuid.uuid4().hex[:8]}"
    live = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=group)
    tps = [TopicPartition(topic, p) for p in range(3)]
    from kafka.structs import OffsetAndMetadata

    live.commit({tp: OffsetAndMetadata(1, "", -1) for tp in tps})
    results = tmp_path / "results.jsonl"
    done = _backfill(
        tmp_path,
        "--source",
        kafka_broker.url(topic),
        "--from",
        start.isoformat(),
        "--to",
        end.isoformat(),
        "--results",
        f"file:{results}",
        "--dead-letters",
        f"file:{tmp_path / 'dead.jsonl'}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ids = sorted(r["id"] for r in read_jsonl(results))
    assert ids == [f"r-{i:06d}" for i in range(6, 15)]
    # Each result says it is a backfill, and of which range (the flags, as given).
    mark = {"from": start.isoformat(), "to": end.isoformat()}
    assert all(r["backfill"] == mark for r in read_jsonl(results))
    assert "9 results, 0 dead letters of 9 records" in done.stderr
    assert {tp: live.committed(tp) for tp in tps} == dict.fromkeys(tps, 1)
    live.close()


def test_backfill_without_an_end_reads_to_the_end_and_stops(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    topic = kafka_broker.create_topic(f"bf-{uuid.uuid4().hex[:8]}", 2)
    _produce_singly(kafka_broker, topic, range(0, 3))
    start = _instant()
    _produce_singly(kafka_broker, topic, range(3, 7))
    results = tmp_path / "results.jsonl"
    done = _backfill(
        tmp_path,
        "--source",
        kafka_broker.url(topic),
        "--from",
        start.isoformat(),
        "--results",
        f"file:{results}",
        "--dead-letters",
        f"file:{tmp_path / 'dead.jsonl'}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(r["id"] for r in read_jsonl(results)) == [f"r-{i:06d}" for i in range(3, 7)]


def test_backfill_results_in_kafka_carry_the_backfill_header(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    topic = kafka_broker.create_topic(f"bf-{uuid.uuid4().hex[:8]}", 1)
    start = datetime.now(UTC)
    time.sleep(0.1)
    _produce_singly(kafka_broker, topic, range(0, 3))
    results = kafka_broker.create_topic(f"bf-results-{uuid.uuid4().hex[:8]}", 1)
    done = _backfill(
        tmp_path,
        "--source",
        kafka_broker.url(topic),
        "--from",
        start.isoformat(),
        "--results",
        kafka_broker.url(results),
        "--dead-letters",
        f"file:{tmp_path / 'dead.jsonl'}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = kafka_broker.consume_all(results, expect=3)
    assert sorted(json.loads(m.value)["id"] for m in out) == [f"r-{i:06d}" for i in range(3)]
    mark = f"{start.isoformat()}/".encode()
    assert all(dict(m.headers)["stef-backfill"] == mark for m in out)
    # No --to: the range ran to the end of the topic at start, "to" is null.
    assert all(
        json.loads(m.value)["backfill"] == {"from": start.isoformat(), "to": None} for m in out
    )


def test_backfill_refuses_a_time_without_timezone_or_a_file_source(tmp_path: Path) -> None:
    naive = _backfill(tmp_path, "--source", "kafka://127.0.0.1:9/t", "--from", "2026-11-01")
    assert naive.returncode == 2 and "give a timezone" in naive.stderr
    file = _backfill(tmp_path, "--source", f"file:{tmp_path}/x", "--from", "2026-11-01T00:00Z")
    assert file.returncode == 2 and "kafka://HOST:PORT/TOPIC" in file.stderr


def _scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]] | None:
    """Every family of the backfill's /metrics: name -> labels -> value; None if it is down."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    return {
        fam.name: {tuple(sorted(s.labels.items())): s.value for s in fam.samples}
        for fam in text_string_to_metric_families(text)
    }


def _logged_port(log: Path) -> int | None:
    """The port of the backfill's ``backfill_metrics`` log line, once it is written."""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # a line being written
            continue
        if isinstance(event, dict) and event.get("event") == "backfill_metrics":
            return int(event["port"])
    return None


def test_backfill_metrics_are_their_own_families_not_the_live_ones(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    """Scraped while it runs (each answer of the fake LLM takes 0.7 s, one at a time): the
    backfill counts its records under stef_backfill_records_total and exports the size of its
    range, and none of the live families (a re-judged unsafe record must not fire the live
    StefUnsafeSql alert, nor be summed into the live dashboards)."""
    topic = kafka_broker.create_topic(f"bf-{uuid.uuid4().hex[:8]}", 1)
    start = datetime.now(UTC)
    time.sleep(0.1)
    _produce_singly(kafka_broker, topic, range(0, 4))
    results = tmp_path / "results.jsonl"
    log = tmp_path / "backfill.log"
    with FakeLlmServer(latency_s=0.7) as llm, log.open("wb") as stderr_file:
        env = _env(STEF_LLM_BASE_URL=llm.base_url, STEF_LLM_MODEL="fake-judge")
        env["STEF_METRICS_PORT"] = "9"  # the live service's setting: the backfill ignores it
        cmd = [
            sys.executable, "-m", "stef.cli", "backfill", "--source", kafka_broker.url(topic),
            "--from", start.isoformat(), "--results", f"file:{results}",
            "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}", "--concurrency", "1",
            # Port 0: one chosen beforehand can be taken by another process meanwhile.
            "--metrics-port", "0",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=stderr_file)
        scrapes = []
        try:
            while proc.poll() is None:
                port = _logged_port(log)
                got = None if port is None else _scrape(port)
                if got is not None:
                    scrapes.append(got)
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    assert len(read_jsonl(results)) == 4
    assert scrapes, "the backfill's /metrics never answered"
    families = set().union(*scrapes)
    assert {"stef_backfill_records", "stef_backfill_range_records"} <= families
    assert not {f for f in families if f.startswith("stef_") and "backfill" not in f}
    # 0 while the range is being resolved at start, then its size.
    sizes = [s["stef_backfill_range_records"][()] for s in scrapes]
    assert set(sizes) <= {0, 4} and sizes[-1] == 4 and sizes == sorted(sizes), sizes
    # Without rules the first app names seen are the labels (docs/metrics.md): "sales".
    counted = [
        s["stef_backfill_records"].get((("app", "sales"), ("outcome", "evaluated")), 0.0)
        for s in scrapes
    ]
    assert counted == sorted(counted) and 1 <= counted[-1] <= 4, counted
