"""prometheus_client's Counter, Gauge and Histogram, each remembering the children its
``labels()`` gave.

The record path asks for about a dozen children a record (the result's counters, the LLM call's
histogram, the judge watch's). prometheus_client's ``labels()`` checks the label names, converts
every value to text and takes the family's lock on every call: 2.7 µs, where a dict lookup of the
call's own values takes a tenth of that. A child is asked of prometheus_client once, the first
time its values are seen, and kept when every value is text (any other value is asked of
prometheus_client every time); the children a family keeps are ones its registry holds anyway
(label values are bounded: :mod:`stef.metrics.labels`). Removing children (``remove``,
``remove_by_labels``, ``clear``) forgets them here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self

import prometheus_client
from prometheus_client.metrics import MetricWrapperBase


class _Remembering(MetricWrapperBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Keyed by the call as written: the values, or the named values in the call's order.
        self._positional: dict[tuple[object, ...], Self] = {}
        self._named: dict[tuple[object, ...], Self] = {}
        super().__init__(*args, **kwargs)

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        children: dict[tuple[object, ...], Self]
        key: tuple[object, ...]
        values: Iterable[object]
        if labelkwargs:
            if labelvalues:  # prometheus_client's own error
                return super().labels(*labelvalues, **labelkwargs)
            children, key, values = self._named, tuple(labelkwargs.items()), labelkwargs.values()
        else:
            children, key, values = self._positional, labelvalues, labelvalues
        for value in values:
            # Text only: 1, 1.0 and True are one dict key and three children, and a str
            # subclass equal to "a" may be another text than "a".
            if type(value) is not str:
                return super().labels(*labelvalues, **labelkwargs)
        child = children.get(key)
        if child is None:
            # Into the dict read before the call: one that a removal replaced meanwhile is
            # dropped with what it holds.
            child = children[key] = super().labels(*labelvalues, **labelkwargs)
        return child

    # A removal first, then the dicts replaced: a child asked for meanwhile goes to the old one.
    def remove(self, *labelvalues: Any) -> None:
        super().remove(*labelvalues)
        self._positional, self._named = {}, {}

    def remove_by_labels(self, labels: dict[str, str]) -> None:
        super().remove_by_labels(labels)
        self._positional, self._named = {}, {}

    def clear(self) -> None:
        super().clear()
        self._positional, self._named = {}, {}


class Counter(_Remembering, prometheus_client.Counter):
    """:class:`prometheus_client.Counter`, its children remembered."""


class Gauge(_Remembering, prometheus_client.Gauge):
    """:class:`prometheus_client.Gauge`, its children remembered."""


class Histogram(_Remembering, prometheus_client.Histogram):
    """:class:`prometheus_client.Histogram`, its children remembered."""
