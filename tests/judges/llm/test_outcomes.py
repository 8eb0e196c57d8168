"""What comes out: outcome and score from the formula, retries counted, failures as judge_error."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from stef.errors import LlmReplyError, LlmTransportError
from stef.judges.llm.judge import LlmJudge
from stef.models import FilterStatus, Verdict
from stef.pipeline import Pipeline
from stef.prompts import data_blocks
from stef.testing.fake_server import Delay, Error, FakeLlmServer, Raw, Reply
from tests.judges.llm.conftest import make_record, request_of
from tests.judges.llm.replies import filt, reply

Make = Callable[..., LlmJudge]
PipelineFor = Callable[[LlmJudge], Pipeline]


def calls(registry: CollectorRegistry, outcome: str, model: str = "judge-model") -> float:
    value = registry.get_sample_value(
        "stef_llm_request_duration_seconds_count", {"model": model, "outcome": outcome}
    )
    return value or 0.0


# ------------------------------------------------------------------------------------ scoring


TYPICAL_SQL = "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'APAC' AND year = 2023"
WRONG_YEAR_SQL = "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'APAC' AND year = 2022"
WRONG_BOTH_SQL = "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'EMEA' AND year = 2022"


@pytest.mark.parametrize(
    ("sql", "scripted", "score", "status", "verdict"),
    [
        # STEF matches APAC and 2023 itself: the model is asked about nothing else.
        pytest.param(TYPICAL_SQL, reply(), 100.0, "fully_applied", "Correct", id="correct"),
        pytest.param(
            TYPICAL_SQL,
            reply(verdict="Likely Correct", confidence=0.7),
            64.0,
            "fully_applied",
            "Likely Correct",
            id="likely-correct-medium-confidence",
        ),
        # STEF's reading finds year = 2022 contradicts "for 2023" and settles it (mismatched):
        # the model is not asked about it again.
        pytest.param(
            WRONG_YEAR_SQL,
            reply(
                verdict="Potentially Incorrect",
                confidence=0.9,
                issues=["filters_incorrect"],
            ),
            50.0,
            "partially_applied",
            "Potentially Incorrect",
            id="partially-applied",
        ),
        pytest.param(
            WRONG_BOTH_SQL,
            reply(
                filters=[filt("in the APAC region", "APAC", "missing", lhs="region")],
                verdict="Incorrect",
                confidence=0.5,
                issues=["filters_missing"],
            ),
            0.0,
            "not_applied",
            "Incorrect",
            id="not-applied-low-confidence",
        ),
        pytest.param(
            TYPICAL_SQL + " AND channel = 'web'",
            reply(verdict="Likely Correct", confidence=0.9),
            70.0,
            "fully_applied_with_extras",
            "Likely Correct",
            id="extra-predicate",
        ),
    ],
)
def test_score_follows_the_formula(
    server: FakeLlmServer,
    judge: LlmJudge,
    pipeline_for: PipelineFor,
    sql: str,
    scripted: dict[str, object],
    score: float,
    status: str,
    verdict: str,
) -> None:
    server.script(Reply(scripted, prompt_tokens=1200, completion_tokens=150))
    result = pipeline_for(judge).judge_record(make_record(sql=sql))
    assert result.outcome == "evaluated"
    assert result.components is not None
    assert result.components.filter_status == FilterStatus(status)
    assert result.components.verdict == Verdict(verdict)
    assert result.score == score
    assert result.usage.prompt_tokens == 1200
    assert result.usage.completion_tokens == 150
    assert result.usage.attempts == 1
    assert result.usage.latency_ms > 0
    assert result.error is None
    assert result.repairs == []


def test_enrichment_without_qe_is_missing_whatever_the_model_says(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    server.script(Reply(reply(enrichment="major_drift")))
    result = pipeline_for(judge).judge_record(make_record(enriched_question=None))
    assert result.enrichment is not None
    assert result.enrichment.status == "missing"
    (sent,) = server.chat_requests()
    assert data_blocks(sent.text("user"))["enriched_question"] is None


def test_mutating_sql_is_incorrect_even_when_the_model_says_correct(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    server.script(Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record(sql="DELETE FROM sales"))
    assert result.components is not None
    assert result.components.verdict == Verdict.INCORRECT
    assert "unsafe_sql" in result.issues


def test_cost_from_the_price_table(
    server: FakeLlmServer,
    judge_factory: Make,
    pipeline_for: PipelineFor,
    registry: CollectorRegistry,
) -> None:
    judge = judge_factory(server, prices={"judge-model": {"prompt": 0.15, "completion": 0.60}})
    server.script(Reply(reply(), prompt_tokens=2000, completion_tokens=500))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.usage.cost_usd == pytest.approx((2000 * 0.15 + 500 * 0.60) / 1e6)
    assert (
        registry.get_sample_value(
            "stef_llm_tokens_total", {"model": "judge-model", "kind": "prompt"}
        )
        == 2000
    )
    assert registry.get_sample_value(
        "stef_llm_cost_usd_total", {"model": "judge-model"}
    ) == pytest.approx(0.0006)


def test_a_cache_hit_costs_nothing_rather_than_an_unknown_amount(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    """Before: a hit's cost_usd was null with a price table set, so a run answered from the
    cache said "cost: unknown (no price table)"."""
    judge = judge_factory(server, prices={"judge-model": {"prompt": 0.15, "completion": 0.60}})
    server.script(Reply(reply(), prompt_tokens=2000, completion_tokens=500))
    p = pipeline_for(judge)
    first, again = p.judge_record(make_record(id="a")), p.judge_record(make_record(id="b"))
    assert (first.usage.cache_hit, again.usage.cache_hit) == (False, True)
    assert again.usage.cost_usd == 0.0
    # Without a price for the model, a hit's cost stays unknown, as a call's does.
    unpriced = judge_factory(server, prices={"other-model": {"prompt": 1, "completion": 1}})
    server.script(Reply(reply()))
    q = pipeline_for(unpriced)
    q.judge_record(make_record(id="c"))
    assert q.judge_record(make_record(id="d")).usage.cost_usd is None


# ------------------------------------------------------------------------------------ retries


def test_500_then_success_is_retried_and_counted(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, registry: CollectorRegistry
) -> None:
    server.script(Reply(reply()))  # json_schema works once: the endpoint settles on it
    pipeline_for(judge).judge_record(make_record(id="warm"))
    server.script(Error(500), Error(503), Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record(id="r", question="Spend APAC 2023?"))
    assert result.outcome == "evaluated"
    assert result.score == 100.0
    assert result.usage.attempts == 3
    assert calls(registry, "retry") == 2
    assert calls(registry, "ok") == 2
    assert len(server.chat_requests()) == 4


def test_429_retry_after_is_honoured(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, registry: CollectorRegistry
) -> None:
    server.script(Error(429, "slow down", retry_after=1), Reply(reply()))
    started = time.monotonic()
    result = pipeline_for(judge).judge_record(make_record())
    elapsed = time.monotonic() - started
    assert result.outcome == "evaluated"
    first, second = server.chat_requests()
    # Backoff alone is at most 0.05 s here; the second call waited for Retry-After.
    assert second.at - first.at >= 1.0
    assert elapsed >= 1.0
    assert result.usage.attempts == 2
    assert calls(registry, "retry") == 1


def test_retry_after_beyond_the_total_budget_gives_up_at_once(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, max_total_retry_s=2.0)
    server.script(Error(429, retry_after=60))
    started = time.monotonic()
    result = pipeline_for(judge).judge_record(make_record())
    assert time.monotonic() - started < 1.0
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("rate_limited:")
    assert "retry budget of 2.0 s" in result.error
    assert result.score is None and result.tier is None


@pytest.mark.parametrize(
    "step",
    [
        # A date past year 9999: mktime_tz raised ValueError out of the retry decision.
        Error(429, retry_after="Mon, 01 Jan 10000 00:00:00 GMT"),
        Raw(429, b"[" * 200_000),  # an error body nested past json.loads: RecursionError
        Raw(500, b"[" * 200_000),
    ],
    ids=["retry-after-year-10000", "429-nested-body", "500-nested-body"],
)
def test_an_unreadable_error_answer_is_retried_like_any_other(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, step: Error | Raw
) -> None:
    """Each was an internal error, the record's call never retried."""
    server.script(step, Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record())
    assert (result.outcome, result.score, result.usage.attempts) == ("evaluated", 100.0, 2)


