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
    assert settings.canary.path is not None and (ROOT / settings.canary.path).exists()
    assert settings.canary.sample_size == 20


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


def test_make_run_script_talks_and_fits_120_columns() -> None:
    """scripts/run-sample.sh (``make run``): progress lines on stderr while the service judges,
    then a summary no wider than 120 columns with the sample's regression in it."""
    import subprocess

    proc = subprocess.run(
        ["bash", "scripts/run-sample.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("stef run: ")]
    assert progress[0].startswith("stef run: judging 416 lines")
    assert progress[-1].startswith("stef run: 416/416 lines done in")
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    rows = {
        tuple(ln.split()[:2]): ln.split() for ln in lines if ln.startswith(("sales", "support"))
    }
    # Release 2.1 drops the year of year questions: its sales mean falls well below 2.0's (by a
    # quarter at least: the heuristic's calibrated confidence scales every score by Γ <= 0.8).
    assert float(rows[("sales", "sql-agent@2.1")][3]) < 0.75 * float(
        rows[("sales", "sql-agent@2.0")][3]
    )
    assert "invalid input lines (dead letters): 16" in proc.stdout


def test_setup_for_run_installs_no_test_tools() -> None:
    """``make run`` installs the runtime lock only; ``make test`` the test lock."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "run: $(RUN_STAMP)" in makefile
    assert "setup.sh $(PY) $(VENV) run" in makefile and "setup.sh $(PY) $(VENV) test" in makefile
    script = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert '-r "requirements/$what.txt"' in script
    run_lock = (ROOT / "requirements" / "run.txt").read_text(encoding="utf-8")
    test_lock = (ROOT / "requirements" / "test.txt").read_text(encoding="utf-8")
    for tool in ("pytest", "mypy", "ruff", "hypothesis", "playwright"):
        assert f"\n{tool}==" not in run_lock and f"\n{tool}==" in test_lock, tool
