"""Patterns that skip text without their cues (stef/cues.py): the cues found from a pattern, and
every cued pattern of the readers answering exactly as its own regex does, on any text."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stef.cues import Cued, cued, cues_of
from tests.conftest import ROOT, SHARED_DATA


def _cued_in(value: object, name: str) -> Iterator[tuple[str, Cued]]:
    if isinstance(value, Cued):
        yield name, value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _cued_in(item, f"{name}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _cued_in(item, f"{name}[{key!r}]")


def _all_cued() -> list[tuple[str, Cued]]:
    """Every cued pattern of every module of the package that builds one."""
    found = []
    for path in sorted((ROOT / "stef").rglob("*.py")):
        if path.name != "cues.py" and "cued(" in path.read_text(encoding="utf-8"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for name, value in vars(importlib.import_module(module)).items():
                found.extend(_cued_in(value, f"{module}.{name}"))
    return found


CUED = _all_cued()


@pytest.mark.parametrize(
    ("pattern", "flags", "expected"),
    [
        # Every word of a branch; a boundary and a lookbehind consume nothing.
        (r"(?<!at )\b(?:top|bottom)s?\b", re.I, [{"top", "bottom"}]),
        # Each literal item is its own set: a match holds one of each.
        (r"\b(count|sum|avg)\s*\(", re.I, [{"count", "sum", "avg"}, {"("}]),
        # A repeat of at least one, a group.
        (r"(?:ab)+cd", 0, [{"ab"}, {"cd"}]),
        # An optional part, or a branch with a way around every literal, gives none.
        (r"(?:x|y){0,2}abc", 0, [{"abc"}]),
        (r"top|\d+", 0, []),
        (r"a|", 0, []),
        # A single letter or digit is in nearly every text: left out; a sign is kept.
        (r"a\d+", 0, []),
        (r"\d+%", 0, [{"%"}]),
        # Upper case is folded: the text is folded too.
        (r"\bQ[1-4]\b", 0, []),
        (r"\bTOTAL\b", 0, [{"total"}]),
        # Non-ASCII literals give no cue (under re.I they match ASCII letters).
        (r"\u212aey|key", re.I, []),
    ],
)
def test_cues_are_the_literals_every_match_holds(
    pattern: str, flags: int, expected: list[set[str]]
) -> None:
    assert [set(c) for c in cues_of(re.compile(pattern, flags))] == expected


def test_the_readers_keyword_patterns_are_cued() -> None:
    # Not a count to keep: the readers' costliest scans must not lose their cues unseen.
    names = {name for name, c in CUED if c.cues}
    for expected in (
        "stef.stages.normalize._TOP_K",
        "stef.question._TIME_WINDOW",
        "stef.question._WORD_NUMBER",
        "stef.judges.heuristic.checks._PERCENT",
        "stef.judges.heuristic.readings._SORT_WORDS",
    ):
        assert expected in names


def _spans(
    matches: Iterator[re.Match[str]],
) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(m.span(), m.groups()) for m in matches]


def _same(c: Cued, text: str) -> None:
    found, expected = c.search(text), c.regex.search(text)
    assert (found and (found.span(), found.groups())) == (
        expected and (expected.span(), expected.groups())
    ), (c, text)
    assert _spans(c.finditer(text)) == _spans(c.regex.finditer(text)), (c, text)


# Words of every cue, in any case, with the characters the patterns turn on around them (and
# the non-ASCII letters that re.I matches to ASCII ones: the Kelvin sign, the long s, a dotted I).
_PIECES = [
    *sorted({cue for _, c in CUED for cues in c.cues for cue in cues}),
    " ", "  ", "\n", ",", ".", "?", "'", '"', "`", "(", ")", "%", "-", "/", "$", "=", ">", "<",
    "1", "12", "2019", "2019-09-01", "7/19/2010", "Q3", "than", "the", "of", "by", "est",
    "\u212a", "\u017f", "\u0130", "\u00df", "\u00e9",
]  # fmt: skip
_cased = st.sampled_from(_PIECES).flatmap(
    lambda p: st.sampled_from([p, p.upper(), p.title(), p.swapcase()])
)
texts = st.one_of(
    st.lists(_cased, max_size=30).map("".join),
    st.lists(_cased, max_size=15).map(" ".join),
    st.text(max_size=60),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_a_cued_pattern_finds_what_its_regex_finds(text: str) -> None:
    for _, c in CUED:
        _same(c, text)


def test_text_that_is_not_ascii_is_always_scanned() -> None:
    # Under re.I the long s matches an s, and stays itself in lower case: the text holds no cue.
    c = cued(r"\bsum\b", re.I)
    assert c.cues and c.search("\u017fum") is not None
    assert c.search("SUM") is not None and c.search("summary") is None


def test_what_is_not_text_fails_as_the_regex_fails() -> None:
    c = cued(r"\bsum\b", re.I)
    for value in (None, 12, b"sum"):
        with pytest.raises(TypeError):
            c.search(value)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            list(c.finditer(value))  # type: ignore[arg-type]


def test_the_readers_texts_read_as_before() -> None:
    """Every question and enrichment of the sample log (and of the dev set, when present)."""
    files = [ROOT / "examples" / "agent_log.jsonl", SHARED_DATA / "judge-dev.jsonl"]
    for path in (p for p in files if p.exists()):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            for key in ("question", "enriched_question"):
                text = record.get(key)
                if isinstance(text, str):
                    for _, c in CUED:
                        _same(c, text)
