"""The merged coverage of verify answers as asking every claim did, in one lookup."""

from __future__ import annotations

import random

from stef.stages.verify import _Claim, _Coverage

_WORDS = ["eu", "emea", "2023", "2023.0", "12", "1,200", "q3", "north", "north america", "x_1", ""]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 4)))


def test_coverage_is_any_claim_covering() -> None:
    rng = random.Random(15)
    for _ in range(300):
        claims = [
            _Claim(frozenset(rng.sample(_WORDS, rng.randint(0, 2))), (_text(rng), _text(rng)))
            for _ in range(rng.randint(0, 5))
        ]
        coverage = _Coverage()
        for claim in claims:
            coverage.add(claim)
        for value in [*_WORDS, "eu emea", "2023 q3", "orth", "1200"]:
            assert coverage.covers(value) == any(c.covers(value) for c in claims), (value, claims)


def test_coverage_grows_with_each_claim() -> None:
    coverage = _Coverage()
    assert not coverage.covers("emea")
    coverage.add(_Claim(frozenset(), ("sales in emea", "")))
    assert coverage.covers("emea")
    assert not coverage.covers("2023")
    coverage.add(_Claim(frozenset(), ("", "2023")))
    assert coverage.covers("2023")
