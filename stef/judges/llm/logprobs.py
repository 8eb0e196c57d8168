"""Probabilities read from a completion's log-probabilities: P(Yes) of a one-token answer, and the
probability that a structured reply's verdict falls on the passing side.

Both read the alternatives the endpoint listed at one position (``top_logprobs``) and renormalise
over the two answers that matter, so mass the model put on other tokens (punctuation, a
preamble) neither counts for nor against the SQL.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

from stef.judges.llm.wire import TokenLogprob, TokenLogprobs
from stef.models import PASSING_VERDICTS, Verdict

# How many leading tokens may precede the Yes/No (a space, a quote, a markdown star).
_YES_NO_WINDOW = 5
_YES = "yes"
_NO = "no"
# A verdict value starts here in the reply's JSON (a key written inside a string is escaped).
# The unescaped quote is checked behind the key, not before it: a pattern that starts with a
# literal is searched for by it, one that starts with a lookbehind is tried at every character.
_VERDICT_KEY = re.compile(r'"verdict"(?<!\\"verdict")\s*:\s*"')


def _answer(token: str) -> str:
    """A token folded to the word it says: case, whitespace and surrounding punctuation off
    (" Yes", "Yes", "yes", "YES", "Yes." are one answer)."""
    return token.strip().strip(".,!:;\"'*`").casefold()


def _alternatives(entry: TokenLogprob) -> dict[str, float]:
    """The listed alternatives at one position, the generated token among them, by token text
    (the same text listed twice counts once)."""
    out = dict(entry.top)
    out.setdefault(entry.token, entry.logprob)
    return out


def yes_probability(tokens: Sequence[TokenLogprob] | None) -> float | None:
    """P(Yes) / (P(Yes) + P(No)) at the first position where Yes or No is among the alternatives,
    every spelling of each summed. None when neither appears in the first few tokens."""
    for entry in (tokens or ())[:_YES_NO_WINDOW]:
        yes = no = 0.0
        for token, logprob in _alternatives(entry).items():
            word = _answer(token)
            if word == _YES:
                yes += math.exp(logprob)
            elif word == _NO:
                no += math.exp(logprob)
        if yes + no > 0:
            return yes / (yes + no)
    return None


def verdict_probability(text: str | None, tokens: Sequence[TokenLogprob] | None) -> float | None:
    """The probability that a structured reply's verdict passes (``Correct`` or ``Likely
    Correct``), read at the verdict value's first token.

    Each alternative there is held against the four labels: one that can only begin a passing
    label counts for passing, one that can only begin a failing label against; the rest (a
    quote, a space, another word) are left out. The four labels begin with four different
    letters, so the first token decides.

    The verdict is found in the tokens' own text (a character split over two tokens, as in
    non-ASCII rationales, may spell the reply differently from its content).

    Returns:
        P(pass) / (P(pass) + P(fail)), or None when the reply or its tokens hold no verdict,
        or more than one, or no alternative at the verdict names a label.
    """
    if not text or not tokens or not _VERDICT_KEY.search(text):
        return None
    # Only the texts are read to find the verdict: the alternatives of that one position next.
    texts = tokens.texts if isinstance(tokens, TokenLogprobs) else [t.token for t in tokens]
    spelt = "".join(texts)
    found = list(_VERDICT_KEY.finditer(spelt))
    if len(found) != 1:
        # Two: text after the object read (a second "verdict" key outside it) could give the
        # probability of a verdict other than the one parsed: none is read.
        return None
    start = found[0].end()
    # The token whose text holds the character at ``start``: the first that ends past it.
    ends = list(accumulate(map(len, texts)))
    i = bisect_right(ends, start)
    if i == len(ends):
        return None
    offset = ends[i] - len(texts[i])
    return _passing_share(_alternatives(tokens[i]), spelt[offset:start])


_FOLDED = tuple((v, v.value.casefold()) for v in Verdict)


def _passing_share(alternatives: dict[str, float], before: str) -> float | None:
    passing = failing = 0.0
    for token, logprob in alternatives.items():
        if not token.startswith(before):
            continue
        rest = token[len(before) :].casefold()
        if not rest:
            continue
        # Any case: a verdict is read in any case ("incorrect" is Incorrect), so is an alternative.
        sides = {
            v in PASSING_VERDICTS for v, f in _FOLDED if f.startswith(rest) or rest.startswith(f)
        }
        if sides == {True}:
            passing += math.exp(logprob)
        elif sides == {False}:
            failing += math.exp(logprob)
    if passing + failing == 0:
        return None
    return passing / (passing + failing)
