"""The run loop of ``stef run``: fetch, judge concurrently, write, acknowledge, commit, shut down.

Threads, not asyncio: kafka-python, the ``openai`` client and the pipeline are all blocking and
thread-safe, and the judge's real work (LLM calls) is I/O. The main thread owns the source (a
Kafka consumer is not thread-safe): it polls, hands records to ``concurrency`` worker threads,
commits and reloads rules. Workers validate, judge and write; a sink's acknowledgement (a file
flush, a broker ack) marks the record done, and only then may its offset be committed, in order
per partition. In-flight work is bounded: at the bound the source is paused (Kafka partitions
paused, the consumer still polled so it keeps its group membership).

This is the one place that catches broadly: anything a stage raises on one record (a "poison"
record) becomes a dead letter, and the loop goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from stef.errors import ConfigError, InvalidInput, RulesError, StefError
from stef.io import Envelope, Sink, Source
from stef.io.deadletter import dead_letter
from stef.io.jsonl import FileSource, JsonlSink
from stef.io.urls import Endpoint
from stef.judges.base import Judge
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.ratelimit import RateLimitedJudge
from stef.metrics import Metrics
from stef.pipeline import Pipeline
from stef.rules import RulesWatcher
from stef.service.health import HealthServer, HealthState
from stef.settings import Settings, load_settings
from stef.stages.validate import validate

log = structlog.get_logger(__name__)

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


# ---------------------------------------------------------------------------------- wiring


def build_backend(settings: Settings, metrics: Metrics | None = None) -> Judge:
    """The judge backend: the LLM judge when an endpoint is configured, else the heuristic one;
    behind the per-replica rate limits when any is set."""
    backend: Judge
    if settings.llm.configured:
        from stef.judges.llm import build_llm_judge

        backend = build_llm_judge(settings.llm, metrics)
    else:
        backend = HeuristicJudge()
    if settings.llm_requests_per_s or settings.llm_tokens_per_min:
        backend = RateLimitedJudge(
            backend,
            requests_per_s=settings.llm_requests_per_s,
            tokens_per_min=settings.llm_tokens_per_min,
        )
    return backend


def open_source(endpoint: Endpoint, settings: Settings) -> Source:
    """The source of a parsed ``--source`` URL."""
    if endpoint.kind == "kafka":
        from stef.io.kafka import KafkaSource

        return KafkaSource(
            list(endpoint.bootstrap),
            endpoint.topic or "",
            endpoint.group or settings.group,
            revoke_timeout_s=min(settings.drain_timeout_s, 10.0),
            consumer_options=settings.kafka_consumer,
        )
    path = endpoint.path if endpoint.kind == "file" else "-"
    return FileSource(path or "-", follow=settings.follow)


def open_sink(endpoint: Endpoint, settings: Settings) -> Sink:
    """The sink of a parsed ``--results`` or ``--dead-letters`` URL."""
    if endpoint.kind == "kafka":
        from stef.io.kafka import KafkaSink

        return KafkaSink(list(endpoint.bootstrap), endpoint.topic or "", settings.kafka_producer)
    return JsonlSink(endpoint.path if endpoint.kind == "file" and endpoint.path else "-")


# ----------------------------------------------------------------------------------- service


class Service:
    """One replica of the service.

    Args:
        settings: validated settings.
        backend: the judge backend; None builds it from the settings (:func:`build_backend`).
        registry: the metrics registry; None makes a fresh one.
        source, results, dead_letters: pre-built I/O (tests); None opens the settings' URLs.
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
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
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
        self.pipeline = Pipeline(
            lambda: self.watcher.rules,
            backend if backend is not None else build_backend(settings, self.metrics),
        )
        self.source = (
            source if source is not None else open_source(settings.source_endpoint, settings)
        )
        self.results = (
            results if results is not None else open_sink(settings.results_endpoint, settings)
        )
        self.dead_letters = (
            dead_letters
            if dead_letters is not None
            else open_sink(settings.dead_letters_endpoint, settings)
        )
        self.health = HealthState()
        self.server: HealthServer | None = None
        self._stop = threading.Event()
        self._stop_at: float | None = None
        self._fatal: BaseException | None = None
        self._closing = False
        self._inflight = 0
        self._cv = threading.Condition()
        self._work: queue.SimpleQueue[Envelope | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._lag_labels: set[tuple[str, int]] = set()
        self.counts = {"received": 0, "results": 0, "dead_letters": 0}

    # ---------------------------------------------------------------------------- control

    def request_stop(self) -> None:
        """Stop fetching and drain (the first SIGTERM/SIGINT)."""
        if not self._stop.is_set():
            self._stop_at = time.monotonic()
            self._stop.set()
            log.info("shutdown_requested", inflight=self._inflight)

    @property
    def inflight(self) -> int:
        return self._inflight

    def run(self) -> int:
        """Run until the source ends (a file without ``--follow``) or a stop is requested.

        Returns:
            0 after a clean drain; 1 when a sink failed (uncommitted work is redelivered).
        """
        s = self.settings
        if s.metrics_port is not None and self.server is None:
            self.server = HealthServer(self.registry, self.health, s.metrics_host, s.metrics_port)
            self.server.start()
        for n in range(s.concurrency):
            t = threading.Thread(target=self._worker, name=f"stef-worker-{n}", daemon=True)
            t.start()
            self._workers.append(t)
        try:
            self.source.start()
            self.health.ready = True
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
                metrics_port=self.server.port if self.server is not None else None,
            )
            self._loop()
            drained = self._drain()
        finally:
            self.health.ready = False
            self._shutdown()
        if self._fatal is not None:
            log.error("service_failed", error=str(self._fatal))
            return EXIT_FAIL
        log.info("service_stopped", drained=drained, **self.counts)
        return EXIT_OK

    # ------------------------------------------------------------------------------- loop

    def _loop(self) -> None:
        s = self.settings
        bound = s.inflight_bound
        paused = False
        next_commit = next_rules = time.monotonic()
        while not self._stop.is_set():
            self.health.beat()
            now = time.monotonic()
            if now >= next_rules:
                self.watcher.check()
                next_rules = now + s.rules_check_interval_s
            if now >= next_commit:
                self._commit()
                next_commit = now + s.commit_interval_s
            if self._inflight >= bound:
                if not paused:
                    self.source.pause()
                    paused = True
                # A paused Kafka consumer is still polled: it keeps its membership and handles
                # rebalances. Whatever a poll returns is handled, never dropped.
                self._submit(self.source.poll(0, 0.05))
                with self._cv:
                    self._cv.wait_for(lambda: self._inflight < bound, timeout=0.1)
                continue
            if paused:
                self.source.resume()
                paused = False
            envelopes = self.source.poll(bound - self._inflight, 0.2)
            self._submit(envelopes)
            if not envelopes and self.source.exhausted:
                log.info("source_exhausted", received=self.counts["received"])
                break

    def _submit(self, envelopes: Sequence[Envelope]) -> None:
        if not envelopes:
            return
        with self._cv:
            self._inflight += len(envelopes)
        self.metrics.inflight.inc(len(envelopes))
        self.counts["received"] += len(envelopes)
        for envelope in envelopes:
            self._work.put(envelope)

    def _drain(self) -> bool:
        """Wait for in-flight work; bounded by the drain timeout once a stop was requested."""
        while True:
            with self._cv:
                if self._inflight == 0:
                    return True
                if self._stop_at is not None:
                    remaining = self._stop_at + self.settings.drain_timeout_s - time.monotonic()
                    if remaining <= 0:
                        log.warning("drain_timeout", abandoned=self._inflight)
                        return False
                    self._cv.wait(timeout=min(remaining, 0.5))
                else:
                    self._cv.wait(timeout=0.5)
            self.health.beat()
            self._commit()

    def _shutdown(self) -> None:
        # Work abandoned at the drain deadline may still finish and hit closed sinks: that is
        # expected (it is redelivered), not a failure of the run.
        self._closing = True
        for _ in self._workers:
            self._work.put(None)
        for sink in (self.results, self.dead_letters):
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
        if outcome == "success":
            apps = self.watcher.rules.known_apps
            self.metrics.known_apps = set(apps)
            for app in apps:
                self.metrics.prime_app(app)

    # ---------------------------------------------------------------------------- workers

    def _worker(self) -> None:
        while True:
            envelope = self._work.get()
            if envelope is None:
                return
            self._handle(envelope)

    def _handle(self, envelope: Envelope) -> None:
        started = time.perf_counter()
        try:
            record = validate(envelope.payload, self.settings.mapping, self.settings.limits)
        except InvalidInput as exc:
            self.metrics.observe_invalid(self._app_of(envelope.payload))
            self._dead_letter(envelope, exc.reason, exc.detail)
            return
        except Exception as exc:  # a poison record must not kill the loop
            self._poison(envelope, exc, None)
            return
        try:
            result = self.pipeline.judge_record(record)
        except Exception as exc:  # a poison record must not kill the loop
            self._poison(envelope, exc, record.app)
            return
        self.metrics.observe_result(result)
        log.info(
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
        self._count("results")
        self.results.send(
            result.id.encode("utf-8"), result.to_json().encode("utf-8"), self._ack(envelope)
        )

    def _count(self, name: str) -> None:
        with self._cv:
            self.counts[name] += 1

    def _poison(self, envelope: Envelope, exc: Exception, app: str | None) -> None:
        log.error(
            "record_poison", error_type=type(exc).__name__, error=str(exc), **envelope.position
        )
        self.metrics.records.labels(app=self.metrics.app_label(app), outcome="poison").inc()
        self._dead_letter(envelope, "poison", f"{type(exc).__name__}: {exc}")

    def _dead_letter(self, envelope: Envelope, reason: str, error: str) -> None:
        log.warning("record_dead_lettered", reason=reason, **envelope.position)
        self._count("dead_letters")
        letter = dead_letter(reason, error, envelope.position, envelope.payload)
        self.dead_letters.send(envelope.key, letter, self._ack(envelope))

    def _ack(self, envelope: Envelope) -> Any:
        def on_ack(error: BaseException | None) -> None:
            if error is None:
                envelope.on_done()
            elif self._closing:
                log.warning("abandoned_record_not_written", error=str(error), **envelope.position)
            else:
                # Not done: its offset is never committed, so a restart redelivers it.
                log.error("sink_failed", error=str(error), **envelope.position)
                if self._fatal is None:
                    self._fatal = error
                    self.health.failed = str(error)
                self.request_stop()
            with self._cv:
                self._inflight -= 1
                self._cv.notify_all()
            self.metrics.inflight.dec()

        return on_ack

    def _app_of(self, payload: bytes) -> str | None:
        """The app of an invalid record, when it names one (for the metric label only)."""
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        app = obj.get(self.settings.mapping.source_of("app"))
        return app if isinstance(app, str) else None


# --------------------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stef run",
        description="The STEF service: judge every logged request of a source, at least once.",
        epilog="Precedence: defaults < --config file < STEF_* environment < flags. "
        "LLM endpoint: STEF_LLM_* (none configured: the heuristic judge).",
    )
    p.add_argument("--config", help="YAML settings file (env STEF_CONFIG)")
    p.add_argument(
        "--source", help="kafka://HOST:PORT/TOPIC?group=GROUP, file:PATH or - (stdin; the default)"
    )
    p.add_argument(
        "--follow",
        action="store_true",
        default=None,
        help="keep reading a file: source as it grows; survives rotation",
    )
    p.add_argument("--results", help="kafka://HOST:PORT/TOPIC, file:PATH or - (stdout; default)")
    p.add_argument(
        "--dead-letters", help="same forms as --results (default file:dead_letters.jsonl)"
    )
    p.add_argument("--rules", help="rules file or directory (hot-reloaded)")
    p.add_argument("--concurrency", type=int, help="records judged at once (default 8)")
    p.add_argument("--max-inflight", type=int, help="fetched, unacknowledged records (4x conc.)")
    p.add_argument(
        "--drain-timeout", type=float, help="seconds to finish in-flight work on SIGTERM (30)"
    )
    p.add_argument("--metrics-host", help="interface for /metrics, /healthz, /readyz (127.0.0.1)")
    p.add_argument(
        "--metrics-port", help="port for /metrics (default 9464; 0: any free port; off: none)"
    )
    p.add_argument("--group", help="consumer group when the source URL names none (stef)")
    p.add_argument("--log-level", help="debug, info (default: one line per record), warning")
    return p


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out = {
        "source": args.source,
        "follow": args.follow,
        "results": args.results,
        "dead_letters": args.dead_letters,
        "rules": args.rules,
        "concurrency": args.concurrency,
        "max_inflight": args.max_inflight,
        "drain_timeout_s": args.drain_timeout,
        "metrics_host": args.metrics_host,
        "metrics_port": args.metrics_port,
        "group": args.group,
        "log_level": args.log_level,
    }
    return {k: v for k, v in out.items() if v is not None}


def _configure_logging(level: str) -> None:
    # The CLI configured structlog already; the service logs at its own level (info by default).
    from stef.cli.main import configure_logging

    configure_logging(level)


def cli_main(argv: list[str]) -> int:
    """``stef run``: parse flags, load settings, run until the source ends or a signal stops it.

    Exit status: 0 after a clean stop or the end of a file source; 1 when a sink failed; 2 for
    invalid settings or rules. A second SIGTERM/SIGINT exits at once with 128 + the signal number
    (uncommitted work is redelivered).
    """
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(args.config, _overrides(args))
    except StefError as exc:
        print(f"stef run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _configure_logging(settings.log_level)
    try:
        service = Service(settings)
    except RulesError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return EXIT_USAGE
    except (StefError, OSError) as exc:
        print(f"stef run: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if service._stop.is_set():
            log.warning("shutdown_forced", signal=signum, inflight=service.inflight)
            sys.stdout.flush()
            os._exit(128 + signum)
        log.info("signal_received", signal=signum)
        service.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return service.run()
    except ConfigError as exc:
        print(f"stef run: {exc}", file=sys.stderr)
        return EXIT_USAGE
