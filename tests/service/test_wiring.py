"""The one builder of what a command runs on: the judge backend chosen from the settings (the
heuristic one, the LLM one, either behind the rate limits), the record path carrying the settings'
mapping, limits and dead-letter cap, and the sinks and sources of parsed URLs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from stef.errors import ConfigError
from stef.io.discard import DiscardSink
from stef.io.jsonl import FileSource, JsonlSink
from stef.io.urls import parse_endpoint
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.llm.judge import LlmJudge
from stef.judges.ratelimit import RateLimitedJudge
from stef.metrics import Metrics
from stef.rules import AppRules, RuleSet
from stef.service.wiring import build_backend, build_pipeline, open_sink, open_source
from stef.settings import Settings, load_settings
from stef.stages.validate import FieldMapping, Limits
from stef.testing.fake_server import FakeLlmServer

RULES = RuleSet(AppRules())
RECORD = json.dumps(
    {
        "question": "How many customers are in APAC?",
        "sql": "SELECT COUNT(*) FROM c WHERE region = 'APAC'",
    }
).encode()


def _settings(**env: str) -> Settings:
    """Settings from ``env`` alone: the test process's own STEF_* variables play no part."""
    return load_settings(None, None, env=env)


@pytest.fixture
def server() -> Iterator[FakeLlmServer]:
    with FakeLlmServer() as srv:
        yield srv


# ------------------------------------------------------------------------------------ backend


def test_without_llm_settings_the_backend_is_the_heuristic_judge() -> None:
    backend = build_backend(_settings())
    assert isinstance(backend, HeuristicJudge)
    assert backend.info.backend == "heuristic"


def test_with_an_endpoint_the_backend_is_the_llm_judge(server: FakeLlmServer) -> None:
    registry = CollectorRegistry()
    settings = _settings(STEF_LLM_BASE_URL=server.base_url, STEF_LLM_MODEL="judge-model")
    backend = build_backend(settings, Metrics(registry))
    try:
        assert isinstance(backend, LlmJudge)
        assert backend.config.base_url == server.base_url
        assert (backend.info.backend, backend.info.model) == ("llm", "judge-model")
        # The judge it built talks to that endpoint, and nothing was sent before it was asked.
        assert server.chat_requests() == []
        processed = build_pipeline(settings, RULES, backend).process(RECORD, {"file": "-"})
    finally:
        backend.close()
    assert processed.result is not None and processed.result.outcome == "evaluated"
    assert processed.result.judge.model == "judge-model"
    assert len(server.chat_requests()) == 1
    assert server.chat_requests()[0].body["model"] == "judge-model"


def test_an_api_key_alone_also_selects_the_llm_judge() -> None:
    settings = _settings(STEF_LLM_API_KEY="sk-test", STEF_LLM_MODEL="m")
    backend = build_backend(settings)
    try:
        assert isinstance(backend, LlmJudge)
    finally:
        backend.close()


def test_an_endpoint_without_a_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="STEF_LLM_MODEL"):
        build_backend(_settings(STEF_LLM_BASE_URL="http://127.0.0.1:9/v1"))


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"STEF_LLM_REQUESTS_PER_S": "5"}, id="requests"),
        pytest.param({"STEF_LLM_TOKENS_PER_MIN": "60000"}, id="tokens"),
        pytest.param(
            {"STEF_LLM_REQUESTS_PER_S": "5", "STEF_LLM_TOKENS_PER_MIN": "60000"}, id="both"
        ),
    ],
)
def test_a_rate_wraps_the_heuristic_judge(env: dict[str, str]) -> None:
    backend = build_backend(_settings(**env))
    assert isinstance(backend, RateLimitedJudge)
    assert isinstance(backend.backend, HeuristicJudge)
    assert backend.info == backend.backend.info


def test_a_rate_wraps_the_llm_judge(server: FakeLlmServer) -> None:
    settings = _settings(
        STEF_LLM_BASE_URL=server.base_url, STEF_LLM_MODEL="m", STEF_LLM_REQUESTS_PER_S="50"
    )
    backend = build_backend(settings)
    assert isinstance(backend, RateLimitedJudge)
    inner = backend.backend
    assert isinstance(inner, LlmJudge)
    backend.close()  # reaches the wrapped judge
    assert inner._closed.is_set()


