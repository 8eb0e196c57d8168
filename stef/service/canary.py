"""The canary: labelled records (the ``stef calibrate`` format) re-judged on a schedule beside the
live stream, so a judge that got worse shows as a metric and an alert.

Each run reads the file again (an edited canary applies without a restart), takes a sample of at
most ``canary.sample_size`` records, stratified by label so both classes are in it, and judges it
through the one record path with the service's rules (sampling off, as in calibration) and a twin
of its judge backend (:func:`stef.service.wiring.build_canary_backend`). Agreement with the labels
-- Cohen's kappa and accuracy at ``canary.pass_threshold`` -- comes from
:mod:`stef.calibrate.agreement`. A run costs at most ``sample_size`` judge requests per
``interval_s``.

Kept apart from the live stream:

- its own thread, with at most ``canary.concurrency`` records in flight; never the service's
  workers or its in-flight bound;
- its records never reach a sink: what the pipeline returns is read and dropped;
- its pipeline is built without metrics, so ``stef_records_total`` and every other record metric
  count live records only (its own figures are the ``stef_canary_*`` metrics).

A run that cannot judge (the file gone or invalid, the endpoint down) is logged and counted, and the
next one is tried at the next interval: the canary never stops the service. A record the judge
could not score is left out of the agreement (an outage is not a disagreement; the judge-error
metrics and the run's outcome ``judge_error`` show it); agreement is measured only when at least
half the sample was scored.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from stef.calibrate.agreement import Item, accuracy, confusion_at, kappa
from stef.calibrate.labels import judge_all, without_sampling
from stef.errors import ConfigError, FileError
from stef.files import regular_file
from stef.judges.base import Judge
from stef.labels_file import LabelledRecord, read_labels
from stef.metrics import Metrics
from stef.rules import RuleSet
from stef.service.wiring import build_canary_backend, build_pipeline
from stef.settings import CanarySettings, Settings

log = structlog.get_logger(__name__)

# A canary is a few hundred labelled records; it is read whole at every run.
CANARY_MAX_BYTES = 64 * 1024 * 1024
# How long stop() waits for a run in progress; its results are dropped anyway.
_STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class CanaryRun:
    """What one run found.

    Attributes:
        outcome: ``ok`` (every sampled record scored), ``judge_error`` (the judge failed on some)
            or ``failed`` (nothing could be judged: the file, an unexpected error).
        sampled: records judged.
        scored: records the judge scored (the agreement is over these).
        kappa: Cohen's kappa, None when not measured or when one label class is missing.
        accuracy: the share of scored records whose prediction matches the label.
    """

    outcome: str
    sampled: int = 0
    scored: int = 0
    kappa: float | None = None
    accuracy: float | None = None


def load_canary(path: Path) -> list[LabelledRecord]:
    """The canary's labelled records, checked as at start.

    Raises:
        ConfigError: the file is missing or unreadable, a line is not a labelled record, or it
            lacks one of the two label classes (kappa would never be defined).
    """
    try:
        # A regular file of a sane size: a FIFO would block the canary forever, a huge file
        # would be read whole into memory at every run.
        hint = " (a canary is a sample of labelled records, not a dataset)"
        regular_file(path, CANARY_MAX_BYTES, too_large=hint)
        records = read_labels(path)
    except FileError as exc:
        raise ConfigError(f"canary {exc}") from exc
    labels = {r.label for r in records}
    if labels != {True, False}:
        raise ConfigError(
            f"canary {path}: needs records labelled true and false "
            f"(found {len(records)} record(s), labels {sorted(labels)})"
        )
    return records


def stratified_sample(
    records: Sequence[LabelledRecord], size: int, rng: random.Random
) -> list[LabelledRecord]:
    """At most ``size`` records, each label class keeping its share of the file and at least one
    record, in file order."""
    if len(records) <= size:
        return list(records)
    correct = [r for r in records if r.label]
    wrong = [r for r in records if not r.label]
    take = round(size * len(correct) / len(records))
    # At least one of each class, and never more of one class than the file holds.
    take = min(max(take, 1, size - len(wrong)), size - 1, len(correct))
    picked = rng.sample(correct, take) + rng.sample(wrong, size - take)
    return sorted(picked, key=lambda r: r.line)


def measure(items: Sequence[Item], threshold: float) -> CanaryRun:
    """The run's outcome and agreement over the records the judge scored."""
    scored = [i for i in items if i.score is not None]
    outcome = "ok" if len(scored) == len(items) else "judge_error"
    if not scored or 2 * len(scored) < len(items):
        return CanaryRun(outcome, sampled=len(items), scored=len(scored))
    c = confusion_at(scored, threshold)
    return CanaryRun(
        outcome, sampled=len(items), scored=len(scored), kappa=kappa(c), accuracy=accuracy(c)
    )


