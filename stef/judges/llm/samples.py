"""Verdict stability: N samples of one LLM judgment folded into one answer (``llm.samples``).

The majority verdict decides; a tie goes to the more severe verdict, so a split vote never reads
better than its worst plausible reading. The confidence is the mean model confidence of the
majority samples times the share of answered samples that agree, so a 2-of-3 vote weighs less
than a unanimous one (docs/llm.md, "Samples").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import fmean

from stef.models import JudgeOutput, SampleVote, Verdict

# Least to most severe: a tie between verdicts goes to the later one.
SEVERITY = (
    Verdict.CORRECT,
    Verdict.LIKELY_CORRECT,
    Verdict.POTENTIALLY_INCORRECT,
    Verdict.INCORRECT,
)


def majority_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict most samples gave; among equally frequent ones, the most severe.

    Raises:
        ValueError: no verdict at all.
    """
    if not verdicts:
        raise ValueError("no verdict to take a majority of")
    counts = Counter(verdicts)
    top = max(counts.values())
    return max((v for v, c in counts.items() if c == top), key=SEVERITY.index)


def majority(outputs: Sequence[JudgeOutput], asked: int) -> JudgeOutput:
    """One output for the answered samples of a judgment.

    The first answered sample with the majority verdict gives the filters, issues, rationale,
    repairs and reported model; its confidence becomes
    ``mean(confidence of the majority samples) * agreeing / answered``, rounded to 4 decimals,
    its token probability (when every majority sample has one) the majority's mean pulled
    toward 0.5 by the same share, and the vote is kept in ``samples``.

    Args:
        outputs: the usable answers, in the order they were asked (at least one).
        asked: samples asked (failed ones included).

    Raises:
        ValueError: no output.
    """
    verdict = majority_verdict([o.verdict for o in outputs])
    agreeing = [o for o in outputs if o.verdict is verdict]
    share = len(agreeing) / len(outputs)
    confidence = round(fmean(o.confidence for o in agreeing) * share, 4)
    # The token probabilities (P of a passing verdict) vote like the confidences: the mean over
    # the majority, pulled toward undecided (0.5) by the share that disagreed. Absent when any
    # majority sample lacks one: a probability of some samples is not the vote's.
    probs = [o.token_probability for o in agreeing]
    token_probability = (
        None
        if any(p is None for p in probs)
        else round(0.5 + (fmean(p for p in probs if p is not None) - 0.5) * share, 4)
    )
    vote = SampleVote(
        n=asked,
        answered=len(outputs),
        agreeing=len(agreeing),
        split=len({o.verdict for o in outputs}) > 1,
        verdicts=[o.verdict for o in outputs],
    )
    return agreeing[0].model_copy(
        update={"confidence": confidence, "samples": vote, "token_probability": token_probability}
    )
