"""Spans -> whole traces: spans grouped by trace id across messages, a trace closed when its root
span and every parent it names have arrived, or when no span came for ``idle_timeout_s`` (then
incomplete, unless it holds only log records, which have no root). Memory is bounded: at most
``max_traces`` open traces and ``max_bytes`` of the messages they came from (past either, the one
idle longest is closed as incomplete), and ``max_spans_per_trace`` spans each (past it the trace
is closed as too large)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from stef.io.otlp.spans import Span


@dataclass
class Trace:
    """One trace being assembled, or closed.

    Attributes:
        trace_id: 32 hex digits.
        spans: the spans (and log records) that arrived, one per span id.
        sources: handles of the messages its spans came from, in arrival order.
        state: ``open``, ``complete``, ``incomplete`` or ``too_large``.
        size: its share of the bytes of the messages it came from (a message's bytes shared
            evenly by its spans).
    """

    trace_id: str
    spans: list[Span] = field(default_factory=list)
    sources: list[Hashable] = field(default_factory=list)
    state: str = "open"
    last_seen: float = 0.0
    size: float = 0.0
    _ids: set[tuple[str, str, str]] = field(default_factory=set)
    # Kept as spans arrive, so that whole() reads two fields (it read every span at every
    # message: quadratic in a trace's spans, 377 s for one of 32,000): the span ids here, the
    # parents named but not here yet, and whether a root arrived.
    _span_ids: set[str] = field(default_factory=set)
    _awaited: set[str] = field(default_factory=set)
    _rooted: bool = False

    def add(self, span: Span, limit: int) -> None:
        ident = (span.span_id, "", "")
        if span.kind == "LOG":
            ident = (span.span_id, span.name, str(span.start_ns))
        if ident in self._ids:  # a message read again (a rebalance, a retry upstream)
            return
        if len(self.spans) >= limit:
            self.state = "too_large"
            return
        self._ids.add(ident)
        self.spans.append(span)
        if span.kind == "LOG":
            return
        self._span_ids.add(span.span_id)
        self._awaited.discard(span.span_id)
        if span.is_root:
            self._rooted = True
        elif span.parent_span_id not in self._span_ids:
            self._awaited.add(span.parent_span_id)

    def whole(self) -> bool:
        """The root span arrived and every parent a span names is here."""
        return self._rooted and not self._awaited


class Assembler:
    """Open traces by id. Not thread-safe: the source's poll (the main thread) drives it.

    Args:
        idle_timeout_s: how long a trace waits for more spans after its last one.
        max_traces: open traces held at once.
        max_spans_per_trace: spans kept per trace.
        max_bytes: the open traces' share of their messages' bytes (None: no bound); the spans
            decoded hold about twice to three times that in memory.
        clock: monotonic seconds (tests pass their own).
        close_on_root: close a trace once it is whole (OTLP: a span is exported when it
            ends, so the root comes last); False waits for the idle timeout or the end of the
            input (trace exports list parents first).
        settle_s: how long a whole trace waits for more spans before it closes (a trace
            whose spans came through two partitions may bring its root before its children).
    """

    def __init__(
        self,
        idle_timeout_s: float,
        max_traces: int,
        max_spans_per_trace: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        close_on_root: bool = True,
        settle_s: float = 0.0,
        max_bytes: int | None = None,
    ) -> None:
        self.close_on_root = close_on_root
        self.settle_s = settle_s
        # Traces found whole, waiting out settle_s (an ordered set).
        self._whole: OrderedDict[str, None] = OrderedDict()
        self.idle_timeout_s = idle_timeout_s
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_bytes = max_bytes
        self.clock = clock
        self._open: OrderedDict[str, Trace] = OrderedDict()
        self._size = 0.0  # the open traces' sizes, summed

    def __len__(self) -> int:
        return len(self._open)

    @property
    def size(self) -> float:
        """The open traces' share of their messages' bytes."""
        return self._size

    def add(
        self, spans: Sequence[Span], source: Hashable, size: int = 0
    ) -> tuple[list[str], list[Trace]]:
        """Take the spans of one message of ``size`` bytes: the trace ids they belong to (once
        per trace the message reached: an id twice when its trace was evicted part-way through
        the message and begun again), and the traces this closed (whole, too large, or evicted
        to stay within ``max_traces`` and ``max_bytes``)."""
        now = self.clock()
        ids: list[str] = []
        closed: list[Trace] = []
        share = size / len(spans) if spans else 0.0
        reached: set[int] = set()  # the traces (objects, alive through the call) it reached
        for span in spans:
            trace = self._open.get(span.trace_id)
            if trace is None:
                trace = self._open[span.trace_id] = Trace(span.trace_id)
                closed.extend(self._evict())
            if id(trace) not in reached:
                # Once per trace the message reaches: a trace evicted part-way through this
                # message and begun again by a later span of it has this message too.
                reached.add(id(trace))
                ids.append(span.trace_id)
                trace.sources.append(source)
            trace.add(span, self.max_spans_per_trace)
            trace.size += share
            self._size += share
            trace.last_seen = now
            self._open.move_to_end(span.trace_id)
        closed.extend(self._evict())
        for trace_id in ids:
            trace = self._open.get(trace_id)  # None: evicted by a later trace of this message
            if trace is None:
                continue
            if trace.state == "too_large" or (
                self.close_on_root and self.settle_s <= 0 and trace.whole()
            ):
                trace.state = "complete" if trace.state == "open" else trace.state
                closed.append(self._pop(trace_id))
            elif self.close_on_root and trace.whole():
                self._whole[trace_id] = None
                self._whole.move_to_end(trace_id)
        return ids, closed

    def expired(self, *, everything: bool = False) -> list[Trace]:
        """Traces idle past the timeout (every open trace with ``everything``: the input ended)."""
        now = self.clock()
        out = self._settled(now)
        while self._open:
            trace = next(iter(self._open.values()))
            if not everything and now - trace.last_seen < self.idle_timeout_s:
                break
            out.append(self._close_idle(trace))
        return out

    def _settled(self, now: float) -> list[Trace]:
        """Whole traces that got no span for ``settle_s``, and are still whole."""
        out = []
        for trace_id in list(self._whole):
            trace = self._open.get(trace_id)
            if trace is None:  # closed meanwhile (evicted, idle)
                del self._whole[trace_id]
                continue
            if now - trace.last_seen < self.settle_s:
                continue
            del self._whole[trace_id]
            if trace.whole():  # a later span may name a parent not here yet
                self._pop(trace_id)
                trace.state = "complete"
                out.append(trace)
        return out

    def _evict(self) -> list[Trace]:
        """The traces idle longest, closed until both bounds hold."""
        out = []
        while len(self._open) > self.max_traces or (
            self.max_bytes is not None and self._open and self._size > self.max_bytes
        ):
            out.append(self._close_idle(next(iter(self._open.values()))))
        return out

    def _pop(self, trace_id: str) -> Trace:
        trace = self._open.pop(trace_id)
        # Summed again from nothing when none is open: float sums would drift.
        self._size = self._size - trace.size if self._open else 0.0
        return trace

    def _close_idle(self, trace: Trace) -> Trace:
        self._pop(trace.trace_id)
        only_logs = all(s.kind == "LOG" for s in trace.spans)
        trace.state = "complete" if only_logs or trace.whole() else "incomplete"
        return trace
