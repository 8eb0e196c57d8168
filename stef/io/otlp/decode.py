"""OTLP bytes -> spans: ``TracesData`` / ``LogsData`` as protobuf (``otlp_proto``) or as OTLP
JSON (``otlp_json``: ids in hex, not base64), through the official ``opentelemetry-proto``
classes. Anything they cannot read is :class:`~stef.errors.InvalidInput` ``not_otlp``."""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

from stef.errors import ConfigError, InvalidInput
from stef.io.otlp.spans import Span
from stef.io.otlp.wire import FIELDS_MORE, FIELDS_PER_SPAN, over_limit

try:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    MISSING: str | None = None
except ImportError as exc:  # the otel extra is not installed: say so when OTLP is asked for
    MISSING = str(exc)


def require_otlp(what: str) -> None:
    """Raises:
    ConfigError: ``opentelemetry-proto`` (the ``otel`` extra) is not installed."""
    if MISSING is not None:
        raise ConfigError(
            f"{what} needs the OpenTelemetry protobuf package: pip install 'stef[otel]' ({MISSING})"
        )


Encoding = Literal["otlp_proto", "otlp_json"]
Signal = Literal["traces", "logs"]
ENCODINGS: tuple[Encoding, ...] = ("otlp_proto", "otlp_json")

# SpanKind numbers of the OTLP protocol (trace.proto), stable by its compatibility rules.
_KINDS = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
# OTLP JSON fields that hold ids in hex (protobuf's JSON mapping would read them as base64).
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
# The one field of each signal's message, in either of the JSON mapping's spellings. Unknown
# fields are ignored (a newer Collector's), so without this check any JSON object, a flat record
# among them, would read as an empty message and be dropped without a dead letter.
_TOP_FIELDS = {
    "traces": ("resourceSpans", "resource_spans"),
    "logs": ("resourceLogs", "resource_logs"),
}


