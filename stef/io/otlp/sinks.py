"""Evaluation results to OpenTelemetry: ``otlp+http://HOST:PORT`` (OTLP/HTTP protobuf logs, in
batches, retried) and ``otlp+kafka://HOST:PORT/otlp_logs`` (one ``LogsData`` message per result,
keyed by trace id, as the Collector's Kafka exporter writes logs). A result is acknowledged only
once the collector or the broker has it: at least once, like the other sinks."""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import structlog

from stef.errors import SinkError
from stef.io import AckCallback, Sink
from stef.io.otlp.decode import require_otlp
from stef.io.otlp.evaluations import evaluated_span, evaluation_logs

log = structlog.get_logger(__name__)


def _convert(value: bytes) -> bytes:
    """The ``LogsData`` of one result JSON.

    Raises:
        SinkError: ``rejected``: the value is not a result (a dead letter has no place here).
    """
    try:
        return evaluation_logs([value])
    except (ValueError, TypeError, AttributeError) as exc:
        raise SinkError(f"not a result, no evaluation event: {exc}", rejected=True) from exc


class OtlpKafkaSink:
    """Evaluation log records to a Kafka topic (``otlp_proto``), through a Kafka sink."""

    def __init__(self, inner: Sink) -> None:
        require_otlp("an otlp+kafka:// sink")
        self.inner = inner

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        try:
            payload = _convert(value)
            trace_id, _ = evaluated_span(json.loads(value))
        except SinkError as exc:
            on_ack(exc)
            return
        self.inner.send(trace_id.encode("ascii") if trace_id else key, payload, on_ack)

    def flush(self, timeout_s: float) -> None:
        self.inner.flush(timeout_s)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class _Item:
    value: bytes
    on_ack: AckCallback


class OtlpHttpSink:
    """Evaluation log records POSTed to an OTLP/HTTP logs endpoint in batches.

    Args:
        url: the logs endpoint (``http://collector:4318/v1/logs``).
        max_batch: results per request.
        linger_s: how long a batch waits for more results.
        timeout_s: one request's timeout.
        max_attempts: attempts per batch (429, 502, 503, 504 and connection errors are retried
            with backoff, ``Retry-After`` honoured); then each of its results fails.
        max_queued: results waiting to be sent; past it ``send`` waits (bounded memory).
    """

    RETRIED = frozenset({429, 502, 503, 504})

    def __init__(
        self,
        url: str,
        *,
        max_batch: int = 256,
        linger_s: float = 0.2,
        timeout_s: float = 10.0,
        max_attempts: int = 5,
        max_queued: int = 10_000,
    ) -> None:
        require_otlp("an otlp+http:// sink")
        self.url = url
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self._queue: queue.Queue[_Item | None] = queue.Queue(maxsize=max_queued)
        self._idle = threading.Condition()
        self._unsent = 0
        self._thread = threading.Thread(target=self._run, name="otlp-http-sink", daemon=True)
        self._thread.start()

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        try:
            _convert(value)
        except SinkError as exc:
            on_ack(exc)
            return
        with self._idle:
            self._unsent += 1
        self._queue.put(_Item(value, on_ack))

    def flush(self, timeout_s: float) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._unsent == 0, timeout=timeout_s)

    def close(self) -> None:
        self.flush(30.0)
        self._queue.put(None)
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.linger_s
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # seen again after this batch: stop then
                    break
                batch.append(item)
            self._deliver(batch)

    def _deliver(self, batch: list[_Item]) -> None:
        error: BaseException | None = None
        try:
            self._post(evaluation_logs([i.value for i in batch]))
        except SinkError as exc:
            error = exc
            log.warning("otlp_export_failed", url=self.url, results=len(batch), error=str(exc))
        except Exception as exc:  # never lose the accounting of a batch
            error = SinkError(f"{self.url}: {type(exc).__name__}: {exc}")
        for item in batch:
            try:
                item.on_ack(error)
            except Exception as exc:  # a callback's failure is its own; the others still run
                log.error("ack_callback_failed", error=str(exc))
        with self._idle:
            self._unsent -= len(batch)
            self._idle.notify_all()

    def _post(self, body: bytes) -> None:
        """POST one ``LogsData`` (as ``ExportLogsServiceRequest``: the same fields), retried.

        Raises:
            SinkError: refused (4xx but 429), or still failing after ``max_attempts``.
        """
        delay = 0.5
        for attempt in range(1, self.max_attempts + 1):
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/x-protobuf"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                    answer.read()
                return
            except urllib.error.HTTPError as exc:
                exc.close()  # the error holds the connection's response
                if exc.code not in self.RETRIED or attempt == self.max_attempts:
                    raise SinkError(f"{self.url}: HTTP {exc.code}") from exc
                wait = _retry_after(exc.headers.get("Retry-After"), delay)
            except (urllib.error.URLError, OSError) as exc:
                if attempt == self.max_attempts:
                    raise SinkError(f"{self.url}: {exc}") from exc
                wait = delay
            time.sleep(min(wait, 30.0))
            delay = min(delay * 2, 8.0)
        raise SinkError(f"{self.url}: no attempt left")


def _retry_after(header: str | None, default: float) -> float:
    try:
        return max(0.0, float(header)) if header else default
    except ValueError:
        return default
