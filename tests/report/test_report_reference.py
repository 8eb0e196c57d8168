"""``stef report`` shows each low-scoring record's reference comparison (issue 30): the verdict
and what decided it, and the counterexample database (its tables, both outputs) when the rows
differed; values escaped; nothing for a record without a reference."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

from stef.cli import main

HOSTILE = "<script>alert(1)</script>"
ROWS = [
    {
        "id": "offset",
        "question": "Which singer has the second highest fee?",
        "sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 2, 1",
        "gold_sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 1, 1",
    },
    {
        "id": "hostile",
        "question": "How many singers are from there?",
        "sql": f"SELECT COUNT(*) FROM singer WHERE country = '{HOSTILE}'",
        "gold_sql": "SELECT COUNT(*) FROM singer WHERE country = 'France'",
    },
    {"id": "free", "question": "How many singers are there?", "sql": "SELECT name FROM singer"},
]


def _report(tmp_path: Path) -> str:
    log, results = tmp_path / "log.jsonl", tmp_path / "results.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["replay", str(log), "--no-progress", "-o", str(results)]) == 0
    out = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(out), "--input", str(log)]) == 0
    return out.read_text()


def _row(page: str, rid: str) -> str:
    return page.split(f"<td>{rid}</td>", 1)[1].split("</tr>\n<tr>", 1)[0]


def test_the_lowest_scores_carry_their_counterexample(tmp_path: Path) -> None:
    page = _report(tmp_path)
    offset = _row(page, "offset")
    assert "reference: Incorrect, decided by execution" in offset
    assert "<caption>singer</caption>" in offset
    assert "<th>name</th>" in offset and "<th>fee</th>" in offset
    assert "<caption>the SQL's rows</caption>" in unescape(offset)
    assert "<caption>the reference's rows</caption>" in unescape(offset)
    hostile = _row(page, "hostile")
    assert "reference: Incorrect" in hostile and "<caption>singer</caption>" in hostile
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile
    assert "reference:" not in _row(page, "free")
