"""How the service runs (in-flight work, consumer lag, rules reloads) and where its seams
failed (callbacks, commits, log lines)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from stef.logs import dropped_lines
from stef.metrics.families import Counter, Gauge
from stef.metrics.labels import CALLBACKS, COMMIT_SOURCES


class ServiceMetrics:
    """The families of the run loop, registered in exposition order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._register_service(registry)

    def _register_service(self, r: CollectorRegistry) -> None:
        """How the service runs: in-flight work, consumer lag, rules reloads."""
        self.inflight = Gauge("stef_inflight", "Records being judged now", registry=r)
        self.consumer_lag = Gauge(
            "stef_consumer_lag",
            "Records behind the end of the partition",
            ["topic", "partition"],
            registry=r,
        )
        self.rules_reload = Counter(
            "stef_rules_reload_total", "Rules reloads by outcome", ["outcome"], registry=r
        )
        for outcome in ("success", "error"):
            self.rules_reload.labels(outcome=outcome)

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self.consumer_lag.labels(topic=topic, partition=str(partition)).set(lag)

    def observe_rules_reload(self, outcome: str) -> None:
        self.rules_reload.labels(outcome=outcome).inc()


class SeamMetrics:
    """The failures at the service's seams, at zero from the start."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._register_seams(registry)

    def _register_seams(self, r: CollectorRegistry) -> None:
        """Where the service's seams failed: callbacks, commits, log lines (zeros at start)."""
        self.callback_errors = Counter(
            "stef_callback_errors_total",
            "Callbacks around an acknowledged record that raised (logged; the record's slot is "
            "released all the same)",
            ["callback"],
            registry=r,
        )
        for callback in CALLBACKS:
            self.callback_errors.labels(callback=callback)
        self.commit_failures = Counter(
            "stef_commit_failures_total",
            "Commits of acknowledged positions that failed (Kafka offsets, file checkpoint)",
            ["source"],
            registry=r,
        )
        for source in COMMIT_SOURCES:
            self.commit_failures.labels(source=source)
        self.uncommitted = Gauge(
            "stef_uncommitted_records",
            "Records done (result or dead letter acknowledged) whose position is not committed",
            registry=r,
        )
        r.register(_DroppedLogLines())

    def observe_callback_error(self, callback: str) -> None:
        self.callback_errors.labels(callback=callback if callback in CALLBACKS else "other").inc()

    def observe_commit_failure(self, source: str) -> None:
        self.commit_failures.labels(source=source if source in COMMIT_SOURCES else "other").inc()


class _DroppedLogLines(Collector):
    """``stef_log_lines_dropped_total``: a process-wide count kept by :mod:`stef.logs` (a log
    line that failed cannot report itself), read at each scrape."""

    def describe(self) -> Iterable[Metric]:
        return [self._family(0)]

    def collect(self) -> Iterable[Metric]:
        return [self._family(dropped_lines())]

    @staticmethod
    def _family(value: int) -> CounterMetricFamily:
        return CounterMetricFamily(
            "stef_log_lines_dropped",
            "Log lines lost because stderr refused them (closed or full)",
            value=value,
        )
