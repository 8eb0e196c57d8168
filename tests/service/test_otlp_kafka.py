"""``stef run`` on OpenTelemetry traces in Kafka: real SDK traces (the official OpenAI
instrumentation, OpenInference's, a LangChain-style SQL tool span) written to a Tansu topic as the
Collector's Kafka exporter frames them (``otlp_proto`` and ``otlp_json``), judged with the same
scores as the equivalent flat JSONL records; a trace split across two partitions (its root first)
joined; a message that does not decode dead-lettered; evaluation results written back as OTLP logs
to Kafka; a backfill of an OTLP topic; SIGKILL mid-stream with traces split across messages."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData

from stef.io.deadletter import original_payload
from stef.testing.fake_server import FakeLlmServer
from tests.brokers import Broker
from tests.otel.traces import CASES, Case, messages, spans_of
from tests.service.conftest import ROOT, ServiceProcess, kafka_config

pytestmark = pytest.mark.integration

SPLIT = Case("Total revenue in 2019", "SELECT SUM(revenue) FROM orders WHERE year = 2019", "genai")
MALFORMED = b"\x0a\xff\xff\xff\xff\x0f not a TracesData"


@pytest.fixture(scope="module")
def traced() -> Iterator[list[tuple[Case, Any]]]:
    with FakeLlmServer() as server:
        yield [(case, spans_of(case, server)) for case in [*CASES, SPLIT]]


def _flat_scores(tmp_path: Path, cases: list[Case]) -> dict[str, float]:
    """question -> score of the flat JSONL records through ``stef replay``."""
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(json.dumps(c.flat()) + "\n" for c in cases))
    out = tmp_path / "flat-results.jsonl"
    subprocess.run(
        [sys.executable, "-m", "stef.cli", "replay", str(flat), "-o", str(out), "--no-progress"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    results = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["input"]["question"]: r["score"] for r in results}


def _produce(
    broker: Broker,
    topic: str,
    traced: list[tuple[Case, Any]],
    encoding: str,
    *,
    singly: bool = False,
) -> None:
    keys: list[bytes | None] = []
    values: list[bytes] = []
    for case, spans in traced:
        if case is SPLIT:  # the root span in partition 0 first, then the chat span in 1
            children = [s for s in spans if s.parent is not None]
            roots = [s for s in spans if s.parent is None]
            for partition, part in enumerate((roots, children)):
                _produce_at(broker, topic, partition, *messages(part, encoding))
            continue
        key, value = messages(spans, encoding)
        keys.append(key)
        values.append(value)
    keys.append(b"0" * 32)
    values.append(MALFORMED if encoding == "otlp_proto" else b'{"resourceSpans": 7}')
    if not singly:
        broker.produce(topic, values, keys=keys)
        return
    # One batch per message: Tansu's end offsets can be wrong after a batched produce, and a
    # backfill reads its range up to them.
    for key, value in zip(keys, values, strict=True):
        broker.produce(topic, [value], keys=[key])


def _produce_at(broker: Broker, topic: str, partition: int, key: bytes, value: bytes) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        producer.send(topic, value=value, key=key, partition=partition).get(timeout=30)
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_traces_in_kafka_are_judged_like_flat_records(
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    traced: list[tuple[Case, Any]],
    tmp_path: Path,
    encoding: str,
) -> None:
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"otlp_spans-{tag}", 2)
    results = kafka_broker.create_topic(f"results-{tag}", 1)
    dead = kafka_broker.create_topic(f"dead-{tag}", 1)
    logs = kafka_broker.create_topic(f"otlp_logs-{tag}", 1)
    _produce(kafka_broker, source, traced, encoding)
    url = f"otlp+kafka://{kafka_broker.bootstrap}/{source}?group=stef-{tag}&encoding={encoding}"
    # The split trace's child, in the other partition, joins its root if it comes within
    # settle_s: 5 s, not the default 1, for a fetch of that partition late on a loaded machine.
    config = kafka_config(span_mapping={"settle_s": 5})
    service = service_factory(
        "--source",
        url,
        "--results",
        kafka_broker.url(results),
        "--dead-letters",
        kafka_broker.url(dead),
        config=config,
    )
    evaluations = service_factory(
        "--source",
        url.replace(f"stef-{tag}", f"otel-{tag}"),
        "--results",
        f"otlp+kafka://{kafka_broker.bootstrap}/{logs}",
        "--dead-letters",
        "-",
        config=config,
    )
    got = kafka_broker.consume_all(results, expect=len(traced), timeout_s=90)
    letters = kafka_broker.consume_all(dead, expect=1, timeout_s=30)
    logged = kafka_broker.consume_all(logs, expect=len(traced), timeout_s=60)
    for proc in (service, evaluations):
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0

    by_trace = {
        json.loads(m.value)["metadata"]["otel"]["trace_id"]: json.loads(m.value) for m in got
    }
    assert len(got) == len(traced) == len(by_trace)  # one result per trace, the split one joined
    expected = _flat_scores(tmp_path, [c for c, _ in traced])
    for case, spans in traced:
        result = by_trace[format(spans[0].context.trace_id, "032x")]
        assert result["input"]["question"] == case.question
        assert result["input"]["sql"] == case.sql
        assert (result["app"], result["agent"], result["agent_version"]) == (
            "sales",
            "sales",
            "2.1",
        )
        assert result["score"] == expected[case.question], case.style
        assert m_key(got, result) == result["id"].encode()

    assert len(letters) == 1
    letter = json.loads(letters[0].value)
    assert letter["reason"] == "not_otlp"
    assert original_payload(letter) == (
        MALFORMED if encoding == "otlp_proto" else b'{"resourceSpans": 7}'
    )

    records = []
    for m in logged:
        data = LogsData.FromString(m.value)
        for rl in data.resource_logs:
            for sl in rl.scope_logs:
                records.extend(sl.log_records)
    assert len(records) == len(traced)
    for record in records:
        assert record.event_name == "gen_ai.evaluation.result"
        attrs = {kv.key: kv.value for kv in record.attributes}
        result = by_trace[record.trace_id.hex()]
        assert record.span_id.hex() == result["metadata"]["otel"]["span_id"]
        assert attrs["gen_ai.evaluation.score.value"].double_value == result["score"]
        assert attrs["gen_ai.evaluation.score.label"].string_value == result["tier"]
        assert attrs["stef.verdict"].string_value == result["components"]["verdict"]


def m_key(got: list[Any], result: dict[str, Any]) -> bytes:
    return next(m.key for m in got if json.loads(m.value)["id"] == result["id"])


def test_backfill_reads_a_range_of_otlp_messages(
    kafka_broker: Broker, traced: list[tuple[Case, Any]], tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"otlp_spans-{tag}", 2)
    _produce(kafka_broker, source, traced, "otlp_proto", singly=True)
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stef.cli",
            "backfill",
            "--source",
            f"otlp+kafka://{kafka_broker.bootstrap}/{source}",
            "--from",
            "2000-01-01T00:00:00Z",
            "--results",
            f"file:{out}",
            "--dead-letters",
            f"file:{dead}",
            "--no-progress",
            "--metrics-port",
            "off",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    results = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["input"]["question"] for r in results) == sorted(c.question for c, _ in traced)
    assert all(r["backfill"]["from"].startswith("2000-01-01") for r in results)
    letters = [json.loads(x) for x in dead.read_text().splitlines()]
    assert [d["reason"] for d in letters] == ["not_otlp"]


def test_sigkill_mid_stream_loses_no_trace(
    kafka_broker: Broker, service_factory: Callable[..., ServiceProcess]
) -> None:
    from tests.otel.traces import sql_tool_traces
    from tests.service.conftest import caught_up, valid_record

    cases = [
        Case(valid_record(i)["question"], valid_record(i)["sql"], "sql_tool") for i in range(1000)
    ]
    traces = sql_tool_traces(cases)
    keys: list[bytes | None] = []
    values: list[bytes] = []
    for i, spans in enumerate(traces):
        parts = (
            [spans]
            if i % 10
            else [[s for s in spans if s.parent], [s for s in spans if not s.parent]]
        )
        for part in parts:  # every tenth trace split: its tool span, then its root
            key, value = messages(part, "otlp_proto")
            keys.append(key)
            values.append(value)
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"otlp_spans-{tag}", 4)
    results = kafka_broker.create_topic(f"results-{tag}", 2)
    dead = kafka_broker.create_topic(f"dead-{tag}", 1)
    kafka_broker.produce(source, values, keys=keys)
    args = [
        "--source",
        f"otlp+kafka://{kafka_broker.bootstrap}/{source}?group=stef-{tag}",
        "--results",
        kafka_broker.url(results),
        "--dead-letters",
        kafka_broker.url(dead),
        "--concurrency",
        "4",
        "--max-inflight",
        "32",
        "--drain-timeout",
        "20",
    ]
    first = service_factory(*args, config=kafka_config())
    first.wait_ready()
    first.wait_for(lambda: first.total("stef_records_total") >= 400, timeout_s=120, what="400")
    first.signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    second = service_factory(*args, config=kafka_config())
    second.wait_ready()
    second.wait_for(lambda: caught_up(second, 4), timeout_s=180, what="the backlog")
    got = kafka_broker.consume_all(results, expect=len(traces), timeout_s=120)
    second.signal(signal.SIGTERM)
    assert second.wait(60) == 0
    ids = [json.loads(m.value)["metadata"]["otel"]["trace_id"] for m in got]
    wanted = {format(spans[0].context.trace_id, "032x") for spans in traces}
    assert set(ids) == wanted, f"{len(wanted - set(ids))} traces lost"
    duplicates = len(ids) - len(set(ids))
    print(f"\nOTLP duplicates after SIGKILL: {duplicates}")
    assert duplicates <= 32 + 300  # the in-flight bound and 0.2 s of commits, as for records
    assert kafka_broker.consume_all(dead, expect=0, timeout_s=2) == []