def test_retries_are_bounded_by_count(
    server: FakeLlmServer,
    judge_factory: Make,
    pipeline_for: PipelineFor,
    registry: CollectorRegistry,
) -> None:
    judge = judge_factory(server, max_retries=2)
    server.script(Reply(reply()))
    pipeline_for(judge).judge_record(make_record(id="warm"))
    server.script(*[Error(502)] * 5)
    result = pipeline_for(judge).judge_record(make_record(id="r2", question="other"))
    assert result.outcome == "judge_error"
    assert result.score is None
    assert result.error is not None and result.error.startswith("http_502:")
    assert "gave up after 3 attempts" in result.error
    assert result.usage.attempts == 3
    assert calls(registry, "retry") == 2
    assert calls(registry, "error") == 1
    assert server.pending == 2


def test_timeout_is_retried_then_judge_error(
    server: FakeLlmServer,
    judge_factory: Make,
    pipeline_for: PipelineFor,
    registry: CollectorRegistry,
) -> None:
    judge = judge_factory(server, timeout_s=0.3, max_retries=1)
    server.script(Delay(3.0), Delay(3.0))
    started = time.monotonic()
    result = pipeline_for(judge).judge_record(make_record())
    elapsed = time.monotonic() - started
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("timeout:")
    assert result.usage.attempts == 2
    assert 0.6 <= elapsed < 2.5
    assert calls(registry, "retry") == 1 and calls(registry, "error") == 1


