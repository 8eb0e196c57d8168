"""Reading a question (ground floor, beside :mod:`stef.sql`): the literal values a question
names (quoted strings, dates, quarters, years, numbers with their comparison words, capitalized
names) and whole-word tests. The heuristic judge builds its question spec from them; the verify
stage checks every judge's filters against them. No pipeline imports.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from stef.cues import cued
from stef.sql.canonical import norm_value

# Time units of a window relative to now ("last 30 days", "the previous quarter"): such a phrase
# is a date filter, never a top-k count (the normalization stage reads them too).
TIME_UNITS = r"(?:second|minute|hour|day|week|month|quarter|year|decade)s?"

# ------------------------------------------------------------------------------ question words

# Words that start a question or join phrases: never a filter value on their own.
_QUESTION_STARTERS = {
    "what", "which", "who", "whom", "whose", "how", "when", "where", "why", "list", "show",
    "give", "find", "name", "count", "calculate", "compute", "return", "display", "get", "tell",
    "provide", "identify", "please", "among", "of", "in", "for", "from", "is", "are", "was",
    "were", "do", "does", "did", "the", "a", "an", "i", "can", "could", "would", "state",
    "indicate", "mention", "describe", "determine", "by", "on", "at", "with", "and", "or", "if",
    "what's", "it", "between", "during", "after", "before", "since", "per", "each", "all", "any",
    "sum", "total", "average", "percentage", "ratio", "top", "as", "to", "please,", "also",
    "then", "this", "that", "these", "those", "there", "their", "its", "his", "her", "they", "we",
    "you", "my", "our", "id", "ids", "sql", "select", "not", "no", "only", "q", "yes"
}  # fmt: skip
_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
# A single quote opens a value only where a word does not run into it, and closes one only where no
# word follows: the apostrophes of "doesn't" or "O'Brien's" are not quotes.
# Inside single quotes, a doubled quote is SQL's escaped apostrophe ('Ancestor''s Chosen').
_QUOTED = cued(r"(?<!\w)'((?:[^'\n]|''){1,200})'(?!\w)|\"([^\"\n]{1,200})\"|`([^`\n]{1,200})`")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}(?:-\d{2})?)\b")
# "2010/7/19", "7/19/2010" (month first unless the first number cannot be a month), and the
# clock times beside them ("21:20:00", "7:39 PM"), whose digits are not filter numbers.
_SLASH_DATE = cued(r"\b(\d{4})/(\d{1,2})/(\d{1,2})\b|\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s*[AP]\.?M\b\.?)?", re.I)
# "user No.58", "race no. 161", "#12": the number, not a name "No.58".
_NUMBERED = re.compile(r"(?<!\w)(?:no|nr|#)\.?\s?(\d+)\b", re.I)
_QUARTER = cued(r"\b(Q[1-4])\b(?:\s+(\d{4}))?")
_MONTH_YEAR = cued(r"\b(" + "|".join(_MONTHS) + r"),?\s+(\d{4})\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:[.,]\d+)*)(%?|[km](?![\w-]))(?![\w-])", re.I)
# A count in words right after a comparison ("at least five years", "less than twenty").
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "hundred": 100, "thousand": 1000,
}  # fmt: skip
_WORD_NUMBER = cued(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
# Tried in order: "no more than" and "no less than" before the "more than" / "less than" they end
# with.
_COMPARATORS = (
    # Symbols, as enrichments write them ("refers to salary > 5000").
    (cued(r"(>\s?=|=>|\u2265)\s*$"), ">="),
    (cued(r"(<\s?=|=<|\u2264)\s*$"), "<="),
    (cued(r"(?<![<>=!-])>\s*$"), ">"),
    (cued(r"<\s*$"), "<"),
    (
        cued(r"(at\s+least|no\s+less\s+than|no\s+fewer\s+than|minimum\s+of|since)\s*$", re.I),
        ">=",
    ),
    (cued(r"(until|through|thru|no\s+later\s+than)\s*$", re.I), "<="),
    (cued(r"(at\s+most|no\s+more\s+than|up\s+to|maximum\s+of)\s*$", re.I), "<="),
    (
        cued(
            r"(more|greater|higher|larger|bigger|older|longer)\s+than\s*$|(over|above|exceeds?|"
            r"exceeding|after)\s*$",
            re.I,
        ),
        ">",
    ),
    (
        cued(
            r"(less|fewer|lower|smaller|younger|shorter)\s+than\s*$|(under|below|before)\s*$", re.I
        ),
        "<",
    ),
)
# Comparison words after the number ("50 or more", "3 or fewer").
_COMPARATORS_AFTER = (
    (
        cued(
            r"^%?\s*(?:\w+\s+)?(?:or|and)\s+(more|greater|higher|above|over|later|older|up)\b",
            re.I,
        ),
        ">=",
    ),
    (
        cued(
            r"^%?\s*(?:\w+\s+)?(?:or|and)\s+(less|fewer|lower|below|under|earlier|younger)\b",
            re.I,
        ),
        "<=",
    ),
)
# A full stop belongs to a name only inside it ("U.S", "St.Louis"): one followed by a space ends
# the sentence, and the next capital starts another name.
_NAME_WORD = r"[A-Z](?:[\w'&-]|\.(?=\w))*"
_ENTITY = re.compile(
    r"\b(" + _NAME_WORD + r"(?:\s+(?:(?:of|de|la|del|the|and|&|von|van)\s+)*" + _NAME_WORD + r")*)"
)
_SMALL_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# A time window relative to now ("in the last 30 days", "past three months", "the previous
# quarter"): a filter on a date, never a top-k count.
_TIME_WINDOW = cued(
    r"\b(?:last|past|previous|prior|preceding|recent|first)\s+"
    r"(?:(\d+|" + "|".join(_SMALL_NUMBERS) + r")\s+)?(" + TIME_UNITS + r")\b",
    re.I,
)
# A calendar period relative to now ("today", "this year", "year to date"): the day or the
# current week, month, quarter or year, as far as it has gone.
_PERIOD_NOW = cued(
    r"\b(today|yesterday)\b|\b(?:this|current)\s+(week|month|quarter|year)\b"
    r"|\b(year|month|quarter)[- ]to[- ]date\b|\b(ytd|mtd|qtd)\b",
    re.I,
)
_TO_DATE = {"ytd": "year", "mtd": "month", "qtd": "quarter"}
# A period that anchors a comparison or a state ("due before today", "as of today", "hired
# before this year", "other than today's"), not the days to keep.
_ANCHOR_BEFORE = re.compile(
    r"\b(?:before|after|until|till|since|as\s+of|prior\s+to|up\s+to|through|by|except|"
    r"excluding|including|than|vs\.?|versus|other\s+than|compared?\s+(?:with|to)|older|younger|"
    r"ago\s+from)\s+(?:the\s+)?$",
    re.I,
)
_TOP_K_NUMBER = cued(
    r"\b(?:top|bottom|best|worst)\s+(\d+)\b|\b(?:first|last)\s+(\d+)\b(?!\s+"
    + TIME_UNITS
    + r"\b)|\b(\d+)\s+(?:highest|lowest|most|least|"
    r"largest|smallest|biggest|best|worst|top)\b|\b(?:latest|newest|oldest|earliest|highest|lowest|"
    r"largest|smallest|top|most recent)\s+(\d+)\b(?!\s+" + TIME_UNITS + r"\b)",
    re.I,
)
# "Which 3 customers ... the most": with a superlative in the question, the count of what it ranks.
_SUPERLATIVE = cued(
    r"\b(?:highest|lowest|most|least|largest|smallest|biggest|fewest|latest|newest|oldest|"
    r"earliest|top|bottom|best|worst|\w{3,}est)\b",
    re.I,
)
_COUNTED = cued(
    r"\b(?:which|what|the|list|show|name|find|get)\s+(?:the\s+)?(\d+)\s+(?!"
    + TIME_UNITS
    + r"\b)[a-z]",
    re.I,
)


# "between 50 and 200", "from 2020 to 2022", "between 2024-03-01 and 2024-03-31": the first
# value is the range's inclusive start, the second its inclusive end.
_RANGE = cued(
    r"\b(?:between|from)\s+(?:\$\s*|')?(?P<lo>-?\d[\d,./:-]*\d|\d)\b.{0,12}?\s+(?:and|to|until|through|-)\s+"
    r"(?:\$\s*|')?(?P<hi>-?\d[\d,./:-]*\d|\d)\b",
    re.I,
)


# Every pattern of a date, a number or a range needs a digit (``\\d``, as they match it): text
# without one skips them (about half of the questions and enrichments of the dev set).
_DIGIT = re.compile(r"\d")


def _range_ops(text: str) -> dict[int, str]:
    """The start offset of each range bound in ``text`` -> its operator (``>=`` or ``<=``)."""
    ops: dict[int, str] = {}
    if not _DIGIT.search(text):
        return ops
    for m in _RANGE.finditer(text):
        ops[m.start("lo")] = ">="
        ops[m.start("hi")] = "<="
    return ops


def _stated_op(text: str, start: int, end: int) -> str:
    """The comparison the words around ``text[start:end]`` state for it (``=`` when none)."""
    # "above $500", "under € 20": the currency mark sits between the words and the number.
    before = text[max(0, start - 30) : start].rstrip(" $\u20ac\u00a3\u00a5")
    for pattern, cmp in _COMPARATORS:
        if pattern.search(before):
            return cmp
    after = text[end : end + 30]
    for pattern, cmp in _COMPARATORS_AFTER:
        if pattern.search(after):
            return cmp
    return "="


def in_words(value: str, text: str) -> bool:
    """Whether ``value`` occurs in ``text`` as whole words, not inside a longer word or number.

    ``'f'`` is not in "female", ``12`` is not in "120" nor in "12.5", ``eu`` is not in "europe".
    Both sides are expected case-folded.
    """
    return as_word(value, text, numbers=True)


def _word_char(ch: str) -> bool:
    """Regex ``\\w`` on one character (``str.isalnum`` is the same Unicode test, plus ``_``)."""
    return ch.isalnum() or ch == "_"


def as_word(value: str, text: str, *, numbers: bool = False) -> bool:
    """Whether ``value`` occurs in ``text`` with no word character on either side; with
    ``numbers``, not after ``1.`` / ``1,`` nor before ``.5`` / ``,5`` either.

    The test of ``(?<!\\w)(?<!\\d[.,])VALUE(?!\\w)(?![.,]\\d)`` without building and compiling one
    pattern per value (values are many and mostly seen once: the regex cache kept missing).
    """
    if not value:
        return False
    size, end_of_text = len(value), len(text)
    start = text.find(value)
    while start != -1:
        end = start + size
        before = text[start - 1] if start else ""
        after = text[end] if end < end_of_text else ""
        if not ((before and _word_char(before)) or (after and _word_char(after))):
            if not numbers:
                return True
            # Not part of a number either: "12" is not in "1.12" nor in "12,5".
            after_number = before in (".", ",") and start > 1 and text[start - 2].isdecimal()
            before_number = (
                after in (".", ",") and end + 1 < end_of_text and text[end + 1].isdecimal()
            )
            if not (after_number or before_number):
                return True
        start = text.find(value, start + 1)
    return False


@dataclass(frozen=True)
class Found:
    value: str
    text: str
    kind: str
    op: str = "="
    span: tuple[int, int] = (0, 0)


def _clean_entity(phrase: str) -> str:
    return phrase.strip(" .,;:!?'\"")


def question_literals(text: str) -> list[Found]:
    """Filter values named in a question: quoted strings, dates, quarters, years, numbers,
    capitalized entities. Top-k counts ("top 10") are not filters."""
    return list(_question_literals(text))


# What a reading pass gives: a value found, or a span taken without a value (a top-k count, a
# clock time) that no later pass may read as a value.
_Step = Found | tuple[int, int]


@lru_cache(maxsize=4096)
def _question_literals(text: str) -> tuple[Found, ...]:
    found: list[Found] = []
    # One byte per character of the text, set where a value (or a top-k count) was taken: a span
    # is tested against its own characters, not against every span taken before it (quadratic
    # in the number of values). Every span is a non-empty part of the text.
    taken = bytearray(len(text))
    ranges = _range_ops(text)
    for read in _PASSES:  # in order: an earlier pass's span is not read again
        for step in read(text, ranges):
            start, end = step.span if isinstance(step, Found) else step
            if isinstance(step, Found):
                if taken.find(1, start, end) != -1:
                    continue
                found.append(step)
            taken[start:end] = b"\x01" * (end - start)
    return tuple(found)


def _period(m: re.Match[str]) -> str:
    """A period relative to now as one value: ``today``, ``yesterday``, ``this month``."""
    if m.group(1):
        return m.group(1).casefold()
    unit = m.group(2) or m.group(3) or _TO_DATE[m.group(4).casefold()]
    return f"this {unit.casefold()}"


def _windows_and_counts(text: str, ranges: dict[int, str]) -> Iterator[_Step]:
    windows = list(_TIME_WINDOW.finditer(text))
    for m in _PERIOD_NOW.finditer(text):
        value = _period(m)
        if value == "today" and windows:
            continue  # "the last 7 days up to today": the window's end
        if _ANCHOR_BEFORE.search(text[max(0, m.start() - 24) : m.start()]):
            yield m.span()  # taken: not read again as a value either
            continue
        yield Found(value, m.group(0), "period", "=", m.span())
    for m in windows:
        number, unit = m.group(1), m.group(2).casefold().removesuffix("s")
        if number is None and m.group(0).casefold().startswith("first"):
            continue  # "the first day" is an ordinal, not a window
        count = _SMALL_NUMBERS.get((number or "1").casefold(), number or "1")
        yield Found(f"{count} {unit}", m.group(0), "window", ">=", m.span())
    if not _DIGIT.search(text):
        return
    for m in _TOP_K_NUMBER.finditer(text):
        yield m.span()
    if _SUPERLATIVE.search(text):
        for m in _COUNTED.finditer(text):
            yield m.span(1)


def _quoted(text: str, ranges: dict[int, str]) -> Iterator[_Step]:
    for m in _QUOTED.finditer(text):
        raw = next(g for g in m.groups() if g is not None)
        if m.group(1) is not None:
            raw = raw.replace("''", "'")
        if _ISO_DATE.fullmatch(raw) and m.start() + 1 in ranges:
            # "BETWEEN '2019-09-01' and '2019-09-30'": a bound of a range of days.
            yield Found(norm_value(raw), raw, "date", ranges[m.start() + 1], m.span())
        else:
            yield Found(norm_value(raw), raw, "value", span=m.span())


def _dates(text: str, ranges: dict[int, str]) -> Iterator[_Step]:
    if not _DIGIT.search(text):
        return
    yield from _hyphen_ranges(text)
    for m in _ISO_DATE.finditer(text):
        op = ranges.get(m.start()) or _stated_op(text, m.start(), m.end())
        yield Found(norm_value(m.group(1)), m.group(1), "date", op, m.span())
    for m in _SLASH_DATE.finditer(text):
        iso = _slash_date(m)
        if iso is not None:
            op = ranges.get(m.start()) or _stated_op(text, m.start(), m.end())
            yield Found(iso, m.group(0), "date", op, m.span())
    for m in _CLOCK.finditer(text):
        yield m.span()
    for m in _MONTH_YEAR.finditer(text):
        yield Found(norm_value(m.group(2)), m.group(0), "year", span=m.span())
    for m in _QUARTER.finditer(text):
        yield Found(norm_value(m.group(1)), m.group(1), "quarter", span=(m.start(1), m.end(1)))


# "ID 1-20", "born 1980-1985": a range written with a hyphen (a year-month "2019-09" is not one:
# its second number is the smaller).
_HYPHEN_RANGE = cued(r"(?<![\w./-])(\d+)-(\d+)(?![\w/-]|\.\d)")


def _hyphen_ranges(text: str) -> Iterator[Found]:
    for m in _HYPHEN_RANGE.finditer(text):
        lo, hi = m.group(1), m.group(2)
        if len(lo) > 9 or len(hi) > 9 or int(lo) >= int(hi):
            continue  # an identifier, or a descending pair
        if lo.startswith("0") or (len(hi) == 4 and int(lo) <= 12 and len(lo) <= 2):
            continue  # a month and year ("03-2019", "3-2019"), not a range
        for group, op in ((1, ">="), (2, "<=")):
            value = norm_value(m.group(group))
            kind = "year" if re.fullmatch(r"(19|20)\d\d", value) else "number"
            yield Found(value, m.group(group), kind, op, m.span(group))


def _numbers(text: str, ranges: dict[int, str]) -> Iterator[_Step]:
    if _DIGIT.search(text):
        for m in _NUMBERED.finditer(text):
            yield Found(norm_value(m.group(1)), m.group(0), "number", span=m.span())
        for m in _NUMBER.finditer(text):
            yield _number_found(m, text, ranges.get(m.start()))
    for m in _WORD_NUMBER.finditer(text):
        op = _stated_op(text, m.start(), m.end())
        if op != "=":  # a bare "one" or "ten" is rarely a filter value
            value = str(_NUMBER_WORDS[m.group(1).casefold()])
            yield Found(value, m.group(0), "number", op, m.span())


def _entities(text: str, ranges: dict[int, str]) -> Iterator[_Step]:
    for m in _ENTITY.finditer(text):
        entity = _entity_found(m, text)
        if entity is not None:
            yield entity


_PASSES = (_windows_and_counts, _quoted, _dates, _numbers, _entities)


def _slash_date(m: re.Match[str]) -> str | None:
    """The ISO date of a slash date, or None when it is not a calendar date."""
    if m.group(1) is not None:
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    else:
        first, second, year = int(m.group(4)), int(m.group(5)), int(m.group(6))
        month, day = (second, first) if first > 12 else (first, second)
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def _number_found(m: re.Match[str], text: str, range_op: str | None = None) -> Found:
    """A number of the question, with the comparison its neighbouring words state (or the
    bound of a range it is)."""
    raw = (
        m.group(1).replace(",", "")
        if re.fullmatch(r"-?\d{1,3}(,\d{3})+", m.group(1))
        else m.group(1)
    )
    scale = {"k": 1000, "m": 1000000}.get(m.group(2).casefold())
    if scale is not None and re.fullmatch(r"-?\d+(\.\d+)?", raw):
        scaled = float(raw) * scale
        raw = str(int(scaled)) if scaled.is_integer() else str(scaled)
    value = norm_value(raw)
    kind = "year" if re.fullmatch(r"(19|20)\d\d", value) else "number"
    op = range_op or _stated_op(text, m.start(), m.end())
    return Found(value, m.group(0), kind, op, m.span())


def _entity_found(m: re.Match[str], text: str) -> Found | None:
    """A capitalized name of the question, or None for a capital that is not one."""
    phrase = _clean_entity(m.group(1))
    words = phrase.split()
    while words and words[0].casefold() in _QUESTION_STARTERS:
        words = words[1:]
    if not words:
        return None
    phrase = " ".join(words)
    folded = phrase.casefold()
    if folded in _MONTHS or len(phrase) < 2 or folded in _QUESTION_STARTERS:
        return None
    start = m.start() + m.group(1).find(words[0])
    sentence_start = not text[:start].strip() or text[:start].rstrip()[-1] in ".?!:;"
    if sentence_start and len(words) == 1 and not phrase.isupper():
        return None  # a capital that only marks the start of a sentence
    return Found(norm_value(phrase), phrase, "entity", span=(start, start + len(phrase)))


# A clause of an enrichment: what one definition says ("chlorine refers to element = 'cl'").
_CLAUSE_END = re.compile(r";|\n|,\s|\.\s")
_WORD = re.compile(r"[^\W\d_]{3,}")
# Names beside an operator are columns ("element = 'cl'"), quoted text is a value.
# A name starts where a word does: tried from inside one, it fails once per letter.
_COLUMN_OR_VALUE = re.compile(
    r"(?<![\w.-])[`\"]?[\w.-]+[`\"]?\s*(?:=|!=|<>|<=|>=|<|>|\bin\b|\blike\b|\bbetween\b)|'[^']*'",
    re.I,
)
_LINK_WORDS = frozenset(
    [
        # An enrichment's heading ("Definitions: male = SEX = 'M'") is no word of its clause.
        "definitions",
        "definition",
        "refers",
        "refer",
        "referring",
        "means",
        "mean",
        "meaning",
        "stands",
        "stand",
        "represents",
        "represent",
        "represented",
        "indicates",
        "indicate",
        "denotes",
        "denote",
        "can",
        "could",
        "are",
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "which",
        "where",
        "when",
        "has",
        "have",
        "its",
        "their",
        "value",
        "values",
        "column",
        "columns",
        "field",
    ]
)


_LINK_STEMS = frozenset(w[:5] for w in _LINK_WORDS)


@lru_cache(maxsize=256)
def _stems(text: str) -> frozenset[str]:
    """The 5-letter stems of the words of ``text`` (a question, or a clause without its names
    and values), link words left out."""
    return frozenset(w.casefold()[:5] for w in _WORD.findall(text)) - _LINK_STEMS


@lru_cache(maxsize=256)
def _clause_ends(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each clause separator outside parentheses: the comma of
    ``DIVIDE(COUNT(x), COUNT(y))`` joins, it does not separate."""
    depth, last, out = 0, 0, []
    for m in _CLAUSE_END.finditer(text):
        depth += text.count("(", last, m.start()) - text.count(")", last, m.start())
        last = m.start()
        if depth <= 0:
            out.append(m.span())
    return out


def glossary_entry(enriched: str, span: tuple[int, int], question: str) -> bool:
    """Whether the enrichment clause around ``span`` defines something the question never
    names: a glossary line ("element = 'cl' means Chlorine") asked of no question about
    chlorine, whose value is then no constraint of this question.

    A clause with no word of its own beside the value (``UserId = 58``) is not a glossary
    entry; nor is one whose words (stems of 5 letters) the question uses.
    """
    ends = _clause_ends(enriched)
    at = bisect.bisect_right(ends, span[0], key=lambda e: e[1]) - 1
    start = ends[at][1] if at >= 0 else 0
    after = bisect.bisect_left(ends, span[1], key=lambda e: e[0])
    clause = enriched[start : ends[after][0] if after < len(ends) else len(enriched)]
    words = _clause_stems(clause)
    return bool(words) and not words & _stems(question)


@lru_cache(maxsize=256)
def _clause_stems(clause: str) -> frozenset[str]:
    return _stems(_COLUMN_OR_VALUE.sub(" ", clause))


def question_key(question: str) -> str:
    """A question as reference mode's references file is matched on: case-folded, whitespace
    collapsed."""
    return " ".join(question.split()).casefold()
