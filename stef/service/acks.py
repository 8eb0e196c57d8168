"""The ack policy of the run loop: what a sink's acknowledgement (or its failure) does to a
record. A record acknowledged is done (its position may be committed) and counted, and the
command's observer sees it; a message the sink refused is replaced by a minimal dead letter; a
sink outage stops the service with nothing committed past what was written. Whatever a callback
raises, the record's in-flight slot is released exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from stef.errors import SinkError
from stef.io import AckCallback, Envelope, Sink
from stef.io.deadletter import dead_letter, message_key
from stef.metrics import Metrics
from stef.pipeline import Processed
from stef.service.window import InFlightWindow

log = structlog.get_logger(__name__)

# The replacement of a refused message keeps only this much of the original payload.
MIN_LETTER_BYTES = 4096

# Called for every record once its result or dead letter is acknowledged (replay's summary).
Observer = Callable[[Envelope, Processed], None]


class AckPolicy:
    """Settles records: each acknowledgement, each failure, each record whose handling raised.

    Args:
        window: the in-flight window whose slots records give back.
        dead_letters: where the replacement of a refused message goes.
        metrics: counts callbacks that raised and sink rejections.
        observer: the command's observer of each acknowledged record, if any.
        on_fatal: called with the error when a record cannot be settled (a sink outage, a done
            callback or a handler that raised): the service stops, nothing committed past it.
        closing: True once the service shuts down (a late failure is then expected: the
            abandoned record is redelivered).

    Attributes:
        counts: results and dead letters acknowledged.
    """

    def __init__(
        self,
        window: InFlightWindow,
        dead_letters: Sink,
        metrics: Metrics,
        *,
        observer: Observer | None = None,
        on_fatal: Callable[[BaseException], None],
        closing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.window = window
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.observer = observer
        self.on_fatal = on_fatal
        self.closing = closing
        self.counts = {"results": 0, "dead_letters": 0}
        self._lock = threading.Lock()
        self._failures = 0

    def release(self, envelope: Envelope) -> bool:
        """The record gives its slot back (once); False when it already had."""
        if not self.window.release(envelope):
            return False
        self.metrics.service.inflight.dec()
        return True

    def callback(
        self, envelope: Envelope, processed: Processed, *, fallback: bool = True
    ) -> AckCallback:
        """The callback a sink calls once the record's result or dead letter is written (None)
        or failed (the error)."""
        called = threading.Event()

        def on_ack(error: BaseException | None) -> None:
            if called.is_set():
                return  # a sink that both raised and called back: the record is settled once
            called.set()
            # Whatever a callback below raises, the slot is released (finally): a leaked slot
            # is a window that shrinks for good, until the service hangs.
            handed_over = False
            try:
                if error is None:
                    self._done(envelope, processed)
                elif fallback and isinstance(error, SinkError) and error.rejected:
                    # The sink refuses this one message: a minimal dead letter takes its place,
                    # so the partition moves on. If that is refused too, the sink is really down.
                    self._replace_rejected(envelope, processed, error)
                    handed_over = True  # the replacement's acknowledgement releases the slot
                elif self.closing():
                    log.warning(
                        "abandoned_record_not_written", error=str(error), **envelope.position
                    )
                else:
                    # Not done: its offset is never committed, so a restart redelivers it.
                    self._sink_failed(envelope, error)
                    self.on_fatal(error)
            except Exception as exc:  # our own bookkeeping raised: counted, never a lost slot
                self.metrics.observe_callback_error("worker")
                log.error("ack_failed", error_type=type(exc).__name__, error=str(exc))
                self.on_fatal(exc)
            finally:
                if not handed_over:
                    self.release(envelope)

        return on_ack

    def _sink_failed(self, envelope: Envelope, error: BaseException) -> None:
        """An error line for the first record a sink failed; the others in flight with it fail
        alike (one closed pipe under ``stef run --results - | head`` wrote some 250 of them) and
        are logged at debug level."""
        with self._lock:
            first, self._failures = self._failures == 0, self._failures + 1
        if first:
            log.error("sink_failed", error=str(error), **envelope.position)
        else:
            log.debug("sink_failed", error=str(error), **envelope.position)

    def unhandled(self, envelope: Envelope, exc: Exception) -> None:
        """The handling of a record raised before its write was acknowledged. Its slot is
        released (the window never shrinks for good), and since its position can never be
        committed the service stops as after a sink failure: a restart redelivers it."""
        self.metrics.observe_callback_error("worker")
        log.error(
            "record_handling_failed",
            error_type=type(exc).__name__,
            error=str(exc),
            **envelope.position,
        )
        if self.release(envelope):
            self.on_fatal(SinkError(f"handling the record raised {type(exc).__name__}: {exc}"))

    def _done(self, envelope: Envelope, processed: Processed) -> None:
        done = self._guarded("source", envelope, envelope.on_done)
        with self._lock:
            self.counts["results" if processed.is_result else "dead_letters"] += 1
        observer = self.observer
        if observer is not None:
            self._guarded("observer", envelope, lambda: observer(envelope, processed))
        if not done:
            # The source cannot commit past it: stop, as after a sink failure.
            self.on_fatal(SinkError("the source's done callback raised"))

    def _guarded(self, callback: str, envelope: Envelope, call: Callable[[], object]) -> bool:
        """Run a callback the way :mod:`concurrent.futures` runs done-callbacks: what it
        raises is logged and counted, never passed on to the accounting around it."""
        try:
            call()
        except Exception as exc:
            self.metrics.observe_callback_error(callback)
            log.error(
                "callback_failed",
                callback=callback,
                error_type=type(exc).__name__,
                error=str(exc),
                **envelope.position,
            )
            return False
        return True

    def _replace_rejected(self, envelope: Envelope, processed: Processed, error: SinkError) -> None:
        log.error("sink_rejected_record", error=str(error), **envelope.position)
        self.metrics.observe_dead_letter("sink_rejected")
        letter = dead_letter(
            "sink_rejected",
            f"{error}; the {'result' if processed.is_result else 'dead letter'} was refused",
            envelope.position,
            envelope.payload,
            max_bytes=MIN_LETTER_BYTES,  # a prefix, the length and sha256 of the original
            key=envelope.key,
        )
        replacement = Processed(value=letter, key=message_key(envelope.key), reason="sink_rejected")
        send(self.dead_letters, replacement, self.callback(envelope, replacement, fallback=False))


def send(sink: Sink, processed: Processed, on_ack: AckCallback) -> None:
    """Write through a sink that may raise instead of calling back: either way, one ack."""
    try:
        sink.send(processed.key, processed.value, on_ack)
    except Exception as exc:  # a sink's own bug must not leave the record in flight for ever
        on_ack(SinkError(f"{type(exc).__name__}: {exc}"))
