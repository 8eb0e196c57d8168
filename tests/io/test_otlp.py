"""OTLP in: real SDK traces decoded (both encodings) and mapped to records by the presets; bad
messages and traces without SQL as dead-letter reasons; traces assembled across messages within
bounds; a message done only once every trace it carried is done."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from stef.errors import ConfigError, InvalidInput
from stef.io import Envelope
from stef.io.otlp.assemble import Assembler, Trace
from stef.io.otlp.decode import decode
from stef.io.otlp.mapping import Pick, SpanMapping, SpanSelector
from stef.io.otlp.record import check_field_mapping, trace_record
from stef.io.otlp.source import OtlpSource
from stef.io.otlp.spans import Span
from stef.io.urls import parse_endpoint
from stef.settings import load_settings
from stef.stages.validate import FieldMapping, validate
from stef.testing.fake_server import FakeLlmServer
from tests.otel.traces import CASES, Case, messages, spans_of, sql_tool_spans

ENCODINGS = ("otlp_proto", "otlp_json")


@pytest.fixture(scope="module")
def traced() -> Iterator[list[tuple[Case, Any]]]:
    with FakeLlmServer() as server:
        yield [(case, spans_of(case, server)) for case in CASES]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("preset", ["all", "by_style"])
def test_every_instrumentation_gives_the_flat_record(
    traced: list[tuple[Case, Any]], encoding: str, preset: str
) -> None:
    for case, spans in traced:
        _, value = messages(spans, encoding)
        decoded = decode(value, encoding, "traces")  # type: ignore[arg-type]
        name = "all" if preset == "all" else ("genai" if case.style == "genai" else "openinference")
        record = trace_record(decoded, SpanMapping(preset=name))  # type: ignore[arg-type]
        assert {k: record[k] for k in case.flat()} == case.flat(), case.style
        trace_id = format(spans[0].context.trace_id, "032x")
        sql_span = record["metadata"]["otel"]["span_id"]
        assert record["id"] == f"{trace_id}:{sql_span}"
        assert sql_span in {format(s.context.span_id, "016x") for s in spans}
        validate(json.dumps(record).encode())  # a record the pipeline accepts


def test_the_sql_comes_from_the_tool_span_not_the_root(traced: list[tuple[Case, Any]]) -> None:
    _case, spans = next((c, s) for c, s in traced if c.style == "sql_tool")
    record = trace_record(
        decode(messages(spans, "otlp_proto")[1], "otlp_proto", "traces"), SpanMapping()
    )
    tool = next(s for s in spans if s.name == "sql_db_query")
    assert record["metadata"]["otel"]["span_id"] == format(tool.context.span_id, "016x")


@pytest.mark.parametrize(
    ("payload", "encoding"),
    [
        (b"\x0a\xff\xff\xff\xff\x0f", "otlp_proto"),  # a length past the end
        (b"not protobuf at all, just text", "otlp_proto"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "otlp_json"),
        (b"{oops", "otlp_json"),
        # JSON that is not OTLP: unknown fields are ignored, so each read as an empty message.
        (b'{"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"}', "otlp_json"),
        (b"{}", "otlp_json"),
        (b"[]", "otlp_json"),
        (b"42", "otlp_json"),
        (b'{"resourceLogs": []}', "otlp_json"),  # a logs message on a traces topic
    ],
)
def test_a_message_that_does_not_decode_is_not_otlp(payload: bytes, encoding: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode(payload, encoding, "traces")  # type: ignore[arg-type]
    assert caught.value.reason == "not_otlp"


@pytest.mark.parametrize("field", ["resourceSpans", "resource_spans"])
def test_an_empty_otlp_json_message_holds_no_spans(field: str) -> None:
    assert decode(json.dumps({field: []}).encode(), "otlp_json", "traces") == []


def test_a_trace_without_sql_names_what_is_missing() -> None:
    case = Case("Total revenue in 2021", "SELECT 1", "sql_tool")
    spans = decode(messages(sql_tool_spans(case), "otlp_proto")[1], "otlp_proto", "traces")
    only_root = [s for s in spans if s.is_root]
    with pytest.raises(InvalidInput) as caught:
        trace_record(only_root, SpanMapping())
    assert caught.value.reason == "missing_field"
    assert (
        "sql" in caught.value.detail and "question" not in caught.value.detail.split("gave")[1][:20]
    )
    with pytest.raises(InvalidInput) as nothing:
        trace_record(only_root, SpanMapping(preset="none"))
    assert "question and sql" in nothing.value.detail


@pytest.mark.parametrize(
    ("start_ns", "end_ns", "timestamp"),
    [
        (1_746_093_600 * 10**9, 1_746_093_601 * 10**9, "2025-05-01T10:00:01+00:00"),
        (1_746_093_600 * 10**9, 0, "2025-05-01T10:00:00+00:00"),  # no end: its start
        (0, 0, None),  # neither: no timestamp, not 1970-01-01
        (0, 3 * 10**20, None),  # past year 9999
    ],
)
def test_the_record_time_is_the_sql_spans_end_else_its_start(
    start_ns: int, end_ns: int, timestamp: str | None
) -> None:
    """Before: a span without an end time (a Langfuse row's end_time null, an OTLP span's
    endTimeUnixNano 0) gave the record 1970-01-01, which reads "today" and freshness so."""
    case = Case("Total revenue in 2021", "SELECT SUM(amount) FROM sales", "sql_tool")
    spans = decode(messages(sql_tool_spans(case), "otlp_proto")[1], "otlp_proto", "traces")
    timed = [dataclasses.replace(s, start_ns=start_ns, end_ns=end_ns) for s in spans]
    assert trace_record(timed, SpanMapping()).get("timestamp") == timestamp


def test_own_picks_resource_fields_and_field_mapping_layout() -> None:
    span = Span(
        "ab" * 16,
        "cd" * 8,
        "",
        "ask",
        "SERVER",
        attributes={"request": json.dumps({"q": "How many?", "payload": {"sql": "SELECT 1"}})},
        resource={"service.name": "svc", "deployment.environment": "prod"},
    )
    mapping = SpanMapping(
        preset="none",
        question=(Pick(span=SpanSelector(kind="SERVER"), attribute="request", path="q"),),
        sql=(Pick(attribute="request", path="payload.sql"),),
        app="=sales",
        agent="deployment.environment",
        agent_version=None,
    )
    fields = FieldMapping(fields={"question": "user_query", "sql": "payload.sql"})
    record = trace_record([span], mapping, fields)
    assert record["user_query"] == "How many?" and record["payload"]["sql"] == "SELECT 1"
    assert (record["app"], record["agent"]) == ("sales", "prod") and "agent_version" not in record
    assert validate(json.dumps(record).encode(), fields).question == "How many?"
    with pytest.raises(ConfigError):
        check_field_mapping(FieldMapping(fields={"sql": "turns[-1].sql"}))


def _span(trace: str, span: str, parent: str = "") -> Span:
    return Span(trace * 32, span * 16, parent * 16 if parent else "", span, "INTERNAL")


def test_a_trace_split_across_messages_is_joined_when_its_root_arrives() -> None:
    asm = Assembler(idle_timeout_s=30, max_traces=10, max_spans_per_trace=10)
    ids, closed = asm.add([_span("a", "2", "1"), _span("b", "5")], "m1")
    assert ids == ["a" * 32, "b" * 32]
    assert [t.trace_id for t in closed] == ["b" * 32]  # b came whole
    _, closed = asm.add([_span("a", "1"), _span("a", "2", "1")], "m2")  # m2 repeats a span
    assert [(t.trace_id, t.state, len(t.spans), t.sources) for t in closed] == [
        ("a" * 32, "complete", 2, ["m1", "m2"])
    ]


def test_a_whole_trace_waits_out_settle_s_for_late_children() -> None:
    now = [0.0]
    asm = Assembler(30, 10, 10, clock=lambda: now[0], settle_s=1.0)
    _, closed = asm.add([_span("a", "1")], "p1")  # the root first, from one partition
    assert closed == [] and asm.expired() == []
    now[0] = 0.5
    asm.add([_span("a", "2", "1"), _span("a", "3", "9")], "p0")  # a child, and an orphan
    now[0] = 1.6
    assert asm.expired() == []  # span 3 names a parent not here yet
    asm.add([_span("a", "9", "1")], "p0")
    now[0] = 2.7
    (trace,) = asm.expired()
    assert (trace.state, len(trace.spans), trace.sources) == ("complete", 4, ["p1", "p0", "p0"])


def test_idle_eviction_and_size_bounds() -> None:
    now = [0.0]
    asm = Assembler(idle_timeout_s=5, max_traces=2, max_spans_per_trace=2, clock=lambda: now[0])
    asm.add([_span("a", "2", "1")], "m1")
    asm.add([_span("b", "2", "1")], "m2")
    _, evicted = asm.add([_span("c", "2", "1")], "m3")
    assert [(t.trace_id[0], t.state) for t in evicted] == [("a", "incomplete")]
    now[0] = 4.0
    assert asm.expired() == []
    now[0] = 5.5
    assert [t.trace_id[0] for t in asm.expired()] == ["b", "c"]
    _, big = asm.add([_span("d", "2", "1"), _span("d", "3", "1"), _span("d", "4", "1")], "m4")
    assert [t.state for t in big] == ["too_large"]


def test_open_traces_are_bounded_by_their_messages_bytes() -> None:
    """Before, only their count was: 400 traces without their root, 1 MB each, held 1.1 GB."""
    asm = Assembler(idle_timeout_s=30, max_traces=100, max_spans_per_trace=10, max_bytes=3000)
    for trace in "abc":
        assert asm.add([_span(trace, "2", "1")], trace, 1000)[1] == []
    assert asm.size == 3000
    _, evicted = asm.add([_span("d", "2", "1")], "d", 1000)
    assert [(t.trace_id[0], t.state, t.size) for t in evicted] == [("a", "incomplete", 1000)]
    # One message's bytes are shared by its spans: e's two spans and f's one, 900 each.
    _, evicted = asm.add(
        [_span("e", "2", "1"), _span("e", "3", "1"), _span("f", "2", "1")], "m", 2700
    )
    assert [t.trace_id[0] for t in evicted] == ["b", "c", "d"]
    assert (len(asm), asm.size) == (2, 2700)
    _, closed = asm.add([_span("e", "1")], "root", 100)  # e whole: closed, its bytes freed
    assert [(t.trace_id[0], t.state, t.size) for t in closed] == [("e", "complete", 1900)]
    assert (len(asm), asm.size) == (1, 900)
    assert [t.trace_id[0] for t in asm.expired(everything=True)] == ["f"]
    assert asm.size == 0


def test_every_byte_taken_is_held_or_handed_out_within_the_bound() -> None:
    """Seeded: whatever closes a trace (whole, settled, too large, evicted by count or bytes,
    idle), the bytes held plus those of the traces handed out are the bytes taken in."""
    rng = random.Random(7)
    now = [0.0]
    bound = 5000
    asm = Assembler(5, 8, 6, clock=lambda: now[0], settle_s=0.5, max_bytes=bound)
    taken = out = 0.0
    for step in range(3000):
        now[0] += rng.choice((0.0, 0.1, 0.7))
        if rng.random() < 0.1:
            out += sum(t.size for t in asm.expired(everything=rng.random() < 0.05))
            continue
        spans = [
            _span(rng.choice("abcdefghij"), rng.choice("123456"), rng.choice(("", "1", "2")))
            for _ in range(rng.randint(1, 4))
        ]
        size = rng.randint(0, 3000)
        taken += size
        out += sum(t.size for t in asm.add(spans, step, size)[1])
        assert asm.size <= bound
        assert asm.size + out == pytest.approx(taken)
    out += sum(t.size for t in asm.expired(everything=True))
    assert (len(asm), asm.size) == (0, 0.0)
    assert out == pytest.approx(taken)


class _Messages:
    """An inner source handing out given messages once, then nothing (a finished file)."""

    def __init__(self, payloads: Sequence[bytes]) -> None:
        self.done: list[int] = []
        self._out = [
            Envelope(p, {"file": "x", "line": i + 1}, on_done=self._mark(i))
            for i, p in enumerate(payloads)
        ]

    def _mark(self, i: int) -> Any:
        return lambda: self.done.append(i)

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        out, self._out = self._out[:max_records], self._out[max_records:]
        return out

    @property
    def exhausted(self) -> bool:
        return not self._out

    def start(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...
    def lag(self) -> dict[tuple[str, int], int]:
        return {}

    def uncommitted(self) -> int:
        return 0

    def unreachable(self) -> str | None:
        return None


def test_a_message_is_done_when_every_trace_it_carried_is(traced: list[tuple[Case, Any]]) -> None:
    (_, first), (_, second) = traced[0], traced[2]
    whole = messages([*first, *second], "otlp_proto")[1]  # two traces in one message
    inner = _Messages([whole, b"garbage\xff"])
    source = OtlpSource(inner, encoding="otlp_proto", signal="traces", mapping=SpanMapping())  # type: ignore[arg-type]
    out = source.poll(10, 0.0)
    records = [e for e in out if e.invalid is None]
    bad = [e for e in out if e.invalid is not None]
    assert len(records) == 2 and [e.invalid[0] for e in bad if e.invalid] == ["not_otlp"]
    assert bad[0].payload == b"garbage\xff"
    records[0].on_done()
    assert inner.done == []  # the other trace of the message is not done yet
    records[1].on_done()
    assert inner.done == [0]
    assert source.exhausted


def test_incomplete_traces_judged_or_dead_lettered_per_setting(
    traced: list[tuple[Case, Any]],
) -> None:
    _, spans = traced[0]  # the chat span under the agent's root: everything but the root
    children = [s for s in spans if s.parent is not None]
    payload = messages(children, "otlp_proto")[1]
    for policy, invalid in (("judge", None), ("dead_letter", "trace_incomplete")):
        source = OtlpSource(
            _Messages([payload]),  # type: ignore[arg-type]
            encoding="otlp_proto",
            signal="traces",
            mapping=SpanMapping(incomplete=policy),  # type: ignore[arg-type]
        )
        out = source.poll(10, 0.0)  # the file ended: open traces close
        assert len(out) == 1
        assert (out[0].invalid or (None,))[0] == invalid


def test_urls_and_settings() -> None:
    e = parse_endpoint("otlp+kafka://127.0.0.1:9092/otlp_spans?group=g&encoding=otlp_json")
    assert (e.kind, e.topic, e.group, e.option("encoding", "")) == (
        "otlp+kafka",
        "otlp_spans",
        "g",
        "otlp_json",
    )
    assert parse_endpoint("otlp+http://127.0.0.1:4318", what="sink").path == (
        "http://127.0.0.1:4318/v1/logs"
    )
    for bad, what in (
        ("otlp+kafka://127.0.0.1:9092/t?encoding=avro", "source"),
        ("otlp+kafka://127.0.0.1:9092/t?compression=lz4", "source"),
        ("otlp+http://127.0.0.1:4318", "source"),
    ):
        with pytest.raises(ConfigError):
            parse_endpoint(bad, what=what)
    with pytest.raises(ConfigError):
        load_settings(overrides={"dead_letters": "otlp+http://127.0.0.1:4318"}, env={})
    settings = load_settings(
        overrides={"span_mapping": {"preset": "genai", "incomplete": "dead_letter"}}, env={}
    )
    assert settings.span_mapping.incomplete == "dead_letter"


def test_a_logs_topic_of_genai_content_events() -> None:
    from tests.otel.traces import genai_logs

    case = CASES[0]
    with FakeLlmServer() as server:
        payload = genai_logs(server, case)
    spans = decode(payload, "otlp_proto", "logs")
    assert {s.kind for s in spans} == {"LOG"}
    record = trace_record(spans, SpanMapping(preset="genai"))
    assert (record["question"], record["sql"]) == (case.question, case.sql)
    assert record["metadata"]["otel"]["trace_id"] == spans[0].trace_id
    source = OtlpSource(
        _Messages([payload]),  # type: ignore[arg-type]
        signal="logs",
        mapping=SpanMapping(),
    )
    (out,) = source.poll(10, 0.0)  # log records have no root: the trace closes at the end
    assert out.invalid is None and json.loads(out.payload)["sql"] == case.sql


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _otlp_line(trace: int, *spans: tuple[int, int, list[dict[str, Any]]]) -> bytes:
    """OTLP JSON of one trace: (span id, parent id or 0, attributes) per span."""
    tid = f"{trace:032x}"
    body = [
        {
            "traceId": tid,
            "spanId": f"{sid:016x}",
            **({"parentSpanId": f"{parent:016x}"} if parent else {}),
            "name": "s",
            "kind": 1,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000",
            "attributes": attributes,
        }
        for sid, parent, attributes in spans
    ]
    export = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", "sales")]},
                "scopeSpans": [{"spans": body}],
            }
        ]
    }
    return json.dumps(export).encode()


def _tool_trace(trace: int, arguments: str) -> bytes:
    """A gen_ai trace: the root, a chat span with the question, a tool span with the SQL."""
    question = json.dumps([{"role": "user", "content": "How many customers in APAC?"}])
    return _otlp_line(
        trace,
        (1, 0, []),
        (2, 1, [_kv("gen_ai.operation.name", "chat"), _kv("gen_ai.input.messages", question)]),
        (
            3,
            1,
            [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.call.arguments", arguments),
            ],
        ),
    )


def _llm_span(trace: int, *keys: str) -> bytes:
    """An OpenInference LLM span whose flattened message keys are ``keys``."""
    return _otlp_line(
        trace, (1, 0, [_kv("openinference.span.kind", "LLM"), *(_kv(k, "user") for k in keys)])
    )


@pytest.mark.parametrize(
    "hostile",
    [
        _llm_span(5, "llm.input_messages.\u00b2.message.role"),  # a digit to isdigit, not to int
        _llm_span(5, "llm.input_messages." + "9" * 5000 + ".message.role"),  # past int's digits
        _llm_span(5, "llm.input_messages." + "a." * 3000 + "b"),  # past the recursion limit
        _tool_trace(5, "[" * 5000),  # arguments nested past the JSON parser's depth
    ],
    ids=["unicode-digit-index", "5000-digit-index", "3000-part-key", "deep-arguments"],
)
def test_a_hostile_trace_is_a_dead_letter_and_the_next_is_judged(hostile: bytes) -> None:
    """Each of these raised out of the source and stopped the service, the valid trace after
    it never read."""
    query = json.dumps({"query": "SELECT COUNT(*) FROM customers WHERE region = 'APAC'"})
    source = OtlpSource(
        _Messages([hostile, _tool_trace(9, query)]),  # type: ignore[arg-type]
        encoding="otlp_json",
        signal="traces",
        mapping=SpanMapping(),
    )
    out = source.poll(10, 0.0)
    assert [e.invalid[0] if e.invalid else None for e in out] == ["missing_field", None]
    assert json.loads(out[1].payload)["sql"].startswith("SELECT COUNT(*)")


@pytest.mark.parametrize("trace_id", ["0" * 32, "", None], ids=["zeros", "empty", "missing"])
def test_spans_without_a_trace_id_are_not_otlp(trace_id: str | None) -> None:
    """A trace id empty or all zeros is invalid in OTLP. Such spans of unrelated messages
    joined one trace: of three complete traces one was judged, the others lost without a dead
    letter."""
    query = json.dumps({"query": "SELECT COUNT(*) FROM customers WHERE region = 'APAC'"})
    bad = json.loads(_tool_trace(1, query))
    for span in bad["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if trace_id is None:
            del span["traceId"]
        else:
            span["traceId"] = trace_id
    source = OtlpSource(
        _Messages([json.dumps(bad).encode()] * 2 + [_tool_trace(9, query)]),  # type: ignore[arg-type]
        encoding="otlp_json",
        signal="traces",
        mapping=SpanMapping(),
    )
    out = source.poll(10, 0.0)
    assert [e.invalid[0] if e.invalid else None for e in out] == ["not_otlp", "not_otlp", None]
    assert "no trace id" in out[0].invalid[1]  # type: ignore[index]


def _one_span_traces(n: int, first: int = 1) -> bytes:
    """One OTLP proto message of ``n`` traces of one (root) span each."""
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    data = TracesData()
    spans = data.resource_spans.add().scope_spans.add().spans
    for i in range(first, first + n):
        span = spans.add(name="ask", trace_id=i.to_bytes(16, "big"), span_id=i.to_bytes(8, "big"))
        span.attributes.add(key="input.value", value={"string_value": "q"})
    return data.SerializeToString()


def test_a_message_of_more_spans_than_max_spans_per_message_is_a_dead_letter_whole() -> None:
    """Counted before any span is decoded: 300,000 one-span traces in one 8.6 MiB message
    (0.5 MiB compressed) took about 1 GB and a minute and a half, deaf to a stop meanwhile."""
    big = _one_span_traces(6)
    inner = _Messages([big, _one_span_traces(5, first=100)])
    source = OtlpSource(
        inner,  # type: ignore[arg-type]
        encoding="otlp_proto",
        signal="traces",
        mapping=SpanMapping(max_spans_per_message=5),
    )
    out = source.poll(20, 0.0)
    reasons = [e.invalid[0] if e.invalid else None for e in out]
    # The message at the limit is read: five traces without SQL, one dead letter each.
    assert reasons == ["limits_exceeded"] + ["missing_field"] * 5
    assert out[0].payload == big and "more than 5 spans" in out[0].invalid[1]  # type: ignore[index]
    assert "max_spans_per_message" in out[0].invalid[1]  # type: ignore[index]
    assert out[0].position == {"file": "x", "line": 1}
    with pytest.raises(InvalidInput) as err:
        decode(big, "otlp_proto", "traces", max_spans=5)
    assert err.value.reason == "limits_exceeded"
    assert len(decode(big, "otlp_proto", "traces", max_spans=6)) == 6


def test_a_message_of_more_than_max_message_bytes_is_a_dead_letter_unread() -> None:
    """Parsed, a message takes up to about 30 times its bytes (3.8 MiB of empty values in one
    attribute took 100 MB): past the bound it is not read at all."""
    big, small = _one_span_traces(60), _one_span_traces(2, first=100)
    assert len(small) < 1024 < len(big)
    source = OtlpSource(
        _Messages([big, small]),  # type: ignore[arg-type]
        encoding="otlp_proto",
        signal="traces",
        mapping=SpanMapping(max_message_bytes=1024, settle_s=0),
    )
    out = source.poll(10, 0.0)
    assert [e.invalid[0] for e in out if e.invalid] == ["limits_exceeded"] + ["missing_field"] * 2
    assert out[0].payload == big and "span_mapping.max_message_bytes" in out[0].invalid[1]  # type: ignore[index]


def test_max_spans_per_message_counts_the_log_records_of_a_logs_message() -> None:
    from opentelemetry.proto.logs.v1.logs_pb2 import LogsData

    data = LogsData()
    records = data.resource_logs.add().scope_logs.add().log_records
    for i in range(1, 4):
        records.add(trace_id=i.to_bytes(16, "big"), span_id=i.to_bytes(8, "big"))
    payload = data.SerializeToString()
    with pytest.raises(InvalidInput) as err:
        decode(payload, "otlp_proto", "logs", max_spans=2)
    assert err.value.reason == "limits_exceeded" and "2 log records" in err.value.detail
    assert len(decode(payload, "otlp_proto", "logs", max_spans=3)) == 3


def _framed(field: int, body: bytes) -> bytes:
    """A length-delimited protobuf field."""
    from google.protobuf.internal.encoder import _VarintBytes

    return _VarintBytes(field << 3 | 2) + _VarintBytes(len(body)) + body


@pytest.mark.parametrize(
    ("payload", "encoding"),
    [
        (b"\x0a\x00" * 500_000, "otlp_proto"),  # empty resource entries: read one by one
        (_framed(1, _framed(2, b"\x12\x00" * 500_000)), "otlp_proto"),  # empty spans
        (b"\x10\x01" * 500_000, "otlp_proto"),  # unknown fields around no span at all
        (json.dumps({"resourceSpans": [{}] * 20_000}).encode(), "otlp_json"),
        # Both spellings: the parser reads the last, so an empty first one hid the spans.
        (
            json.dumps(
                {"resourceSpans": [], "resource_spans": [{"scopeSpans": [{"spans": [{}] * 2000}]}]}
            ).encode(),
            "otlp_json",
        ),
        (
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{}] * 2000}]}]}).encode(),
            "otlp_json",
        ),
    ],
    ids=[
        "empty-resources",
        "empty-spans",
        "unknown-fields",
        "json-resources",
        "json-both-spellings",
        "json-spans",
    ],
)
def test_a_message_of_many_tiny_entries_is_refused_before_it_is_parsed(
    payload: bytes, encoding: str
) -> None:
    """Each is a few bytes an entry and about a hundred times that parsed: 20 MiB of empty
    spans took 2 GB; 20 MiB of empty resource entries took 29 s, deaf to SIGTERM, to become
    an empty export's dead letter."""
    with pytest.raises(InvalidInput) as err:
        decode(payload, encoding, "traces", max_spans=1000)  # type: ignore[arg-type]
    assert err.value.reason == "limits_exceeded"


