"""``as_word`` is the whole-word regex it replaced, without one compiled pattern per value."""

from __future__ import annotations

import random
import re

import pytest

from stef.question import as_word, in_words

# Word characters of several scripts, digits of two (Arabic-Indic ٣ is \d), the separators the
# number rule looks at, and a space.
_ALPHABET = "ab1._, é٣2"


def _regex(value: str, text: str, *, numbers: bool) -> bool:
    guard = r"(?<!\d[.,])" if numbers else ""
    tail = r"(?![.,]\d)" if numbers else ""
    return re.search(r"(?<![\w])" + guard + re.escape(value) + r"(?![\w])" + tail, text) is not None


def test_as_word_agrees_with_the_regex_on_random_text() -> None:
    rng = random.Random(15)
    for _ in range(20000):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 10)))
        value = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 3)))
        for numbers in (True, False):
            assert as_word(value, text, numbers=numbers) == _regex(value, text, numbers=numbers), (
                value,
                text,
                numbers,
            )


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("f", "female", False),
        ("12", "120 orders", False),
        ("12", "12.5 units", False),
        ("12", "1.12 units", False),
        ("12", "12, 13", True),
        ("eu", "europe or eu", True),
        ("", "anything", False),
    ],
)
def test_in_words(value: str, text: str, expected: bool) -> None:
    assert in_words(value, text) is expected
