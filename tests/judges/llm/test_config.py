"""LLM settings from STEF_LLM_* variables: validated, frozen, the key kept secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from stef.errors import ConfigError
from stef.judges.llm import build_llm_judge
from stef.judges.llm.client import ChatClient
from stef.judges.llm.config import LlmConfig
from stef.testing.fake_server import FakeLlmServer

SECRET = "sk-live-please-never-print-me"


def test_nothing_set_means_not_configured() -> None:
    config = LlmConfig.from_env({})
    assert not config.configured
    assert config.model is None


@pytest.mark.parametrize(
    "env",
    [
        {"STEF_LLM_BASE_URL": "http://127.0.0.1:8000/v1"},
        {"STEF_LLM_API_KEY": SECRET},
    ],
)
def test_a_base_url_or_a_key_selects_the_llm(env: dict[str, str]) -> None:
    assert LlmConfig.from_env(env).configured


def test_empty_values_count_as_unset() -> None:
    assert not LlmConfig.from_env({"STEF_LLM_BASE_URL": "", "STEF_LLM_API_KEY": " "}).configured


def test_every_variable_is_read() -> None:
    config = LlmConfig.from_env(
        {
            "STEF_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
            "STEF_LLM_API_KEY": SECRET,
            "STEF_LLM_MODEL": "qwen2.5:7b",
            "STEF_LLM_TIMEOUT_S": "12.5",
            "STEF_LLM_MAX_RETRIES": "2",
            "STEF_LLM_MAX_TOTAL_RETRY_S": "40",
            "STEF_LLM_MAX_CONCURRENCY": "16",
            "STEF_LLM_MAX_TOKENS": "800",
            "STEF_LLM_RESPONSE_FORMAT": "json_object",
            "STEF_LLM_CACHE": "/tmp/stef-cache.sqlite",
            "STEF_LLM_CACHE_SIZE": "50",
            "STEF_LLM_PRICES": '{"qwen2.5:7b": {"prompt": 0.1, "completion": 0.2}}',
        }
    )
    assert config.base_url == "http://127.0.0.1:11434/v1"
    assert config.api_key is not None and config.api_key.get_secret_value() == SECRET
    assert config.model == "qwen2.5:7b"
    assert config.timeout_s == 12.5
    assert config.max_retries == 2
    assert config.max_total_retry_s == 40
    assert config.max_concurrency == 16
    assert config.max_tokens == 800
    assert config.response_format == "json_object"
    assert config.cache_path == Path("/tmp/stef-cache.sqlite")
    assert config.cache_size == 50
    assert config.cost("qwen2.5:7b", 1_000_000, 500_000) == pytest.approx(0.2)
    assert config.cost("other", 10, 10) is None
    assert config.temperature == 0


def test_the_key_is_never_shown() -> None:
    config = LlmConfig.from_env({"STEF_LLM_API_KEY": SECRET, "STEF_LLM_TIMEOUT_S": "5"})
    assert SECRET not in repr(config)
    assert SECRET not in str(config)
    assert SECRET not in config.model_dump_json()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STEF_LLM_TIMEOUT_S": "soon"}, "STEF_LLM_TIMEOUT_S"),
        ({"STEF_LLM_MAX_RETRIES": "-1"}, "STEF_LLM_MAX_RETRIES"),
        ({"STEF_LLM_MAX_CONCURRENCY": "0"}, "STEF_LLM_MAX_CONCURRENCY"),
        ({"STEF_LLM_RESPONSE_FORMAT": "xml"}, "STEF_LLM_RESPONSE_FORMAT"),
        ({"STEF_LLM_PRICES": "{not json"}, "STEF_LLM_PRICES"),
        ({"STEF_LLM_PRICES": '{"m": {"prompt": -1, "completion": 0}}'}, "STEF_LLM_PRICES"),
    ],
)
def test_invalid_values_fail_at_start_naming_the_variable(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        LlmConfig.from_env({**env, "STEF_LLM_API_KEY": SECRET})
    assert SECRET not in str(info.value)


def test_config_is_frozen() -> None:
    config = LlmConfig.from_env({})
    with pytest.raises(ValueError, match="frozen"):
        config.model = "x"  # type: ignore[misc]


def test_a_model_name_is_required() -> None:
    with pytest.raises(ConfigError, match="STEF_LLM_MODEL"):
        build_llm_judge(LlmConfig(base_url="http://127.0.0.1:9/v1"))


def test_requests_read_nothing_from_openai_variables(
    monkeypatch: pytest.MonkeyPatch, server: FakeLlmServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-openai-env")
    for base_url in (server.base_url, server.base_url + "/"):
        client = ChatClient(LlmConfig(base_url=base_url, model="m"))
        try:
            client.complete(lambda mode: [{"role": "user", "content": "ping"}])
        finally:
            client.close()
    for got in server.requests:
        assert (got.method, got.path) == ("POST", "/v1/chat/completions")
        assert got.headers["authorization"] == "Bearer none"
        assert "sk-from-openai-env" not in str(got.headers)
        assert "org-from-openai-env" not in str(got.headers)
        assert got.body["model"] == "m"
    assert len(server.requests) == 2


def test_samples_temperature_and_second_opinion_from_the_environment() -> None:
    default = LlmConfig.from_env({})
    assert (default.samples, default.temperature, default.second_opinion) == (1, 0, True)
    config = LlmConfig.from_env(
        {
            "STEF_LLM_SAMPLES": "3",
            "STEF_LLM_TEMPERATURE": "0.7",
            "STEF_LLM_SECOND_OPINION": "false",
        }
    )
    assert (config.samples, config.temperature, config.second_opinion) == (3, 0.7, False)
    for var, value in (("STEF_LLM_SAMPLES", "0"), ("STEF_LLM_SAMPLES", "16")):
        with pytest.raises(ConfigError, match=var):
            LlmConfig.from_env({var: value})


def test_a_check_across_variables_names_the_variable_it_is_about() -> None:
    env = {"STEF_LLM_BASE_URL": "http://127.0.0.1:9/v1", "STEF_LLM_VERDICT": "probability"}
    with pytest.raises(ConfigError, match=r"^invalid LLM settings: STEF_LLM_VERDICT: "):
        LlmConfig.from_env({**env, "STEF_LLM_SAMPLES": "3"})