def test_a_group_field_is_not_otlp_unparsed() -> None:
    """OTLP writes no group, and protobuf reads an unknown one: the count, which cannot read
    it, left the message to the parser without a limit (8.3 million empty spans behind a
    4-byte group took 1.5 GB)."""
    group = b"\xa3\x06\xa4\x06"  # field 100: start group, end group
    span = _framed(2, _framed(1, b"\x01" * 16) + _framed(2, b"\x02" * 8))
    payload = group + _framed(1, _framed(2, span * 5000))
    with pytest.raises(InvalidInput) as err:
        decode(payload, "otlp_proto", "traces", max_spans=1000)
    assert err.value.reason == "not_otlp"


def test_the_count_on_the_wire_is_the_count_parsed() -> None:
    """Random messages of SDK shape (resources, scopes, spans with attributes): over a limit
    exactly when they hold more spans than it; bytes that are not a message are left to the
    parser (not_otlp)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    from stef.io.otlp.wire import over_limit

    rnd = random.Random(7)
    for _ in range(200):
        data, n = TracesData(), 0
        for _ in range(rnd.randint(1, 4)):
            resource = data.resource_spans.add(schema_url="s" * rnd.randint(0, 3))
            resource.resource.attributes.add(key="service.name").value.string_value = "sales"
            for _ in range(rnd.randint(0, 3)):
                scope = resource.scope_spans.add()
                scope.scope.name = "sdk"
                for _ in range(rnd.randint(0, 5)):
                    span = scope.spans.add(
                        trace_id=rnd.randbytes(16), span_id=rnd.randbytes(8), name="x" * 200
                    )
                    span.attributes.add(key="k").value.string_value = "v" * rnd.randint(0, 300)
                    n += 1
        payload = data.SerializeToString()
        assert over_limit(payload, n + 1) is False and over_limit(payload, n) is False
        if n:
            assert over_limit(payload, n - 1) is True
            assert over_limit(payload[:-1], n) is None  # cut: the parser says not_otlp
    with pytest.raises(InvalidInput) as err:
        decode(_one_span_traces(3)[:-1], "otlp_proto", "traces", max_spans=10)
    assert err.value.reason == "not_otlp"


def test_a_poll_decodes_messages_only_while_it_has_too_few_traces_ready(
    monkeypatch: Any,
) -> None:
    """A fetch of many large messages is not decoded in one poll: six messages of 50,000
    traces each took one poll 5.9 s and 520 MB."""
    import stef.io.otlp.source as source_module

    decoded: list[int] = []

    def counted(payload: bytes, *args: Any) -> list[Span]:
        decoded.append(1)
        return decode(payload, *args)

    monkeypatch.setattr(source_module, "decode", counted)
    inner = _Messages([_one_span_traces(100, first=1 + 100 * i) for i in range(3)])
    mapping = SpanMapping(settle_s=0)  # whole traces are ready at once
    source = OtlpSource(inner, encoding="otlp_proto", signal="traces", mapping=mapping)  # type: ignore[arg-type]
    assert (len(source.poll(10, 0.0)), len(decoded)) == (10, 1)
    assert not source.exhausted  # the other two messages are held, not decoded yet
    out: list[Envelope] = []
    while not source.exhausted:
        out += source.poll(150, 0.0)
    assert len(out) == 290 and len(decoded) == 3


def test_a_trace_becomes_its_record_when_a_poll_hands_it_out(monkeypatch: Any) -> None:
    """One message of many traces is not converted in the poll that reads it: a poll builds
    the records it hands out, so the loop sees a stop between polls, not after all of them."""
    import stef.io.otlp.source as source_module

    built: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append(1)
        return trace_record(*args, **kwargs)

    monkeypatch.setattr(source_module, "trace_record", counted)
    inner = _Messages([_one_span_traces(1000)])
    source = OtlpSource(inner, encoding="otlp_proto", signal="traces", mapping=SpanMapping())  # type: ignore[arg-type]
    first = source.poll(10, 0.0)
    assert (len(first), len(built)) == (10, 10)
    out = first
    while not source.exhausted:
        out += source.poll(100, 0.0)
    assert len(out) == len(built) == 1000
    assert len({e.position["trace_id"] for e in out}) == 1000
    for envelope in out[:-1]:
        envelope.on_done()
    assert inner.done == []  # one trace of the message is not done yet
    out[-1].on_done()
    assert inner.done == [0]


class _Polled(_Messages):
    """:class:`_Messages` that records each poll's ``max_records`` and its paused state."""

    def __init__(self, payloads: Sequence[bytes]) -> None:
        super().__init__(payloads)
        self.paused = False
        self.polls: list[tuple[int, bool]] = []

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        self.polls.append((max_records, self.paused))
        return [] if self.paused else super().poll(max_records, timeout_s)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False


