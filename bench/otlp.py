"""Bench section ``otlp``: ``stef run`` on OpenTelemetry traces against the flat Kafka source in the
same run. The same records, once as flat JSON messages and once as SDK-built traces (a CHAIN root
span with the question, a TOOL span with the SQL: OpenInference's LangChain shape) encoded with the
SDK's OTLP encoder, one ``otlp_proto`` message per trace as the Collector's Kafka exporter writes
them; the two sides alternate in two rounds. The issue's bar: OTLP within 2x of flat."""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.kafka import PARTITIONS, _payloads, stef_run_until_drained
from tests.brokers import tansu_broker
from tests.otel.traces import Case, messages, sql_tool_traces


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    n = 5_000
    concurrency = 8
    flat = _payloads(corpus, n)
    rows = [corpus[i % len(corpus)] for i in range(n)]
    traces = sql_tool_traces([Case(r["question"], r["sql"], "sql_tool") for r in rows])
    framed = [messages(spans, "otlp_proto") for spans in traces]
    rates: dict[str, list[float]] = {"flat": [], "otlp": []}
    with tansu_broker() as broker:
        flat_topic = broker.create_topic("bench-flat", PARTITIONS)
        otlp_topic = broker.create_topic("bench-otlp_spans", PARTITIONS)
        broker.produce(flat_topic, flat)
        broker.produce(otlp_topic, [v for _, v in framed], keys=[k for k, _ in framed])
        for round_ in range(2):
            for side in ("flat", "otlp") if round_ == 0 else ("otlp", "flat"):
                out = broker.create_topic(f"bench-{side}-out-{round_}", PARTITIONS)
                dead = broker.create_topic(f"bench-{side}-dead-{round_}", 1)
                # A later --source wins over the helper's kafka:// one (argparse keeps the last).
                extra = (
                    ["--source", f"otlp+kafka://{broker.bootstrap}/{otlp_topic}"
                     f"?group=bench-otlp-{time.time()}&encoding=otlp_proto"]
                    if side == "otlp"
                    else []
                )  # fmt: skip
                topic = otlp_topic if side == "otlp" else flat_topic
                got = stef_run_until_drained(
                    broker.bootstrap, topic, out, dead, n, concurrency, extra=extra
                )
                rates[side].append(got["per_s"])
    flat_rate = sum(rates["flat"]) / 2
    otlp_rate = sum(rates["otlp"]) / 2
    return {
        "records": n,
        "partitions": PARTITIONS,
        "concurrency": concurrency,
        "flat_kafka_per_s": round(flat_rate, 1),
        "otlp_proto_per_s": round(otlp_rate, 1),
        "otlp_vs_flat_ratio": round(otlp_rate / flat_rate, 3),
        "rounds": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
    }
