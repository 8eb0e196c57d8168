"""The bench report's header: which sqlglot build it measured (bench/run.py)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest
import sqlglot.parser

from bench.run import _markdown, sqlglot_build


def _report(**extra: Any) -> dict[str, Any]:
    return {
        "run_at": "now",
        "machine": "here",
        "python": "3.11",
        "sqlglot": "30.30.0",
        "corpus_records": 2402,
        "sections": {},
        **extra,
    }


def test_the_build_is_read_from_the_loaded_parser() -> None:
    try:
        metadata.version("sqlglotc")
        installed = True
    except metadata.PackageNotFoundError:
        installed = False
    assert sqlglot_build() == ("compiled (sqlglotc)" if installed else "pure Python")


def test_a_parser_loaded_from_source_is_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlglot.parser, "__file__", "/site-packages/sqlglot/parser.py")
    assert sqlglot_build() == "pure Python"
    monkeypatch.setattr(
        sqlglot.parser, "__file__", "/sqlglot/parser.cpython-311-x86_64-linux-gnu.so"
    )
    assert sqlglot_build() == "compiled (sqlglotc)"


def test_the_header_names_the_build() -> None:
    text = _markdown(_report(sqlglot_build="pure Python"))
    assert "(Python 3.11, sqlglot 30.30.0, pure Python)" in text
    # A report written before the build was recorded still renders.
    assert "(Python 3.11, sqlglot 30.30.0)" in _markdown(_report())