def _one_message(*lines: bytes) -> bytes:
    """Several traces in one OTLP JSON message (an exporter's batch)."""
    spans = [rs for line in lines for rs in json.loads(line)["resourceSpans"]]
    return json.dumps({"resourceSpans": spans}).encode()


def test_the_message_source_is_polled_while_traces_wait_and_paused_meanwhile() -> None:
    """Before: with more traces ready than a fetch asked for (one message can carry hundreds),
    or a full window (poll(0)), the Kafka consumer under the source was not polled at all:
    past max.poll.interval.ms it left its group, its commits failed, /healthz failed, and the
    partition's traces were judged again elsewhere. A full window was also handed a ready
    trace on every poll."""
    query = json.dumps({"query": "SELECT 1"})
    inner = _Polled([_one_message(*(_tool_trace(t, query) for t in range(1, 6)))])
    source = OtlpSource(inner, encoding="otlp_json", signal="traces", mapping=SpanMapping())  # type: ignore[arg-type]
    assert len(source.poll(2, 0.0)) == 2  # five traces read, three wait
    inner._out.append(Envelope(_tool_trace(9, query), {"file": "x", "line": 2}))
    assert len(source.poll(2, 0.0)) == 2
    assert inner.polls[-1] == (0, True)  # polled, paused: the next message waits
    assert source.poll(0, 0.0) == []  # the window is full: nothing handed out, still polled
    assert inner.polls[-1] == (0, True)
    assert len(source.poll(2, 0.0)) == 2  # the last trace, and the next message's
    assert inner.polls[-1] == (2, False) and not inner.paused
    source.pause()  # the loop's pause holds whatever the backlog
    assert source.poll(2, 0.0) == [] and inner.polls[-1] == (0, True)
    source.resume()
    assert not inner.paused


