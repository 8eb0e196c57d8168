"""Few-shot from corrections (``llm.few_shot: k``): labelled records of the same app shown to the
model before the record it judges, the ones the judge got wrong first.

The examples file is the labelled format ``stef calibrate`` reads (what ``stef canary add``
writes from ``stef review`` labels), one JSON object a line::

    {"id": "r-17", "app": "sales", "question": "...", "enriched_question": "...",
     "sql": "SELECT ...", "label": false, "note": "counts refunds too",
     "judge_verdict": "Correct", "judge_p_correct": 0.81}

``id``, ``question``, ``sql`` and ``label`` (true or false) are required; ``note`` is the
reviewer's, shown to the model; ``judge_verdict`` (or, without it, ``judge_p_correct``) is what the
judge said when the record was reviewed, and decides whether the judge got it wrong.

For each record, the examples are those of its app (an example without ``app`` serves records
without one), never the record itself (same ``id``, or the same question and SQL). They are
ranked: the judge got it wrong first, then by the words their question shares with the record's
(Jaccard), then the later line of the file first. The file is read once, at start; a line that
cannot be used fails the start with its number, and an example too long to show is left out and
counted (:attr:`Examples.too_long`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stef.errors import ConfigError
from stef.models import PASSING_VERDICTS, InputRecord, Verdict

# The examples file is read whole at start: a path to the wrong file (a results file of many
# gigabytes) is refused by size rather than read into memory.
MAX_FILE_BYTES = 64 * 1024 * 1024
# One example's text (question, enriched question, SQL, note) in characters: every example is
# paid for in every prompt it is shown in, so one that would crowd the record out is left out.
MAX_EXAMPLE_CHARS = 4000
_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Example:
    """One labelled record, as the prompt shows it and as the ranking needs it.

    Attributes:
        line: its line in the file (later lines are newer: the tie-break).
        judge_wrong: the judge's verdict when it was reviewed disagreed with the label; None
            when the line does not say what the judge said.
    """

    id: str
    app: str | None
    question: str
    enriched_question: str | None
    sql: str
    label: bool
    note: str
    judge_wrong: bool | None
    line: int
    words: frozenset[str]
    key: tuple[str, str]

    def shown(self) -> dict[str, Any]:
        """The example as the prompt's data block holds it."""
        out: dict[str, Any] = {"question": self.question}
        if self.enriched_question:
            out["enriched_question"] = self.enriched_question
        out["sql"] = self.sql
        out["correct"] = self.label
        if self.note:
            out["reviewer_note"] = self.note
        return out


class Examples:
    """The examples of one file, by app. Read-only after load, so thread-safe.

    Attributes:
        path: the file.
        too_long: lines left out because their text is longer than ``MAX_EXAMPLE_CHARS``.
    """

    def __init__(self, path: Path, examples: Sequence[Example], too_long: int) -> None:
        self.path = path
        self.too_long = too_long
        self._by_app: dict[str | None, list[Example]] = defaultdict(list)
        for ex in examples:
            self._by_app[ex.app].append(ex)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_app.values())

    def counts(self) -> dict[str, dict[str, int]]:
        """Per app (``""`` for none): the examples, and those the judge got wrong."""
        return {
            app or "": {"examples": len(v), "judge_wrong": sum(e.judge_wrong is True for e in v)}
            for app, v in sorted(self._by_app.items(), key=lambda kv: kv[0] or "")
        }

    def pick(self, record: InputRecord, k: int) -> list[Example]:
        """The ``k`` examples to show with ``record`` (fewer when its app has fewer)."""
        pool = self._by_app.get(record.app)
        if not pool or k <= 0:
            return []
        key = _key(record.question, record.sql)
        words = _words(f"{record.question} {record.enriched_question or ''}")

        def rank(ex: Example) -> tuple[bool, float, int]:
            return (ex.judge_wrong is not True, -_jaccard(words, ex.words), -ex.line)

        eligible = [ex for ex in pool if ex.id != record.id and ex.key != key]
        return sorted(eligible, key=rank)[:k]


def load_examples(path: Path) -> Examples:
    """The examples file, checked whole.

    Raises:
        ConfigError: the file is not a readable regular file, is too large, is not UTF-8, or a
            line is not a usable example (the message names the file and the line).
    """
    where = f"llm.few_shot_file {path}"
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{where}: not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{where}: {info.st_size} bytes is larger than {MAX_FILE_BYTES} "
            "(an examples file holds labelled records, not results)"
        )
    try:
        with path.open(encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    examples: list[Example] = []
    too_long = 0
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        example = _example(text, f"{where}:{n}", n)
        if (
            len(example.question)
            + len(example.enriched_question or "")
            + len(example.sql)
            + len(example.note)
            > MAX_EXAMPLE_CHARS
        ):
            too_long += 1
            continue
        examples.append(example)
    return Examples(path, examples, too_long)


def _example(text: str, where: str, line: int) -> Example:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # ValueError: not JSON, or an integer of too many digits; RecursionError: too deep.
        raise ConfigError(f"{where}: not JSON ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: not a JSON object")
    for name in ("id", "question", "sql"):
        value = obj.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {name!r} must be a non-empty string")
    label = obj.get("label")
    if not isinstance(label, bool):
        raise ConfigError(f"{where}: 'label' must be true or false (a skipped record is none)")
    for name in ("app", "enriched_question", "note"):
        if obj.get(name) is not None and not isinstance(obj.get(name), str):
            raise ConfigError(f"{where}: {name!r} must be a string")
    return Example(
        id=obj["id"],
        app=obj.get("app") or None,
        question=obj["question"],
        enriched_question=obj.get("enriched_question") or None,
        sql=obj["sql"],
        label=label,
        note=(obj.get("note") or "").strip(),
        judge_wrong=_judge_wrong(obj, label, where),
        line=line,
        words=_words(f"{obj['question']} {obj.get('enriched_question') or ''}"),
        key=_key(obj["question"], obj["sql"]),
    )


def _judge_wrong(obj: dict[str, Any], label: bool, where: str) -> bool | None:
    """Whether the judge's verdict at review time disagreed with the label."""
    verdict, p = obj.get("judge_verdict"), obj.get("judge_p_correct")
    if verdict is not None:
        try:
            passed = Verdict(verdict) in PASSING_VERDICTS
        except ValueError:
            known = ", ".join(v.value for v in Verdict)
            raise ConfigError(f"{where}: 'judge_verdict' must be one of {known}") from None
        return passed != label
    if p is not None:
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
            raise ConfigError(f"{where}: 'judge_p_correct' must be a number from 0 to 1")
        return (p >= 0.5) != label
    return None


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if len(w) > 2)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def folded(text: str) -> str:
    """Text up to case and spacing."""
    return _SPACE.sub(" ", text).strip().casefold()


def _key(question: str, sql: str) -> tuple[str, str]:
    """A record's text up to case and spacing: the same record under another id."""
    return (folded(question), folded(sql))
