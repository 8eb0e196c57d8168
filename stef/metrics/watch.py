"""Whether the judge itself can be trusted: second opinions, sample votes, model swaps."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from stef.metrics.families import Counter, Gauge
from stef.metrics.labels import MAX_REPORTED_MODELS, SAMPLE_OUTCOMES, BoundedLabels
from stef.models import Result


class WatchMetrics:
    """The families that watch the judge, registered in exposition order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._reported = BoundedLabels(MAX_REPORTED_MODELS, "other")
        self._register_watch(registry)

    def prime_app(self, a: str) -> None:
        """The zero-valued series of the app label ``a`` that alerts read."""
        self.second_opinions.labels(app=a)
        self.disagreements.labels(app=a)
        self.split_verdicts.labels(app=a)

    def _register_watch(self, r: CollectorRegistry) -> None:
        """Whether the judge itself can be trusted: second opinions, sample votes, model swaps."""
        self.second_opinions = Counter(
            "stef_judge_second_opinions_total",
            "Records the heuristic judged beside the LLM (a second opinion)",
            ["app"],
            registry=r,
        )
        self.disagreements = Counter(
            "stef_judge_disagreement_total",
            "Records where the LLM and the heuristic second opinion disagree on pass/fail",
            ["app"],
            registry=r,
        )
        self.second_opinion_errors = Counter(
            "stef_judge_second_opinion_errors_total",
            "Second opinions that failed (the LLM's result stands without one)",
            registry=r,
        )
        self.split_verdicts = Counter(
            "stef_judge_split_verdicts_total",
            "Records whose LLM samples did not all give the same verdict",
            ["app"],
            registry=r,
        )
        self.samples = Counter(
            "stef_judge_samples_total",
            "LLM samples asked (llm.samples per judged record), by outcome",
            ["model", "outcome"],
            registry=r,
        )
        self.model_changes = Counter(
            "stef_judge_model_changes_total",
            "Replies whose reported model differs from the previous reply's",
            ["configured"],
            registry=r,
        )
        self.reported_model = Gauge(
            "stef_judge_reported_model",
            "1 for the model the endpoint named in its latest reply",
            ["configured", "reported"],
            registry=r,
        )

    def prime_model(self, model: str) -> None:
        """Create the zero-valued series of a configured LLM model: samples by outcome and model
        changes, so the first swap is seen by ``increase()``."""
        for outcome in SAMPLE_OUTCOMES:
            self.samples.labels(model=model, outcome=outcome)
        self.model_changes.labels(configured=model)

    def reported_label(self, reported: str) -> str:
        """A reported model name as a label: the first ``MAX_REPORTED_MODELS`` label-like names
        seen, any other ``other`` (the name comes from the endpoint, not from configuration)."""
        return self._reported(reported)

    def observe_result(self, app: str, result: Result) -> None:
        """The second opinion and the sample vote of an evaluated result."""
        second = result.judge.second_opinion
        if second is not None:
            self.second_opinions.labels(app=app).inc()
            if not second.agrees:
                self.disagreements.labels(app=app).inc()
        samples = result.judge.samples
        if samples is not None and samples.split:
            self.split_verdicts.labels(app=app).inc()

    def observe_samples(self, model: str, answered: int, failed: int) -> None:
        """The samples of one judged record: how many answered, how many failed."""
        if answered:
            self.samples.labels(model=model, outcome="answered").inc(answered)
        if failed:
            self.samples.labels(model=model, outcome="failed").inc(failed)

    def observe_reported_model(self, configured: str, previous: str | None, reported: str) -> None:
        """The model an endpoint reported; ``previous`` is the one it reported before (None on
        the first reply): a different one counts as a change."""
        label = self.reported_label(reported)
        if previous is not None and previous != reported:
            self.model_changes.labels(configured=configured).inc()
            old = self.reported_label(previous)
            if old != label:
                self.reported_model.labels(configured=configured, reported=old).set(0)
        self.reported_model.labels(configured=configured, reported=label).set(1)

    def observe_second_opinion_error(self) -> None:
        self.second_opinion_errors.inc()