@pytest.mark.parametrize(
    ("payload", "encoding"),
    [
        (b"", "otlp_proto"),  # an empty value (a tombstone's too)
        (b"\x12\x03abc\x18\x01", "otlp_proto"),  # protobuf of unknown fields only
        (b'{"resourceSpans": []}', "otlp_json"),
        (b'{"resourceSpans": null, "question": "q?", "sql": "SELECT 1"}', "otlp_json"),
        (b'{"resourceSpans": [{"scopeSpans": [{}]}]}', "otlp_json"),
    ],
)
def test_a_message_with_nothing_to_judge_is_a_dead_letter(payload: bytes, encoding: str) -> None:
    """Before: done at once, committed with no result, no dead letter and no metric: messages
    in were more than results and dead letters out."""
    inner = _Messages([payload])
    source = OtlpSource(inner, encoding=encoding, signal="traces", mapping=SpanMapping())  # type: ignore[arg-type]
    out = source.poll(10, 0.0)
    assert [e.invalid[0] if e.invalid else None for e in out] == ["missing_field"]
    assert out[0].invalid is not None and "nothing to judge" in out[0].invalid[1]
    assert out[0].payload == payload and inner.done == []  # done once its letter is written


def test_traces_held_by_the_source_stay_within_max_open_bytes() -> None:
    """40 traces without their root, 100 kB each, against a 1 MiB bound: never more than ten
    open, and each handed out (a dead letter: no SQL in it) as the bound closes it."""
    lines = [_otlp_line(t, (2, 1, [_kv("note", "x" * 100_000)])) for t in range(1, 41)]
    source = OtlpSource(
        _Messages(lines),  # type: ignore[arg-type]
        encoding="otlp_json",
        signal="traces",
        mapping=SpanMapping(max_open_bytes=1024 * 1024),
    )
    out: list[Envelope] = []
    while not source.exhausted:
        out.extend(source.poll(1, 0.0))
        assert source.open_traces <= 10
    assert len(out) == 40
    assert {e.invalid[0] for e in out if e.invalid} == {"missing_field"}


