"""Bench section: prompt size per record of the dev set (no tokenizer here: characters / 4)."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from stef.judges.base import JudgeRequest
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.rules import load_rules
from stef.stages.normalize import normalize
from stef.stages.sqlspec import sqlspec
from stef.stages.validate import validate


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rules = load_rules(None)
    judge = LlmJudge(LlmConfig(base_url="http://127.0.0.1:9/v1", model="bench"))
    sizes = []
    try:
        for raw in corpus:
            record = validate(raw)
            app_rules = rules.for_app(record.app)
            spec = sqlspec(record.sql, record.dialect or app_rules.dialect)
            norm = normalize(record, spec, app_rules)
            request = JudgeRequest(
                record=record,
                sql_spec=spec,
                normalizations=norm.normalizations,
                notes=norm.notes,
                flags=norm.flags,
                rules=app_rules,
            )
            messages = judge.messages(request)
            sizes.append(sum(_tokens(m["content"]) for m in messages))
    finally:
        judge.close()
    sizes.sort()
    q = statistics.quantiles(sizes, n=20)
    return {
        "records": len(sizes),
        "estimate": "characters / 4, json_schema mode (system + user message)",
        "prompt_tokens_p50": int(statistics.median(sizes)),
        "prompt_tokens_p95": int(q[18]),
        "prompt_tokens_max": sizes[-1],
    }
