"""Process settings: file < env < flags, invalid values fail at start naming the setting, the API
key never shows, structured env values are YAML, unknown keys are rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from stef.errors import ConfigError
from stef.settings import load_settings
from stef.stages.validate import Limits


def test_settings_precedence_file_env_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "stef.yaml"
    cfg.write_text(
        "source: file:a.jsonl\nconcurrency: 2\nfield_mapping: {question: user_query}\n"
        "llm: {base_url: 'http://127.0.0.1:8000/v1', model: from-file, timeout_s: 5}\n"
    )
    s = load_settings(
        cfg,
        overrides={"concurrency": 7},
        env={"STEF_SOURCE": "file:b.jsonl", "STEF_CONCURRENCY": "3", "STEF_LLM_MODEL": "env"},
    )
    assert (s.source, s.concurrency) == ("file:b.jsonl", 7)
    assert s.mapping.source_of("question") == "user_query"
    assert (s.llm.model, s.llm.timeout_s) == ("env", 5)
    assert s.inflight_bound == 256  # max(256, 4 x concurrency)
    assert s.inflight_bytes_bound == 4 * 1024 * 1024
    assert load_settings(overrides={"concurrency": 100}, env={}).inflight_bound == 400


def test_the_llm_cache_in_a_config_file_is_cache_as_its_variable_says(tmp_path: Path) -> None:
    """Before: ``llm: {cache: ...}`` (STEF_LLM_CACHE lower-case, as docs/llm.md says config
    keys are) was refused as an extra input; only ``cache_path`` was read."""
    cfg = tmp_path / "stef.yaml"
    cfg.write_text("llm: {base_url: 'http://127.0.0.1:9/v1', model: m, cache: a.sqlite}\n")
    assert load_settings(cfg, env={}).llm.cache_path == Path("a.sqlite")
    env = {"STEF_LLM_CACHE": "b.sqlite"}
    assert load_settings(cfg, env=env).llm.cache_path == Path("b.sqlite")  # env over file
    cfg.write_text("llm: {base_url: 'http://127.0.0.1:9/v1', model: m, cache_path: c.sqlite}\n")
    assert load_settings(cfg, env={}).llm.cache_path == Path("c.sqlite")


def test_a_flag_not_given_leaves_the_env_value(tmp_path: Path) -> None:
    cfg = tmp_path / "stef.yaml"
    cfg.write_text("concurrency: 2\nmetrics_port: 9000\n")
    # The CLI passes every flag; the ones not given are None and override nothing.
    s = load_settings(cfg, overrides={"concurrency": None}, env={"STEF_CONCURRENCY": "3"})
    assert (s.concurrency, s.metrics_port) == (3, 9000)
    assert load_settings(env={}).concurrency == 8  # no file, no env, no flag: the default


def test_the_config_file_may_come_from_stef_config(tmp_path: Path) -> None:
    cfg = tmp_path / "stef.yaml"
    cfg.write_text("concurrency: 5\n")
    assert load_settings(env={"STEF_CONFIG": str(cfg)}).concurrency == 5


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"source": "http://x/y"}, "source"),
        ({"results": "kafka://k:1/t?group=g"}, "group"),
        ({"concurrency": 0}, "concurrency"),
        ({"gc_gen0": -1}, "gc_gen0"),
        ({"gc_gen0": 2**31}, "gc_gen0"),  # past what gc.set_threshold takes
        ({"field_mapping": {"qestion": "q"}}, "qestion"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_invalid_settings_fail_at_start(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(overrides=overrides, env={})


def test_api_key_is_never_in_the_settings_repr() -> None:
    s = load_settings(env={"STEF_LLM_API_KEY": "sk-secret-value", "STEF_LLM_MODEL": "m"})
    assert "sk-secret-value" not in repr(s)
    assert "sk-secret-value" not in s.model_dump_json()


def test_api_key_is_not_in_the_error_of_another_setting() -> None:
    env = {"STEF_LLM_API_KEY": "sk-secret-value", "STEF_LLM_MODEL": "m", "STEF_CONCURRENCY": "0"}
    with pytest.raises(ConfigError, match="concurrency") as info:
        load_settings(env=env)
    assert "sk-secret-value" not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "{max_sql_chars: 1000, max_question_chars: 50}",  # flow style
        '{"max_sql_chars": 1000, "max_question_chars": 50}',  # JSON is YAML too
        "max_sql_chars: 1000\nmax_question_chars: 50\n",  # block style
    ],
)
def test_stef_limits_is_yaml(text: str) -> None:
    limits = load_settings(env={"STEF_LIMITS": text}).limits
    assert (limits.max_sql_chars, limits.max_question_chars) == (1000, 50)
    # The limits not named keep their defaults.
    assert limits.max_json_depth == Limits().max_json_depth
    assert limits.max_record_bytes == Limits().max_record_bytes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{max_sql_chars: [1", "STEF_LIMITS is not valid YAML"),
        ("{max_sq_chars: 10}", "limits.max_sq_chars"),  # a misspelt limit
        ("{max_sql_chars: 0}", "limits.max_sql_chars"),
        ("- 1000", "limits"),
    ],
)
def test_bad_stef_limits_fail_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env={"STEF_LIMITS": text})


def test_dead_letter_max_bytes_has_a_minimum() -> None:
    s = load_settings(overrides={"dead_letter_max_bytes": 1024}, env={})
    assert s.dead_letter_max_bytes == 1024
    with pytest.raises(ConfigError, match="dead_letter_max_bytes"):
        load_settings(overrides={"dead_letter_max_bytes": 1023}, env={})
    with pytest.raises(ConfigError, match="dead_letter_max_bytes"):
        load_settings(env={"STEF_DEAD_LETTER_MAX_BYTES": "1000"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus_key: 1\n", "bogus_key"),
        ("limits: {max_sql_chars: 10, max_sql_charz: 5}\n", "max_sql_charz"),
        ("llm: {model: m, temprature: 0}\n", "temprature"),
        ("- source\n- results\n", "top level must be a mapping"),
        ("llm: [a]\n", "'llm' must be a mapping"),
    ],
)
def test_unknown_keys_in_the_file_are_rejected(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "stef.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, env={})


def test_an_unreadable_config_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_settings(tmp_path / "missing.yaml", env={})


_LLM_ENV = {"STEF_LLM_BASE_URL": "http://127.0.0.1:9/v1", "STEF_LLM_MODEL": "m"}


def test_an_llm_budget_beyond_a_set_record_timeout_is_refused() -> None:
    """Before: 3 samples of 4 retries of 60 s each were accepted beside a 600 s record timeout,
    and the liveness probe restarted the replica in the middle of a slow, healthy record."""
    with pytest.raises(ConfigError) as refused:
        load_settings(env={**_LLM_ENV, "STEF_LLM_SAMPLES": "3", "STEF_RECORD_TIMEOUT_S": "600"})
    message = str(refused.value)
    assert "\n" not in message
    assert "record_timeout_s 600" in message and "1440 s" in message
    assert load_settings(env={**_LLM_ENV, "STEF_LLM_SAMPLES": "3", "STEF_RECORD_TIMEOUT_S": "1440"})


def test_an_unset_record_timeout_covers_the_llm_budget() -> None:
    """Before: the documented slow-model settings (``STEF_LLM_TIMEOUT_S=300``, ``samples: 3``)
    were refused at start unless record_timeout_s was raised by hand as well."""
    assert load_settings(env={**_LLM_ENV, "STEF_LLM_SAMPLES": "3"}).record_timeout_s == 1440
    slow = {**_LLM_ENV, "STEF_LLM_TIMEOUT_S": "300", "STEF_LLM_MAX_RETRIES": "1"}
    settings = load_settings(env=slow)
    assert settings.record_timeout_s == settings.llm.record_budget_s > 600
    # Never below the default, whatever the budget; the heuristic has none.
    assert load_settings(env=_LLM_ENV).record_timeout_s == 600
    assert load_settings(env={}).record_timeout_s == 600


def test_the_llm_budget_counts_slot_waits_retries_backoffs_reasks_and_samples() -> None:
    settings = load_settings(env=_LLM_ENV)
    assert settings.llm.record_budget_s == 2 * (120 + 2 * 60)  # the retry budget binds
    few = load_settings(
        env={**_LLM_ENV, "STEF_LLM_TIMEOUT_S": "5", "STEF_LLM_MAX_RETRIES": "1"},
        overrides={"record_timeout_s": 200},
    )
    assert few.llm.record_budget_s == 2 * (2 * 10 + 30)  # the attempts bind
    # The heuristic judge has no LLM budget: any record timeout goes.
    assert load_settings(env={}, overrides={"record_timeout_s": 1}).record_timeout_s == 1
