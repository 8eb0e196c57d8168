"""The labelled records of calibration: read from the labels file and judged through the one
record path, like production traffic (every record judged: sampling is switched off)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import sqlglot
from sqlglot.errors import SqlglotError

from stef.calibrate.agreement import Item
from stef.labels_file import LabelledRecord
from stef.pipeline import Pipeline, Processed
from stef.rules import RuleSet
from stef.sql.dialects import dialect_of


def without_sampling(rules: RuleSet) -> RuleSet:
    """The same rules judging every record: calibration must not lose items to sampling."""
    return RuleSet(
        rules.default.model_copy(update={"sampling_rate": 1.0}),
        {app: r.model_copy(update={"sampling_rate": 1.0}) for app, r in rules.apps.items()},
        source=rules.source,
        single_file=rules.single_file,
    )


def reformat_sql(sql: str, dialect: str | None) -> str:
    """Re-print ``sql`` through sqlglot (upper-case keywords, one line); unchanged if unparsable.

    Agreement on re-formatted SQL shows whether the judge leans on formatting (the dev set's
    lower-case ``select`` is mostly wrong SQL from one generator).
    """
    try:
        written = dialect_of(dialect)
        statements = sqlglot.transpile(sql, read=written, write=written, pretty=False)
    except (SqlglotError, RecursionError, ValueError):
        return sql
    text = "; ".join(s for s in statements if s.strip())
    return text or sql


def judge_all(
    pipeline: Pipeline,
    records: Sequence[LabelledRecord],
    *,
    concurrency: int = 8,
    reformat: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> list[Item]:
    """Judge every record, at most ``concurrency`` in flight, results in input order."""
    results: list[Processed] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        window: deque[Future[Processed]] = deque()
        for rec in records:
            if len(window) >= concurrency * 2:
                results.append(window.popleft().result())
                if on_progress:
                    on_progress(len(results))
            window.append(pool.submit(_judge_one, pipeline, rec, reformat))
        while window:
            results.append(window.popleft().result())
            if on_progress:
                on_progress(len(results))
    return [_item(rec, res) for rec, res in zip(records, results, strict=True)]


def _judge_one(pipeline: Pipeline, rec: LabelledRecord, reformat: bool) -> Processed:
    payload = rec.payload
    if reformat and isinstance(payload.get("sql"), str):
        app = payload.get("app")
        dialect = (
            payload.get("dialect")
            or pipeline.rules.for_app(app if isinstance(app, str) else None).dialect
        )
        payload = {**payload, "sql": reformat_sql(payload["sql"], dialect)}
    raw = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
    # The one record path; a dead letter (invalid input) is counted as invalid, not judged.
    return pipeline.process(raw, {"file": "labels", "line": rec.line})


def _item(rec: LabelledRecord, processed: Processed) -> Item:
    result = processed.result
    app = rec.payload.get("app")
    raw: float | None = None
    p_correct: float | None = None
    if result is None or result.outcome != "evaluated" or result.score is None:
        score, verdict = None, None
    else:
        score = result.score
        verdict = str(result.components.verdict) if result.components else None
        raw = result.components.raw_signal if result.components else None
        p_correct = result.judge.p_correct
    return Item(
        label=rec.label,
        score=score,
        source=rec.source,
        app=app if isinstance(app, str) else None,
        complexity=result.complexity if result is not None else None,
        error_types=rec.error_types,
        verdict=verdict,
        raw=raw,
        p_correct=p_correct,
        invalid=processed.reason if result is None else None,
    )
