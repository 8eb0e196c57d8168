"""The ``otlp+http://`` results sink against a local OTLP/HTTP endpoint: one
``gen_ai.evaluation.result`` log record per result, decoded back with the protobuf classes (ids
of the evaluated span, score, tier, explanation, ``stef.`` attributes); 503 retried with its
Retry-After; 400 fails the batch's results; a dead letter is refused, not sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from stef.errors import SinkError
from stef.io.otlp.sinks import OtlpHttpSink

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


class _Collector(ThreadingHTTPServer):
    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses = statuses
        self.bodies: list[tuple[str, str, bytes]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append((self.path, self.headers["Content-Type"], body))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector([])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _result(i: int) -> bytes:
    import json

    return json.dumps(
        {
            "id": f"{TRACE}:{SPAN}" if i == 0 else f"r-{i}",
            "outcome": "evaluated",
            "score": 80.0 + i,
            "tier": "good",
            "rationale": f"reason {i}",
            "components": {"verdict": "Likely Correct", "confidence": 0.9},
            "issues": ["none"],
            "judge": {"backend": "heuristic", "p_correct": 0.7},
            "metadata": {"otel": {"trace_id": TRACE, "span_id": SPAN}} if i == 1 else {},
        }
    ).encode()


def _send(sink: OtlpHttpSink, values: list[bytes]) -> list[BaseException | None]:
    acks: list[BaseException | None] = []
    for value in values:
        sink.send(None, value, acks.append)
    sink.flush(30.0)
    return acks


def _records(collector: _Collector) -> list[Any]:
    out = []
    for _, _, body in collector.bodies:
        for rl in ExportLogsServiceRequest.FromString(body).resource_logs:
            for sl in rl.scope_logs:
                out.extend(sl.log_records)
    return out


def test_results_become_evaluation_events_of_their_span(collector: _Collector) -> None:
    collector.statuses = [503]  # retried after its Retry-After
    sink = OtlpHttpSink(f"http://127.0.0.1:{collector.server_port}/v1/logs", linger_s=0.5)
    try:
        assert _send(sink, [_result(0), _result(1), _result(2)]) == [None, None, None]
    finally:
        sink.close()
    assert {(p, t) for p, t, _ in collector.bodies} == {("/v1/logs", "application/x-protobuf")}
    records = _records(collector)[-3:]  # the retried batch
    assert [r.event_name for r in records] == ["gen_ai.evaluation.result"] * 3
    ids = [(r.trace_id.hex(), r.span_id.hex()) for r in records]
    assert ids == [(TRACE, SPAN), (TRACE, SPAN), ("", "")]  # from the id, from metadata, none
    attrs = {kv.key: kv.value for kv in records[0].attributes}
    assert attrs["gen_ai.evaluation.name"].string_value == "stef"
    assert attrs["gen_ai.evaluation.score.value"].double_value == 80.0
    assert attrs["gen_ai.evaluation.score.label"].string_value == "good"
    assert attrs["gen_ai.evaluation.explanation"].string_value == "reason 0"
    assert attrs["stef.verdict"].string_value == "Likely Correct"
    assert attrs["stef.p_correct"].double_value == 0.7
    assert [v.string_value for v in attrs["stef.issues"].array_value.values] == ["none"]


def test_a_refused_batch_fails_its_results_and_a_dead_letter_is_refused(
    collector: _Collector,
) -> None:
    collector.statuses = [400]
    sink = OtlpHttpSink(f"http://127.0.0.1:{collector.server_port}/v1/logs", linger_s=0.2)
    try:
        acks = _send(sink, [_result(0), b"not json"])
    finally:
        sink.close()
    assert len(collector.bodies) == 1  # a 400 is not retried
    assert all(isinstance(a, SinkError) for a in acks)
    refused = [a for a in acks if isinstance(a, SinkError) and a.rejected]
    assert len(refused) == 1  # the value that is no result, refused before any request
