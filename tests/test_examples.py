"""The example files people copy from are valid: the service config and the dev-set rules."""

from __future__ import annotations

import json

import pytest

from stef.cli import main
from stef.rules import load_rules
from stef.settings import load_settings
from tests.conftest import ROOT


def test_example_service_config_is_valid() -> None:
    settings = load_settings(ROOT / "examples" / "stef.yaml", env={})
    assert settings.field_mapping["sql"] == "payload.sql"
    assert settings.llm.model == "qwen2.5-7b-instruct"
    assert settings.llm.configured
    assert settings.known_agents == ["sql-agent@2.0", "sql-agent@2.1"]


def test_dev_set_rules_are_valid() -> None:
    assert load_rules(ROOT / "examples" / "rules-judge-dev").default.dialect == "sqlite"


def test_readme_calibrate_example_runs_on_the_shipped_labels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's `stef calibrate examples/judge-sample.jsonl --rules rules --json`."""
    labels = ROOT / "examples" / "judge-sample.jsonl"
    assert main(["calibrate", str(labels), "--rules", str(ROOT / "rules"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 40
