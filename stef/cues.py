"""Patterns that skip the text they cannot match: a pattern's cues are literal words that every
match of it contains, found once from the pattern itself; text that holds none of them is not
scanned.

Python's regex engine finds no first character to look for in a case-insensitive pattern, nor in
one that starts with a word boundary, so it tries such a pattern at every position of the text.
The question and enrichment readers run dozens of them a record (``\\b(?:top|bottom|...)\\b``,
``re.I``), most on text that holds none of their words: counted, the regex engine was a third of
the deterministic path's instructions.

The cues decide nothing: :class:`Cued` returns exactly what its pattern returns, and only skips
the scan where the pattern has no match to find. A cue is a run of literal characters that any
match consumes (a word of every alternative of a branch, a repeat of at least one, a group);
the text is folded to lower case to look for it, so the test holds with or without ``re.I``. Text
that is not ASCII is always scanned: under ``re.I`` some non-ASCII characters match ASCII
letters (the Kelvin sign a ``k``, the long s an ``s``). A pattern with no cue (it can match
without any literal, as ``\\w+est`` can) is always scanned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

try:  # the standard library's own parser of patterns (3.11 and later)
    from re import _constants as _ops  # type: ignore[attr-defined]
    from re import _parser as _parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - another Python: every pattern is scanned, as before
    _ops = _parse = None


class Cued:
    """``regex`` with its cues (:func:`cues_of`): ``search`` and ``finditer`` as the pattern's own,
    run only on text that holds a cue of each set.

    Attributes:
        regex: the compiled pattern.
        cues: sets of lower-case literals; every match contains one of each set. Empty (none
            found): the text is always scanned.
    """

    __slots__ = ("cues", "regex")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex = regex
        self.cues = cues_of(regex)

    def _may_match(self, text: str) -> bool:
        # Anything but a plain str goes to the regex as it is (and fails there as it did).
        if not self.cues or type(text) is not str or not text.isascii():
            return True
        folded = text.lower()
        # Each cue looked for with ``in`` (a substring search in C): on the readers' texts half
        # the time of one alternation of the set's literals, and of a generator over the sets.
        for cues in self.cues:
            for cue in cues:
                if cue in folded:
                    break
            else:
                return False
        return True

    def search(self, text: str) -> re.Match[str] | None:
        return self.regex.search(text) if self._may_match(text) else None

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.regex.finditer(text) if self._may_match(text) else iter(())

    def __repr__(self) -> str:
        return f"Cued({self.regex!r})"


def cued(pattern: str, flags: int = 0) -> Cued:
    """``re.compile(pattern, flags)``, skipping text without its cues (:class:`Cued`)."""
    return Cued(re.compile(pattern, flags))


def cues_of(regex: re.Pattern[str]) -> tuple[frozenset[str], ...]:
    """Sets of lower-case literals such that every match of ``regex`` contains one of each; a set
    that only a single letter or digit gives is left out (nearly every text holds one). Empty
    when none is found."""
    if _parse is None:
        return ()
    try:
        found = _candidates(list(_parse.parse(regex.pattern, regex.flags)))
        return tuple(dict.fromkeys(c for c in found if _selective(c)))
    except Exception:  # a parser that changed, a pattern it cannot read: always scanned
        return ()


def _selective(cues: frozenset[str]) -> bool:
    return all(len(cue) > 1 or not cue.isalnum() for cue in cues)


def _required(items: Any) -> frozenset[str] | None:
    """A cue set of a sequence of parsed items (the one whose shortest cue is longest): any one
    item's will do."""
    best: frozenset[str] | None = None
    for found in _candidates(list(items)):
        if best is None or min(map(len, found)) > min(map(len, best)):
            best = found
    return best


def _candidates(items: list[tuple[Any, Any]]) -> Iterator[frozenset[str]]:
    """Each cue set one item of the sequence (or a run of literal items) gives: a match of the
    sequence consumes what each of its items matches."""
    i = 0
    while i < len(items):
        op, av = items[i]
        if op is _ops.LITERAL:
            run = []
            while i < len(items) and items[i][0] is _ops.LITERAL:
                run.append(chr(items[i][1]))
                i += 1
            text = "".join(run)
            if text.isascii():
                yield frozenset({text.lower()})
            continue
        found = _item_cues(op, av)
        if found is not None:
            yield found
        i += 1


def _item_cues(op: Any, av: Any) -> frozenset[str] | None:
    """The cues of one item that consumes text: a group's, every branch's (all of them, or
    none), a repeat's of at least one; none for the rest (a class, a lookaround, a boundary)."""
    if op is _ops.SUBPATTERN:
        return _required(av[-1])
    if op is _ops.BRANCH:
        branches = [_required(branch) for branch in av[1]]
        if any(b is None for b in branches):
            return None
        return frozenset().union(*(b for b in branches if b is not None))
    if op in (_ops.MAX_REPEAT, _ops.MIN_REPEAT, _ops.POSSESSIVE_REPEAT) and av[0] >= 1:
        return _required(av[2])
    return None