# ----------------------------------------------------------------------------------- pipeline


def test_build_pipeline_carries_mapping_limits_and_cap() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    settings = _settings(
        STEF_FIELD_MAPPING="{question: user_query, sql: query.text}",
        STEF_LIMITS="{max_question_chars: 100}",
        STEF_DEAD_LETTER_MAX_BYTES="2048",
    )
    backend = HeuristicJudge()
    pipeline = build_pipeline(settings, RULES, backend, metrics)
    assert pipeline.options.mapping == FieldMapping(
        fields={"question": "user_query", "sql": "query.text"}
    )
    assert pipeline.options.limits == Limits(max_question_chars=100)
    assert pipeline.options.dead_letter_max_bytes == 2048
    assert pipeline.backend is backend and pipeline.metrics is metrics
    assert pipeline.rules is RULES
    # ... and uses them on a record.
    ok = pipeline.process(
        b'{"user_query": "How many users?", "query": {"text": "SELECT COUNT(*) FROM u"}}',
        {"file": "-", "line": 1},
    )
    assert ok.result is not None and ok.result.outcome == "evaluated"
    too_long = pipeline.process(
        json.dumps({"user_query": "q" * 101, "query": {"text": "SELECT 1"}}).encode(),
        {"file": "-", "line": 2},
    )
    assert too_long.reason == "too_large"
    huge = pipeline.process(b"x" * 100_000, {"file": "-", "line": 3})
    assert huge.reason is not None and len(huge.value) <= 2048


def test_build_pipeline_reads_rules_through_a_callable() -> None:
    current = {"rules": RULES}
    pipeline = build_pipeline(_settings(), lambda: current["rules"], HeuristicJudge())
    newer = RuleSet(AppRules(limit_min=10))
    current["rules"] = newer
    assert pipeline.rules is newer


# ------------------------------------------------------------------------------ sinks, sources


def test_no_sink_url_discards() -> None:
    assert isinstance(open_sink(None, _settings()), DiscardSink)


def test_a_file_sink_url_opens_a_jsonl_sink(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.jsonl"
    sink = open_sink(parse_endpoint(f"file:{path}", what="results"), _settings())
    acks: list[BaseException | None] = []
    try:
        assert isinstance(sink, JsonlSink) and sink.path == str(path)
        sink.send(None, b'{"id": 1}', acks.append)
    finally:
        sink.close()
    assert acks == [None]
    assert path.read_bytes() == b'{"id": 1}\n'


def test_a_dash_sink_url_writes_to_stdout() -> None:
    sink = open_sink(parse_endpoint("-", what="results"), _settings())
    assert isinstance(sink, JsonlSink) and sink.path == "-"


def test_a_file_source_follows_when_the_settings_say_so(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    endpoint = parse_endpoint(f"file:{path}")
    plain = open_source(endpoint, _settings())
    followed = open_source(endpoint, _settings(STEF_FOLLOW="true"))
    assert isinstance(plain, FileSource) and isinstance(followed, FileSource)
    assert (plain.path, plain.follow) == (str(path), False)
    assert (followed.path, followed.follow) == (str(path), True)


def test_a_dash_source_reads_stdin_and_never_follows() -> None:
    source = open_source(parse_endpoint("-"), _settings(STEF_FOLLOW="true"))
    assert isinstance(source, FileSource)
    assert (source.path, source.follow) == ("-", False)


def test_heuristic_options_and_the_dialect_guess_come_from_the_settings() -> None:
    settings = load_settings(
        env={"STEF_HEURISTIC": "{operator_mismatch: true}", "STEF_GUESS_DIALECT": "false"}
    )
    backend = build_backend(settings)
    assert isinstance(backend, HeuristicJudge)
    assert backend._options.operator_mismatch and not backend._options.backtick_names
    pipeline = build_pipeline(settings, RuleSet(AppRules()), backend)
    assert pipeline.options.guess_dialect is False
    with pytest.raises(ConfigError, match="heuristic"):
        load_settings(overrides={"heuristic": {"no_such_signal": True}}, env={})
