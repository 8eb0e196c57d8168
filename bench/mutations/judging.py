"""The golds and their variants judged through STEF's own record path, built as ``stef judge``
and ``stef replay`` build it (:mod:`stef.service.wiring`) from the default settings: the
heuristic judge with its default calibration and the built-in rules.

A record carries the question, the enrichment, the SQL and ``dialect: sqlite``; the gold's SQL
goes in ``gold_sql`` in reference mode only (the heuristic never sees it: the record path keeps
the reference from the judge, docs/reference.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from bench.mutations.generate import Judged, Variant
from bench.mutations.golds import DIALECT
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import load_settings


@dataclass(frozen=True)
class Outcome:
    """What the record path gave one record: its score and verdicts, or why none."""

    score: float | None
    verdict: str | None
    reference_verdict: str | None
    reference_components: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class Scored:
    """A variant judged beside its gold."""

    variant: Variant
    gold: Outcome
    outcome: Outcome


def default_pipeline() -> Pipeline:
    """The record path of ``stef judge`` with no config file, no ``STEF_*`` variable and no
    flag: the heuristic judge and its default calibration, the built-in rules."""
    settings = load_settings(None, {}, env={})
    return build_pipeline(settings, load_rules(settings.rules), build_backend(settings))


def judge(pipeline: Pipeline, rid: str, judged: Judged, sql: str, *, reference: bool) -> Outcome:
    gold = judged.gold
    record: dict[str, str] = {"id": rid, "question": gold.question, "sql": sql}
    if gold.enriched_question is not None:
        record["enriched_question"] = gold.enriched_question
    record["dialect"] = DIALECT
    if reference:
        record["gold_sql"] = judged.sql
    processed = pipeline.process(json.dumps(record).encode("utf-8"), {"file": "bench", "line": 0})
    result = processed.result
    if result is None:
        return Outcome(None, None, None, (), f"{processed.reason}: {processed.error}")
    ref = result.reference
    return Outcome(
        score=result.score,
        verdict=str(result.components.verdict) if result.components is not None else None,
        reference_verdict=str(ref.verdict) if ref is not None and ref.verdict else None,
        reference_components=tuple(d.component for d in ref.differences) if ref else (),
        error=result.error,
    )


def judge_all(pipeline: Pipeline, golds: list[Judged], *, reference: bool) -> list[Scored]:
    """Each gold judged once (against itself in reference mode), then each of its variants."""
    out: list[Scored] = []
    for judged in golds:
        base = judge(pipeline, judged.gold.id, judged, judged.sql, reference=reference)
        identity = Variant(judged.gold.id, "identity", "right", judged.sql, "the gold itself")
        if reference:
            out.append(Scored(identity, base, base))
        for variant in judged.variants:
            rid = f"{judged.gold.id}#{variant.type}"
            out.append(
                Scored(
                    variant, base, judge(pipeline, rid, judged, variant.sql, reference=reference)
                )
            )
    return out
