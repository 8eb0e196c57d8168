"""Charts as SVG text: the score histograms of ``stef calibrate --plot`` and of ``stef report``,
and the reliability diagram of the report.

SVG is text: no plotting stack, no binary encoder, and the report inlines it. Every label goes
through :func:`xml.sax.saxutils.escape`, so an app name cannot become markup. Histogram bars are
the share of each series per 5-point score bin, so a skewed balance does not hide the smaller
series; the pass threshold is a blue dashed line, the κ-maximising one (when different) orange.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from stef.calibrate.agreement import Item

GREEN, RED, BLUE, ORANGE, GREY, INK = "#2ea043", "#d73a49", "#0366d6", "#e6821e", "#888", "#333"

BIN = 5
BINS = 100 // BIN

Series = tuple[str, str, Sequence[float]]  # name, colour, values (scores 0-100)


def shares(scores: Sequence[float]) -> list[float]:
    """Share of ``scores`` in each 5-point bin of 0-100 (100 falls in the last bin)."""
    counts = [0] * BINS
    for s in scores:
        counts[min(BINS - 1, max(0, int(s // BIN)))] += 1
    total = len(scores)
    return [c / total if total else 0.0 for c in counts]


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = 12) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{INK}">{escape(s)}</text>'
    )


@dataclass(frozen=True)
class _Frame:
    """Where a histogram's plot area sits in its SVG."""

    left: int
    top: int
    plot_w: int
    plot_h: int

    @property
    def base(self) -> int:
        return self.top + self.plot_h

    def x_of(self, score: float) -> float:
        return self.left + max(0.0, min(100.0, score)) / 100 * self.plot_w


def histogram_svg(
    series: Sequence[Series],
    *,
    title: str,
    markers: Sequence[tuple[str, str, float]] = (),
    width: int = 800,
    height: int = 360,
    x_label: str = "score",
) -> str:
    """Side-by-side bars per 5-point score bin, one colour per series; ``markers`` are dashed
    vertical lines ``(name, colour, score)``."""
    left, right, top, bottom = 56, 20, 64, 46
    frame = _Frame(left, top, width - left - right, height - top - bottom)
    binned = [shares(values) for _, _, values in series]
    peak = max([s for b in binned for s in b] + [0.01])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        _text(left, 20, title, size=14),
        *_bars(frame, [colour for _, colour, _ in series], binned, peak),
        *_score_axis(frame, x_label, peak),
    ]
    for _, colour, at in markers:
        x = frame.x_of(at)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{frame.base}" stroke="{colour}" '
            'stroke-width="2" stroke-dasharray="6 4"/>'
        )
    parts.extend(_legend(left, [(n, c) for n, c, _ in series] + [(n, c) for n, c, _ in markers]))
    parts.append("</svg>")
    return "\n".join(parts)


def _bars(frame: _Frame, colours: list[str], binned: list[list[float]], peak: float) -> list[str]:
    """One bar per series side by side in each bin, its height the series' share."""
    parts = []
    k = max(1, len(colours))
    for i in range(BINS):
        x0, x1 = frame.x_of(i * BIN) + 2, frame.x_of((i + 1) * BIN) - 2
        w = (x1 - x0) / k
        for j, colour in enumerate(colours):
            h = binned[j][i] / peak * frame.plot_h
            if h > 0:
                parts.append(
                    f'<rect x="{x0 + j * w:.1f}" y="{frame.base - h:.1f}" width="{w:.1f}" '
                    f'height="{h:.1f}" fill="{colour}"/>'
                )
    return parts


def _score_axis(frame: _Frame, x_label: str, peak: float) -> list[str]:
    """The axes, a tick and its label every 10 points, the x label and the peak share."""
    left, top, base = frame.left, frame.top, frame.base
    parts = [
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="{INK}"/>',
        f'<line x1="{left}" y1="{base}" x2="{left + frame.plot_w}" y2="{base}" stroke="{INK}"/>',
    ]
    for score in range(0, 101, 10):
        x = frame.x_of(score)
        parts.append(
            f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 5}" stroke="{INK}"/>'
        )
        parts.append(_text(x, base + 18, str(score), anchor="middle"))
    parts.append(_text(left + frame.plot_w / 2, base + 36, x_label, anchor="middle"))
    parts.append(_text(left - 6, top + 4, f"{100 * peak:.0f}%", anchor="end"))
    return parts


