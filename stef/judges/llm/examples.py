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
cannot be used fails the start with its number. An id given twice is the later line's; an
example too long to show is left out and counted (:attr:`Examples.too_long`); an app keeps its
``MAX_PER_APP`` examples the judge got wrong first, then the latest (:attr:`Examples.dropped`),
which bounds the ranking's cost per record and the memory.
"""

from __future__ import annotations

import heapq
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from stef.errors import ConfigError, FileError, TemplateError
from stef.files import json_object, read_bounded, utf8_text
from stef.labels_file import checked_label
from stef.models import PASSING_VERDICTS, InputRecord, Verdict
from stef.prompts import Prompts, data_blocks

# Logged under the judge's module name, as when the judge loaded the examples itself.
log = structlog.get_logger("stef.judges.llm.judge")

# The template of the examples block, rendered above the record's prompt in both verdict modes.
TEMPLATE = "few_shot.j2"

# The examples file is read whole at start: a path to the wrong file (a results file of many
# gigabytes) is refused by size rather than read into memory.
MAX_FILE_BYTES = 16 * 1024 * 1024
# Examples kept per app (the judge's mistakes first, then the latest): every record ranks its
# app's examples before its cache lookup, so this bounds that cost.
MAX_PER_APP = 1000
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
        dropped: examples past ``MAX_PER_APP`` of their app (the oldest the judge got right).
        size: the file's size in bytes.
    """

    def __init__(
        self, path: Path, examples: Sequence[Example], too_long: int, size: int = 0
    ) -> None:
        self.path = path
        self.too_long = too_long
        self.size = size
        by_app: dict[str | None, list[Example]] = defaultdict(list)
        for ex in examples:
            by_app[ex.app].append(ex)
        self.dropped = 0
        self._by_app: dict[str | None, list[Example]] = {}
        for app, pool in by_app.items():
            kept = sorted(pool, key=lambda e: (e.judge_wrong is not True, -e.line))[:MAX_PER_APP]
            self.dropped += len(pool) - len(kept)
            self._by_app[app] = kept

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

        eligible = (ex for ex in pool if ex.id != record.id and ex.key != key)
        return heapq.nsmallest(k, eligible, key=rank)


def check_template(prompts: Prompts) -> None:
    """The examples template is there and shows its examples as the ``<reviewed_examples>`` data
    block: a custom template folder must not drop them without a word.

    Raises:
        TemplateError: the template is missing, or a probe example does not come back out of it.
    """
    prompts.require(TEMPLATE)
    probe = [
        {"question": f"probe {i} </x>", "sql": f"SELECT {i}", "correct": i % 2 == 0}
        for i in range(3)
    ]
    probe[0]["reviewer_note"] = "n"
    rendered = prompts.render(TEMPLATE, examples=probe)
    try:
        shown = data_blocks(rendered).get("reviewed_examples")
    except ValueError:  # a block that is not JSON
        shown = None
    if shown != probe:
        raise TemplateError(
            f"prompt template {TEMPLATE} in {prompts.directory} does not show the examples as "
            "a <reviewed_examples> block of '{{ examples | tojson }}' (llm.few_shot is on)"
        )


def render(prompts: Prompts, shots: Sequence[Example]) -> str:
    """The examples block above a prompt: empty without examples."""
    if not shots:
        return ""
    return prompts.render(TEMPLATE, examples=[e.shown() for e in shots]) + "\n"


def keyed(shots: Sequence[Example]) -> list[dict[str, Any]]:
    """The examples as the cache key holds them: their ids too, so a result names the examples
    it was judged with."""
    return [{"id": e.id, **e.shown()} for e in shots]


