"""Every shape an endpoint may answer ends as a reply or a JudgeError with a machine reason, and
through the pipeline as outcome ``judge_error``: nothing else leaves the backend."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry

from stef.errors import JudgeError, LlmReplyError, LlmTransportError
from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.stages.validate import validate
from stef.testing.fake_server import FakeLlmServer, Raw, Reply, Step, completion_body
from tests.judges.llm.conftest import RECORD, request_for
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]
ServerFactory = Callable[..., FakeLlmServer]

# max_retries=2 below: a transport-level failure costs 3 calls, a reply-level one 2 (the re-ask).
TRANSPORT_CALLS = 3
REASK_CALLS = 2


def choice(message: Any, finish_reason: str | None = "stop") -> dict[str, Any]:
    return {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}


SHAPES = [
    # The model sent nothing: re-asked once, then empty_reply.
    pytest.param(
        Raw(200, completion_body([choice(None)])),
        LlmReplyError,
        "empty_reply",
        REASK_CALLS,
        "no content",
        id="null-message",
    ),
    pytest.param(
        Raw(200, completion_body([choice({"role": "assistant", "content": None})])),
        LlmReplyError,
        "empty_reply",
        REASK_CALLS,
        "the reply is empty",
        id="null-content",
    ),
    pytest.param(Reply("  "), LlmReplyError, "empty_reply", REASK_CALLS, "empty", id="blank"),
    pytest.param(
        Raw(200, completion_body([])),
        LlmReplyError,
        "empty_reply",
        REASK_CALLS,
        "no content",
        id="empty-choices",
    ),
    # Not a chat completion at all: retried within the transport budget, then bad_response.
    pytest.param(
        Raw(200, completion_body(None, without=("choices",))),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "choices: Field required",
        id="missing-choices",
    ),
    pytest.param(
        Raw(200, completion_body(None)),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "choices: Input should be a valid list",
        id="null-choices",
    ),
    pytest.param(
        Raw(200, completion_body([None])),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "choices.0",
        id="null-choice",
    ),
    pytest.param(
        Raw(200, b'{"error": {"message": "upstream model overloaded", "code": 503}}'),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "error: upstream model overloaded",
        id="error-object-on-200",
    ),
    pytest.param(
        Raw(200, b"<html>\n<body>502 Bad Gateway</body>\n</html>", content_type="text/html"),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "not JSON (text/html): <html> <body>502 Bad Gateway</body> </html>",
        id="html-body",
    ),
    pytest.param(
        Raw(200, b"{oops"),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "not JSON (application/json): {oops",
        id="garbage-body",
    ),
    pytest.param(
        Raw(200, b""), LlmTransportError, "bad_response", TRANSPORT_CALLS, "<empty>", id="no-body"
    ),
    pytest.param(
        Raw(200, b'[{"choices": []}]'),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "a JSON array, not a chat completion",
        id="json-array-body",
    ),
    pytest.param(
        Raw(200, b'"ok"'),
        LlmTransportError,
        "bad_response",
        TRANSPORT_CALLS,
        "a JSON string, not a chat completion",
        id="json-string-body",
    ),
    # The model declined: asking again would only cost another refusal.
    pytest.param(
        Reply(refusal="I can't help with that request."),
        LlmReplyError,
        "refused",
        1,
        "I can't help with that request.",
        id="refusal",
    ),
    # The refusal as a content part: read as no content, and the model asked again.
    pytest.param(
        Raw(
            200, completion_body([choice({"content": [{"type": "refusal", "refusal": "I can't"}]})])
        ),
        LlmReplyError,
        "refused",
        1,
        "the model refused to judge: I can't",
        id="refusal-content-part",
    ),
    pytest.param(
        Raw(200, completion_body([choice({"content": None}, "content_filter")])),
        LlmReplyError,
        "refused",
        1,
        "content filter",
        id="content-filter",
    ),
    # Content that cannot be used: re-asked once with the errors.
    pytest.param(
        Reply('{"question_spec": {"outputs": [', finish_reason="length"),
        LlmReplyError,
        "truncated",
        REASK_CALLS,
        "cut off at the token limit",
        id="truncated",
    ),
    pytest.param(
        Reply("The SQL looks right to me."),
        LlmReplyError,
        "invalid_json",
        REASK_CALLS,
        "not valid JSON",
        id="content-not-json",
    ),
    pytest.param(
        Reply({"verdict": "Correct"}),
        LlmReplyError,
        "invalid_reply",
        REASK_CALLS,
        "question_spec: Field required",
        id="schema-violation",
    ),
    pytest.param(
        Reply("[1, 2]"),
        LlmReplyError,
        "invalid_reply",
        REASK_CALLS,
        "valid dictionary",
        id="content-json-array",
    ),
]


@pytest.mark.parametrize(("step", "error_type", "reason", "n_calls", "detail_part"), SHAPES)
def test_reply_shape_ends_as_judge_error(
    server_factory: ServerFactory,
    judge_factory: Make,
    rules: RuleSet,
    step: Step,
    error_type: type[JudgeError],
    reason: str,
    n_calls: int,
    detail_part: str,
) -> None:
    srv = server_factory(default=lambda _received: step)
    judge = judge_factory(srv, max_retries=2)

    with pytest.raises(JudgeError) as info:
        judge.judge(request_for(RECORD))
    assert type(info.value) is error_type
    assert info.value.reason == reason
    assert detail_part in info.value.detail
    assert info.value.attempts == n_calls
    assert len(srv.chat_requests()) == n_calls

    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "judge_error"
    assert result.score is None and result.tier is None and result.components is None
    assert result.error is not None and result.error.startswith(f"{reason}: ")
    assert result.usage.attempts == n_calls
    # Failures are never cached: the second record went to the endpoint again.
    assert len(srv.chat_requests()) == 2 * n_calls


def test_bad_body_then_a_good_reply_is_evaluated(
    server: FakeLlmServer, judge: LlmJudge, rules: RuleSet, registry: CollectorRegistry
) -> None:
    server.script(
        Raw(200, b"<html>502</html>", content_type="text/html"),
        Raw(200, completion_body(None, without=("choices",))),
        Reply(reply()),
    )
    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "evaluated"
    assert result.score == 100.0
    assert result.usage.attempts == 3
    labels = {"model": "judge-model"}
    assert registry.get_sample_value(
        "stef_llm_request_duration_seconds_count", {**labels, "outcome": "retry"}
    ) == (2)
    assert registry.get_sample_value(
        "stef_llm_request_duration_seconds_count", {**labels, "outcome": "ok"}
    ) == (1)


def test_a_bad_body_does_not_settle_the_response_format(
    server_factory: ServerFactory, judge_factory: Make
) -> None:
    srv = server_factory(default=lambda _received: Raw(200, b"[]"))
    judge = judge_factory(srv, max_retries=0)
    with pytest.raises(LlmTransportError):
        judge.judge(request_for(RECORD))
    # Only a usable answer proves the endpoint accepts json_schema.
    assert judge.response_mode == "auto"


def test_refusal_is_not_reasked_and_keeps_the_text(server: FakeLlmServer, judge: LlmJudge) -> None:
    server.script(Reply("not json"), Reply(refusal="I won't judge this."))
    with pytest.raises(LlmReplyError) as info:
        judge.judge(request_for(RECORD))
    assert info.value.reason == "refused"
    assert info.value.detail == "the model refused to judge: I won't judge this."
    assert info.value.attempts == 2
    assert len(server.chat_requests()) == 2


def test_truncated_then_valid_is_evaluated(
    server: FakeLlmServer, judge: LlmJudge, rules: RuleSet
) -> None:
    server.script(Reply('{"question_spec": ', finish_reason="length"), Reply(reply()))
    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "evaluated" and result.score == 100.0
    reask = server.chat_requests()[1].messages[-1]["content"]
    assert "cut off at the token limit" in reask


# ------------------------------------------------------------------------ the last guard, close


def test_an_unexpected_exception_becomes_judge_error_internal(
    server: FakeLlmServer, judge_factory: Make, rules: RuleSet, tmp_path: Path
) -> None:
    cache_file = tmp_path / "judge-cache.sqlite"
    judge = judge_factory(server, cache_path=cache_file)
    # A real fault below the judge: the cache table vanishes under the open connection.
    with sqlite3.connect(cache_file) as other:
        other.execute("DROP TABLE judge_cache")
    with structlog.testing.capture_logs() as logs, pytest.raises(JudgeError) as info:
        judge.judge(request_for(RECORD))
    assert type(info.value) is JudgeError
    assert info.value.reason == "internal"
    assert info.value.detail.startswith("OperationalError: no such table: judge_cache")
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    (event,) = [e for e in logs if e["event"] == "llm_judge_internal_error"]
    assert event["log_level"] == "error"
    assert event["where"].startswith("cache.py:")

    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "judge_error" and result.score is None
    assert result.error is not None and result.error.startswith("internal: OperationalError")


def test_close_is_idempotent_and_a_closed_judge_answers_judge_error(
    server: FakeLlmServer, judge_factory: Make, rules: RuleSet, tmp_path: Path
) -> None:
    judge = judge_factory(server, cache_path=tmp_path / "c.sqlite")
    assert Pipeline(rules, judge).judge_record(validate(RECORD)).outcome == "evaluated"
    judge.close()
    judge.close()
    with pytest.raises(JudgeError) as info:
        judge.judge(request_for({**RECORD, "id": "after-close", "question": "Spend?"}))
    assert info.value.reason == "closed" and info.value.attempts == 0
    result = Pipeline(rules, judge).judge_record(validate({**RECORD, "id": "after-close"}))
    assert result.outcome == "judge_error"
    assert result.error == "closed: the LLM judge is closed"
    assert len(server.chat_requests()) == 1


def test_fake_server_refusal_wire_shape(server: FakeLlmServer) -> None:
    """The scripted refusal looks like OpenAI's: content null, refusal set."""
    import urllib.request

    server.script(Reply(refusal="no"))
    req = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps({"model": "m", "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        body = json.load(resp)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": None, "refusal": "no"}


def test_tokens_of_failed_calls_count_in_the_judge_error_usage(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: Callable[[LlmJudge], Pipeline]
) -> None:
    server.script(Reply("this is not JSON"), Reply("still not JSON"))
    result = pipeline_for(judge).judge_record(validate(RECORD))
    assert result.outcome == "judge_error"
    assert result.usage.attempts == REASK_CALLS
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


# ----------------------------------------------------------------------- words around the JSON

VERDICT = json.dumps(reply(verdict="Likely Correct", confidence=0.9), indent=2)


def _assert_read_in_one_call(
    content: str, server: FakeLlmServer, judge: LlmJudge, rules: RuleSet
) -> None:
    """``content`` is read as VERDICT (its score is 80) from the first reply, with no re-ask."""
    server.script(Reply(content, logprobs=False))
    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "evaluated" and result.score == 80.0
    assert len(server.chat_requests()) == 1


def _assert_never_read(
    content: str, server_factory: ServerFactory, judge_factory: Make, rules: RuleSet
) -> None:
    """``content``, answered every time, is never read as a verdict: re-asked once, then
    invalid_json."""
    srv = server_factory(default=lambda _received: Reply(content, logprobs=False))
    result = Pipeline(rules, judge_factory(srv)).judge_record(validate(RECORD))
    assert result.outcome == "judge_error" and result.error is not None
    assert result.error.startswith("invalid_json: ")
    assert len(srv.chat_requests()) == REASK_CALLS


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("Here is my judgement: " + VERDICT, id="sentence-before"),
        pytest.param(VERDICT + "\nLet me know if you need more.", id="sentence-after"),
        pytest.param("```JSON\n" + VERDICT + "\n```", id="fence-upper-case"),
        pytest.param("```jsonc\n" + VERDICT + "\n```", id="fence-other-tag"),
        pytest.param(
            "Here it is:\n```json\n" + VERDICT + "\n```\nThe SQL is fine.", id="fence-words"
        ),
        pytest.param("```json\n" + VERDICT, id="fence-unclosed"),
        pytest.param("\ufeff" + VERDICT, id="bom"),
        pytest.param("\u200b" + VERDICT, id="zero-width-space"),
    ],
)
def test_words_around_one_object_are_read_without_a_reask(
    content: str, server: FakeLlmServer, judge: LlmJudge, rules: RuleSet
) -> None:
    # Before: re-asked (a second paid call), then invalid_json when the model kept its habit.
    _assert_read_in_one_call(content, server, judge, rules)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(VERDICT + "\n" + json.dumps(reply(verdict="Incorrect")), id="two-objects"),
        pytest.param("Note {x}: " + VERDICT, id="brace-in-the-words"),
    ],
)
def test_which_object_holds_the_verdict_is_not_guessed(
    content: str, server_factory: ServerFactory, judge_factory: Make, rules: RuleSet
) -> None:
    _assert_never_read(content, server_factory, judge_factory, rules)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("<think>\nSUM(spend) for APAC in {2023}.\n</think>\n\n" + VERDICT, id="think"),
        pytest.param("<thinking>Looks right.</thinking>\n" + VERDICT, id="thinking"),
        # DeepSeek-R1's template opens the block in the prompt: only its end is in the reply.
        pytest.param("The year and region match.\n</think>\n\n" + VERDICT, id="think-end-only"),
        pytest.param(
            '<think>{"verdict": "Incorrect"}? No, it is fine.</think>\n' + VERDICT,
            id="think-with-a-draft",
        ),
        pytest.param("<think>ok</think>\n```json\n" + VERDICT + "\n```", id="think-then-fence"),
    ],
)
def test_the_answer_after_a_reasoning_models_thinking_is_read(
    content: str, server: FakeLlmServer, judge: LlmJudge, rules: RuleSet
) -> None:
    # Before: re-asked, then invalid_json (the thinking is not JSON).
    _assert_read_in_one_call(content, server, judge, rules)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            "<think>Draft: " + VERDICT + " but let me check the year", id="draft-unclosed"
        ),
        pytest.param("<think>Draft: " + VERDICT + "</think>\nIt is Incorrect.", id="draft-only"),
        # The thinking names its own closing tag before the draft: read as the answer, it was.
        pytest.param(
            "<think>I end with </think> then answer. Draft: " + VERDICT + " hmm</think>",
            id="draft-after-a-named-tag",
        ),
    ],
)
def test_a_draft_in_the_thinking_is_never_the_verdict(
    content: str, server_factory: ServerFactory, judge_factory: Make, rules: RuleSet
) -> None:
    _assert_never_read(content, server_factory, judge_factory, rules)
