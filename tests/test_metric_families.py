"""The metric families that remember their children (stef.metrics.families) expose what
prometheus_client's own do, call for call."""

from __future__ import annotations

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from stef.metrics import families


def _calls(counter: prometheus_client.Counter, gauge: prometheus_client.Gauge) -> None:
    counter.labels(app="a", outcome="evaluated").inc()
    counter.labels(outcome="evaluated", app="a").inc(2)  # the names in another order
    counter.labels("a", "evaluated").inc()  # positional
    counter.labels("b", 7).inc()  # a value that is not text
    counter.labels("b", 1).inc()  # 1, 1.0 and True: one dict key, three children
    counter.labels("b", 1.0).inc()
    counter.labels("b", True).inc()
    counter.labels("b", 1).inc()
    gauge.labels(app="a").set(0.5)
    gauge.labels(app="a").set(0.25)
    gauge.labels(app=None).set(1)  # None is the text "None" to prometheus_client


def _exposition(module: object) -> bytes:
    registry = CollectorRegistry()
    counter = module.Counter("x_total", "x", ["app", "outcome"], registry=registry)  # type: ignore[attr-defined]
    gauge = module.Gauge("y", "y", ["app"], registry=registry)  # type: ignore[attr-defined]
    _calls(counter, gauge)
    return generate_latest(registry)


def test_the_same_exposition_as_prometheus_client() -> None:
    ours = _exposition(families)
    assert ours == _exposition(prometheus_client)
    assert b'x_total{app="a",outcome="evaluated"} 4.0' in ours


def test_a_child_is_asked_once_and_kept() -> None:
    counter = families.Counter("x_total", "x", ["app"], registry=CollectorRegistry())
    child = counter.labels(app="a")
    assert counter.labels(app="a") is child
    assert counter.labels("a") is child  # prometheus_client's own child, whichever way asked


def test_removed_children_are_forgotten() -> None:
    registry = CollectorRegistry()
    gauge = families.Gauge("y", "y", ["app"], registry=registry)
    gauge.labels(app="a").set(1)
    gauge.remove("a")
    gauge.labels(app="a").set(2)
    assert registry.get_sample_value("y", {"app": "a"}) == 2
    gauge.clear()
    assert registry.get_sample_value("y", {"app": "a"}) is None
    gauge.labels(app="a").set(3)
    gauge.remove_by_labels({"app": "a"})
    gauge.labels(app="a").set(4)
    assert registry.get_sample_value("y", {"app": "a"}) == 4


def test_a_value_that_is_no_dict_key_is_still_counted() -> None:
    registry = CollectorRegistry()
    counter = families.Counter("x_total", "x", ["app"], registry=registry)
    counter.labels(app=["a"]).inc()
    counter.labels(app=["a"]).inc()
    assert registry.get_sample_value("x_total", {"app": "['a']"}) == 2


def test_a_value_equal_to_text_is_its_own_child() -> None:
    class Shown(str):
        def __str__(self) -> str:
            return "shown"

    registry = CollectorRegistry()
    counter = families.Counter("x_total", "x", ["app"], registry=registry)
    counter.labels(app="a").inc()
    counter.labels(app=Shown("a")).inc()  # equal to "a", and "shown" as text
    counter.labels(("app", "a")).inc()  # a positional value that is the named call's key
    assert registry.get_sample_value("x_total", {"app": "a"}) == 1
    assert registry.get_sample_value("x_total", {"app": "shown"}) == 1
    assert registry.get_sample_value("x_total", {"app": "('app', 'a')"}) == 1


def test_a_child_asked_for_during_a_removal_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child prometheus_client gave just before a removal is not remembered after it."""
    registry = CollectorRegistry()
    gauge = families.Gauge("y", "y", ["app"], registry=registry)
    gauge.labels(app="b")
    asked = MetricWrapperBase.labels

    def removed_meanwhile(self: MetricWrapperBase, *args: object, **kwargs: object) -> object:
        child = asked(self, *args, **kwargs)
        monkeypatch.setattr(MetricWrapperBase, "labels", asked)
        gauge.remove("a")  # another thread's removal, between the ask and the keeping
        return child

    monkeypatch.setattr(MetricWrapperBase, "labels", removed_meanwhile)
    gauge.labels(app="a").set(1)
    gauge.labels(app="a").set(3)
    assert registry.get_sample_value("y", {"app": "a"}) == 3


def test_wrong_labels_fail_as_prometheus_client_fails() -> None:
    counter = families.Counter("x_total", "x", ["app"], registry=CollectorRegistry())
    counter.labels(app="a")
    with pytest.raises(ValueError):
        counter.labels("b", app="a")  # both ways at once
    with pytest.raises(ValueError):
        counter.labels(wrong="a")
    with pytest.raises(ValueError):
        counter.labels("a", "b")
