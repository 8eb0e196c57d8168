"""Model identity: the model an endpoint reports in each reply, watched for silent swaps.

A proxy or a provider can route the configured name to another model without notice, the
commonest cause of a judge's drift. Every reply's ``model`` is compared with the previous reply's
for the same configured model; a change is logged (``llm_reported_model_changed``, old and new)
and counted (``stef_judge_model_changes_total{configured}``).
"""

from __future__ import annotations

import threading

import structlog

from stef.metrics import Metrics

log = structlog.get_logger(__name__)


class ModelWatch:
    """The last reported model of one configured model. Thread-safe.

    Args:
        configured: the model name STEF asks for.
        metrics: optional; changes and the current reported model are exported.
    """

    def __init__(self, configured: str, metrics: Metrics | None = None) -> None:
        self.configured = configured
        self._metrics = metrics
        self._lock = threading.Lock()
        self._last: str | None = None

    @property
    def last(self) -> str | None:
        """The model the latest reply reported (None before any named one)."""
        with self._lock:
            return self._last

    def observe(self, reported: str | None) -> None:
        """One reply's reported model; None (the reply named none) changes nothing."""
        if reported is None:
            return
        with self._lock:
            previous, self._last = self._last, reported
            changed = previous is not None and previous != reported
            # Under the lock: the gauge's old and new series move together.
            if self._metrics is not None:
                self._metrics.observe_reported_model(self.configured, previous, reported)
        if changed:
            log.warning(
                "llm_reported_model_changed",
                configured=self.configured,
                old=previous,
                new=reported,
            )
