"""Structured output: strict json_schema first; one fallback to json_object, remembered."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.reply import reply_schema
from stef.pipeline import Pipeline
from stef.testing.fake_server import Error, FakeLlmServer, Reply
from tests.judges.llm.conftest import make_record
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]
PipelineFor = Callable[[LlmJudge], Pipeline]
Servers = Callable[..., FakeLlmServer]


@pytest.mark.parametrize("status", [400, 422, 500])
def test_rejected_json_schema_falls_back_to_json_object_and_remembers(
    server_factory: Servers, judge_factory: Make, pipeline_for: PipelineFor, status: int
) -> None:
    srv = server_factory(reject_json_schema=status)
    judge = judge_factory(srv)
    p = pipeline_for(judge)
    assert judge.response_mode == "auto"

    first = p.judge_record(make_record(id="a"))
    assert first.outcome == "evaluated"
    assert first.score == 80.0  # the server's judge-like default: matched, Likely Correct
    assert first.usage.attempts == 2
    assert judge.response_mode == "json_object"

    rejected, accepted = srv.chat_requests()
    assert rejected.response_format_type == "json_schema"
    assert accepted.response_format_type == "json_object"
    # json_object mode carries the schema in the (static) system prompt instead.
    schema_text = json.dumps(reply_schema(), sort_keys=True)
    assert schema_text in accepted.text("system")
    assert schema_text not in rejected.text("system")
    assert accepted.text("user") == rejected.text("user")

    # Remembered for the endpoint: the next records go straight to json_object.
    second = p.judge_record(make_record(id="b", question="Spend in EMEA for 2022?"))
    assert second.usage.attempts == 1
    assert [r.response_format_type for r in srv.chat_requests()] == [
        "json_schema",
        "json_object",
        "json_object",
    ]


def test_accepted_json_schema_is_kept(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    p = pipeline_for(judge)
    p.judge_record(make_record(id="a"))
    p.judge_record(make_record(id="b", question="Other question"))
    assert judge.response_mode == "json_schema"
    assert [r.response_format_type for r in server.chat_requests()] == ["json_schema"] * 2


def test_fallback_happens_once_then_the_error_stands(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, registry: CollectorRegistry
) -> None:
    # A 400 that has nothing to do with response_format: json_object is refused as well.
    server.script(Error(400, "context length exceeded"), Error(400, "context length exceeded"))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("http_400:")
    assert "context length exceeded" in result.error
    assert [r.response_format_type for r in server.chat_requests()] == [
        "json_schema",
        "json_object",
    ]
    # Nothing was learned: json_object never succeeded.
    assert judge.response_mode == "auto"


def test_after_json_schema_worked_a_plain_500_is_retried_not_a_fallback(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    p = pipeline_for(judge)
    p.judge_record(make_record(id="a"))
    server.script(Error(500, "upstream hiccup"), Reply(reply()))
    result = p.judge_record(make_record(id="b", question="Other question"))
    assert result.outcome == "evaluated"
    assert [r.response_format_type for r in server.chat_requests()] == ["json_schema"] * 3
    assert judge.response_mode == "json_schema"


def test_after_json_schema_worked_a_500_naming_the_schema_falls_back(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    p = pipeline_for(judge)
    p.judge_record(make_record(id="a"))
    server.script(Error(500, "could not compile the json_schema grammar"))
    result = p.judge_record(make_record(id="b", question="Other question"))
    assert result.outcome == "evaluated"
    assert [r.response_format_type for r in server.chat_requests()] == [
        "json_schema",
        "json_schema",
        "json_object",
    ]
    assert judge.response_mode == "json_object"


def test_forced_json_object_mode_never_sends_a_schema_format(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, response_format="json_object")
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated"
    (sent,) = server.chat_requests()
    assert sent.response_format_type == "json_object"
    assert "must validate against" in sent.text("system")


def test_forced_json_schema_mode_does_not_fall_back(
    server_factory: Servers, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    srv = server_factory(reject_json_schema=400)
    judge = judge_factory(srv, response_format="json_schema")
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("http_400:")
    assert len(srv.chat_requests()) == 1


def test_reask_after_fallback_stays_in_json_object(
    server_factory: Servers, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    srv = server_factory(reject_json_schema=400)
    judge = judge_factory(srv)
    srv.script(Reply("not json"), Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated" and result.score == 100.0
    kinds = [r.response_format_type for r in srv.chat_requests()]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert result.usage.attempts == 3
