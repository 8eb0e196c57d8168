"""``stef calibrate --plot``: score histograms of correct vs incorrect items, as a PNG.

Drawn with the standard library (zlib + struct and a 3x5 pixel font) so the judge does not pull in
a plotting stack for one chart. Bars are the share of each class per 5-point score bin, so a
skewed label balance does not hide the smaller class; the pass threshold is a blue dashed line,
the κ-maximising one (when different) orange.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from stef.calibrate.agreement import Item

Color = tuple[int, int, int]

WHITE: Color = (255, 255, 255)
BLACK: Color = (40, 40, 40)
GREY: Color = (200, 200, 200)
GREEN: Color = (46, 160, 67)
RED: Color = (215, 58, 73)
BLUE: Color = (3, 102, 214)
ORANGE: Color = (230, 130, 20)

BIN = 5
BINS = 100 // BIN

# A 3x5 pixel font: five rows of three pixels per glyph.
_FONT: dict[str, str] = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    " ": "000000000000000", ":": "000010000010000", "(": "001010010010001",
    ")": "100010010010100", ".": "000000000000010", "%": "101001010100101",
    "=": "000111000111000", ">": "100010001010100", "-": "000000111000000",
    ",": "000000000010100", "/": "001001010100100",
}  # fmt: skip


class Canvas:
    """An RGB raster with the few drawing operations the chart needs."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def point(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle with corners (x0, y0) and (x1, y1), both included."""
        x0, x1 = max(0, min(x0, x1)), min(self.width - 1, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height - 1, max(y0, y1))
        row = bytes(color) * (x1 - x0 + 1)
        for y in range(y0, y1 + 1):
            i = (y * self.width + x0) * 3
            self.pixels[i : i + len(row)] = row

    def vline(self, x: int, y0: int, y1: int, color: Color, dash: int = 0) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            if not dash or (y // dash) % 2 == 0:
                self.rect(x - 1, y, x, y, color)

    def text(self, x: int, y: int, s: str, color: Color = BLACK, scale: int = 2) -> int:
        """Draw ``s`` with its top-left at (x, y); returns the x after the last glyph."""
        for ch in s.upper():
            glyph = _FONT.get(ch, _FONT[" "])
            for k, bit in enumerate(glyph):
                if bit == "1":
                    gx, gy = x + (k % 3) * scale, y + (k // 3) * scale
                    self.rect(gx, gy, gx + scale - 1, gy + scale - 1, color)
            x += 4 * scale
        return x

    def png(self) -> bytes:
        """The raster as a PNG file (8-bit RGB, no interlace, filter 0 on every row)."""
        stride = self.width * 3
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * stride : (y + 1) * stride]) for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            crc = zlib.crc32(kind + data) & 0xFFFFFFFF
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def text_width(s: str, scale: int = 2) -> int:
    return len(s) * 4 * scale


def shares(scores: Sequence[float]) -> list[float]:
    """Share of ``scores`` in each 5-point bin of 0-100 (100 falls in the last bin)."""
    counts = [0] * BINS
    for s in scores:
        counts[min(BINS - 1, max(0, int(s // BIN)))] += 1
    total = len(scores)
    return [c / total if total else 0.0 for c in counts]


def histogram_png(
    correct: Sequence[float],
    incorrect: Sequence[float],
    threshold: float,
    *,
    best: float | None = None,
    width: int = 800,
    height: int = 440,
) -> bytes:
    """The chart as PNG bytes: per bin, the share of correct (green) and incorrect (red) items."""
    c = Canvas(width, height)
    left, right, top, bottom = 60, 20, 70, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    x_base, y_base = left, top + plot_h

    def x_of(score: float) -> int:
        return x_base + round(max(0.0, min(100.0, score)) / 100 * plot_w)

    good, bad = shares(correct), shares(incorrect)
    peak = max([*good, *bad, 0.01])
    for i in range(BINS):
        x0, x1 = x_of(i * BIN), x_of((i + 1) * BIN)
        mid = (x0 + x1) // 2
        for share, color, a, b in ((good[i], GREEN, x0 + 2, mid - 1), (bad[i], RED, mid, x1 - 2)):
            h = round(share / peak * plot_h)
            if h:
                c.rect(a, y_base - h, b, y_base - 1, color)

    # Axes, ticks every 10 points, and the peak share on the y axis.
    c.rect(x_base - 1, top, x_base, y_base, BLACK)
    c.rect(x_base, y_base, x_base + plot_w, y_base + 1, BLACK)
    for score in range(0, 101, 10):
        x = x_of(score)
        c.rect(x, y_base + 2, x, y_base + 6, BLACK)
        label = str(score)
        c.text(x - text_width(label) // 2, y_base + 10, label)
    c.rect(x_base - 5, top, x_base - 2, top, BLACK)
    peak_label = f"{100 * peak:.0f}%"
    c.text(x_base - 8 - text_width(peak_label), top - 4, peak_label)
    c.text(x_base + plot_w // 2 - text_width("SCORE") // 2, y_base + 28, "SCORE")

    c.vline(x_of(threshold), top, y_base, BLUE, dash=6)
    if best is not None and best != threshold:
        c.vline(x_of(best), top, y_base, ORANGE, dash=3)

    title = f"SCORES: CORRECT N={len(correct)} VS INCORRECT N={len(incorrect)}, SHARE PER CLASS"
    c.text(left, 12, title, scale=2)
    x = left
    for color, name in (
        (GREEN, "CORRECT"),
        (RED, "INCORRECT"),
        (BLUE, f"THRESHOLD {threshold:g}"),
        *([(ORANGE, f"BEST KAPPA {best:g}")] if best is not None and best != threshold else []),
    ):
        c.rect(x, 36, x + 11, 47, color)
        x = c.text(x + 18, 38, name) + 20
    return c.png()


def write_histogram(
    path: Path, items: Sequence[Item], threshold: float, best: float | None = None
) -> None:
    """The score histograms of correct and wrong items as a PNG at ``path`` (folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        histogram_png(
            [i.score for i in items if i.label and i.score is not None],
            [i.score for i in items if not i.label and i.score is not None],
            threshold,
            best=best,
        )
    )