def test_a_trace_evicted_part_way_through_its_message_keeps_the_message() -> None:
    """One message past ``max_open_bytes`` with spans of traces 1, 2, 3, 1: trace 1 is evicted
    by the bound before its second span, which begins it again. That trace had no message
    (an IndexError out of the source: the service stopped, and again after each restart), and
    the message would be done after four traces of which it counted three."""
    spans = [(2, 1, [_kv("note", "x" * 2900)])]
    body = json.loads(_otlp_line(1, *spans))
    for trace in (2, 3, 1):
        extra = json.loads(_otlp_line(trace, (3, 1, [_kv("note", "x" * 2900)])))
        body["resourceSpans"][0]["scopeSpans"][0]["spans"] += extra["resourceSpans"][0][
            "scopeSpans"
        ][0]["spans"]
    inner = _Messages([json.dumps(body).encode()])
    source = OtlpSource(
        inner,  # type: ignore[arg-type]
        encoding="otlp_json",
        signal="traces",
        mapping=SpanMapping(max_open_bytes=4096),
    )
    out: list[Envelope] = []
    while not source.exhausted:
        out.extend(source.poll(10, 0.0))
    assert [e.position["trace_id"][-1] for e in out] == ["1", "2", "3", "1"]
    for envelope in out[:-1]:
        envelope.on_done()
        assert inner.done == []
    out[-1].on_done()
    assert inner.done == [0]


