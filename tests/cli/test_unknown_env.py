"""A misspelt STEF_* variable is a start-up error that names it, as an unknown config key is."""

from __future__ import annotations

from pathlib import Path

import pytest

from stef.cli import main
from stef.errors import ConfigError
from stef.exits import Exit
from stef.settings import load_settings


def test_unknown_variable_is_named() -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(env={"STEF_CONCURENCY": "3", "STEF_CONCURRENCY": "4"})
    assert "STEF_CONCURENCY" in str(exc.value)
    assert "concurrency" in str(exc.value)  # the list of real names helps spot the typo


def test_every_unknown_variable_is_named_at_once() -> None:
    with pytest.raises(ConfigError, match="variables STEF_A, STEF_B"):
        load_settings(env={"STEF_B": "1", "STEF_A": "1"})


@pytest.mark.parametrize(
    "name",
    [
        "STEF_CONFIG",
        "STEF_PROMPTS_DIR",
        "STEF_LOG_LEVEL",
        "STEF_SKIP_REAL_MODEL",
        "STEF_REAL_MODEL_RECORDS",
        "STEF_CONCURRENCY",
        "STEF_METRICS_PORT",
    ],
)
def test_known_variables_pass(name: str) -> None:
    values = {"STEF_CONFIG": "", "STEF_LOG_LEVEL": "info", "STEF_CONCURRENCY": "2"}
    values |= {"STEF_METRICS_PORT": "off", "STEF_PROMPTS_DIR": "", "STEF_SKIP_REAL_MODEL": "1"}
    load_settings(env={name: values.get(name, "x")})


def test_other_prefixes_are_not_ours() -> None:
    load_settings(env={"STEFAN": "1", "MY_STEF_X": "1", "stef_lower": "1"})


def test_stef_run_exits_with_usage_and_the_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEF_CONCURENCY", "3")
    code = main(["run", "--source", "file:/nonexistent.jsonl", "--metrics-port", "off"])
    assert code == Exit.USAGE
    err = capsys.readouterr().err
    assert "STEF_CONCURENCY" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "meant"),
    [("STEF_LLM_BASEURL", "STEF_LLM_BASE_URL"), ("STEF_LLM_TIMOUT_S", "STEF_LLM_TIMEOUT_S")],
)
def test_a_misspelt_llm_variable_is_a_usage_error_with_a_suggestion(
    name: str, meant: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the misspelt endpoint was ignored and the heuristic judged every record, exit 0.
    monkeypatch.setenv(name, "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STEF_LLM_MODEL", "m")
    code = main(["run", "--source", "file:/nonexistent.jsonl", "--metrics-port", "off"])
    assert code == Exit.USAGE
    err = capsys.readouterr().err
    assert name in err and f"did you mean {meant}" in err and "Traceback" not in err


def test_llm_settings_without_an_endpoint_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"STEF_LLM_MODEL.*no endpoint"):
        load_settings(env={"STEF_LLM_MODEL": "gpt-5", "STEF_LLM_SAMPLES": "3"})
    config = tmp_path / "stef.yaml"
    config.write_text("llm: {model: gpt-5}\n")
    with pytest.raises(ConfigError, match=r"llm\.model.*no endpoint"):
        load_settings(config, env={})
    assert load_settings(env={"STEF_LLM_MODEL": "m", "STEF_LLM_API_KEY": "k"}).llm.configured


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000", "ftp://host/v1", "http://"])
def test_a_base_url_without_a_scheme_is_a_usage_error(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "How many?", "sql": "SELECT 1"}\n')
    monkeypatch.setenv("STEF_LLM_BASE_URL", url)
    monkeypatch.setenv("STEF_LLM_MODEL", "m")
    assert main(["replay", str(log), "--no-progress"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "STEF_LLM_BASE_URL" in err and "Traceback" not in err


def test_an_api_key_with_a_line_break_is_refused_without_printing_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: accepted; every call failed in the HTTP library, whose debug lines quoted the key.
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "How many?", "sql": "SELECT 1"}\n')
    monkeypatch.setenv("STEF_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STEF_LLM_MODEL", "m")
    monkeypatch.setenv("STEF_LLM_API_KEY", "sk-first-half-of-key\nsecond-half-of-key")
    assert main(["--log-level", "debug", "replay", str(log), "--no-progress"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "STEF_LLM_API_KEY" in err and "line break" in err
    assert "first-half" not in err and "second-half" not in err


def test_the_process_budgets_sharing_the_llm_prefix_are_known() -> None:
    # Per-replica budgets of any backend: neither misspelt nor "LLM settings without endpoint".
    env = {"STEF_LLM_REQUESTS_PER_S": "5", "STEF_LLM_TOKENS_PER_MIN": "20000"}
    settings = load_settings(env=env)
    assert (settings.llm_requests_per_s, settings.llm_tokens_per_min) == (5, 20000)
    assert not settings.llm.configured
