"""Results -> ``gen_ai.evaluation.result`` log records (the OpenTelemetry GenAI evaluation event),
parented to the evaluated span by its trace and span ids, as an OTLP ``LogsData`` message.

Attributes: ``gen_ai.evaluation.name`` (``stef``), ``gen_ai.evaluation.score.value`` (the score),
``gen_ai.evaluation.score.label`` (the tier), ``gen_ai.evaluation.explanation`` (the rationale),
and STEF's own under ``stef.`` (verdict, p_correct, issues, outcome, filter status, id, app)."""

from __future__ import annotations

import json
import time
from typing import Any

from stef.io.otlp.decode import require_otlp

try:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData, SeverityNumber
except ImportError:  # require_otlp says so at start
    pass

EVENT_NAME = "gen_ai.evaluation.result"
EVALUATION_NAME = "stef"


def evaluation_logs(results: list[bytes]) -> bytes:
    """One ``LogsData`` message with one evaluation log record per result JSON."""
    require_otlp("an OpenTelemetry results sink")
    data = LogsData()
    resource_logs = data.resource_logs.add()
    resource_logs.resource.attributes.append(_kv("service.name", "stef"))
    scope = resource_logs.scope_logs.add()
    scope.scope.name = "stef"
    for value in results:
        scope.log_records.append(evaluation_record(json.loads(value)))
    body: bytes = data.SerializeToString()
    return body


def evaluation_record(result: dict[str, Any]) -> LogRecord:
    """The ``gen_ai.evaluation.result`` log record of one result (a decoded result JSON)."""
    record = LogRecord(event_name=EVENT_NAME, time_unix_nano=time.time_ns())
    trace_id, span_id = evaluated_span(result)
    if trace_id is not None:
        record.trace_id = bytes.fromhex(trace_id)
    if span_id is not None:
        record.span_id = bytes.fromhex(span_id)
    # WARN: the judge could not decide (judge_error); INFO otherwise.
    decided = result.get("outcome") in ("evaluated", "skipped_sampling")
    record.severity_number = (
        SeverityNumber.SEVERITY_NUMBER_INFO if decided else SeverityNumber.SEVERITY_NUMBER_WARN
    )
    judge = result.get("judge") or {}
    components = result.get("components") or {}
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "gen_ai.evaluation.score.value": result.get("score"),
        "gen_ai.evaluation.score.label": result.get("tier"),
        "gen_ai.evaluation.explanation": result.get("rationale") or result.get("error"),
        "stef.id": result.get("id"),
        "stef.app": result.get("app"),
        "stef.outcome": result.get("outcome"),
        "stef.verdict": components.get("verdict"),
        "stef.confidence": components.get("confidence"),
        "stef.filter_status": components.get("filter_status"),
        "stef.p_correct": judge.get("p_correct"),
        "stef.judge": judge.get("backend"),
        "stef.issues": result.get("issues"),
        "stef.complexity": result.get("complexity"),
    }
    for key, value in attributes.items():
        if value is not None:
            record.attributes.append(_kv(key, value))
    return record


def evaluated_span(result: dict[str, Any]) -> tuple[str | None, str | None]:
    """The trace and span ids of the span a result evaluated: its record's ``metadata.otel``
    (records from traces carry it), else an id of the form ``TRACE_ID:SPAN_ID``; None when it
    names none (a result of a flat record: the log record is then not parented)."""
    otel = (result.get("metadata") or {}).get("otel")
    if isinstance(otel, dict):
        return _hex(otel.get("trace_id"), 32), _hex(otel.get("span_id"), 16)
    trace, _, span = str(result.get("id") or "").partition(":")
    return _hex(trace, 32), _hex(span, 16)


def _hex(value: Any, digits: int) -> str | None:
    if not isinstance(value, str) or len(value) != digits:
        return None
    try:
        bytes.fromhex(value)
    except ValueError:
        return None
    return value.lower()


def _kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=_any(value))


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list | tuple):
        return AnyValue(array_value=ArrayValue(values=[_any(v) for v in value]))
    return AnyValue(string_value=str(value))
