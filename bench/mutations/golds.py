"""The gold queries of the benchmark, and what their question names.

A gold is a labelled record's ``gold_sql`` with the record's question and enrichment, one per
(question, gold_sql) pair. It is parsed once in SQLite's dialect (the data is BIRD and Spider);
the benchmark judges sqlglot's rendering of that tree as "the gold", so that each variant differs
from it by its one change and not by sqlglot's formatting too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

DIALECT = "sqlite"

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")


class GoldsError(Exception):
    """The golds file cannot be read (absent, not JSON lines): said in one line."""


@dataclass(frozen=True)
class Gold:
    """One gold query and the question it answers.

    Attributes:
        id: the first labelled record's id that carries this (question, gold_sql).
        question: the record's question.
        enriched_question: its enrichment (BIRD's evidence), or None.
        gold_sql: the gold as written in the labelled file.
        db: the record's database (``db_id``), or None; values are pooled per database.
    """

    id: str
    question: str
    enriched_question: str | None
    gold_sql: str
    db: str | None

    @property
    def text(self) -> str:
        """The question and its enrichment, lower-cased: what the question names."""
        return f"{self.question} {self.enriched_question or ''}".lower()


def read_golds(path: Path) -> tuple[list[Gold], int]:
    """The golds of a labelled JSON-lines file in file order, deduplicated by (question,
    gold_sql); with the number of records that had no ``gold_sql``.

    Raises:
        GoldsError: the file is absent or a line is not a JSON object.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GoldsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    seen: set[tuple[str, str]] = set()
    golds: list[Gold] = []
    without = 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise GoldsError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(rec, dict):
            raise GoldsError(f"{path}:{n}: not a JSON object")
        gold, question = rec.get("gold_sql"), rec.get("question")
        if not isinstance(gold, str) or not gold.strip() or not isinstance(question, str):
            without += 1
            continue
        if (question, gold) in seen:
            continue
        seen.add((question, gold))
        enriched = rec.get("enriched_question")
        golds.append(
            Gold(
                id=str(rec.get("id", f"line-{n}")),
                question=question,
                enriched_question=enriched if isinstance(enriched, str) else None,
                gold_sql=gold,
                db=str(rec["db_id"]) if rec.get("db_id") is not None else None,
            )
        )
    return golds, without


def parse(sql: str) -> exp.Expr | None:
    """One statement in SQLite's dialect, or None when sqlglot cannot read it."""
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except SqlglotError:
        return None
    return tree if isinstance(tree, exp.Query) else None


def render(tree: exp.Expr) -> str:
    return tree.sql(dialect=DIALECT)


def numbers_named(text: str) -> set[float]:
    """The numbers written in digits in the question or enrichment."""
    return {float(m) for m in _NUMBER.findall(text)}


def number_of(lit: exp.Literal) -> float | None:
    """A literal's numeric value: a number, or a string that is only a number."""
    try:
        return float(lit.this)
    except ValueError:
        return None


def is_named(lit: exp.Literal, text: str, numbers: set[float]) -> bool:
    """Whether the question or enrichment names the literal's value: a number written there,
    or a string (LIKE wildcards stripped) found there, case-folded."""
    value = number_of(lit)
    if value is not None and value in numbers:
        return True
    if not lit.is_string:
        return False
    word = lit.this.strip("%").strip().lower()
    return len(word) >= 1 and value is None and _contains(text, word)


def _contains(text: str, word: str) -> bool:
    """``word`` in ``text``, not inside a longer word (so 'M' is not found in 'many')."""
    start = text.find(word)
    while start >= 0:
        before = text[start - 1] if start else " "
        end = start + len(word)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() and word[0].isalnum()) and not (
            after.isalnum() and word[-1].isalnum()
        ):
            return True
        start = text.find(word, start + 1)
    return False
