"""OTLP messages -> records: wraps a message source (a Kafka topic the Collector's Kafka exporter
writes, or a file of OTLP JSON lines), decodes each message, assembles traces across messages and
hands out one record per trace (:mod:`.record`).

At least once: a message is done (its offset may be committed) only when every trace it carried a
span of is done, so a restart re-reads every message of a trace not yet judged. A message that
does not decode, and a trace that gives no record, go to the dead letters with the reason."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from stef.errors import InvalidInput
from stef.fields import FieldMapping
from stef.io import Envelope, Source
from stef.io.otlp.assemble import Assembler, Trace
from stef.io.otlp.decode import Encoding, Signal, decode
from stef.io.otlp.mapping import SpanMapping
from stef.io.otlp.record import trace_record
from stef.io.otlp.spans import Span

log = structlog.get_logger(__name__)

# The longest error text a dead letter of an internal error carries.
_MAX_ERROR_CHARS = 500


class OtlpSource:
    """Records of OTLP traces (or logs) carried by the messages of ``inner``.

    Args:
        inner: the message source (one OTLP ``TracesData`` / ``LogsData`` per message).
        encoding: ``otlp_proto`` or ``otlp_json``.
        signal: ``traces`` or ``logs``.
        mapping: the ``span_mapping`` settings.
        fields: the ``field_mapping``: records are laid out where it reads them.
        decoder: reads one message's spans instead of OTLP (rows of a trace export); raises
            :class:`~stef.errors.InvalidInput` for a message it cannot read. Its traces close
            at the idle timeout or the end of the input, not on their root span (an export
            lists parents first).
    """

    def __init__(
        self,
        inner: Source,
        *,
        encoding: Encoding = "otlp_proto",
        signal: Signal = "traces",
        mapping: SpanMapping,
        fields: FieldMapping | None = None,
        decoder: Callable[[bytes], list[Span]] | None = None,
    ) -> None:
        self.inner = inner
        self.decoder = decoder or (
            lambda payload: decode(payload, encoding, signal, mapping.max_spans_per_message)
        )
        self.mapping = mapping
        self.fields = fields or FieldMapping()
        self._assembler = Assembler(
            mapping.idle_timeout_s,
            mapping.max_traces,
            mapping.max_spans_per_trace,
            close_on_root=decoder is None,
            settle_s=mapping.settle_s,
            max_bytes=mapping.max_open_bytes,
        )
        # Dead letters of messages, and closed traces: a trace becomes its record only when a
        # poll hands it out, so one message of thousands of traces is not converted in one poll.
        self._ready: deque[Envelope | Trace] = deque()
        # Messages fetched, not decoded yet: a poll decodes only while it has fewer traces
        # ready than it hands out, so a fetch of many large messages is not decoded at once.
        self._messages: deque[Envelope] = deque()
        # message -> traces of it not yet done; guarded: workers finish records concurrently.
        self._pending: dict[Envelope, int] = {}
        self._lock = threading.Lock()
        # The message source is paused when the loop says so (the window is full) or while
        # the traces already read are more than a fetch asks for: it is polled all the same.
        self._paused_by_loop = False
        self._backlog = False
        self._inner_paused = False

    # Delegated to the message source.
    def start(self) -> None:
        self.inner.start()

    def pause(self) -> None:
        self._paused_by_loop = True
        self._apply_pause()

    def resume(self) -> None:
        self._paused_by_loop = False
        self._apply_pause()

    def _apply_pause(self) -> None:
        """Pause or resume the message source as the loop and the backlog of ready traces
        say, on a change only."""
        paused = self._paused_by_loop or self._backlog
        if paused != self._inner_paused:
            if paused:
                self.inner.pause()
            else:
                self.inner.resume()
            self._inner_paused = paused

    def commit(self) -> None:
        self.inner.commit()

    def lag(self) -> dict[tuple[str, int], int]:
        return self.inner.lag()

    def uncommitted(self) -> int:
        return self.inner.uncommitted()

    def close(self) -> None:
        self.inner.close()

    def unreachable(self) -> str | None:
        return self.inner.unreachable()

    @property
    def exhausted(self) -> bool:
        return (
            self.inner.exhausted
            and not self._messages
            and not self._ready
            and not len(self._assembler)
        )

    @property
    def open_traces(self) -> int:
        """Traces waiting for more spans."""
        return len(self._assembler)

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        """At most ``max_records`` traces (none when the loop asks for none: its window is
        full). The message source is polled every time, so a Kafka consumer keeps its group
        membership however long the traces already read take to judge (one message can carry
        hundreds); it is paused while they are more than this fetch asks for or a message
        fetched is not decoded yet, and whatever it returns is taken, never dropped."""
        self._backlog = len(self._ready) >= max_records or bool(self._messages)
        self._apply_pause()
        held = self._ready or self._messages
        wait = timeout_s if not held and not self._inner_paused else 0.0
        self._messages.extend(self.inner.poll(0 if self._inner_paused else max_records, wait))
        while self._messages and len(self._ready) < max_records:
            self._take(self._messages.popleft())
        end = self.inner.exhausted and not self._messages
        self._ready.extend(self._assembler.expired(everything=end))
        out: list[Envelope] = []
        while self._ready and len(out) < max_records:
            item = self._ready.popleft()
            out.append(item if isinstance(item, Envelope) else self._record(item))
        return out

    def _take(self, message: Envelope) -> None:
        if message.oversized is not None or message.invalid is not None:
            self._ready.append(message)  # dead-lettered as it is
            return
        if len(message.payload) > self.mapping.max_message_bytes:
            detail = (
                f"the message is {len(message.payload):,} bytes, more than "
                f"{self.mapping.max_message_bytes:,} (span_mapping.max_message_bytes)"
            )
            self._ready.append(_invalid(message, "limits_exceeded", detail))
            return
        try:
            spans = self.decoder(message.payload)
        except InvalidInput as exc:
            self._ready.append(_invalid(message, exc.reason, exc.detail))
            return
        except Exception as exc:  # no message stops the source: it is dead-lettered, said why
            detail = _error_text(exc)
            log.error("otlp_decode_internal_error", error=detail, **message.position)
            self._ready.append(_invalid(message, "internal_error", detail))
            return
        if not spans:  # every message comes out: an empty one as a dead letter, said why
            detail = "nothing to judge in the message: no span (an empty export)"
            self._ready.append(_invalid(message, "missing_field", detail))
            return
        # A log record outside any trace cannot be joined to one: an application's own logs on
        # a logs topic, passed over (as dead letters they would flood, batch by batch).
        spans = [s for s in spans if s.kind != "LOG" or s.trace_id.strip("0")]
        if not spans:
            message.on_done()
            return
        ids, closed = self._assembler.add(spans, message, len(message.payload))
        with self._lock:  # before any record of it is handed out: none is done yet
            self._pending[message] = len(ids)  # the traces it reached, each done once
        self._ready.extend(closed)

    def _record(self, trace: Trace) -> Envelope:
        messages: list[Envelope] = [m for m in trace.sources if isinstance(m, Envelope)]
        first = messages[0]
        position = {**first.position, "trace_id": trace.trace_id}
        done = self._done_of(messages)
        claim = _claim_of(messages)
        # An export's trace id is any text ("trace-é", a lone surrogate): never a reason to stop.
        key = trace.trace_id.encode("utf-8", "backslashreplace")
        problem = self._problem(trace)
        if problem is not None:
            payload = _spans_json(trace)
            return Envelope(payload, position, key, done, claim, invalid=problem)
        try:
            record = trace_record(trace.spans, self.mapping, self.fields)
        except InvalidInput as exc:
            return Envelope(
                _spans_json(trace), position, key, done, claim, invalid=(exc.reason, exc.detail)
            )
        except Exception as exc:  # no trace stops the source: it is dead-lettered, said why
            detail = _error_text(exc)
            log.error("trace_internal_error", trace_id=trace.trace_id, error=detail)
            return Envelope(
                _spans_json(trace), position, key, done, claim, invalid=("internal_error", detail)
            )
        return Envelope(_json_bytes(record), position, key, done, claim)

    def _problem(self, trace: Trace) -> tuple[str, str] | None:
        if trace.state == "too_large":
            return (
                "limits_exceeded",
                f"trace {trace.trace_id} has more than {self.mapping.max_spans_per_trace} spans "
                "(span_mapping.max_spans_per_trace)",
            )
        if trace.state == "incomplete" and self.mapping.incomplete == "dead_letter":
            return (
                "trace_incomplete",
                f"trace {trace.trace_id}: its root span (or a parent) did not arrive within "
                f"{self.mapping.idle_timeout_s:g} s ({len(trace.spans)} spans arrived)",
            )
        return None

    def _done_of(self, messages: list[Envelope]) -> Callable[[], None]:
        def done() -> None:
            finished = []
            with self._lock:
                for message in messages:
                    left = self._pending.get(message, 1) - 1
                    if left <= 0:
                        self._pending.pop(message, None)
                        finished.append(message)
                    else:
                        self._pending[message] = left
            for message in finished:
                message.on_done()

        return done


def _claim_of(messages: list[Envelope]) -> Callable[[], bool]:
    """The trace is judged here unless every one of its messages' partitions was revoked: a
    message claimed must be done (or its partition's commit would stall), and the messages of
    a revoked partition are read again by its next owner (at least once: a duplicate)."""

    def claim() -> bool:
        return any([m.claim() for m in messages])  # a list: every message is claimed

    return claim


def _error_text(exc: Exception) -> str:
    """An unexpected exception as a dead letter's error: its type and text, on one line, cut."""
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:_MAX_ERROR_CHARS]


def _invalid(message: Envelope, reason: str, detail: str) -> Envelope:
    return Envelope(
        message.payload,
        message.position,
        message.key,
        message.on_done,
        message.claim,
        invalid=(reason, detail),
    )


def _spans_json(trace: Trace) -> bytes:
    """What a dead letter keeps of a trace: its spans' names, ids and attributes; without the
    attributes when one is nested past what ``json.dumps`` writes (an export row's ``input``
    about a thousand lists deep, which ``json.loads`` read: it stopped the source)."""
    body: dict[str, Any] = {
        "trace_id": trace.trace_id,
        "spans": [s.summary() for s in trace.spans],
    }
    try:
        return _json_bytes(body)
    except RecursionError:
        for span in body["spans"]:
            span["attributes"] = "(left out: nested deeper than JSON can be written)"
        return _json_bytes(body)


def _json_bytes(value: Any) -> bytes:
    """``value`` as UTF-8 JSON; with ``\\u`` escapes where it holds a lone surrogate (a JSON
    attribute's ``"\\ud800"``, which no UTF-8 can carry), so the record is dead-lettered
    ``not_utf8`` as a flat record with one is, rather than stopping the source."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, default=str).encode("ascii")
