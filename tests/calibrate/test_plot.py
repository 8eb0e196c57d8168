"""The charts: well-formed SVG with every series drawn, labels escaped, and the bins."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from stef.calibrate.agreement import Item
from stef.calibrate.plot import (
    GREEN,
    RED,
    calibration_histogram,
    histogram_svg,
    reliability_svg,
    shares,
)

SVG = "{http://www.w3.org/2000/svg}"


def _item(label: bool, score: float) -> Item:
    return Item(label=label, score=score, source=None, app=None, complexity=None,
                error_types=(), verdict=None)  # fmt: skip


def test_calibration_plot_is_svg_with_both_classes() -> None:
    items = [_item(True, s) for s in (90.0, 100.0, 80.0)]
    items += [_item(False, s) for s in (10.0, 55.0, 100.0)]
    root = ET.fromstring(calibration_histogram(items, 75.0, best=80.0))
    assert root.tag == f"{SVG}svg"
    fills = {r.get("fill") for r in root.iter(f"{SVG}rect")}
    assert GREEN in fills and RED in fills
    dashed = [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 2  # the threshold and the best kappa


def test_labels_are_escaped() -> None:
    svg = histogram_svg([("<script>x</script>", GREEN, [50.0])], title="a & <b>")
    root = ET.fromstring(svg)  # well-formed: nothing in a name became markup
    assert not list(root.iter(f"{SVG}script"))
    assert "<script>x" not in svg
    rel = reliability_svg([(0.5, 0.4, 10)], title="<i>", x_label="p")
    assert not list(ET.fromstring(rel).iter(f"{SVG}i"))


def test_histogram_bins() -> None:
    s = shares([0.0, 4.99, 5.0, 100.0])
    assert s[0] == 0.5 and s[1] == 0.25 and s[-1] == 0.25 and len(s) == 20


def test_a_long_reliability_title_widens_the_figure_not_the_plot() -> None:
    """The report's titles ("Labelled share correct by score (no P(correct) in the results)")
    ran past the 360-pixel figure and were cut; the plot itself stays square."""
    short = ET.fromstring(reliability_svg([(0.5, 0.4, 10)], title="R", x_label="p"))
    long_title = "Labelled share correct by score (no P(correct) in the results)"
    wide = ET.fromstring(reliability_svg([(0.5, 0.4, 10)], title=long_title, x_label="p"))
    assert short.get("width") == "360" and short.get("height") == "360"
    assert int(wide.get("width") or 0) >= 56 + 7 * len(long_title)
    assert wide.get("height") == "360"
    axes = [
        [(ln.get("x1"), ln.get("y1"), ln.get("x2"), ln.get("y2")) for ln in svg.iter(f"{SVG}line")]
        for svg in (short, wide)
    ]
    assert axes[0] == axes[1]