class Canary:
    """The scheduled canary of one service replica.

    Args:
        config: the ``canary`` settings (``path`` set).
        judge: runs one sample through the record path and returns the items (labels and scores).
        metrics: where the canary's metrics go.
        backend: the canary's backend (its labels; closed by :meth:`stop`).
        seed: the sampling seed (None: random).
    """

    def __init__(
        self,
        config: CanarySettings,
        judge: Callable[[Sequence[LabelledRecord]], list[Item]],
        metrics: Metrics,
        backend: Judge,
        *,
        seed: int | None = None,
    ) -> None:
        if config.path is None:
            raise ConfigError("canary: no path configured")
        self.config = config
        self.path = config.path
        self._judge = judge
        self.metrics = metrics
        self.backend = backend
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        info = backend.info
        self._labels = {"backend": info.backend, "model": info.model or "none"}
        metrics.prime_canary({"kappa": config.kappa_floor, "accuracy": config.accuracy_floor})

    def start(self) -> None:
        """Run now, then every ``interval_s``, in a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="stef-canary", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the schedule; a run in progress is abandoned (its backend closed)."""
        self._stop.set()
        self.backend.close()
        if self._thread is not None:
            self._thread.join(_STOP_WAIT_S)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.config.interval_s)

    def run_once(self) -> CanaryRun:
        """One run: sample, judge, export. Never raises (but for interrupts)."""
        started = time.monotonic()
        try:
            records = load_canary(self.path)
            sample = stratified_sample(records, self.config.sample_size, self._rng)
            run = measure(self._judge(sample), self.config.pass_threshold)
        except Exception as exc:  # a run that breaks is counted; the service goes on
            log.error("canary_run_failed", path=str(self.path), error=str(exc)[:300])
            run = CanaryRun("failed")
        if self._stop.is_set():
            return run  # stopped mid-run: the backend was closed under it, nothing to report
        agreement = None
        if run.accuracy is not None:
            agreement = {"accuracy": run.accuracy}
            if run.kappa is not None:
                agreement["kappa"] = run.kappa
        self.metrics.observe_canary_run(
            run.outcome, **self._labels, agreement=agreement, at=time.time()
        )
        log.info(
            "canary_run",
            outcome=run.outcome,
            sampled=run.sampled,
            scored=run.scored,
            kappa=run.kappa,
            accuracy=run.accuracy,
            seconds=round(time.monotonic() - started, 3),
        )
        return run


def build_canary(
    settings: Settings, rules: Callable[[], RuleSet], live: Judge, metrics: Metrics
) -> Canary | None:
    """The canary of ``settings``, or None when no canary file is configured.

    Raises:
        ConfigError: the canary file is missing or invalid.
    """
    config = settings.canary
    if config.path is None:
        return None
    load_canary(config.path)  # a bad file fails at start, not at the first run
    backend = build_canary_backend(settings, live, metrics)
    # The labels file uses STEF's own field names: no field mapping applies to it.
    plain = settings.model_copy(update={"field_mapping": {}})

    def judge(sample: Sequence[LabelledRecord]) -> list[Item]:
        # No metrics: canary records stay out of every live record metric.
        # No cascade: the canary watches the LLM itself, on every one of its records.
        pipeline = build_pipeline(
            plain, without_sampling(rules()), backend, metrics=None, cascade=False
        )
        items = judge_all(pipeline, sample, concurrency=config.concurrency)
        cal = pipeline.options.calibration
        if cal is None:
            return items
        # With a calibration, pass/fail is p_correct >= its threshold, as in stef calibrate:
        # the score is scaled by the calibrated Γ and pass_threshold no longer reads it.
        return [
            replace(i, score=None if i.score is None or i.p_correct is None else
                    (100.0 if i.p_correct >= cal.threshold else 0.0))
            for i in items
        ]  # fmt: skip

    try:
        return Canary(config, judge, metrics, backend)
    except BaseException:
        backend.close()
        raise
