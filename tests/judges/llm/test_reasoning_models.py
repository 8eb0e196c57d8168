"""GPT-5 and the o-series (issue 25 §2): they refuse ``temperature`` and ``max_tokens`` with a 400
naming the parameter. STEF sends ``max_completion_tokens`` and no temperature to them by name,
adapts once per model when a server names a parameter it refuses (an Azure deployment's name says
nothing of its model), sends ``reasoning_effort`` when set, and never mistakes the 400 for a
structured-output refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from stef.judges.llm.client import REASONING_MAX_TOKENS
from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.testing.fake_server import FakeLlmServer
from tests.judges.llm.conftest import make_record

GPT5 = ("max_tokens", "temperature")  # refused in this order, one per answer


def _judge_three(judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]) -> list[str]:
    pipeline = pipeline_for(judge)
    return [pipeline.judge_record(make_record(id=str(i))).outcome for i in range(3)]


def test_a_deployment_name_adapts_once_to_the_parameters_the_server_names(
    server_factory: Callable[..., FakeLlmServer],
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    server = server_factory(unsupported_params=GPT5)
    judge = judge_factory(server, model="my-azure-deployment", max_retries=0, cache_size=0)
    with capture_logs() as logs:
        # Before: every record a judge error (the 400 taken for a json_schema refusal).
        assert _judge_three(judge, pipeline_for) == ["evaluated"] * 3
    sent = [r.body for r in server.chat_requests()]
    # Two refusals on the first record, then each request as the model takes it.
    assert len(sent) == 5
    assert "max_tokens" in sent[0] and "temperature" in sent[0]
    assert "max_completion_tokens" in sent[1] and "temperature" in sent[1]
    for body in sent[2:]:
        assert body["max_completion_tokens"] == 1024
        assert "max_tokens" not in body and "temperature" not in body
        assert body["response_format"]["type"] == "json_schema"  # no structured-output fallback
    adapted = [x["parameter"] for x in logs if x["event"] == "llm_parameter_adapted"]
    assert adapted == ["max_tokens", "temperature"]
    assert not [x for x in logs if x["event"] == "llm_json_schema_rejected"]


@pytest.mark.parametrize("model", ["gpt-5-mini", "o4-mini", "openai/o3", "GPT-5"])
def test_reasoning_models_by_name_get_their_parameters_first_time(
    model: str,
    server_factory: Callable[..., FakeLlmServer],
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    server = server_factory(unsupported_params=GPT5)
    judge = judge_factory(server, model=model, reasoning_effort="low", cache_size=0)
    assert _judge_three(judge, pipeline_for) == ["evaluated"] * 3
    sent = [r.body for r in server.chat_requests()]
    assert len(sent) == 3
    for body in sent:
        assert "temperature" not in body and "max_tokens" not in body
        # Reasoning counts against the cap: a larger default when none is set.
        assert body["max_completion_tokens"] == REASONING_MAX_TOKENS
        assert body["reasoning_effort"] == "low"


def test_a_set_cap_and_an_explicit_parameter_name_are_kept(
    server: FakeLlmServer,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    judge = judge_factory(server, model="gpt-5", max_tokens=2000)
    pipeline_for(judge).judge_record(make_record())
    other = judge_factory(server, model="gpt-4o-mini", token_param="max_completion_tokens")
    pipeline_for(other).judge_record(make_record())
    first, second = (r.body for r in server.chat_requests())
    assert first["max_completion_tokens"] == 2000
    assert second["max_completion_tokens"] == 1024 and second["temperature"] == 0


def test_other_models_keep_temperature_and_max_tokens(
    server: FakeLlmServer,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    for model in ("gpt-4o-mini", "gpt-5-chat-latest", "qwen2.5-coder"):
        pipeline_for(judge_factory(server, model=model)).judge_record(make_record())
    for body in (r.body for r in server.chat_requests()):
        assert body["temperature"] == 0 and body["max_tokens"] == 1024
        assert "reasoning_effort" not in body


def test_a_server_refusing_every_variant_ends_in_a_judge_error(
    server_factory: Callable[..., FakeLlmServer],
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    server = server_factory(unsupported_params=("max_tokens", "max_completion_tokens"))
    judge = judge_factory(server, model="odd", max_retries=0, response_format="json_schema")
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error" and (result.error or "").startswith("http_400")
    assert len(server.chat_requests()) == 3  # each name tried once: bounded


def test_the_message_alone_names_the_parameter(
    server_factory: Callable[..., FakeLlmServer],
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    from stef.testing.fake_server import Error

    server = server_factory()
    # A proxy's wording, without OpenAI's ``param`` field.
    server.script(Error(400, "litellm.BadRequestError: temperature is not supported by o3"))
    judge = judge_factory(server, model="proxy-alias", max_retries=0)
    assert pipeline_for(judge).judge_record(make_record()).outcome == "evaluated"
    bodies: list[dict[str, Any]] = [r.body for r in server.chat_requests()]
    assert "temperature" in bodies[0] and "temperature" not in bodies[1]
    assert bodies[1]["response_format"]["type"] == "json_schema"
