"""The references file as an operator may get it wrong: every case is refused at start with the
file and line, or (an empty file) said in a warning, never left to judge records silently."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from stef.errors import ConfigError
from stef.io.references import load_references, max_line_bytes
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings
from stef.stages.validate import Limits

QUESTION = "How many singers are from France?"


def _pipeline(refs: Path, **settings: object) -> Pipeline:
    config = Settings(references=refs, **settings)  # type: ignore[arg-type]
    return build_pipeline(config, load_rules(None), build_backend(config))


def _write(path: Path, *lines: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_gold_sql_longer_than_a_record_s_own_may_be_is_refused(tmp_path: Path) -> None:
    """A 1 MB gold_sql took 45 s of the comparison for each record asking its question (10 MB:
    over a minute and 2.2 GB); a record's own gold_sql is bounded by limits.max_sql_chars."""
    gold = "SELECT COUNT(*) FROM singer WHERE country IN (" + "1, " * 40 + "2)"
    line = {"question": QUESTION, "gold_sql": gold}
    refs = _write(tmp_path / "refs.jsonl", {"question": "q", "gold_sql": "SELECT 1"}, line)
    _pipeline(refs, limits=Limits(max_sql_chars=len(gold)))
    with pytest.raises(ConfigError, match=rf"refs\.jsonl:2: gold_sql is {len(gold)} characters"):
        _pipeline(refs, limits=Limits(max_sql_chars=len(gold) - 1))


def test_a_question_given_two_gold_sql_is_refused_with_both_lines(tmp_path: Path) -> None:
    """The last line won silently: records of that question were judged against one of two
    answers, chosen by the order of the lines."""
    first = {"question": QUESTION, "gold_sql": "SELECT COUNT(*) FROM singer"}
    again = {"question": QUESTION.upper(), "gold_sql": first["gold_sql"]}
    other = {"question": f"  {QUESTION.lower()}", "gold_sql": "SELECT 1 FROM singer"}
    refs = _write(tmp_path / "refs.jsonl", first, {"question": "q", "gold_sql": "SELECT 2"}, again)
    _pipeline(refs)  # the same question with the same gold_sql twice is no conflict
    _write(refs, first, {"question": "q", "gold_sql": "SELECT 2"}, again, other)
    with pytest.raises(ConfigError, match=r"refs\.jsonl:4: the question of line 1 again"):
        _pipeline(refs)


def test_an_empty_references_file_is_said(tmp_path: Path) -> None:
    """An empty file (a copy that failed, the wrong path) left reference mode off without a word."""
    refs = tmp_path / "refs.jsonl"
    refs.write_text("\n \n", encoding="utf-8")
    with capture_logs() as logs:
        _pipeline(refs)
    assert [e["path"] for e in logs if e["event"] == "references_empty"] == [str(refs)]


def test_a_dialect_on_a_line_is_said_once(tmp_path: Path) -> None:
    """A ``dialect`` key was passed over without a word: the reference is read in its record's
    dialect (the record's own, else its app's)."""
    lines = [
        {"question": "q", "gold_sql": "SELECT 1"},
        {"question": QUESTION, "gold_sql": "SELECT COUNT(*) FROM singer", "dialect": "duckdb"},
        {"question": "r", "gold_sql": "SELECT 2", "dialect": "duckdb"},
    ]
    refs = _write(tmp_path / "refs.jsonl", *lines)
    with capture_logs() as logs:
        _pipeline(refs)
    said = [e for e in logs if e["event"] == "references_dialect_ignored"]
    assert [(e["path"], e["line"]) for e in said] == [(str(refs), 2)]
    with capture_logs() as logs:
        _pipeline(_write(refs, *lines[:1]))
    assert not [e for e in logs if e["event"] == "references_dialect_ignored"]


def test_a_line_too_long_for_any_gold_sql_is_refused_before_it_is_read_whole(
    tmp_path: Path,
) -> None:
    """A 200 MB line (one gold_sql) took 700 MB before its gold_sql was found too long: a line
    longer than a gold_sql and a question at their limits can need is refused at its number
    once that much of it is read."""
    bound = max_line_bytes(40, 20)
    line = json.dumps({"question": QUESTION[:20], "gold_sql": "SELECT COUNT(*) FROM singer"})
    fits = line[:-1] + " " * (bound - len(line)) + "}"  # exactly the bound: taken
    refs = tmp_path / "refs.jsonl"
    refs.write_text(f"{line}\n{fits}\n", encoding="utf-8")
    assert len(load_references(refs, 40, max_question_chars=20)) == 1
    huge = json.dumps({"question": "q", "gold_sql": "SELECT " + "1+" * (4 << 20) + "1"})
    refs.write_text(f"{fits}\n{huge}\n", encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=rf"refs\.jsonl:2: longer than {bound} bytes"):
            load_references(refs, 40, max_question_chars=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # the line is 8 MB
