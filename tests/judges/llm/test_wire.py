"""What the LLM judge sends: model, temperature, strict schema, data blocks, the key in one place"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import jsonschema

from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.reply import SCHEMA_NAME, reply_schema
from stef.judges.llm.wire import completion_of, parse_body
from stef.pipeline import Pipeline
from stef.prompts import data_blocks
from stef.testing.fake_server import FakeLlmServer, Raw, Reply, completion_body
from tests.judges.llm.conftest import API_KEY, make_record
from tests.judges.llm.replies import reply


def test_request_carries_model_temperature_and_strict_schema(
    server: FakeLlmServer,
    judge: LlmJudge,
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    server.script(Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated"
    (sent,) = server.chat_requests()
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "judge-model"
    assert sent.body["temperature"] == 0
    rf = sent.body["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == SCHEMA_NAME
    assert rf["json_schema"]["strict"] is True
    # The request's own schema: predicate ids limited to the SQL's two predicates.
    assert rf["json_schema"]["schema"] == reply_schema([1, 2])
    assert [m["role"] for m in sent.messages] == ["system", "user"]
    # The scripted reply itself validates against the schema that was sent.
    jsonschema.validate(reply(), rf["json_schema"]["schema"])


def test_strict_schema_requires_every_field_and_forbids_extras() -> None:
    def objects(node: object) -> list[dict[str, object]]:
        found: list[dict[str, object]] = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                found.append(node)
            for v in node.values():
                found.extend(objects(v))
        elif isinstance(node, list):
            for v in node:
                found.extend(objects(v))
        return found

    schema = reply_schema()
    objs = objects(schema)
    assert len(objs) >= 5
    for obj in objs:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])  # type: ignore[call-overload]
    assert "default" not in json.dumps(schema)
    verdicts = schema["$defs"]["Verdict"]["enum"]
    assert verdicts == ["Correct", "Likely Correct", "Potentially Incorrect", "Incorrect"]


def test_questions_and_sql_arrive_as_data_in_the_user_message(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    record = make_record(sql="SELECT SUM(spend)\nFROM sales\nWHERE region = 'APAC' AND year = 2023")
    pipeline_for(judge).judge_record(record)
    (sent,) = server.chat_requests()
    user, system = sent.text("user"), sent.text("system")
    blocks = data_blocks(user)
    assert blocks["user_question"] == record.question
    assert blocks["enriched_question"] == record.enriched_question
    assert blocks["sql"] == record.sql
    assert [p["id"] for p in blocks["sql_predicates"]] == [1, 2]
    assert blocks["sql_predicates"][0]["text"] == "region = 'APAC'"
    assert blocks["app_rules"]["limit_min"] == 1000
    assert blocks["sql_spec"]["tables"] == ["sales"]
    # The record is not in the system message, which stays static for prefix caching.
    assert record.question not in system and "APAC" not in system
    assert "Assume every table and column named in the SQL exists" in system
    assert "judge S against Qu" in system


def test_system_prompt_is_identical_for_every_record(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    p = pipeline_for(judge)
    p.judge_record(make_record(id="a"))
    p.judge_record(make_record(id="b", question="How many orders in 2022?", sql="SELECT 1"))
    first, second = server.chat_requests()
    assert first.text("system") == second.text("system")
    assert first.messages[0] == second.messages[0]


def test_api_key_is_sent_only_as_the_authorization_header(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    result = pipeline_for(judge).judge_record(make_record())
    (sent,) = server.chat_requests()
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    others = {k: v for k, v in sent.headers.items() if k != "authorization"}
    assert API_KEY not in json.dumps(others)
    assert API_KEY not in sent.path
    assert API_KEY not in json.dumps(sent.body)
    assert API_KEY not in result.to_json()
    assert API_KEY not in repr(judge.config)


def test_result_names_the_llm_backend_model_and_prompt_version(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    result = pipeline_for(judge).judge_record(make_record())
    assert result.judge.backend == "llm"
    assert result.judge.model == "judge-model"
    assert result.judge.prompt_version == judge.info.prompt_version
    assert result.judge.prompt_version and len(result.judge.prompt_version) == 12
    assert result.judge.rules_version is not None


def test_fake_server_runs_from_the_command_line() -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "stef.testing.fake_server", "--latency-s", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
            models = json.loads(answer.read())
        assert models["data"][0]["id"] == "fake-model"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "requests: 0" in out


def test_reply_schema_is_built_once_per_shape_and_never_leaks_between_shapes() -> None:
    # Cached per set of ids (order and repeats do not matter), shared, and a request's ids
    # never reach the generic schema or another request's.
    assert reply_schema([2, 1, 2]) is reply_schema([1, 2])
    assert reply_schema() is reply_schema()
    with_ids = reply_schema([1, 2])["$defs"]["WireFilter"]["properties"]["predicates"]
    none = reply_schema([])["$defs"]["WireFilter"]["properties"]["predicates"]
    generic = reply_schema()["$defs"]["WireFilter"]["properties"]["predicates"]
    assert with_ids["items"] == {"type": "integer", "enum": [1, 2]}
    assert none["maxItems"] == 0 and "enum" not in none["items"]
    assert "enum" not in generic["items"] and "maxItems" not in generic
    # Everything but the predicates property is the generic schema's.
    strip = {**reply_schema([7])["$defs"]["WireFilter"]["properties"], "predicates": None}
    assert strip == {**reply_schema()["$defs"]["WireFilter"]["properties"], "predicates": None}


def test_numbers_past_any_float_are_read_not_raised() -> None:
    """A usage count or a log-probability beyond float range (10**4000) lost the reply's
    verdict (the counters compute in floats): the count reads as none, the log-probability as
    a probability of zero."""
    huge = 10**4000
    body = completion_body(
        [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Yes"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "Yes",
                            "logprob": -huge,
                            "top_logprobs": [{"token": "No", "logprob": -huge}],
                        }
                    ]
                },
            }
        ],
        usage={"prompt_tokens": huge, "completion_tokens": -3},
    )
    completion = completion_of(parse_body(body, "application/json", ()), "text", 1, ())
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == (
        "Yes",
        0,
        0,
    )
    assert completion.logprobs is not None
    read = completion.logprobs[0]
    assert (read.token, read.logprob) == ("Yes", -math.inf)
    assert read.top == (("No", -math.inf),)


def test_content_sent_as_text_parts_is_their_text(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    """A gateway (or Mistral's reasoning models) sending the content as a list of parts: the text
    parts joined are the reply, a thinking part is not. Before: bad_response, retried until the
    budget ran out, then a judge_error."""
    text = json.dumps(reply(verdict="Likely Correct", confidence=0.9))
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": '{"verdict": "Incorrect"}'}]},
        {"type": "text", "text": text[:40]},
        {"type": "text", "text": text[40:]},
    ]
    message = {"role": "assistant", "content": parts}
    server.script(
        Raw(200, completion_body([{"index": 0, "message": message, "finish_reason": "stop"}]))
    )
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated" and result.score == 80.0
    assert len(server.chat_requests()) == 1


def test_content_parts_without_text_are_no_content() -> None:
    message = {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    body = completion_body([{"index": 0, "message": message, "finish_reason": "stop"}])
    completion = completion_of(parse_body(body, "application/json", ()), "json_schema", 1, ())
    assert completion.text is None


def test_a_refusal_content_part_is_the_refusal() -> None:
    """Read as no content before (its part left out as not text): the judge re-asked."""
    parts = [{"type": "refusal", "refusal": "I can't"}, {"type": "refusal", "refusal": "sorry"}]
    message = {"role": "assistant", "content": parts}
    body = completion_body([{"index": 0, "message": message, "finish_reason": "stop"}])
    completion = completion_of(parse_body(body, "application/json", ()), "json_schema", 1, ())
    assert (completion.text, completion.refusal) == (None, "I can't sorry")
    # The message's own refusal string stands.
    message = {**message, "refusal": "no"}
    body = completion_body([{"index": 0, "message": message, "finish_reason": "stop"}])
    completion = completion_of(parse_body(body, "application/json", ()), "json_schema", 1, ())
    assert completion.refusal == "no"