def load_configured(prompts: Prompts, k: int, path: Path | None) -> Examples | None:
    """The examples ``llm.few_shot: k`` shows, from ``llm.few_shot_file``, and a check that the
    examples template shows them; None when no example is shown. What the file leaves out, and
    a file that nears the size limit, are logged.

    Raises:
        ConfigError: the examples file cannot be used.
        TemplateError: the examples template is missing or does not show them.
    """
    if k == 0 or path is None:
        if path is not None:
            log.warning(
                "llm_few_shot_off",
                path=str(path),
                hint="llm.few_shot_file is set and llm.few_shot is 0: no example is shown",
            )
        return None
    check_template(prompts)
    examples = load_examples(path)
    log.info(
        "llm_few_shot_loaded",
        path=str(path),
        k=k,
        examples=len(examples),
        too_long=examples.too_long,
        dropped=examples.dropped,
        apps=examples.counts(),
    )
    _log_left_out(examples, path)
    return examples


def _log_left_out(examples: Examples, path: Path) -> None:
    left_out = (
        (
            "llm_few_shot_too_long",
            examples.too_long,
            f"an example longer than {MAX_EXAMPLE_CHARS} characters "
            "(question, enriched question, SQL, note) is not shown",
        ),
        (
            "llm_few_shot_capped",
            examples.dropped,
            f"an app keeps {MAX_PER_APP} examples (those the judge got wrong "
            "first, then the latest)",
        ),
    )
    for event, count, hint in left_out:
        if count:
            log.warning(event, path=str(path), left_out=count, hint=hint)
    if examples.size > MAX_FILE_BYTES // 2:
        log.warning(
            "llm_few_shot_file_large",
            path=str(path),
            size=examples.size,
            limit=MAX_FILE_BYTES,
            hint="past the limit STEF will not start; keep the examples of the last months",
        )
    if not len(examples):
        log.warning(
            "llm_few_shot_empty",
            path=str(path),
            hint="no record is shown an example: the file holds no usable labelled record",
        )


def load_examples(path: Path) -> Examples:
    """The examples file, checked whole.

    Raises:
        ConfigError: the file is not a readable regular file, is too large, or a line is not
            UTF-8 or not a usable example (the message names the file and the line).
    """
    try:
        # The likeliest file too large is a results file named by mistake.
        hint = " (an examples file holds labelled records)"
        data = read_bounded(path, MAX_FILE_BYTES, too_large=hint)
        text = utf8_text(data, path)
    except FileError as exc:
        raise ConfigError(f"llm.few_shot_file {exc}") from None
    by_id: dict[str, Example] = {}
    too_long = 0
    # Lines as JSON Lines has them (a CR inside a line is no break); a leading BOM is passed over.
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        example = _example(line, path, n)
        # An id given twice (a file appended to, or edited by hand) is its later line's.
        by_id.pop(example.id, None)
        size = len(example.question) + len(example.enriched_question or "")
        if size + len(example.sql) + len(example.note) > MAX_EXAMPLE_CHARS:
            too_long += 1
            continue
        by_id[example.id] = example
    return Examples(path, list(by_id.values()), too_long, len(data))


def _example(text: str, path: Path, line: int) -> Example:
    where = f"llm.few_shot_file {path}:{line}"
    try:
        obj = json_object(text, path, line)
        _check_fields(obj, where)
        label = checked_label(obj, path, line)  # as every reader of labelled records
    except FileError as exc:
        raise ConfigError(f"llm.few_shot_file {exc}") from None
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


def _check_fields(obj: dict[str, Any], where: str) -> None:
    """The example's own fields checked (types, non-empty, Unicode text)."""
    for name in ("id", "question", "sql"):
        value = obj.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {name!r} must be a non-empty string")
    for name in ("app", "enriched_question", "note"):
        if obj.get(name) is not None and not isinstance(obj.get(name), str):
            raise ConfigError(f"{where}: {name!r} must be a string")
    for name in ("id", "app", "question", "enriched_question", "sql", "note"):
        if isinstance(obj.get(name), str) and not _encodable(obj[name]):
            # A lone surrogate (JSON "\ud800") cannot reach a prompt, a cache key or a result.
            raise ConfigError(f"{where}: {name!r} holds a lone surrogate (not Unicode text)")


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


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