def _legend(left: int, entries: list[tuple[str, str]]) -> list[str]:
    """A colour swatch and its name per entry, in one row above the plot."""
    parts = []
    x = float(left)
    for name, colour in entries:
        parts.append(f'<rect x="{x:.1f}" y="32" width="12" height="12" fill="{colour}"/>')
        parts.append(_text(x + 17, 43, name))
        x += 30 + 7 * len(name)
    return parts


def reliability_svg(
    points: Sequence[tuple[float, float, int]],
    *,
    title: str,
    x_label: str,
    size: int = 360,
) -> str:
    """Observed share correct against predicted, one dot per bin ``(predicted, observed, n)``
    (area grows with n), with the diagonal a calibrated judge would follow."""
    left, right, top, bottom = 56, 20, 40, 46
    plot_w, plot_h = size - left - right, size - top - bottom
    # The plot stays square; the figure widens for a title longer than the plot (about 0.55 em
    # a character at 14 px), which the viewBox would otherwise cut.
    width = max(size, round(left + 7.7 * len(title) + right))

    def xy(p: float, q: float) -> tuple[float, float]:
        return left + p * plot_w, top + (1 - q) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{size}" '
        f'viewBox="0 0 {width} {size}" font-family="sans-serif" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{size}" fill="#fff"/>',
        _text(left, 20, title, size=14),
    ]
    (x0, y0), (x1, y1) = xy(0, 0), xy(1, 1)
    parts.append(
        f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="{GREY}" stroke-dasharray="4 4"/>'
    )
    parts.append(f'<line x1="{x0}" y1="{y1}" x2="{x0}" y2="{y0}" stroke="{INK}"/>')
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="{INK}"/>')
    for t in (0, 0.5, 1):
        x, _ = xy(t, 0)
        _, y = xy(0, t)
        parts.append(_text(x, y0 + 18, f"{t:g}", anchor="middle"))
        parts.append(_text(x0 - 6, y + 4, f"{t:g}", anchor="end"))
    parts.append(_text(left + plot_w / 2, y0 + 36, x_label, anchor="middle"))
    most = max([n for _, _, n in points] + [1])
    for p, q, n in points:
        x, y = xy(p, q)
        r = 3 + 9 * (n / most) ** 0.5
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{BLUE}" fill-opacity="0.7">'
            f"<title>{escape(f'{n} labelled: predicted {p:.2f}, observed {q:.2f}')}</title>"
            "</circle>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def calibration_histogram(
    items: Sequence[Item], threshold: float, best: float | None = None, x_label: str = "score"
) -> str:
    """``stef calibrate --plot``: score histograms of the correct and the incorrect items;
    ``x_label`` names what ``Item.score`` holds (``P(correct) x 100`` with a calibration)."""
    good = [i.score for i in items if i.label and i.score is not None]
    bad = [i.score for i in items if not i.label and i.score is not None]
    markers = [(f"threshold {threshold:g}", BLUE, threshold)]
    if best is not None and best != threshold:
        markers.append((f"best kappa {best:g}", ORANGE, best))
    return histogram_svg(
        [(f"correct n={len(good)}", GREEN, good), (f"incorrect n={len(bad)}", RED, bad)],
        title="Scores of correct vs incorrect records (share per class)",
        markers=markers,
        x_label=x_label,
    )


def write_histogram(
    path: Path,
    items: Sequence[Item],
    threshold: float,
    best: float | None = None,
    *,
    x_label: str = "score",
) -> None:
    """The score histograms of correct and wrong items as an SVG at ``path`` (folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(calibration_histogram(items, threshold, best, x_label), encoding="utf-8")