def test_timeout_then_success(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, timeout_s=0.3)
    server.script(Delay(2.0), Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated" and result.score == 100.0
    assert result.usage.attempts == 2


def test_connection_refused_is_a_transport_error(
    judge_factory: Make, server_factory: Callable[..., FakeLlmServer], pipeline_for: PipelineFor
) -> None:
    srv = server_factory()
    judge = judge_factory(srv, max_retries=1)
    srv.close()  # nothing listens on that port any more
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("connection_error:")
    assert result.usage.attempts == 2


def test_client_errors_are_not_retried(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    server.script(Error(401, "invalid api key"))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.error is not None and result.error.startswith("http_401:")
    assert "invalid api key" in result.error
    assert len(server.chat_requests()) == 1


def test_transport_error_carries_status_and_attempts(
    server: FakeLlmServer, judge_factory: Make
) -> None:
    judge = judge_factory(server, max_retries=1)
    server.script(Reply(reply()))
    judge.judge(request_of(make_record()))
    server.script(Error(503), Error(503))
    with pytest.raises(LlmTransportError) as info:
        judge.judge(request_of(make_record(question="different")))
    assert info.value.status_code == 503
    assert info.value.attempts == 2
    assert info.value.reason == "http_503"


# --------------------------------------------------------------------------- invalid replies


@pytest.mark.parametrize(
    ("bad", "error_part"),
    [
        pytest.param(Reply("this is not JSON"), "not valid JSON", id="not-json"),
        pytest.param(Reply({"verdict": "Correct"}), "question_spec: Field required", id="schema"),
        pytest.param(
            Reply({**reply(), "verdict": "Mostly Correct"}), "verdict: Input should be", id="label"
        ),
        pytest.param(
            Reply({**reply(), "confidence": 1.7}), "confidence must be between", id="confidence"
        ),
        pytest.param(
            Reply({**reply(), "verdict": None}), "verdict: Input should be", id="no-verdict"
        ),
        pytest.param(Reply(""), "the reply is empty", id="empty"),
        pytest.param(
            Reply('{"question_spec": ', finish_reason="length"), "cut off", id="truncated"
        ),
    ],
)
def test_invalid_reply_is_reasked_once_with_the_error(
    server: FakeLlmServer,
    judge: LlmJudge,
    pipeline_for: PipelineFor,
    bad: Reply,
    error_part: str,
) -> None:
    server.script(bad, Reply(reply(), prompt_tokens=100, completion_tokens=10))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated"
    assert result.score == 100.0
    first, second = server.chat_requests()
    assert second.messages[:2] == first.messages
    assert second.messages[2]["role"] == "assistant"
    assert second.messages[2]["content"] == (
        bad.content if isinstance(bad.content, str) else second.messages[2]["content"]
    )
    reask = second.messages[3]
    assert reask["role"] == "user"
    errors = data_blocks(reask["content"])["validation_errors"]
    assert any(error_part in e for e in errors), errors
    assert result.usage.attempts == 2
    assert result.usage.completion_tokens >= 10


def test_a_reply_with_a_lone_surrogate_is_quoted_back_in_the_reask(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    # Half an emoji, as a model cut short writes it: JSON carries it escaped; the re-ask body
    # quotes it back escaped too (UTF-8 cannot hold it raw).
    half = "not a verdict \ud83d"
    server.script(Reply(half, logprobs=False), Reply(reply()))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated"
    first, second = server.chat_requests()
    assert second.messages[:2] == first.messages
    assert second.messages[2] == {"role": "assistant", "content": half}


@pytest.mark.parametrize("ascii_json", [True, False], ids=["escaped", "raw"])
def test_a_verdict_whose_rationale_holds_half_an_emoji_is_judged_at_once(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, ascii_json: bool
) -> None:
    # A usable verdict with a lone surrogate in its free text (JSON "\ud83d", or the character
    # itself escaped by the body): U+FFFD in its place, no re-ask. It was two calls and a
    # judge_error.
    answer = {**reply(), "rationale": "half an emoji \ud83d here"}
    server.script(Reply(json.dumps(answer, ensure_ascii=ascii_json), logprobs=False))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated", result.error
    assert len(server.chat_requests()) == 1
    assert "half an emoji \ufffd here" in result.rationale
    result.to_json()  # encodes: nothing of the surrogate is left


def test_second_invalid_reply_is_judge_error_never_a_score(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    server.script(Reply("nope"), Reply({"verdict": "Correct", "confidence": 1.0}))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.score is None and result.tier is None and result.components is None
    assert result.error is not None and result.error.startswith("invalid_reply:")
    assert result.usage.attempts == 2
    assert len(server.chat_requests()) == 2


def test_reply_error_keeps_the_raw_text(server: FakeLlmServer, judge: LlmJudge) -> None:
    server.script(Reply("nope"), Reply("still nope"))
    with pytest.raises(LlmReplyError) as info:
        judge.judge(request_of(make_record()))
    assert info.value.raw == "still nope"
    assert info.value.attempts == 2


def test_http_body_that_is_not_json_is_a_transport_error(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    # A gateway's error page is retried like a 5xx (max_retries=3: four calls), then given up.
    server.script(*[Raw(200, b"<html>gateway</html>", content_type="text/html")] * 4)
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "judge_error"
    assert result.score is None
    assert result.error is not None and result.error.startswith("bad_response:")
    assert result.usage.attempts == 4


def test_code_fenced_json_object_is_accepted(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor
) -> None:
    import json

    server.script(Reply("```json\n" + json.dumps(reply()) + "\n```"))
    result = pipeline_for(judge).judge_record(make_record())
    assert result.outcome == "evaluated" and result.score == 100.0
    assert len(server.chat_requests()) == 1
