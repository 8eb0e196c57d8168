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

The in-flight window (:mod:`stef.service.window`), the ack policy (:mod:`stef.service.acks`) and
the lifecycle (:mod:`stef.service.lifecycle`) live in their own modules, each testable alone;
this one wires them and runs the loop and the workers.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Sequence

import structlog
from prometheus_client import CollectorRegistry

from stef.errors import CommitError, ConfigError
from stef.exits import Exit
from stef.io import Envelope, Sink, Source
from stef.io.jsonl import JsonlSink
from stef.judges.base import Judge
from stef.metrics import Metrics
from stef.models import Backfill
from stef.pipeline import Pipeline
from stef.rules.watch import RulesWatcher
from stef.service.acks import AckPolicy, Observer, send
from stef.service.canary import Canary, build_canary
from stef.service.collector import restore_collector, settle_collector
from stef.service.health import HealthServer, HealthState
from stef.service.judge_errors import JudgeErrorLog
from stef.service.lifecycle import Lifecycle
from stef.service.window import InFlightWindow
from stef.service.wiring import build_backend, build_pipeline, open_sink, open_source
from stef.settings import Settings

log = structlog.get_logger(__name__)

__all__ = ["Observer", "Service"]


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
        log_dead_letters: log a warning per dead letter; False when the observer reports each
            one itself (``stef replay`` prints ``FILE:LINE: invalid input``), so it shows once.
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
        log_dead_letters: bool = True,
    ) -> None:
        self.settings = settings
        self._log_dead_letters = log_dead_letters
        self.registry = registry if registry is not None else CollectorRegistry()
        self._resources = contextlib.ExitStack()
        # Fails loudly at start on a bad rules file; later bad edits keep the last good rules.
        self.watcher = RulesWatcher(settings.rules, on_reload=self._on_rules_reload)
        self.metrics = self._metrics()
        self.canary: Canary | None = None
        self.pipeline = self._judging(backend, with_canary=with_canary, backfill=backfill)
        self.source = source or open_source(settings.source_endpoint, settings)
        self.results = results or open_sink(settings.results_endpoint, settings)
        self.dead_letters = dead_letters or open_sink(settings.dead_letters_endpoint, settings)
        self.observer = observer
        self._supervise(observer)
        self._received = 0
        # Whether the run ended with no record in flight (set by run): a stop signal or a drain
        # timeout abandons some, which a command that must read its input whole reports.
        self.drained = False
        self._work: queue.SimpleQueue[Envelope | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._busy_since: dict[str, float] = {}
        self._dead_workers: list[str] = []
        self._lag_labels: set[tuple[str, int]] = set()
        # Commits failed in a row, and the last one's error.
        self._commit_failures: tuple[int, str] = (0, "")
        self.judge_errors = JudgeErrorLog()

    def _metrics(self) -> Metrics:
        """The service's metrics, every app the rules know at zero from the start."""
        settings = self.settings
        metrics = Metrics(
            self.registry,
            # No rules configured: no apps are known, so the first label-like app names seen
            # are the labels (docs/metrics.md), not one `unknown` for every app.
            known_apps=self.watcher.rules.known_apps if settings.rules is not None else None,
            known_agents=settings.known_agents,
            max_agents=settings.max_agents,
        )
        for app in [None, *self.watcher.rules.known_apps]:
            metrics.prime_app(app)
        return metrics

    def _supervise(self, observer: Observer | None) -> None:
        """Health checks, the in-flight window, the lifecycle and the ack policy over them."""
        self.health = HealthState()
        self.health.liveness.append(self._workers_problem)
        self.health.liveness.append(self._acks_problem)
        self.health.liveness.append(self._commits_problem)
        self.health.readiness.append(self.source.unreachable)
        self.server: HealthServer | None = None
        settings = self.settings
        self.window = InFlightWindow(settings.inflight_bound, settings.inflight_bytes_bound)
        self.lifecycle = Lifecycle(self.health, lambda: self.window.count)
        self.acks = AckPolicy(
            self.window,
            self.dead_letters,
            self.metrics,
            observer=observer,
            on_fatal=self.lifecycle.fail,
            closing=lambda: self.lifecycle.closing,
        )

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
        self.lifecycle.request_stop()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: the first drains, a second exits at once with 128 + the signal;
        SIGQUIT stops without waiting for the records in flight; SIGHUP checks the rules at
        once, contents included; SIGUSR1 reopens the output files; SIGUSR2 is logged, ignored."""
        self.lifecycle.install_signal_handlers()

    @property
    def inflight(self) -> int:
        return self.window.count

    @property
    def counts(self) -> dict[str, int]:
        """Records received, and results and dead letters acknowledged."""
        return {"received": self._received, **self.acks.counts}

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
            try:
                self.server = HealthServer(
                    self.registry, self.health, s.metrics_host, s.metrics_port
                )
            except ConfigError:  # the port is taken: nothing started, the sinks are let go
                for sink in (self.results, self.dead_letters):
                    with contextlib.suppress(Exception):
                        sink.close()
                raise
            self.server.start()
            # The bound port: with metrics_port 0 the OS chose it, and only this line says which.
            log.info("metrics_serving", host=s.metrics_host, port=self.server.port)
        if self.canary is not None:
            self.canary.start()
        for n in range(s.concurrency):
            t = threading.Thread(target=self._worker, name=f"stef-worker-{n}", daemon=True)
            t.start()
            self._workers.append(t)
        drained = False
        # Everything is built and no record is in yet: what is alive now lives as long as the
        # run (stef.service.collector).
        collector = settle_collector(s.gc_gen0)
        try:
            self.source.start()
            if self._open_outputs():
                self.health.ready = True
                self._log_start()
            self._loop()
            drained = self.drained = self._drain()
        finally:
            self.health.ready = False
            self._shutdown()
            self.judge_errors.flush()
            restore_collector(collector)
        if self.lifecycle.fatal is not None:
            log.error("service_failed", error=str(self.lifecycle.fatal))
            return Exit.FAILURE
        log.info("service_stopped", drained=drained, **self.counts)
        if not drained and self.lifecycle.stop_at is None:
            return Exit.FAILURE  # the end of a file, with records that never finished
        return Exit.OK

    def _open_outputs(self) -> bool:
        """Open the file outputs: one exists once its source is open, even if empty. False when
        a stop came while a FIFO waited for its reader: the run is then never ready and never
        says it started (it did both for the moment before the loop saw the stop); the loop
        logs the signal and stops before fetching."""
        for sink in (self.results, self.dead_letters):
            if isinstance(sink, JsonlSink):
                sink.open(self._stop_waiting)
        return not self._stop_waiting()

    def _stop_waiting(self) -> bool:
        """Whether a FIFO output's wait for its reader ends: a stop came (the loop then stops
        before fetching). The replica is alive meanwhile, only not ready."""
        self.health.beat()
        return self.lifecycle.stopped.is_set() or bool(self.lifecycle.signals)

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

    def _asked(self, now: float, next_rules: float) -> float:
        """What SIGUSR1 (reopen the output files) and SIGHUP (check the rules, contents
        included) asked for, a SIGUSR2 logged as ignored, and the rules' own timer; returns
        when the rules are next due."""
        while self.lifecycle.ignored:
            signum = self.lifecycle.ignored.pop(0)
            log.warning("signal_ignored", signal=signum)
        if self.lifecycle.reopen_outputs.is_set():
            self.lifecycle.reopen_outputs.clear()
            log.info("outputs_reopen_requested", signal="SIGUSR1")
            for sink in (self.results, self.dead_letters):
                if isinstance(sink, JsonlSink):
                    sink.reopen()
        asked = self.lifecycle.check_rules.is_set()
        if not asked and now < next_rules:
            return next_rules
        if asked:
            self.lifecycle.check_rules.clear()
            log.info("rules_check_requested", signal="SIGHUP")
        self.watcher.check(contents=asked)
        return now + self.settings.rules_check_interval_s

    def _loop(self) -> None:
        s = self.settings
        paused = False
        next_commit = next_rules = time.monotonic()
        while not self.lifecycle.stopped.is_set():
            self.health.beat()
            if self.lifecycle.signals:
                log.info("signal_received", signal=self.lifecycle.signals[0])
                self.request_stop()
                break
            now = time.monotonic()
            next_rules = self._asked(now, next_rules)
            if now >= next_commit:
                self._commit()
                next_commit = now + s.commit_interval_s
            if self.window.full():
                if not paused:
                    self.source.pause()
                    paused = True
                # A paused Kafka consumer is still polled: it keeps its membership and handles
                # rebalances. Whatever a poll returns is handled, never dropped.
                self._submit(self.source.poll(0, 0.05))
                self.window.wait_for_room(0.1)
                continue
            if paused:
                self.source.resume()
                paused = False
            envelopes = self.source.poll(self.window.room(), 0.2)
            self._submit(envelopes)
            if not envelopes and self.source.exhausted:
                log.info("source_exhausted", received=self._received)
                break

    def _submit(self, envelopes: Sequence[Envelope]) -> None:
        if not envelopes:
            return
        self.window.admit(envelopes)
        self.metrics.service.inflight.inc(len(envelopes))
        self._received += len(envelopes)
        for envelope in envelopes:
            self._work.put(envelope)

    def _drain(self) -> bool:
        """Wait for in-flight work: after a stop request, up to the drain timeout; at the end of
        a file, as long as records keep finishing (none awaited past ``record_timeout_s``)."""
        while True:
            if self.window.count == 0:
                return True
            if self.lifecycle.quick:  # SIGQUIT: what is written is committed, nothing awaited
                if self.lifecycle.stop_at is None:
                    # It came as the loop found the end of a file: a stop all the same (exit 0),
                    # not the end of a file with records that never finished (exit 1).
                    self.request_stop()
                log.warning("drain_skipped", signal="SIGQUIT", abandoned=self.window.count)
                return False
            now = time.monotonic()
            stop_at = self.lifecycle.stop_at
            if stop_at is not None:
                remaining = stop_at + self.settings.drain_timeout_s - now
            else:
                remaining = self.window.last_settled + self.settings.record_timeout_s - now
            if remaining <= 0:
                log.warning("drain_timeout", abandoned=self.window.count)
                return False
            self.window.wait_for_empty(min(remaining, 0.5))
            self.health.beat()
            self._commit()
            if self.lifecycle.signals and self.lifecycle.stop_at is None:
                self.request_stop()

    def _shutdown(self) -> None:
        # Work abandoned at the drain deadline may still finish and hit closed sinks: that is
        # expected (it is redelivered), not a failure of the run.
        self.lifecycle.closing = True
        for _ in self._workers:
            self._work.put(None)
        for sink in (self.results, self.dead_letters):
            with contextlib.suppress(Exception):
                sink.flush(10.0)
        with contextlib.suppress(Exception):  # counted there; close() commits again anyway
            self._commit()
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
        try:
            self.source.commit()
        except CommitError as exc:
            # Loud, not fatal: the next commit retries and nothing done is lost (a restart
            # redelivers it). After commit_failures_unhealthy in a row, /healthz fails.
            self._commit_failures = (self._commit_failures[0] + 1, str(exc))
            self.metrics.observe_commit_failure(exc.source)
            log.error(
                "commit_failed",
                source=exc.source,
                error=str(exc),
                in_a_row=self._commit_failures[0],
            )
        else:
            self._commit_failures = (0, "")
        self.metrics.seams.uncommitted.set(self.source.uncommitted())
        lags = self.source.lag()
        for (topic, partition), lag in lags.items():
            self.metrics.set_lag(topic, partition, lag)
        for topic, partition in self._lag_labels - set(lags):
            self.metrics.service.consumer_lag.remove(topic, str(partition))
        self._lag_labels = set(lags)

    def _on_rules_reload(self, outcome: str) -> None:
        self.metrics.observe_rules_reload(outcome)
        # Even a reload with errors applies the good files: new apps get their labels now.
        apps = self.watcher.rules.known_apps
        self.metrics.known_apps = set(apps)
        for app in apps:
            self.metrics.prime_app(app)

    # ---------------------------------------------------------------------------- workers

    def _acks_problem(self) -> str | None:
        """Why ``/healthz`` must fail because records are held but none is settled: a leaked
        slot or a sink that never calls back looks like this, while every worker is idle."""
        waited = self.window.unsettled_for()
        if waited > self.settings.record_timeout_s:
            inflight = self.window.count
            return f"{inflight} records in flight and no acknowledgement for {waited:.0f} s"
        return None

    def _commits_problem(self) -> str | None:
        """Why ``/healthz`` must fail because commits keep failing (quix-streams raises
        ``CheckpointConsumerCommitError``): a restart reconnects, and redelivers what is done."""
        failures, last = self._commit_failures
        if failures >= self.settings.commit_failures_unhealthy:
            return f"{failures} commits in a row failed: {last}"
        return None

    def _workers_problem(self) -> str | None:
        """Why ``/healthz`` must fail because of a worker: dead, or stuck on one record."""
        if self._dead_workers:
            return f"worker died: {', '.join(self._dead_workers)}"
        dead = [t.name for t in self._workers if not t.is_alive() and not self.lifecycle.closing]
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
                except Exception as exc:  # outside the pipeline (which never raises): a bug
                    self.acks.unhandled(envelope, exc)
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
            self.acks.release(envelope)
            return
        started = time.perf_counter()
        processed = self.pipeline.process(
            envelope.payload,
            envelope.position,
            envelope.key,
            oversized=envelope.oversized,
            invalid=envelope.invalid,
        )
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
            send(self.results, processed, self.acks.callback(envelope, processed))
        else:
            if self._log_dead_letters:
                log.warning("record_dead_lettered", reason=processed.reason, **envelope.position)
            send(self.dead_letters, processed, self.acks.callback(envelope, processed))
