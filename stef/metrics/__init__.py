"""Prometheus metrics: their names, labels and buckets are a contract (dashboards, alerts),
documented in docs/metrics.md (tests/test_docs.py keeps the two in step).

One module per concern, each registering its own families: what the judge found
(:mod:`~stef.metrics.quality`), what the LLM costs (:mod:`~stef.metrics.llm`), how the service
runs and where its seams failed (:mod:`~stef.metrics.service`), whether the judge can be trusted
(:mod:`~stef.metrics.watch`) and the canary (:mod:`~stef.metrics.canary`). :class:`Metrics`
registers them in one order (the order of ``/metrics``) and is what the record path, the judges
and the service call. Label values are bounded (:mod:`~stef.metrics.labels`): a record cannot put
a 10,000-character or multi-line value into every scrape.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, ProcessCollector, disable_created_metrics

from stef.calibration import Calibration
from stef.metrics.backfill import BackfillMetrics
from stef.metrics.canary import CanaryMetrics
from stef.metrics.labels import (
    CALLBACKS,
    CANARY_OUTCOMES,
    COMMIT_SOURCES,
    CONFIDENCE_BUCKETS,
    DEAD_LETTER_REASONS,
    JUDGE_ERROR_REASONS,
    LLM_BUCKETS,
    MAX_REPORTED_MODELS,
    RECORD_OUTCOMES,
    SAMPLE_OUTCOMES,
    SCORE_BUCKETS,
    AppAgentLabels,
    BoundedLabels,
    judge_error_reason,
    record_time,
    sane_label,
)
from stef.metrics.llm import LlmMetrics
from stef.metrics.quality import ESTIMATE_WINDOW, AccuracyWindow, QualityMetrics
from stef.metrics.service import SeamMetrics, ServiceMetrics
from stef.metrics.watch import WatchMetrics
from stef.models import Result

__all__ = [
    "CALLBACKS",
    "CANARY_OUTCOMES",
    "COMMIT_SOURCES",
    "CONFIDENCE_BUCKETS",
    "DEAD_LETTER_REASONS",
    "ESTIMATE_WINDOW",
    "JUDGE_ERROR_REASONS",
    "LLM_BUCKETS",
    "MAX_REPORTED_MODELS",
    "RECORD_OUTCOMES",
    "SAMPLE_OUTCOMES",
    "SCORE_BUCKETS",
    "AccuracyWindow",
    "BackfillMetrics",
    "BoundedLabels",
    "Metrics",
    "judge_error_reason",
    "record_time",
    "sane_label",
]

# `_created` series double the scrape (71 of 127 lines on the sample) and no panel or alert reads
# them. A process-wide switch in prometheus_client, so it is thrown when this module loads.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client


class Metrics:
    """Every STEF metric, registered on the registry it is given.

    Attributes:
        quality, llm, service, watch, canary, seams: the families of each concern.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        known_apps: list[str] | None = None,
        known_agents: list[str] | None = None,
        max_agents: int = 20,
        max_apps: int = 20,
    ) -> None:
        self._labels = AppAgentLabels(known_apps, known_agents, max_apps, max_agents)
        # Registered in this order: /metrics lists the families as they were registered.
        self.quality = QualityMetrics(registry, self._labels)
        self.llm = LlmMetrics(registry)
        self.service = ServiceMetrics(registry)
        self.watch = WatchMetrics(registry)
        self.canary = CanaryMetrics(registry)
        self.seams = SeamMetrics(registry)
        # CPU seconds, resident memory, open files of this process (Linux /proc; elsewhere none).
        ProcessCollector(registry=registry)
        # An app without a rules file counts as "unknown": its first unsafe statement must raise
        # the alert, and increase() needs an earlier sample at zero to see it.
        self.prime_app("unknown")

    # ---------------------------------------------------------------------------- label bounding

    @property
    def known_apps(self) -> set[str] | None:
        return self._labels.apps.known

    @known_apps.setter
    def known_apps(self, apps: set[str] | None) -> None:
        self._labels.apps.known = apps

    def app_label(self, app: str | None) -> str:
        """The app's label: configured apps as they are, any other ``unknown``."""
        return self._labels.app(app)

    def agent_label(self, agent: str | None, version: str | None) -> str:
        """``agent@version``: when in ``known_agents``, or (none configured) among the first
        ``max_agents`` label-like values seen; any other agent is ``other``."""
        return self._labels.agent(agent, version)

    def prime_app(self, app: str | None) -> None:
        """Create the zero-valued series of an app that alerts read, so rates, ratios and
        ``increase()`` see the first event: every outcome, unsafe SQL, judge errors by reason,
        the score of the ``other`` agent (any agent beyond ``known_agents``), the judge watch."""
        a = "unknown" if app == "unknown" else self.app_label(app)
        self.quality.prime_app(a)
        self.watch.prime_app(a)

    # -------------------------------------------------------------------------------- the record

    def observe_result(self, result: Result) -> None:
        """Count one result of the pipeline."""
        self.quality.observe_result(result)
        if result.outcome == "evaluated" and result.components is not None:
            self.watch.observe_result(self.app_label(result.app), result)

    def observe_cascade(self, app: str | None, escalated: bool) -> None:
        """One record of a cascade: decided by the heuristic alone, or sent to the LLM."""
        self.quality.observe_cascade(app, escalated)

    def set_calibration(self, calibration: Calibration, window: int = ESTIMATE_WINDOW) -> None:
        """Estimate each app's accuracy from the p_correct of its last ``window`` results."""
        self.quality.set_calibration(calibration, window)

    def observe_invalid(self, app: str | None = None, reason: str | None = None) -> None:
        """One invalid record: outcome ``invalid``, and a dead letter of ``reason`` when given."""
        self.quality.observe_invalid(app, reason)

    def observe_internal_error(self, app: str | None = None) -> None:
        """A stage raised: outcome ``internal_error`` and a dead letter of that reason."""
        self.quality.observe_internal_error(app)

    def observe_dead_letter(self, reason: str) -> None:
        """One dead letter written; a reason outside :data:`DEAD_LETTER_REASONS` is ``other``."""
        self.quality.observe_dead_letter(reason)

    def observe_repairs(self, kinds: list[str]) -> None:
        """Count the repairs of one judged record, by kind (a fixed set chosen by the caller)."""
        self.llm.observe_repairs(kinds)

    def observe_second_opinion_error(self) -> None:
        self.watch.observe_second_opinion_error()

    # ---------------------------------------------------------------------------- the LLM judge

    def observe_llm_call(
        self,
        model: str,
        outcome: str,
        seconds: float,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """One HTTP call to the LLM (``outcome``: ok, error or retry)."""
        self.llm.observe_llm_call(
            model,
            outcome,
            seconds,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost_usd,
        )

    def observe_cache(self, hit: bool) -> None:
        self.llm.observe_cache(hit)

    def observe_cache_failure(self) -> None:
        self.llm.observe_cache_failure()

    def prime_model(self, model: str) -> None:
        """The zero-valued series of a configured LLM model (samples, model changes)."""
        self.watch.prime_model(model)

    def reported_label(self, reported: str) -> str:
        """A reported model name as a label (bounded: the endpoint chooses it)."""
        return self.watch.reported_label(reported)

    def observe_samples(self, model: str, answered: int, failed: int) -> None:
        """The samples of one judged record: how many answered, how many failed."""
        self.watch.observe_samples(model, answered, failed)

    def observe_reported_model(self, configured: str, previous: str | None, reported: str) -> None:
        """The model an endpoint reported after ``previous`` (None on the first reply)."""
        self.watch.observe_reported_model(configured, previous, reported)

    # ------------------------------------------------------------------------------ the service

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self.service.set_lag(topic, partition, lag)

    def observe_rules_reload(self, outcome: str) -> None:
        self.service.observe_rules_reload(outcome)

    def observe_callback_error(self, callback: str) -> None:
        self.seams.observe_callback_error(callback)

    def observe_commit_failure(self, source: str) -> None:
        self.seams.observe_commit_failure(source)

    def prime_canary(self, floors: dict[str, float]) -> None:
        """A canary is configured: its run counters at zero and its floors, for the alerts."""
        self.canary.prime_canary(floors)

    def observe_canary_run(
        self,
        outcome: str,
        *,
        backend: str,
        model: str,
        agreement: dict[str, float] | None = None,
        at: float | None = None,
    ) -> None:
        """One canary run; ``agreement`` (measure -> value) when it was measured at time ``at``."""
        self.canary.observe_canary_run(
            outcome, backend=backend, model=model, agreement=agreement, at=at
        )
