"""The score histograms: a valid PNG with both classes drawn, and the bins."""

from __future__ import annotations

import struct
import zlib

from stef.calibrate.plot import histogram_png, shares


def test_plot_is_a_valid_png() -> None:
    data = histogram_png([90.0, 100.0, 80.0], [10.0, 55.0, 100.0], 75.0, best=80.0)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc
        chunks.append((kind, body))
        pos += 12 + length
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height = struct.unpack(">II", chunks[0][1][:8])
    raw = zlib.decompress(chunks[1][1])
    assert len(raw) == height * (1 + 3 * width)
    assert bytes((46, 160, 67)) in raw and bytes((215, 58, 73)) in raw  # both classes drawn


def test_histogram_bins() -> None:
    s = shares([0.0, 4.99, 5.0, 100.0])
    assert s[0] == 0.5 and s[1] == 0.25 and s[-1] == 0.25 and len(s) == 20
