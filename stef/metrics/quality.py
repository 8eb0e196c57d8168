"""What the judge found: outcomes, scores, tiers, issues, safety, reference verdicts, the
cascade, the accuracy estimate, judge errors and dead letters."""

from __future__ import annotations

import math
import threading
from collections import deque

from prometheus_client import CollectorRegistry

from stef.accuracy import Interval
from stef.calibration import Calibration
from stef.metrics.families import Counter, Gauge, Histogram
from stef.metrics.labels import (
    CONFIDENCE_BUCKETS,
    DEAD_LETTER_REASONS,
    JUDGE_ERROR_REASONS,
    RECORD_OUTCOMES,
    SCORE_BUCKETS,
    AppAgentLabels,
    judge_error_reason,
    record_time,
)
from stef.models import ISSUE_LABELS, Result
from stef.sql.budget import BUDGET_SPENT

# Records per app over which the accuracy is estimated.
ESTIMATE_WINDOW = 1000


class QualityMetrics:
    """The families of what the judge found, registered in exposition order.

    Args:
        registry: where the families are registered.
        labels: the app and agent labels of records.
    """

    def __init__(self, registry: CollectorRegistry, labels: AppAgentLabels) -> None:
        self._labels = labels
        self._lock = threading.Lock()
        self._newest: dict[str, float] = {}
        self._estimator: AccuracyWindow | None = None
        self._register_verdicts(registry)
        self._register_reference(registry)
        self._register_estimates(registry)
        self._register_failures(registry)
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters.labels(reason=reason)

    def prime_app(self, a: str) -> None:
        """The zero-valued series of the app label ``a`` that alerts read."""
        for outcome in RECORD_OUTCOMES:
            self.records.labels(app=a, outcome=outcome)
        self.unsafe.labels(app=a)
        self.score.labels(app=a, agent="other")
        for reason in JUDGE_ERROR_REASONS:
            self.judge_errors.labels(app=a, reason=reason)
        self.needs_review.labels(app=a)
        for decided_by in ("heuristic", "llm"):
            # Zero unless llm.verdict is cascade: the dashboard's cascade panel reads it.
            self.cascade.labels(app=a, decided_by=decided_by)

    def _register_verdicts(self, r: CollectorRegistry) -> None:
        """Outcomes, scores, tiers, confidence, enrichment, issues, safety, review."""
        self.records = Counter(
            "stef_records_total", "Records received, by outcome", ["app", "outcome"], registry=r
        )
        self.score = Histogram(
            "stef_score",
            "Score of evaluated records",
            ["app", "agent"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.evaluations = Counter(
            "stef_evaluations_total",
            "Evaluated records by tier, verdict and filter status",
            ["app", "agent", "tier", "verdict", "filter_status"],
            registry=r,
        )
        self.confidence = Histogram(
            "stef_confidence",
            "Judge confidence of evaluated records",
            ["app"],
            buckets=CONFIDENCE_BUCKETS,
            registry=r,
        )
        self.enrichment = Counter(
            "stef_enrichment_total", "Enrichment check results", ["app", "status"], registry=r
        )
        self.issues = Counter(
            "stef_issues_total", "Issue labels of evaluated records", ["app", "issue"], registry=r
        )
        self.unsafe = Counter(
            "stef_unsafe_sql_total",
            "Records whose SQL mutates or stacks statements",
            ["app"],
            registry=r,
        )
        self.needs_review = Counter(
            "stef_needs_review_total",
            "Evaluated records whose confidence is below the review bound (needs_review)",
            ["app"],
            registry=r,
        )

    def _register_reference(self, r: CollectorRegistry) -> None:
        """Reference mode and the cascade: what decided a record."""
        self.reference_verdicts = Counter(
            "stef_reference_verdicts_total",
            "Records compared with a reference SQL, by reference verdict and what decided it "
            "(execution, structure): the match rate is the Correct share",
            ["app", "verdict", "decided_by"],
            registry=r,
        )
        self.reference_fallbacks = Counter(
            "stef_reference_execution_fallbacks_total",
            "Records whose execution (generated databases or reference.execute) could not "
            "decide (not_run, budget, undecided, unexercised, other): the structure decided",
            ["app", "reason"],
            registry=r,
        )
        self.cascade = Counter(
            "stef_cascade_records_total",
            "llm.verdict cascade: records decided by the heuristic alone (an LLM call saved) "
            "or sent to the LLM",
            ["app", "decided_by"],
            registry=r,
        )

    def _register_estimates(self, r: CollectorRegistry) -> None:
        """The agent's accuracy estimated from the judge's p_correct."""
        self.estimated_accuracy = Gauge(
            "stef_estimated_accuracy",
            "Agent accuracy estimated from p_correct over the last window of evaluated records "
            "(adjusted classify-and-count); NaN when the judge cannot resolve it",
            ["app"],
            registry=r,
        )
        self.estimated_accuracy_low = Gauge(
            "stef_estimated_accuracy_low",
            "Lower end of the 95% CI of stef_estimated_accuracy",
            ["app"],
            registry=r,
        )
        self.estimated_accuracy_high = Gauge(
            "stef_estimated_accuracy_high",
            "Upper end of the 95% CI of stef_estimated_accuracy",
            ["app"],
            registry=r,
        )

    def _register_failures(self, r: CollectorRegistry) -> None:
        """Records the judge could not decide, dead letters, and the newest record's time."""
        self.judge_errors = Counter(
            "stef_judge_errors_total",
            "Records whose judge could not decide, by reason",
            ["app", "reason"],
            registry=r,
        )
        self.dead_letters = Counter(
            "stef_dead_letters_total", "Dead letters written, by reason", ["reason"], registry=r
        )
        self.newest_record = Gauge(
            "stef_newest_record_timestamp_seconds",
            "Timestamp (Unix seconds) of the newest record judged, from the record's own field",
            ["app"],
            registry=r,
        )

    def observe_result(self, result: Result) -> None:
        """Count one result of the pipeline."""
        app = self._labels.app(result.app)
        self.records.labels(app=app, outcome=result.outcome).inc()
        self._observe_timestamp(app, result.timestamp)
        if result.outcome == "judge_error" or (result.error and result.outcome == "evaluated"):
            # An unsafe record whose judge failed is evaluated by the safety override alone; its
            # judge still failed and counts here.
            self.judge_errors.labels(app=app, reason=judge_error_reason(result.error)).inc()
        if result.safety.mutating or result.safety.multiple_statements:
            # Sampled-out records too: safety is checked on every record, judged or not.
            self.unsafe.labels(app=app).inc()
        if result.outcome != "evaluated" or result.components is None:
            return
        agent = self._labels.agent(result.agent, result.agent_version)
        if result.score is not None:
            self.score.labels(app=app, agent=agent).observe(result.score)
        self.evaluations.labels(
            app=app,
            agent=agent,
            tier=result.tier or "unknown",
            verdict=result.components.verdict.value,
            filter_status=result.components.filter_status.value,
        ).inc()
        self.confidence.labels(app=app).observe(result.components.confidence)
        if result.enrichment is not None:
            self.enrichment.labels(app=app, status=result.enrichment.status.value).inc()
        for issue in result.issues:
            # A Result read back from a file is not checked against the Issue literal.
            label = issue if issue in ISSUE_LABELS else "other"
            self.issues.labels(app=app, issue=label).inc()
        if result.needs_review:
            self.needs_review.labels(app=app).inc()
        self._observe_reference(app, result)
        if result.judge.p_correct is not None:
            self._observe_estimate(app, result.judge.p_correct)

    def _observe_estimate(self, app: str, p_correct: float) -> None:
        """The app's accuracy estimated over its last window of p_correct values."""
        if self._estimator is None:
            return
        est = self._estimator.add(app, p_correct)
        value, low, high = (
            (math.nan, math.nan, math.nan) if est is None else (est.estimate, est.low, est.high)
        )
        self.estimated_accuracy.labels(app=app).set(value)
        self.estimated_accuracy_low.labels(app=app).set(low)
        self.estimated_accuracy_high.labels(app=app).set(high)

    def _observe_reference(self, app: str, result: Result) -> None:
        """The reference verdict of a record that had one, and why execution did not decide."""
        ref = result.reference
        if ref is None or ref.verdict is None:
            return
        decided_by = ref.decided_by or "structure"
        self.reference_verdicts.labels(
            app=app, verdict=ref.verdict.value, decided_by=decided_by
        ).inc()
        run = ref.execution
        if run is not None and decided_by == "structure":
            reason: str = run.status if run.status in ("not_run", "undecided") else "other"
            if (ref.error or "").startswith("execution_unexercised"):
                reason = "unexercised"
            elif run.detail == BUDGET_SPENT:
                # Told apart from other not_run causes: raise limits.max_record_cpu_s.
                reason = "budget"
            self.reference_fallbacks.labels(app=app, reason=reason).inc()

    def observe_cascade(self, app: str | None, escalated: bool) -> None:
        """One record of a cascade: decided by the heuristic alone, or sent to the LLM."""
        decided_by = "llm" if escalated else "heuristic"
        self.cascade.labels(app=self._labels.app(app), decided_by=decided_by).inc()

    def set_calibration(self, calibration: Calibration, window: int = ESTIMATE_WINDOW) -> None:
        """Estimate each app's accuracy from the p_correct of its last ``window`` results."""
        self._estimator = AccuracyWindow(calibration, window)

    def _observe_timestamp(self, app: str, timestamp: str | None) -> None:
        seconds = record_time(timestamp)
        if seconds is None:
            return
        with self._lock:
            # Results finish out of order: the gauge only moves forward.
            if seconds > self._newest.get(app, float("-inf")):
                self._newest[app] = seconds
                self.newest_record.labels(app=app).set(seconds)

    def observe_invalid(self, app: str | None = None, reason: str | None = None) -> None:
        """One invalid record: outcome ``invalid``, and a dead letter of ``reason`` when given."""
        self.records.labels(app=self._labels.app(app), outcome="invalid").inc()
        if reason is not None:
            self.observe_dead_letter(reason)

    def observe_internal_error(self, app: str | None = None) -> None:
        """A stage raised: outcome ``internal_error`` and a dead letter of that reason."""
        self.records.labels(app=self._labels.app(app), outcome="internal_error").inc()
        self.observe_dead_letter("internal_error")

    def observe_dead_letter(self, reason: str) -> None:
        """One dead letter written; a reason outside :data:`DEAD_LETTER_REASONS` is ``other``."""
        self.dead_letters.labels(reason=reason if reason in DEAD_LETTER_REASONS else "other").inc()


class AccuracyWindow:
    """The last ``window`` p_correct values per app, with running sums: the estimate is O(1)
    per record. Thread-safe."""

    def __init__(self, calibration: Calibration, window: int) -> None:
        self.calibration = calibration
        self.window = window
        self._values: dict[str, deque[float]] = {}
        self._sums: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def add(self, app: str, p: float) -> Interval | None:
        """Add one p_correct; the app's label-free estimate (:mod:`stef.accuracy`), or None
        when it declines (its CI, transfer between sources included, is too wide)."""
        with self._lock:
            values = self._values.setdefault(app, deque())
            sums = self._sums.setdefault(app, [0.0, 0.0])
            values.append(p)
            sums[0] += p
            sums[1] += p * p
            if len(values) > self.window:
                old = values.popleft()
                sums[0] -= old
                sums[1] -= old * old
            n, total, squares = len(values), sums[0], sums[1]
        return self.calibration.label_free(n, total, squares).interval
