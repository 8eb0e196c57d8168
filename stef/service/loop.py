"""The run loop: fetch, judge concurrently, write, acknowledge, commit, shut down.

Threads, not asyncio: kafka-python, the ``openai`` client and the pipeline are all blocking and
thread-safe, and the judge's real work (LLM calls) is I/O. The main thread owns the source (a
Kafka consumer is not thread-safe): it polls, hands records to ``concurrency`` worker threads,
commits and reloads rules. Workers run the one record path (:meth:`Pipeline.process`, which turns
anything a record makes a stage raise into a dead letter) and write; a sink's acknowledgement (a
file flush, a broker ack) marks the record done, and only then may its offset be committed, in
order per partition. In-flight work is bounded in records and in bytes: at either bound the
source is paused (Kafka partitions paused, the consumer still polled so it keeps its group
membership).

Supervision: a worker that dies or stays on one record past ``record_timeout_s`` fails
``/healthz``; a sink that refuses one message (too large) gets a minimal dead letter in its place,
so no single record stops its partition; a sink outage stops the service with nothing committed
past what was written. The signal handler only records the signal; the loop acts on it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

import structlog
from prometheus_client import CollectorRegistry

from stef.errors import SinkError
from stef.exits import Exit
from stef.io import AckCallback, Envelope, Sink, Source
from stef.io.deadletter import dead_letter
from stef.judges.base import Judge
from stef.metrics import Metrics
from stef.models import Backfill
from stef.pipeline import Pipeline, Processed
from stef.rules.watch import RulesWatcher
from stef.service.canary import Canary, build_canary
from stef.service.health import HealthServer, HealthState
from stef.service.judge_errors import JudgeErrorLog
from stef.service.wiring import build_backend, build_pipeline, open_sink, open_source
from stef.settings import Settings

log = structlog.get_logger(__name__)

# The replacement of a refused message keeps only this much of the original payload.
_MIN_LETTER_BYTES = 4096

# Called for every record once its result or dead letter is acknowledged (replay's summary).
Observer = Callable[[Envelope, Processed], None]


class Service:
    """One replica of the service.

    Args:
        settings: validated settings.
        backend: the judge backend; None builds it from the settings (and the service closes it).
        registry: the metrics registry; None makes a fresh one.
        source, results, dead_letters: pre-built I/O (tests, ``stef replay``); None opens the
            settings' URLs.
        observer: called with each acknowledged record and what it became.
        with_canary: run the settings' canary, if one is configured (``stef run`` only: a
            replay or a backfill has no schedule to keep).
        backfill: the range of a ``stef backfill`` run, set on every result.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        backend: Judge | None = None,
        registry: CollectorRegistry | None = None,
        source: Source | None = None,
        results: Sink | None = None,
        dead_letters: Sink | None = None,
        observer: Observer | None = None,
        with_canary: bool = False,
        backfill: Backfill | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self._resources = contextlib.ExitStack()
        # Fails loudly at start on a bad rules file; later bad edits keep the last good rules.
        self.watcher = RulesWatcher(settings.rules, on_reload=self._on_rules_reload)
        self.metrics = Metrics(
            self.registry,
            known_apps=self.watcher.rules.known_apps,
            known_agents=settings.known_agents,
            max_agents=settings.max_agents,
        )
        for app in [None, *self.watcher.rules.known_apps]:
            self.metrics.prime_app(app)
        self.canary: Canary | None = None
        self.pipeline = self._judging(backend, with_canary=with_canary, backfill=backfill)
        self.source = source or open_source(settings.source_endpoint, settings)
        self.results = results or open_sink(settings.results_endpoint, settings)
        self.dead_letters = dead_letters or open_sink(settings.dead_letters_endpoint, settings)
        self.observer = observer
        self.health = HealthState()
        self.health.liveness.append(self._workers_problem)
        self.health.readiness.append(self.source.unreachable)
        self.server: HealthServer | None = None
        self._stop = threading.Event()
        self._stop_at: float | None = None
        self._signals: list[int] = []
        self._fatal: BaseException | None = None
        self._closing = False
        self._inflight = 0
        self._inflight_bytes = 0
        # The recent mean payload size: a fetch asks for no more records than fit the bytes
        # bound (None until the first fetch, which asks for one record).
        self._mean_bytes: float | None = None
        self._last_ack = time.monotonic()
        self._cv = threading.Condition()
        self._work: queue.SimpleQueue[Envelope | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._busy_since: dict[str, float] = {}
        self._dead_workers: list[str] = []
        self._lag_labels: set[tuple[str, int]] = set()
        self.counts = {"received": 0, "results": 0, "dead_letters": 0}
        self.judge_errors = JudgeErrorLog()

    def _judging(
        self, backend: Judge | None, *, with_canary: bool, backfill: Backfill | None
    ) -> Pipeline:
        """The record path (building and owning the backend when none is given), and the canary
        beside it when asked for and configured."""
        settings = self.settings
        if backend is None:
            backend = build_backend(settings, self.metrics)
            self._resources.callback(backend.close)
        pipeline = build_pipeline(
            settings, lambda: self.watcher.rules, backend, self.metrics, backfill=backfill
        )
        if with_canary:
            self.canary = build_canary(settings, lambda: self.watcher.rules, backend, self.metrics)
            if self.canary is not None:
                self._resources.callback(self.canary.stop)
        return pipeline

    # ---------------------------------------------------------------------------- control

    def request_stop(self) -> None:
        """Stop fetching and drain (the first SIGTERM/SIGINT)."""
        if not self._stop.is_set():
            self._stop_at = time.monotonic()
            self._stop.set()
            log.info("shutdown_requested", inflight=self._inflight)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: the first drains, a second exits at once with 128 + the signal
        (uncommitted work is redelivered). The handler only records the signal."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self._signals.append(signum)
            if len(self._signals) > 1:
                os._exit(128 + signum)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    @property
    def inflight(self) -> int:
        return self._inflight

    def run(self) -> int:
        """Run until the source ends (a file without ``--follow``) or a stop is requested.

        Returns:
            0 after a clean drain; 1 when a sink failed or records were left unfinished at the
            end of a file (uncommitted work is redelivered).
        """
        with self._resources:
            return self._run()

    def _run(self) -> int:
        s = self.settings
        if s.metrics_port is not None and self.server is None:
            self.server = HealthServer(self.registry, self.health, s.metrics_host, s.metrics_port)
            self.server.start()
        if self.canary is not None:
            self.canary.start()
        for n in range(s.concurrency):
            t = threading.Thread(target=self._worker, name=f"stef-worker-{n}", daemon=True)
            t.start()
            self._workers.append(t)
        drained = False
        try:
            self.source.start()
            self.health.ready = True
            self._log_start()
            self._loop()
            drained = self._drain()
        finally:
            self.health.ready = False
            self._shutdown()
            self.judge_errors.flush()
        if self._fatal is not None:
            log.error("service_failed", error=str(self._fatal))
            return Exit.FAILURE
        log.info("service_stopped", drained=drained, **self.counts)
        if not drained and self._stop_at is None:
            return Exit.FAILURE  # the end of a file, with records that never finished
        return Exit.OK

    def _log_start(self) -> None:
        s = self.settings
        log.info(
            "service_started",
            source=str(s.source_endpoint),
            results=str(s.results_endpoint),
            dead_letters=str(s.dead_letters_endpoint),
            backend=self.pipeline.backend.info.backend,
            model=self.pipeline.backend.info.model,
            rules_version=self.watcher.rules.version,
            concurrency=s.concurrency,
            max_inflight=s.inflight_bound,
            max_inflight_bytes=s.inflight_bytes_bound,
            metrics_port=self.server.port if self.server is not None else None,
        )

    # ------------------------------------------------------------------------------- loop

    def _full(self) -> bool:
        s = self.settings
        return self._inflight >= s.inflight_bound or self._inflight_bytes >= s.inflight_bytes_bound

    def _room(self) -> int:
        """How many records the next fetch may bring: within the records bound, and within the
        bytes bound at the recent mean size (one record at least: the bytes bound is soft)."""
        s = self.settings
        if self._mean_bytes is None:
            return 1
        by_bytes = int((s.inflight_bytes_bound - self._inflight_bytes) / self._mean_bytes)
        return max(1, min(s.inflight_bound - self._inflight, by_bytes))

    def _loop(self) -> None:
        s = self.settings
        paused = False
        next_commit = next_rules = time.monotonic()
        while not self._stop.is_set():
            self.health.beat()
            if self._signals:
                log.info("signal_received", signal=self._signals[0])
                self.request_stop()
                break
            now = time.monotonic()
            if now >= next_rules:
                self.watcher.check()
                next_rules = now + s.rules_check_interval_s
            if now >= next_commit:
                self._commit()
                next_commit = now + s.commit_interval_s
            if self._full():
                if not paused:
                    self.source.pause()
                    paused = True
                # A paused Kafka consumer is still polled: it keeps its membership and handles
                # rebalances. Whatever a poll returns is handled, never dropped.
                self._submit(self.source.poll(0, 0.05))
                with self._cv:
                    self._cv.wait_for(lambda: not self._full(), timeout=0.1)
                continue
            if paused:
                self.source.resume()
                paused = False
            envelopes = self.source.poll(self._room(), 0.2)
            self._submit(envelopes)
            if not envelopes and self.source.exhausted:
                log.info("source_exhausted", received=self.counts["received"])
                break

    def _submit(self, envelopes: Sequence[Envelope]) -> None:
        if not envelopes:
            return
        size = sum(len(e.payload) for e in envelopes)
        with self._cv:
            self._inflight += len(envelopes)
            self._inflight_bytes += size
        mean = size / len(envelopes)
        self._mean_bytes = mean if self._mean_bytes is None else 0.8 * self._mean_bytes + 0.2 * mean
        self.metrics.inflight.inc(len(envelopes))
        self.counts["received"] += len(envelopes)
        for envelope in envelopes:
            self._work.put(envelope)

    def _drain(self) -> bool:
        """Wait for in-flight work: after a stop request, up to the drain timeout; at the end of
        a file, as long as records keep finishing (none awaited past ``record_timeout_s``)."""
        while True:
            with self._cv:
                if self._inflight == 0:
                    return True
                now = time.monotonic()
                if self._stop_at is not None:
                    remaining = self._stop_at + self.settings.drain_timeout_s - now
                else:
                    remaining = self._last_ack + self.settings.record_timeout_s - now
                if remaining <= 0:
                    log.warning("drain_timeout", abandoned=self._inflight)
                    return False
                self._cv.wait(timeout=min(remaining, 0.5))
            self.health.beat()
            self._commit()
            if self._signals and self._stop_at is None:
                self.request_stop()

    def _shutdown(self) -> None:
        # Work abandoned at the drain deadline may still finish and hit closed sinks: that is
        # expected (it is redelivered), not a failure of the run.
        self._closing = True
        for _ in self._workers:
            self._work.put(None)
        for sink in (self.results, self.dead_letters):
            with contextlib.suppress(Exception):
                sink.flush(10.0)
        try:
            self.source.close()  # commits what is acknowledged
        except Exception as exc:  # shutdown goes on; uncommitted work is redelivered
            log.warning("source_close_failed", error=str(exc))
        for sink in (self.results, self.dead_letters):
            try:
                sink.close()
            except Exception as exc:  # as above
                log.warning("sink_close_failed", error=str(exc))
        if self.server is not None:
            self.server.close()
            self.server = None

    def _commit(self) -> None:
        self.source.commit()
        lags = self.source.lag()
        for (topic, partition), lag in lags.items():
            self.metrics.set_lag(topic, partition, lag)
        for topic, partition in self._lag_labels - set(lags):
            self.metrics.consumer_lag.remove(topic, str(partition))
        self._lag_labels = set(lags)

    def _on_rules_reload(self, outcome: str) -> None:
        self.metrics.observe_rules_reload(outcome)
        # Even a reload with errors applies the good files: new apps get their labels now.
        apps = self.watcher.rules.known_apps
        self.metrics.known_apps = set(apps)
        for app in apps:
            self.metrics.prime_app(app)

    # ---------------------------------------------------------------------------- workers

    def _workers_problem(self) -> str | None:
        """Why ``/healthz`` must fail because of a worker: dead, or stuck on one record."""
        if self._dead_workers:
            return f"worker died: {', '.join(self._dead_workers)}"
        dead = [t.name for t in self._workers if not t.is_alive() and not self._closing]
        if dead:
            return f"worker not running: {', '.join(dead)}"
        now = time.monotonic()
        for name, since in list(self._busy_since.items()):
            if now - since > self.settings.record_timeout_s:
                return f"{name} stuck on one record for {now - since:.0f} s"
        return None

    def _worker(self) -> None:
        name = threading.current_thread().name
        try:
            while True:
                envelope = self._work.get()
                if envelope is None:
                    return
                self._busy_since[name] = time.monotonic()
                try:
                    self._handle(envelope)
                finally:
                    self._busy_since.pop(name, None)
        except BaseException as exc:  # the worker is gone: say so where probes and logs see it
            self._dead_workers.append(name)
            log.critical("worker_died", worker=name, error_type=type(exc).__name__, error=str(exc))

    def _handle(self, envelope: Envelope) -> None:
        if not envelope.claim():
            # Its partition went to another replica before this record's turn: that replica
            # reads it again from the last commit, so judging it here would only duplicate it.
            log.debug("record_skipped_revoked", **envelope.position)
            self._released(envelope)
            return
        started = time.perf_counter()
        processed = self.pipeline.process(envelope.payload, envelope.position, envelope.key)
        if processed.result is not None:
            result = processed.result
            # Debug, not info: a line per record cost ~10% of a Kafka replica's throughput.
            log.debug(
                "record_judged",
                id=result.id,
                app=result.app,
                outcome=result.outcome,
                score=result.score,
                tier=result.tier,
                backend=result.judge.backend,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                **envelope.position,
            )
            self.judge_errors.observe(result)
            _send(self.results, processed, self._ack(envelope, processed))
        else:
            log.warning("record_dead_lettered", reason=processed.reason, **envelope.position)
            _send(self.dead_letters, processed, self._ack(envelope, processed))

    def _count(self, name: str) -> None:
        with self._cv:
            self.counts[name] += 1

    def _ack(
        self, envelope: Envelope, processed: Processed, *, fallback: bool = True
    ) -> AckCallback:
        called = threading.Event()

        def on_ack(error: BaseException | None) -> None:
            if called.is_set():
                return  # a sink that both raised and called back: the record is settled once
            called.set()
            if error is None:
                envelope.on_done()
                self._count("results" if processed.is_result else "dead_letters")
                if self.observer is not None:
                    self.observer(envelope, processed)
            elif fallback and isinstance(error, SinkError) and error.rejected:
                # The sink refuses this one message: a minimal dead letter takes its place, so
                # the partition moves on. If that is refused too, the sink is really down.
                self._replace_rejected(envelope, processed, error)
                return
            elif self._closing:
                log.warning("abandoned_record_not_written", error=str(error), **envelope.position)
            else:
                # Not done: its offset is never committed, so a restart redelivers it.
                log.error("sink_failed", error=str(error), **envelope.position)
                if self._fatal is None:
                    self._fatal = error
                    self.health.failed = str(error)
                self.request_stop()
            self._released(envelope)

        return on_ack

    def _released(self, envelope: Envelope) -> None:
        """The record no longer counts against the in-flight bounds."""
        with self._cv:
            self._inflight -= 1
            self._inflight_bytes -= len(envelope.payload)
            self._last_ack = time.monotonic()
            self._cv.notify_all()
        self.metrics.inflight.dec()

    def _replace_rejected(self, envelope: Envelope, processed: Processed, error: SinkError) -> None:
        log.error("sink_rejected_record", error=str(error), **envelope.position)
        self.metrics.observe_dead_letter("sink_rejected")
        letter = dead_letter(
            "sink_rejected",
            f"{error}; the {'result' if processed.is_result else 'dead letter'} was refused",
            envelope.position,
            envelope.payload,
            max_bytes=_MIN_LETTER_BYTES,  # a prefix, the length and sha256 of the original
        )
        replacement = Processed(value=letter, key=envelope.key, reason="sink_rejected")
        _send(self.dead_letters, replacement, self._ack(envelope, replacement, fallback=False))


def _send(sink: Sink, processed: Processed, on_ack: AckCallback) -> None:
    """Write through a sink that may raise instead of calling back: either way, one ack."""
    try:
        sink.send(processed.key, processed.value, on_ack)
    except Exception as exc:  # a sink's own bug must not leave the record in flight for ever
        on_ack(SinkError(f"{type(exc).__name__}: {exc}"))
