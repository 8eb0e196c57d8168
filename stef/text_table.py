"""The fixed-width text tables of ``stef summary``, ``stef replay`` and ``stef calibrate``."""

from __future__ import annotations

from collections.abc import Container, Sequence


def render_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    left: int = 1,
    rule_before: Container[int] = (),
) -> str:
    """Lay out ``header`` and ``rows`` in columns as wide as their widest cell.

    Args:
        header: the column names; every row has as many cells.
        rows: the cells, already formatted.
        left: how many leading columns are names, left-aligned; the rest are figures,
            right-aligned so their digits line up.
        rule_before: indices of rows preceded by a rule of dashes (a total row); one rule always
            separates the header from the rows.

    Returns:
        The lines joined by newlines, without trailing spaces or a final newline.
    """
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    rule = "  ".join("-" * w for w in widths)

    def line(cells: Sequence[str]) -> str:
        padded = (
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "  ".join(padded).rstrip()

    lines = [line(header), rule]
    for k, row in enumerate(rows):
        if k in rule_before:
            lines.append(rule)
        lines.append(line(row))
    return "\n".join(lines)
