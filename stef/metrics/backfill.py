"""What ``stef backfill`` exports in place of the live families."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from stef.metrics.families import Gauge

if TYPE_CHECKING:
    from stef.metrics import Metrics


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
        self._records = metrics.quality.records
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
