"""Bench section: prompt and completion size per record of the dev set (characters / 4).

The completion estimate is the fake server's :func:`~stef.testing.fake_server.judge_like` reply to
the record's prompt: one claimed filter per SQL predicate that STEF did not already match, in the
reply shape of this version. It measures what the reply shape and STEF's own matching leave for a
model to write, not what a given model writes (a real model adds prose to the rationale).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.pipeline import judge_request
from stef.rules import load_rules
from stef.stages.validate import validate
from stef.testing.fake_server import Received, judge_like


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _figures(name: str, sizes: list[int]) -> dict[str, int]:
    sizes = sorted(sizes)
    q = statistics.quantiles(sizes, n=20)
    return {
        f"{name}_tokens_p50": int(statistics.median(sizes)),
        f"{name}_tokens_p95": int(q[18]),
        f"{name}_tokens_max": sizes[-1],
    }


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rules = load_rules(None)
    judge = LlmJudge(LlmConfig(base_url="http://127.0.0.1:9/v1", model="bench"))
    prompts: list[int] = []
    completions: list[int] = []
    asked = 0
    try:
        for raw in corpus:
            record = validate(raw)
            request, _ = judge_request(record, rules.for_app(record.app))
            # The body STEF sends (response_format included: without it the fake server takes
            # the request for the probability mode's Yes/No question).
            body = json.loads(judge.request_body(request))
            prompts.append(sum(_tokens(m["content"]) for m in body["messages"]))
            received = Received("POST", "/v1/chat/completions", {}, body, 0.0)
            content = judge_like(received).content
            assert isinstance(content, dict)
            completions.append(_tokens(json.dumps(content)))
            asked += len(content["question_spec"]["filters"])
    finally:
        judge.close()
    return {
        "records": len(prompts),
        "estimate": "characters / 4, json_schema mode; completion: the fake server's judge_like",
        **_figures("prompt", prompts),
        **_figures("completion", completions),
        "filters_asked_per_record": round(asked / max(1, len(prompts)), 2),
        # This section run on commit 10bb2b5, before the one-list reply shape and STEF's own
        # matches, on the same corpus (2402 records): the figures to compare with.
        "before_one_list_shape": "prompt p50 1480 / p95 1595; completion p50 139 / p95 230; "
        "1.54 filters asked per record",
    }
