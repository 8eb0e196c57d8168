"""Reference mode: the LLM judge is reference-free; the gold SQL never reaches its prompt."""

from __future__ import annotations

import json
from collections.abc import Callable

from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.testing.fake_server import FakeLlmServer
from tests.judges.llm.conftest import RECORD

SECRET = "gold_secret_table"


def test_the_llm_prompt_never_carries_the_reference(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    record = {**RECORD, "gold_sql": f"SELECT SUM(spend) FROM {SECRET} WHERE region = 'APAC'"}
    processed = pipeline_for(judge).process(json.dumps(record).encode(), {"file": "t", "line": 1})
    assert processed.result is not None and processed.result.outcome == "evaluated"
    assert processed.result.reference is not None  # reference mode did read it
    sent = server.chat_requests()
    assert sent, "the LLM judge was not asked"
    assert all(SECRET not in r.text("user") + r.text("system") for r in sent)
