"""A misspelt STEF_* variable is a start-up error that names it, as an unknown config key is."""

from __future__ import annotations

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
        "STEF_LLM_SOMETHING_NEW",  # the STEF_LLM_* family belongs to LlmConfig
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
