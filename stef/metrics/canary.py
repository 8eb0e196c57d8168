"""Whether the judge still agrees with the labelled canary records."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from stef.metrics.families import Counter, Gauge
from stef.metrics.labels import CANARY_OUTCOMES


class CanaryMetrics:
    """The canary's families, registered in exposition order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._register_canary(registry)

    def _register_canary(self, r: CollectorRegistry) -> None:
        """Whether the judge still agrees with the labelled canary records."""
        self.canary_agreement = Gauge(
            "stef_canary_agreement",
            "Agreement of the judge with the canary labels at the last measured run",
            ["backend", "model", "measure"],
            registry=r,
        )
        self.canary_floor = Gauge(
            "stef_canary_agreement_floor",
            "The configured floor of canary agreement (the alert threshold)",
            ["measure"],
            registry=r,
        )
        self.canary_runs = Counter(
            "stef_canary_runs_total", "Canary runs by outcome", ["outcome"], registry=r
        )
        self.canary_last_run = Gauge(
            "stef_canary_last_run_timestamp_seconds",
            "Unix time of the last canary run that measured agreement",
            ["backend", "model"],
            registry=r,
        )

    def prime_canary(self, floors: dict[str, float]) -> None:
        """A canary is configured: its run counters at zero and its floors, for the alerts."""
        for outcome in CANARY_OUTCOMES:
            self.canary_runs.labels(outcome=outcome)
        for measure, floor in floors.items():
            self.canary_floor.labels(measure=measure).set(floor)

    def observe_canary_run(
        self,
        outcome: str,
        *,
        backend: str,
        model: str,
        agreement: dict[str, float] | None = None,
        at: float | None = None,
    ) -> None:
        """One canary run; ``agreement`` (measure -> value) when it was measured at time ``at``.

        The run is counted last: a scrape that sees it counted sees its agreement too."""
        if agreement is not None:
            for measure, value in agreement.items():
                labels = self.canary_agreement.labels(backend=backend, model=model, measure=measure)
                labels.set(value)
            if at is not None:
                self.canary_last_run.labels(backend=backend, model=model).set(at)
        self.canary_runs.labels(outcome=outcome).inc()