def decode(
    payload: bytes, encoding: Encoding, signal: Signal, max_spans: int | None = None
) -> list[Span]:
    """The spans (or log records) of one message.

    Args:
        max_spans: the spans (or log records) one message may carry (None: any number),
            counted before the message is parsed (:mod:`.wire`): a span takes at least about
            1 KB decoded, so 300,000 one-span traces in 8.6 MiB took about 1 GB and a minute
            and a half.

    Raises:
        InvalidInput: ``not_otlp``: the bytes are not a ``TracesData`` / ``LogsData`` message in
            ``encoding``. ``limits_exceeded``: it carries more than ``max_spans``.
    """
    message: TracesData | LogsData = TracesData() if signal == "traces" else LogsData()
    kind = "TracesData" if signal == "traces" else "LogsData"
    try:
        if encoding == "otlp_proto":
            if max_spans is not None:
                _check_wire(payload, kind, max_spans)
            message.ParseFromString(payload)
        else:
            tree = json.loads(payload)
            if not isinstance(tree, dict) or not any(k in tree for k in _TOP_FIELDS[signal]):
                what = "object" if isinstance(tree, dict) else type(tree).__name__
                raise InvalidInput(
                    "not_otlp",
                    f"not an OTLP {kind} message ({encoding}): "
                    f"a JSON {what} without {_TOP_FIELDS[signal][0]}",
                )
            if max_spans is not None and _json_over_limit(tree, signal, max_spans):
                _too_many(kind, max_spans)
            _hex_ids_to_base64(tree)
            json_format.ParseDict(tree, message, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise InvalidInput(
            "not_otlp", f"not an OTLP {kind} message ({encoding}): {detail}"
        ) from exc
    if isinstance(message, TracesData):
        return _spans(message)
    return _logs(message)


# The JSON names of the lists of entries at each level (resource, scope, span), both spellings.
_JSON_ENTRIES = {
    "traces": (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",)),
    "logs": (
        ("resourceLogs", "resource_logs"),
        ("scopeLogs", "scope_logs"),
        ("logRecords", "log_records"),
    ),
}


def _json_over_limit(tree: dict[str, Any], signal: Signal, max_spans: int) -> bool:
    """:func:`~stef.io.otlp.wire.over_limit` of OTLP JSON, before it is parsed into objects:
    its spans (log records) and its resource and scope entries."""
    names = _JSON_ENTRIES[signal]
    spans = 0
    entries_left = FIELDS_PER_SPAN * max_spans + FIELDS_MORE
    for resource in _entries(tree, names[0]):
        for scope in _entries(resource, names[1]):
            spans += len(_entries(scope, names[2]))
            entries_left -= 1
            if spans > max_spans or entries_left < 0:
                return True
        entries_left -= 1
        if entries_left < 0:
            return True
    return False


def _entries(node: Any, names: tuple[str, ...]) -> list[Any]:
    """The lists under every one of ``names`` that ``node`` holds, joined (none when it is not
    an object: the parser says so). Every spelling: the parser reads the last one the object
    holds, so counting the first let an empty ``resourceSpans`` hide a full ``resource_spans``
    after it."""
    if not isinstance(node, dict):
        return []
    return [entry for name in names if isinstance(node.get(name), list) for entry in node[name]]


def _check_wire(payload: bytes, kind: str, max_spans: int) -> None:
    """Raises:
    InvalidInput: ``limits_exceeded`` past the limit; ``not_otlp`` for bytes the count cannot
        read (cut, or a group field, which the parser would read without a limit and OTLP
        never writes)."""
    over = over_limit(payload, max_spans)
    if over is None:
        raise InvalidInput(
            "not_otlp",
            f"not an OTLP {kind} message (otlp_proto): its fields do not read as protobuf "
            "without groups",
        )
    if over:
        _too_many(kind, max_spans)


def _too_many(kind: str, max_spans: int) -> None:
    """Raises:
    InvalidInput: ``limits_exceeded``, always."""
    what = "spans" if kind == "TracesData" else "log records"
    raise InvalidInput(
        "limits_exceeded",
        f"the {kind} message holds more than {max_spans:,} {what} (or more than "
        f"{FIELDS_PER_SPAN} times as many resource and scope entries): "
        "span_mapping.max_spans_per_message",
    )


def _spans(data: TracesData) -> list[Span]:
    """Raises:
    InvalidInput: ``not_otlp``: a span without a trace id (empty or all zeros, invalid in OTLP):
        the spans of every such message would join one trace, and all but one trace be lost."""
    out = []
    for rs in data.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                if not s.trace_id.strip(b"\0"):
                    raise InvalidInput(
                        "not_otlp",
                        f"not an OTLP TracesData message: span {s.name[:80]!r} has no trace id "
                        "(empty or all zeros)",
                    )
                out.append(
                    Span(
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=s.name,
                        kind=_KINDS.get(s.kind, "INTERNAL"),
                        attributes=attributes(s.attributes),
                        resource=resource,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                    )
                )
    return out


def _logs(data: LogsData) -> list[Span]:
    out = []
    for rl in data.resource_logs:
        resource = attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                attrs = attributes(r.attributes)
                if r.HasField("body"):
                    attrs["body"] = any_value(r.body)
                when = r.time_unix_nano or r.observed_time_unix_nano
                out.append(
                    Span(
                        trace_id=r.trace_id.hex(),
                        span_id=r.span_id.hex(),
                        parent_span_id=r.span_id.hex(),
                        name=r.event_name or str(attrs.get("event.name", "")),
                        kind="LOG",
                        attributes=attrs,
                        resource=resource,
                        start_ns=when,
                        end_ns=when,
                    )
                )
    return out


def attributes(kvs: Any) -> dict[str, Any]:
    """OTLP key-values as a dict of plain values (a repeated key keeps its last value)."""
    return {kv.key: any_value(kv.value) for kv in kvs if isinstance(kv, KeyValue)}


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a plain value: lists, dicts, text (bytes in base64), numbers."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP JSON writes trace and span ids in hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _ID_FIELDS and isinstance(value, str):
            try:
                node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            except ValueError as exc:
                raise ValueError(f"{key} {value[:40]!r} is not hex") from exc
        elif isinstance(value, dict | list):
            _hex_ids_to_base64(value)
