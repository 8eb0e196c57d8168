"""Prometheus metrics: their names, labels and buckets are a contract (dashboards, alerts),
documented in docs/metrics.md (tests/test_docs.py keeps the two in step).

Label values come from configuration, never raw from input: an app that is not configured is
``unknown``; an agent not in ``known_agents`` is ``other``. Without that configuration the first
distinct values seen are used (``max_agents`` agents, ``max_apps`` apps), and only when they look
like labels (short, printable, ``[A-Za-z0-9._@:/-]``): a record cannot put a 10,000-character or
multi-line value into every scrape.
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from stef.accuracy import Interval
from stef.calibration import Calibration
from stef.logs import dropped_lines
from stef.models import ISSUE_LABELS, REPAIR_KINDS, Result

# Every 10 points plus the tier edges (50, 75, 90) and 85/95: coarser buckets (the tier edges
# alone) left histogram_quantile nothing to interpolate, so the dashboard's P90 was a flat line.
SCORE_BUCKETS = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 100.0)
CONFIDENCE_BUCKETS = (0.5, 0.65, 0.85, 1.0)
# LLM calls routinely take tens of seconds; the default buckets stop at 10 s.
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

# "internal_error": a record that made a stage raise; it went to the dead letters like invalid
# input (reason internal_error), and the command went on.
RECORD_OUTCOMES = ("evaluated", "judge_error", "skipped_sampling", "invalid", "internal_error")

# Why a record became a dead letter: the validation reasons (stef.stages.validate), a stage that
# raised (internal_error), a result or letter the sink refused (sink_rejected).
DEAD_LETTER_REASONS = (
    "not_utf8",
    "not_json",
    "not_object",
    "missing_field",
    "wrong_type",
    "too_large",
    "limits_exceeded",
    "unknown_dialect",
    "unreadable",
    "not_otlp",
    "trace_incomplete",
    "internal_error",
    "sink_rejected",
)
# Why a judge could not decide (JudgeError.reason); an HTTP status other than 429 is http_<code>.
JUDGE_ERROR_REASONS = (
    "timeout",
    "connection_error",
    "bad_response",
    "rate_limited",
    "empty_reply",
    "invalid_json",
    "invalid_reply",
    "truncated",
    "refused",
    "internal",
    "closed",
    "no_logprobs",
    "no_yes_no",
)
# How one LLM sample ended: a usable verdict, or a failure after its own retries and re-ask.
SAMPLE_OUTCOMES = ("answered", "failed")
# Distinct reported model names kept as labels; the endpoint chooses them, so they are bounded.
MAX_REPORTED_MODELS = 10
_HTTP_REASON = re.compile(r"http_[1-5][0-9][0-9]")
# How a canary run ended (stef.service.canary): every sampled record scored; the judge failed on
# some; the run could not judge at all (the file unreadable, an unexpected error).
CANARY_OUTCOMES = ("ok", "judge_error", "failed")
# Where a callback around an acknowledged record raised (stef.service.loop): the command's
# observer (replay's summary and progress), the source's done callback, the record's handling
# outside the pipeline (logging, sending).
CALLBACKS = ("observer", "source", "worker")
# The kinds of source whose commits (Kafka offsets, a followed file's checkpoint) can fail.
COMMIT_SOURCES = ("kafka", "file")

# `_created` series double the scrape (71 of 127 lines on the sample) and no panel or alert reads
# them. A process-wide switch in prometheus_client, so it is thrown when this module loads.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client

# What a label value taken from input, not from configuration, must look like to be used as is.
_SANE_LABEL = re.compile(r"[A-Za-z0-9._@:/-]{1,64}")


def sane_label(value: str) -> bool:
    """Short, printable, no spaces or quotes: fit for a label value nobody configured."""
    return _SANE_LABEL.fullmatch(value) is not None


# Records per app over which the accuracy is estimated.
ESTIMATE_WINDOW = 1000


class BoundedLabels:
    """The values one label may take when they come from input (apps, agents, model names).

    Configured values (``known``) are used as they are and any other value is ``overflow``;
    with nothing configured, the first ``limit`` label-like values seen are kept. Thread-safe.

    Args:
        limit: distinct values kept when none are configured.
        overflow: the label of every other value.
        known: the configured values; None: none configured.
    """

    def __init__(self, limit: int, overflow: str, known: Iterable[str] | None = None) -> None:
        self.known: set[str] | None = set(known) if known is not None else None
        self.limit = limit
        self.overflow = overflow
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if self.known is not None:
            return value if value in self.known else self.overflow
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit or not sane_label(value):
                return self.overflow
            self._seen.add(value)
            return value


class Metrics:
    """Every STEF metric, registered on the registry it is given."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        known_apps: list[str] | None = None,
        known_agents: list[str] | None = None,
        max_agents: int = 20,
        max_apps: int = 20,
    ) -> None:
        self._apps = BoundedLabels(max_apps, "unknown", known_apps)
        self._agents = BoundedLabels(max_agents, "other", known_agents)
        self._reported = BoundedLabels(MAX_REPORTED_MODELS, "other")
        self._lock = threading.Lock()
        self._newest: dict[str, float] = {}
        self._estimator: AccuracyWindow | None = None
        self._register_quality(registry)
        self._register_llm(registry)
        self._register_service(registry)
        self._register_watch(registry)
        self._register_canary(registry)
        self._register_seams(registry)
        # CPU seconds, resident memory, open files of this process (Linux /proc; elsewhere none).
        ProcessCollector(registry=registry)
        # An app without a rules file counts as "unknown": its first unsafe statement must raise
        # the alert, and increase() needs an earlier sample at zero to see it.
        self.prime_app("unknown")
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters.labels(reason=reason)
        # A fixed set: at zero from the start, so rate() sees a backend's first repair.
        for kind in (*REPAIR_KINDS, "other"):
            self.judge_repairs.labels(kind=kind)

    def _register_quality(self, r: CollectorRegistry) -> None:
        """What the judge found: outcomes, scores, tiers, issues, safety."""
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
        self.reference_verdicts = Counter(
            "stef_reference_verdicts_total",
            "Records compared with a reference SQL, by reference verdict and what decided it "
            "(execution, structure): the match rate is the Correct share",
            ["app", "verdict", "decided_by"],
            registry=r,
        )
        self.reference_fallbacks = Counter(
            "stef_reference_execution_fallbacks_total",
            "Records whose generated databases could not decide (not_run, undecided, unexercised): "
            "the structure decided",
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

    def _register_llm(self, r: CollectorRegistry) -> None:
        """What the LLM judge costs: latency, tokens, money, cache."""
        self.llm_duration = Histogram(
            "stef_llm_request_duration_seconds",
            "LLM request latency",
            ["model", "outcome"],
            buckets=LLM_BUCKETS,
            registry=r,
        )
        self.llm_tokens = Counter(
            "stef_llm_tokens_total", "LLM tokens used", ["model", "kind"], registry=r
        )
        self.llm_cost = Counter(
            "stef_llm_cost_usd_total",
            "LLM cost from the configured price table",
            ["model"],
            registry=r,
        )
        self.judge_repairs = Counter(
            "stef_judge_repairs_total",
            "Repairs of a judge's answer (dropped ids, ungrounded filters, overruled matches)",
            ["kind"],
            registry=r,
        )
        self.cache_hits = Counter("stef_cache_hits_total", "Judge cache hits", registry=r)
        self.cache_failures = Counter(
            "stef_cache_failures_total",
            "Judge cache files given up after a failure (a full disk): the run goes on without",
            registry=r,
        )
        self.cache_misses = Counter("stef_cache_misses_total", "Judge cache misses", registry=r)

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

    # ---------------------------------------------------------------------------- label bounding

    @property
    def known_apps(self) -> set[str] | None:
        """The apps with rules (None: no rules configured, the first ``max_apps`` seen)."""
        return self._apps.known

    @known_apps.setter
    def known_apps(self, apps: set[str] | None) -> None:
        self._apps.known = apps

    def app_label(self, app: str | None) -> str:
        """The app's label: configured apps as they are, any other ``unknown``."""
        return "default" if app is None else self._apps(app)

    def agent_label(self, agent: str | None, version: str | None) -> str:
        """``agent@version``: when in ``known_agents``, or (none configured) among the first
        ``max_agents`` label-like values seen; any other agent is ``other``."""
        if agent is None:
            return "unknown"
        return self._agents(f"{agent}@{version}" if version else agent)

    def prime_app(self, app: str | None) -> None:
        """Create the zero-valued series of an app that alerts read, so rates, ratios and
        ``increase()`` see the first event: every outcome, unsafe SQL, judge errors by reason,
        and the score of the ``other`` agent (any agent beyond ``known_agents``)."""
        a = "unknown" if app == "unknown" else self.app_label(app)
        for outcome in RECORD_OUTCOMES:
            self.records.labels(app=a, outcome=outcome)
        self.unsafe.labels(app=a)
        self.score.labels(app=a, agent="other")
        for reason in JUDGE_ERROR_REASONS:
            self.judge_errors.labels(app=a, reason=reason)
        self.second_opinions.labels(app=a)
        self.disagreements.labels(app=a)
        self.split_verdicts.labels(app=a)
        self.needs_review.labels(app=a)
        for decided_by in ("heuristic", "llm"):
            # Zero unless llm.verdict is cascade: the dashboard's cascade panel reads it.
            self.cascade.labels(app=a, decided_by=decided_by)

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

    # -------------------------------------------------------------------------------- observers

    def observe_result(self, result: Result) -> None:
        """Count one result of the pipeline."""
        app = self.app_label(result.app)
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
        self._observe_judge_watch(app, result)
        agent = self.agent_label(result.agent, result.agent_version)
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
        if result.judge.p_correct is not None and self._estimator is not None:
            est = self._estimator.add(app, result.judge.p_correct)
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
        if run is not None and run.source == "generated" and decided_by == "structure":
            reason: str = run.status if run.status in ("not_run", "undecided") else "other"
            if (ref.error or "").startswith("execution_unexercised"):
                reason = "unexercised"
            self.reference_fallbacks.labels(app=app, reason=reason).inc()

    def observe_cascade(self, app: str | None, escalated: bool) -> None:
        """One record of a cascade: decided by the heuristic alone, or sent to the LLM."""
        decided_by = "llm" if escalated else "heuristic"
        self.cascade.labels(app=self.app_label(app), decided_by=decided_by).inc()

    def set_calibration(self, calibration: Calibration, window: int = ESTIMATE_WINDOW) -> None:
        """Estimate each app's accuracy from the p_correct of its last ``window`` results."""
        self._estimator = AccuracyWindow(calibration, window)

    def _observe_judge_watch(self, app: str, result: Result) -> None:
        """The second opinion and the sample vote of an evaluated result."""
        second = result.judge.second_opinion
        if second is not None:
            self.second_opinions.labels(app=app).inc()
            if not second.agrees:
                self.disagreements.labels(app=app).inc()
        samples = result.judge.samples
        if samples is not None and samples.split:
            self.split_verdicts.labels(app=app).inc()

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
        self.records.labels(app=self.app_label(app), outcome="invalid").inc()
        if reason is not None:
            self.observe_dead_letter(reason)

    def observe_internal_error(self, app: str | None = None) -> None:
        """A stage raised: outcome ``internal_error`` and a dead letter of that reason."""
        self.records.labels(app=self.app_label(app), outcome="internal_error").inc()
        self.observe_dead_letter("internal_error")

    def observe_dead_letter(self, reason: str) -> None:
        """One dead letter written; a reason outside :data:`DEAD_LETTER_REASONS` is ``other``."""
        self.dead_letters.labels(reason=reason if reason in DEAD_LETTER_REASONS else "other").inc()

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
        self.llm_duration.labels(model=model, outcome=outcome).observe(seconds)
        if prompt_tokens:
            self.llm_tokens.labels(model=model, kind="prompt").inc(prompt_tokens)
        if completion_tokens:
            self.llm_tokens.labels(model=model, kind="completion").inc(completion_tokens)
        if cost_usd:
            self.llm_cost.labels(model=model).inc(cost_usd)

    def observe_repairs(self, kinds: list[str]) -> None:
        """Count the repairs of one judged record, by kind (a fixed set chosen by the caller)."""
        for kind in kinds:
            self.judge_repairs.labels(kind=kind).inc()

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

    def observe_cache(self, hit: bool) -> None:
        (self.cache_hits if hit else self.cache_misses).inc()

    def observe_cache_failure(self) -> None:
        self.cache_failures.inc()

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self.consumer_lag.labels(topic=topic, partition=str(partition)).set(lag)

    def observe_callback_error(self, callback: str) -> None:
        self.callback_errors.labels(callback=callback if callback in CALLBACKS else "other").inc()

    def observe_commit_failure(self, source: str) -> None:
        self.commit_failures.labels(source=source if source in COMMIT_SOURCES else "other").inc()

    def observe_rules_reload(self, outcome: str) -> None:
        self.rules_reload.labels(outcome=outcome).inc()

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
        """One canary run; ``agreement`` (measure -> value) when it was measured at time ``at``."""
        self.canary_runs.labels(outcome=outcome).inc()
        if agreement is None:
            return
        for measure, value in agreement.items():
            self.canary_agreement.labels(backend=backend, model=model, measure=measure).set(value)
        if at is not None:
            self.canary_last_run.labels(backend=backend, model=model).set(at)


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


def judge_error_reason(error: str | None) -> str:
    """The bounded reason label of a result's ``error`` (``"<reason>: <detail>"``)."""
    reason = (error or "").split(":", 1)[0].strip()
    if reason in JUDGE_ERROR_REASONS or _HTTP_REASON.fullmatch(reason):
        return reason
    return "other"


def record_time(timestamp: str | None) -> float | None:
    """Unix seconds of a record's ISO 8601 timestamp (``Z`` or an offset; naive means UTC), or
    None when it is absent or not ISO 8601."""
    if not timestamp:
        return None
    try:
        when = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


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


class BackfillMetrics(Collector):
    """What ``stef backfill`` exports on its ``/metrics`` (with ``--metrics-port``), in place of
    the live families.

    A backfill re-judges records the live service has already counted: exported under the live
    names, its scores and unsafe statements would be summed into the dashboards and fire the
    live alerts again (``StefUnsafeSql``) for old records. So it exports its own families only:
    ``stef_backfill_records_total{app,outcome}`` counts exactly what ``stef_records_total``
    would have (same labels and values, primed zeros included), and
    ``stef_backfill_range_records`` the size of the range, for progress.

    Args:
        registry: the registry the backfill serves (not the one ``metrics`` lives on).
        metrics: the backfill's own, unserved, metrics (the service's record path feeds them).
    """

    def __init__(self, registry: CollectorRegistry, metrics: Metrics) -> None:
        self._records = metrics.records
        self.range_records = Gauge(
            "stef_backfill_range_records",
            "Records in the range of the running backfill (known once it is resolved)",
            registry=registry,
        )
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for metric in self._records.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    labels = [sample.labels["app"], sample.labels["outcome"]]
                    family.add_metric(labels, sample.value)
        return [family]

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily(
            "stef_backfill_records",
            "Records a stef backfill judged, by outcome (stef_records_total does not count them)",
            labels=["app", "outcome"],
        )
