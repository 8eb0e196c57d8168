"""The reference comparison of one record as report HTML: its verdict and what decided it, and
the counterexample database (its tables, both outputs, trimmed) when the rows differed. Every
value goes through :func:`html.escape`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from stef.review import explain as E


def reference_html(rec: Mapping[str, Any]) -> str:
    """The block under a record's SQL; empty without a reference."""
    said = E.reference(rec)
    if said is None:
        return ""
    parts = [f'<p class="muted">reference: {escape(said)}</p>']
    example = E.counterexample(rec)
    if example is not None:
        parts.append('<p class="muted">counterexample (a generated database):</p>')
        parts += [_grid(t["rows"], t["columns"], t["name"]) for t in example["tables"]]
        parts.append(_grid(example["generated"], [], "the SQL's rows"))
        parts.append(_grid(example["reference"], [], "the reference's rows"))
    return "".join(parts)


def _grid(rows: Sequence[Sequence[str]], columns: Sequence[str], caption: str) -> str:
    out = [f'<table class="grid"><caption>{escape(caption)}</caption>']
    if columns:
        out.append("<tr>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>")
    if not rows:
        out.append("<tr><td>(no rows)</td></tr>")
    out.append("</table>")
    return "".join(out)