def test_a_trace_that_fails_to_map_for_any_reason_is_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The source's guard: whatever mapping a trace raises, it becomes a dead letter
    (``internal_error``, the exception named) and the source goes on."""
    import stef.io.otlp.source as source_module

    def broken(*args: object) -> dict[str, Any]:
        raise ZeroDivisionError("a bug in a mapping")

    monkeypatch.setattr(source_module, "trace_record", broken)
    source = OtlpSource(
        _Messages([_tool_trace(5, "{}"), _tool_trace(6, "{}")]),  # type: ignore[arg-type]
        encoding="otlp_json",
        signal="traces",
        mapping=SpanMapping(),
    )
    out = source.poll(10, 0.0)
    assert [e.invalid for e in out] == [
        ("internal_error", "ZeroDivisionError: a bug in a mapping")
    ] * 2


def _whole_by_scan(trace: Trace) -> bool:
    """What Trace.whole() answered by reading every span (before it was kept as they came)."""
    spans = [s for s in trace.spans if s.kind != "LOG"]
    ids = {s.span_id for s in spans}
    return any(s.is_root for s in spans) and all(
        s.is_root or s.parent_span_id in ids for s in spans
    )


def test_whole_kept_as_spans_arrive_answers_as_the_scan() -> None:
    """Random streams of spans, repeats, log records and spans past the limit: after every
    span, whole() gives what reading all of them gives."""
    rng = random.Random(20261128)
    checked = 0
    for _ in range(400):
        trace = Trace("t" * 32)
        ids = [f"{i:016x}" for i in range(rng.randint(1, 12))]
        for _ in range(rng.randint(1, 30)):
            kind = rng.choice(["INTERNAL", "INTERNAL", "CLIENT", "LOG"])
            parent = rng.choice(["", *ids, "f" * 16])
            span = Span("t" * 32, rng.choice(ids), parent, rng.choice(["a", "b"]), kind)
            trace.add(span, limit=rng.randint(3, 40))
            assert trace.whole() == _whole_by_scan(trace)
            checked += 1
    assert checked > 4000


def _assembly_cpu(n: int) -> float:
    """This thread's CPU seconds to add a rootless trace's n spans, one message each."""
    assembler = Assembler(idle_timeout_s=3600, max_traces=10, max_spans_per_trace=10 * n)
    spans = [Span("t" * 32, f"{i + 2:016x}", f"{1:016x}", "s", "INTERNAL") for i in range(n)]
    started = time.thread_time()
    for i, span in enumerate(spans):
        assembler.add([span], i)
    return time.thread_time() - started


def test_a_trace_of_many_messages_is_assembled_in_linear_time() -> None:
    """Every message read every span of its trace again: 377 s of CPU for a trace of 32,000
    spans, one a message (max_spans_per_trace raised). About 8 times the spans now cost about
    8 times the time (64 when quadratic); the bound is relative to the small case."""
    small = max(min(_assembly_cpu(500) for _ in range(3)), 1e-4)
    assert min(_assembly_cpu(4000) for _ in range(3)) / small < 24
