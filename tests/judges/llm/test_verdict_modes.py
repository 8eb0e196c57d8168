"""``llm.verdict``: probability mode (one Yes/No token, P(Yes) from the log-probabilities) and the
structured mode's verdict-token probability, against the fake server's log-probabilities."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from stef.errors import ConfigError, InvalidInput, LlmReplyError
from stef.judges.heuristic.judge import heuristic
from stef.judges.llm import build_llm_judge
from stef.judges.llm.client import TokenLogprob
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.logprobs import verdict_probability, yes_probability
from stef.judges.llm.probability import relevant_rules
from stef.judges.llm.wire import read_logprobs
from stef.models import Verdict
from stef.pipeline import Pipeline, judge_request
from stef.rules import AppRules, load_rules
from stef.stages.validate import validate
from stef.testing.fake_server import Error, FakeLlmServer, Reply, estimate_tokens
from tests.judges.llm.conftest import RECORD, request_for
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]
EXAMPLES = Path(__file__).parents[3] / "examples"


def _config(server: FakeLlmServer, **overrides: object) -> LlmConfig:
    data: dict[str, object] = {
        "base_url": server.base_url,
        "model": "judge-model",
        "max_retries": 0,
        "timeout_s": 5.0,
    }
    data.update(overrides)
    return LlmConfig.model_validate(data)


# -------------------------------------------------------------------------- probability mode


def test_probability_sums_the_spellings_of_yes_and_no(judge_factory: Make) -> None:
    with FakeLlmServer() as server:
        server.script(
            Reply("Yes", token_probs={"Yes": 0.5, " Yes": 0.1, "yes": 0.1, "No": 0.2, " no": 0.1})
        )
        judge = judge_factory(server, verdict="probability")
        out = judge.judge(request_for(RECORD)).output
        body = server.chat_requests()[-1].body
    assert out.token_probability == pytest.approx(0.7)
    assert out.verdict is Verdict.LIKELY_CORRECT
    assert out.confidence == pytest.approx(0.7)
    # One token asked for, with its alternatives, as plain text.
    assert body["logprobs"] is True
    assert body["top_logprobs"] == 10
    assert body["max_tokens"] <= 5
    assert "response_format" not in body


@pytest.mark.parametrize(
    ("probs", "verdict", "confidence"),
    [
        ({"Yes": 0.95, "No": 0.05}, Verdict.CORRECT, 0.95),
        ({"Yes": 0.3, "No": 0.7}, Verdict.POTENTIALLY_INCORRECT, 0.7),
        ({"No": 0.96, "Yes": 0.04}, Verdict.INCORRECT, 0.96),
    ],
)
def test_probability_verdict_and_confidence_follow_p(
    judge_factory: Make, probs: dict[str, float], verdict: Verdict, confidence: float
) -> None:
    with FakeLlmServer() as server:
        first = next(iter(probs))
        server.script(Reply(first, token_probs=probs))
        out = judge_factory(server, verdict="probability").judge(request_for(RECORD)).output
    assert out.verdict is verdict
    assert out.confidence == pytest.approx(confidence)


def test_probability_keeps_the_heuristic_reading(judge_factory: Make) -> None:
    request = request_for(RECORD)
    with FakeLlmServer() as server:
        out = judge_factory(server, verdict="probability").judge(request).output
        prompt = server.chat_requests()[-1].text("user")
    reading = heuristic(request)
    assert out.question_spec == reading.question_spec
    assert out.filter_matches == reading.filter_matches
    assert out.enrichment == reading.enrichment
    # STEF's own matches reach the prompt: the model is told what the checks found.
    assert "'APAC' matched" in prompt
    assert "'2023' matched" in prompt


def test_probability_prompt_shows_what_the_sql_has_for_a_mismatch(judge_factory: Make) -> None:
    wrong_year = {**RECORD, "sql": RECORD["sql"].replace("2023", "2022")}
    with FakeLlmServer() as server:
        judge_factory(server, verdict="probability").judge(request_for(wrong_year))
        prompt = server.chat_requests()[-1].text("user")
    assert "'2023' mismatched: year = 2022" in prompt


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT COUNT(*) FROM accounts WHERE status = 'open'", id="bare"),
        pytest.param(
            "SELECT COUNT(*) FROM accounts AS T1 WHERE T1.status = 'open'", id="alias-with-digit"
        ),
        pytest.param('SELECT COUNT(*) FROM accounts a WHERE a."Status" = 1', id="quoted"),
    ],
)
def test_probability_prompt_keeps_the_rules_on_a_column_however_qualified(sql: str) -> None:
    """A benign or ignored filter on a column the SQL names reaches the prompt, whether the
    column is bare, quoted or qualified by an alias ending in a digit (``T1.status``, as BIRD
    writes every column); a filter on a column the SQL does not name stays out."""
    rules = AppRules(
        benign_filters=["status <> 'deleted'", "region = 'EMEA'"],
        ignore_filters=["STATUS", "tenant_id"],
    )
    request, _ = judge_request(validate({**RECORD, "sql": sql}), rules)
    assert relevant_rules(request) == {
        "benign_filters": ["status <> 'deleted'"],
        "ignore_filters": ["STATUS"],
    }


def test_probability_reply_without_logprobs_is_a_judge_error() -> None:
    with FakeLlmServer() as server:
        server.script(Reply("Yes", logprobs=False))
        judge = LlmJudge(_config(server, verdict="probability"))
        try:
            result = Pipeline(load_rules(None), judge).judge_record(validate(RECORD))
        finally:
            judge.close()
    assert result.outcome == "judge_error"
    assert result.score is None
    assert result.error is not None and result.error.startswith("no_logprobs:")


@pytest.mark.parametrize(
    "answer",
    [
        Reply(refusal="I cannot help with that"),
        Reply(refusal="I cannot help with that", logprobs=False),
        Reply("No", token_probs={"No": 0.9, "Yes": 0.1}, finish_reason="content_filter"),
    ],
    ids=["refusal", "refusal-without-logprobs", "content-filter"],
)
def test_probability_mode_reads_a_refusal_as_one(answer: Reply) -> None:
    # It was "no_logprobs: the endpoint sent no log-probabilities", the endpoint blamed for
    # what the model said; or a P(Yes) read off a reply the endpoint's filter stopped.
    with FakeLlmServer() as server:
        server.script(answer)
        judge = LlmJudge(_config(server, verdict="probability"))
        try:
            result = Pipeline(load_rules(None), judge).judge_record(validate(RECORD))
        finally:
            judge.close()
        asked = len(server.chat_requests())
    assert result.outcome == "judge_error"
    assert result.score is None
    assert result.error is not None and result.error.startswith("refused:")
    assert asked == 1  # a refusal is not asked again


@pytest.mark.parametrize("verdict", ["structured", "probability"])
def test_a_refusal_still_costs_its_tokens(verdict: str) -> None:
    # The refused judge_error counted its attempts but none of its tokens (usage 0 and 0),
    # where every other failed reply, no_logprobs for this one before, counts what it cost.
    with FakeLlmServer() as server:
        server.script(Reply(refusal="I cannot help", prompt_tokens=700, completion_tokens=12))
        judge = LlmJudge(_config(server, verdict=verdict))
        try:
            result = Pipeline(load_rules(None), judge).judge_record(validate(RECORD))
        finally:
            judge.close()
    assert result.error is not None and result.error.startswith("refused:")
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (700, 12)
    assert result.usage.attempts == 1


def test_probability_without_yes_or_no_is_a_judge_error(judge_factory: Make) -> None:
    with FakeLlmServer() as server:
        server.script(Reply("Maybe", token_probs={"Maybe": 0.8, "Perhaps": 0.2}))
        judge = judge_factory(server, verdict="probability")
        with pytest.raises(LlmReplyError) as caught:
            judge.judge(request_for(RECORD))
    assert caught.value.reason == "no_yes_no"


def test_probability_result_names_its_mode() -> None:
    with FakeLlmServer() as server:
        judge = build_llm_judge(_config(server, verdict="probability"))
        try:
            result = Pipeline(load_rules(None), judge).judge_record(validate(RECORD))
        finally:
            judge.close()
    data = json.loads(result.to_json())
    assert data["outcome"] == "evaluated"
    assert data["judge"]["mode"] == "probability"


def test_heuristic_result_has_no_mode_key() -> None:
    from stef.judges.heuristic.judge import HeuristicJudge

    result = Pipeline(load_rules(None), HeuristicJudge()).judge_record(validate(RECORD))
    assert "mode" not in json.loads(result.to_json())["judge"]


# ------------------------------------------------------------------------------------ preflight


def test_preflight_refuses_an_endpoint_without_logprobs() -> None:
    with FakeLlmServer(logprobs=False) as server:
        with pytest.raises(ConfigError, match="structured"):
            build_llm_judge(_config(server, verdict="probability"))
        # One probe, of one token; no record was judged.
        (probe,) = server.chat_requests()
    assert probe.body["max_tokens"] == 1
    assert probe.body["logprobs"] is True


def test_preflight_refuses_an_endpoint_that_rejects_logprobs() -> None:
    with FakeLlmServer() as server:
        server.script(Error(400, "logprobs is not supported with this model"))
        with pytest.raises(ConfigError, match="log-probabilities"):
            build_llm_judge(_config(server, verdict="probability"))


def test_preflight_passes_and_structured_mode_probes_nothing() -> None:
    with FakeLlmServer() as server:
        build_llm_judge(_config(server, verdict="probability")).close()
        assert len(server.chat_requests()) == 1
        build_llm_judge(_config(server)).close()
        assert len(server.chat_requests()) == 1


def test_cli_stops_with_one_line_when_probability_mode_has_no_logprobs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stef.cli import main
    from stef.exits import Exit

    with FakeLlmServer(logprobs=False) as server:
        monkeypatch.setenv("STEF_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("STEF_LLM_MODEL", "judge-model")
        monkeypatch.setenv("STEF_LLM_VERDICT", "probability")
        code = main(["judge", "--question", "Total spend in 2023?", "--sql", "SELECT 1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == Exit.USAGE
    assert len(err) == 1 and "log-probabilities" in err[0]


# ------------------------------------------------------------------------------- settings


def test_verdict_setting_from_env() -> None:
    assert LlmConfig.from_env({"STEF_LLM_VERDICT": "probability"}).verdict == "probability"
    assert LlmConfig.from_env({"STEF_LLM_VERDICT": "cascade"}).verdict == "cascade"
    assert LlmConfig.from_env({}).verdict == "structured"
    with pytest.raises(ConfigError, match="STEF_LLM_VERDICT"):
        LlmConfig.from_env({"STEF_LLM_VERDICT": "vibes"})


def test_probability_mode_refuses_samples() -> None:
    with pytest.raises(ConfigError, match="samples"):
        LlmConfig.from_env({"STEF_LLM_VERDICT": "probability", "STEF_LLM_SAMPLES": "3"})


# ------------------------------------------------------------------------------- structured


def test_structured_keeps_the_verdict_token_probability(judge_factory: Make) -> None:
    with FakeLlmServer() as server:
        server.script(Reply(reply(), token_probs={"Correct": 0.6, "Likely": 0.1, "Incorrect": 0.3}))
        out = judge_factory(server).judge(request_for(RECORD)).output
        body = server.chat_requests()[-1].body
    assert body["logprobs"] is True and body["top_logprobs"] == 10
    assert out.verdict is Verdict.CORRECT
    assert out.token_probability == pytest.approx(0.7)
    # The self-reported number stays what the model said.
    assert out.confidence == pytest.approx(0.95)


def test_structured_without_logprobs_has_no_token_probability(judge_factory: Make) -> None:
    with FakeLlmServer(logprobs=False) as server:
        out = judge_factory(server).judge(request_for(RECORD)).output
    assert out.token_probability is None
    assert out.verdict is Verdict.LIKELY_CORRECT


def test_structured_top_logprobs_zero_asks_for_none(judge_factory: Make) -> None:
    with FakeLlmServer() as server:
        out = judge_factory(server, top_logprobs=0).judge(request_for(RECORD)).output
        body = server.chat_requests()[-1].body
    assert "logprobs" not in body and "top_logprobs" not in body
    assert out.token_probability is None


def test_structured_endpoint_rejecting_logprobs_is_asked_again_without(
    judge_factory: Make,
) -> None:
    with FakeLlmServer() as server:
        server.script(Error(400, "'logprobs' is not supported with json_schema"))
        judge = judge_factory(server)
        first = judge.judge(request_for(RECORD)).output
        judge.judge(request_for({**RECORD, "id": "2", "question": "Spend in APAC for 2024?"}))
        bodies = [r.body for r in server.chat_requests()]
    assert first.verdict is Verdict.LIKELY_CORRECT
    assert [("logprobs" in b) for b in bodies] == [True, False, False]
    # json_schema stays: the refusal was of the log-probabilities, not of the schema.
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)


# ------------------------------------------------------------------------ the logprob readers


def _lp(token: str, top: dict[str, float]) -> TokenLogprob:
    return TokenLogprob(
        token, math.log(top.get(token, 1.0)), tuple((t, math.log(p)) for t, p in top.items())
    )


def test_yes_probability_skips_a_leading_token_and_needs_an_answer() -> None:
    tokens = [_lp(" ", {" ": 0.9, "\n": 0.1}), _lp("No", {"No": 0.75, "YES": 0.25})]
    assert yes_probability(tokens) == pytest.approx(0.25)
    assert yes_probability([_lp("Sure", {"Sure": 1.0})]) is None
    assert yes_probability(None) is None


def test_verdict_probability_reads_a_token_that_starts_before_the_value() -> None:
    text = '{"verdict": "Incorrect"}'
    tokens = [
        _lp('{"', {'{"': 1.0}),
        _lp("verdict", {"verdict": 1.0}),
        _lp('":', {'":': 1.0}),
        # The token that holds the value's first letters also holds the opening quote.
        _lp(' "In', {' "In': 0.6, ' "Correct': 0.3, ' "Pot': 0.05, " ": 0.05}),
        _lp("correct", {"correct": 1.0}),
        _lp('"}', {'"}': 1.0}),
    ]
    assert verdict_probability(text, tokens) == pytest.approx(0.3 / 0.95)
    # A reply, or tokens, without a verdict: nothing to read.
    assert verdict_probability('{"rationale": "x"}', tokens) is None
    assert verdict_probability(text, tokens[:3]) is None


def test_a_second_verdict_key_outside_the_reply_gives_no_probability() -> None:
    """The reply's object is read between its first and last brace; a second "verdict" after
    it gave its own probability to the first one's verdict (0.0009 to a parsed Likely
    Correct, and the score halved)."""
    text = '{"verdict": "Likely Correct"}\nFinal "verdict": "Incorrect"'
    tokens = [
        _lp('{"verdict": "', {'{"verdict": "': 1.0}),
        _lp("Likely", {"Likely": 0.9, "Incorrect": 0.1}),
        _lp(' Correct"}\nFinal "verdict": "', {' Correct"}\nFinal "verdict": "': 1.0}),
        _lp("Incorrect", {"Incorrect": 0.999, "Correct": 0.001}),
        _lp('"', {'"': 1.0}),
    ]
    assert verdict_probability(text, tokens) is None
    alone = [*tokens[:2], _lp(' Correct"}', {' Correct"}': 1.0})]
    assert verdict_probability('{"verdict": "Likely Correct"}', alone) == pytest.approx(0.9)


def test_verdict_probability_reads_the_alternatives_in_any_case() -> None:
    # A verdict is read in any case ("incorrect"), so are the alternatives at its position: read
    # in one case only, "incorrect" (0.95) beside "correct" (0.04) and "Correct" (0.01) was 1.0
    # passing.
    text = '{"verdict": "incorrect"}'
    tokens = [
        _lp('{"verdict": "', {'{"verdict": "': 1.0}),
        _lp("incorrect", {"incorrect": 0.95, "correct": 0.04, "Correct": 0.01}),
        _lp('"}', {'"}': 1.0}),
    ]
    assert verdict_probability(text, tokens) == pytest.approx(0.05)


# --------------------------------------------------------------------------------- the cost


def test_probability_prompt_is_short_on_the_example_log() -> None:
    """The median prompt of the example log stays under 300 tokens (estimated as characters /
    4; `make eval` measures the real tokenizer's count on the dev set)."""
    judge = LlmJudge(LlmConfig(base_url="http://127.0.0.1:9/v1", model="m", verdict="probability"))
    rules = load_rules(EXAMPLES.parent / "rules")
    sizes = []
    try:
        for line in (EXAMPLES / "agent_log.jsonl").read_text().splitlines():
            try:
                record = validate(line.encode())
            except InvalidInput:  # the log's deliberately bad lines are dead letters
                continue
            request, _ = judge_request(record, rules.for_app(record.app))
            context = judge.probability_messages(request)
            sizes.append(sum(estimate_tokens(m["content"]) for m in context))
    finally:
        judge.close()
    assert len(sizes) > 300
    assert statistics.median(sizes) <= 300


def test_a_reply_block_read_lazily_reads_as_its_tokens() -> None:
    block = {
        "content": [
            {"token": '{"', "logprob": 0.0, "top_logprobs": [{"token": '{"', "logprob": 0.0}]},
            {"token": 7, "logprob": -0.1},  # not a token: left out, as from the spelling
            {"token": "verdict", "logprob": -0.0, "top_logprobs": "not a list"},
            {"token": '":', "logprob": -0.0},
            {
                "token": ' "In',
                "logprob": math.log(0.6),
                "top_logprobs": [
                    {"token": ' "In', "logprob": math.log(0.6)},
                    {"token": ' "Correct', "logprob": math.log(0.3)},
                    {"token": ' "Pot', "logprob": float("nan")},  # no probability: skipped
                ],
            },
            {"token": "correct", "logprob": -1},  # an integer log-probability is one
        ]
    }
    tokens = read_logprobs(block)
    assert tokens is not None
    eager = tuple(tokens)
    text = '{"verdict": "Incorrect"}'
    assert [t.token for t in eager] == ['{"', "verdict", '":', ' "In', "correct"]
    assert eager[3].top == ((' "In', math.log(0.6)), (' "Correct', math.log(0.3)))
    assert eager[1].top == () and eager[4].logprob == -1.0
    assert tokens[-1] == eager[-1] and tokens[1:3] == eager[1:3]
    assert verdict_probability(text, tokens) == verdict_probability(text, eager)
    assert verdict_probability(text, tokens) == pytest.approx(0.3 / 0.9)
    with pytest.raises(IndexError):
        tokens[len(eager)]
    assert read_logprobs({"content": [{"token": "x", "logprob": 0.5}]}) is None


def test_request_body_is_what_the_judge_sends(judge_factory: Make) -> None:
    with FakeLlmServer() as server:
        judge = judge_factory(server)
        request = request_for(RECORD)
        body = json.loads(judge.request_body(request))
        judge.judge(request)
        sent = server.chat_requests()[-1].body
    assert body == sent
    assert body["logprobs"] is True and body["response_format"]["type"] == "json_schema"
