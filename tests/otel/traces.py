"""Real OpenTelemetry traces for the OTLP tests: the Python SDK, an ``openai`` client instrumented
with the official GenAI instrumentation or with OpenInference's calling STEF's fake OpenAI server,
and a hand-built LangChain-style SQL tool span; encoded with the SDK's own OTLP encoder and framed
as the Collector's Kafka exporter writes them (one message per trace, keyed by its hex id)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from stef.testing.fake_server import FakeLlmServer, Reply

RESOURCE = {"service.name": "sales", "service.version": "2.1"}


@dataclass(frozen=True)
class Case:
    """One agent request: what the trace carries, and the flat record it stands for."""

    question: str
    sql: str
    style: str  # genai, openinference or sql_tool

    def flat(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "sql": self.sql,
            "app": "sales",
            "agent": "sales",
            "agent_version": "2.1",
        }


CASES = [
    Case("Total revenue in 2021", "SELECT SUM(revenue) FROM orders WHERE year = 2021", "genai"),
    Case(
        "How many customers are in EMEA?",
        "SELECT COUNT(*) FROM customers WHERE region = 'EMEA'",
        "openinference",
    ),
    Case(
        "Revenue by region for 2020",
        "SELECT region, SUM(revenue) FROM orders WHERE year = 2020 GROUP BY region",
        "sql_tool",
    ),
    Case(
        "List open tickets for team APAC",
        "SELECT id FROM tickets WHERE team = 'APAC' AND open = 1",
        "genai",
    ),
]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _answer(case: Case) -> str:
    return f"Here is the query:\n```sql\n{case.sql}\n```\nIt sums what you asked."


def _chat(server: FakeLlmServer, case: Case) -> None:
    import openai

    server.script(Reply(_answer(case)))
    client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    try:
        client.chat.completions.create(
            model="sql-agent",
            messages=[
                {"role": "system", "content": "Write one SQL query for the user's question."},
                {"role": "user", "content": case.question},
            ],
        )
    finally:
        client.close()


def genai_spans(server: FakeLlmServer, case: Case) -> Sequence[ReadableSpan]:
    """The official OpenAI instrumentation (GenAI conventions, content on the span) under an
    agent's root span."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider, exporter = _provider()
    with _env(
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    ):
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            tracer = provider.get_tracer("agent")
            with tracer.start_as_current_span(
                "invoke_agent sql-agent", attributes={"gen_ai.operation.name": "invoke_agent"}
            ):
                _chat(server, case)
        finally:
            instrumentor.uninstrument()
    return exporter.get_finished_spans()


def openinference_spans(server: FakeLlmServer, case: Case) -> Sequence[ReadableSpan]:
    """OpenInference's OpenAI instrumentation (its LLM span is the root)."""
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider, exporter = _provider()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        _chat(server, case)
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def sql_tool_spans(case: Case) -> Sequence[ReadableSpan]:
    """A LangChain-style agent as OpenInference records it: a CHAIN root span with the question,
    a TOOL span ``sql_db_query`` whose input is the SQL."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    with (
        tracer.start_as_current_span(
            "AgentExecutor",
            attributes={
                "openinference.span.kind": "CHAIN",
                "input.value": json.dumps({"input": case.question}),
                "input.mime_type": "application/json",
            },
        ),
        tracer.start_as_current_span(
            "sql_db_query",
            kind=SpanKind.INTERNAL,
            attributes={
                "openinference.span.kind": "TOOL",
                "tool.name": "sql_db_query",
                "input.value": json.dumps({"query": case.sql}),
                "output.value": "[(42,)]",
            },
        ),
    ):
        pass
    return exporter.get_finished_spans()


def spans_of(case: Case, server: FakeLlmServer) -> Sequence[ReadableSpan]:
    if case.style == "genai":
        return genai_spans(server, case)
    if case.style == "openinference":
        return openinference_spans(server, case)
    return sql_tool_spans(case)


def traces_data(spans: Sequence[ReadableSpan]) -> TracesData:
    """The SDK's own OTLP encoding of ``spans``, as the ``TracesData`` the Kafka exporter writes
    (``ExportTraceServiceRequest`` has the same fields)."""
    return TracesData.FromString(encode_spans(spans).SerializeToString())


def otlp_json(data: TracesData) -> bytes:
    """The Collector's ``otlp_json`` framing: OTLP JSON, trace and span ids in hex."""
    tree = json_format.MessageToDict(data, use_integers_for_enums=True)
    _to_hex(tree)
    return json.dumps(tree).encode()


def _to_hex(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _to_hex(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _to_hex(value)


def messages(spans: Sequence[ReadableSpan], encoding: str) -> tuple[bytes, bytes]:
    """(key, value) of one trace's Kafka message, in ``otlp_proto`` or ``otlp_json``."""
    data = traces_data(spans)
    trace_id = format(spans[0].context.trace_id, "032x")
    value = data.SerializeToString() if encoding == "otlp_proto" else otlp_json(data)
    return trace_id.encode(), value


def sql_tool_traces(cases: Sequence[Case]) -> list[Sequence[ReadableSpan]]:
    """:func:`sql_tool_spans` for many cases from one provider (fast): the spans of each trace."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    for case in cases:
        with (
            tracer.start_as_current_span(
                "AgentExecutor",
                attributes={
                    "openinference.span.kind": "CHAIN",
                    "input.value": json.dumps({"input": case.question}),
                },
            ),
            tracer.start_as_current_span(
                "sql_db_query",
                attributes={
                    "openinference.span.kind": "TOOL",
                    "input.value": json.dumps({"query": case.sql}),
                },
            ),
        ):
            pass
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    return list(by_trace.values())


def genai_logs(server: FakeLlmServer, case: Case) -> bytes:
    """The official OpenAI instrumentation with content sent as log records (``EVENT_ONLY``):
    the ``LogsData`` of its ``gen_ai.client.inference.operation.details`` record, encoded with
    the SDK's own OTLP log encoder."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    provider, _ = _provider()
    logs = LoggerProvider(resource=Resource.create(RESOURCE))
    exporter = InMemoryLogRecordExporter()
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    with _env(
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVENT_ONLY",
    ):
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider, logger_provider=logs)
        try:
            _chat(server, case)
        finally:
            instrumentor.uninstrument()
    request = encode_logs(exporter.get_finished_logs())
    return LogsData.FromString(request.SerializeToString()).SerializeToString()
