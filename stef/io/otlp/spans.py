"""One decoded span (or log record) of a trace, as plain Python values: what the mapping reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Span:
    """A span, or a log record seen as one (kind ``LOG``, its event name as ``name``, its body as
    the attribute ``body``), with its resource's attributes.

    Attributes:
        trace_id: 32 hex digits.
        span_id: 16 hex digits ("" for a log record outside any span).
        parent_span_id: 16 hex digits, "" for a root span.
        name: the span name, or the log record's event name.
        kind: ``INTERNAL``, ``SERVER``, ``CLIENT``, ``PRODUCER``, ``CONSUMER`` or ``LOG``.
        attributes: the attributes, nested values as lists and dicts.
        resource: the resource's attributes (``service.name`` ...).
        start_ns: start time (a log record's time), Unix nanoseconds.
        end_ns: end time, Unix nanoseconds.
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0

    @property
    def is_root(self) -> bool:
        return self.kind != "LOG" and not self.parent_span_id

    def summary(self) -> dict[str, Any]:
        """The span as JSON for a dead letter (what arrived, to see why it was not judged)."""
        return {
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "kind": self.kind,
            "attributes": self.attributes,
        }
