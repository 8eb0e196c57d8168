"""App rules: validation with file:line errors, directories, schema, structural benign matching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
import structlog.testing

from stef.cli import main
from stef.errors import RulesError
from stef.rules import AppRules, load_rules, rules_schema
from stef.rules.watch import RulesWatcher
from tests.conftest import ROOT


def test_shipped_rules_are_valid() -> None:
    ruleset = load_rules(ROOT / "rules")
    assert ruleset.known_apps == ["sales", "support"]
    assert ruleset.for_app("sales").dialect == "snowflake"
    assert ruleset.for_app("nope") is ruleset.default
    assert ruleset.for_app(None) is ruleset.default
    assert ruleset.for_app("support").sampling_rate == 0.5


def test_schema_file_is_in_sync() -> None:
    on_disk = json.loads((ROOT / "rules" / "schema.json").read_text())
    assert on_disk == rules_schema(), "regenerate with: stef rules schema > rules/schema.json"


def test_unknown_key_is_reported_with_line(tmp_path: Path) -> None:
    f = tmp_path / "app.yaml"
    f.write_text("dialect: postgres\n\nlimitt: 10\n")
    with pytest.raises(RulesError) as info:
        load_rules(f)
    (problem,) = info.value.problems
    assert (problem.line, problem.location, problem.message) == (
        3,
        "limitt",
        "unknown key (did you mean 'limit_min'?)",
    )


def test_an_app_key_that_is_not_the_files_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``app: orders`` in sales.yaml loaded without a word, and applied to no record of
    ``orders``. Said, not refused: a directory that loaded before must not stop a restart."""
    d = tmp_path / "rules"
    d.mkdir()
    (d / "sales.yaml").write_text("limit_min: 5\napp: orders\n")
    with structlog.testing.capture_logs() as logs:
        assert load_rules(d).for_app("sales").limit_min == 5
    said = [e for e in logs if e["event"] == "rules_app_not_the_files"]
    assert len(said) == 1 and (said[0]["app"], said[0]["applies_to"]) == ("orders", "sales")
    assert "orders.yaml" in said[0]["hint"]
    (d / "sales.yaml").write_text("limit_min: 5\napp: sales\n")
    with structlog.testing.capture_logs() as logs:
        load_rules(d)
    assert not [e for e in logs if e["event"] == "rules_app_not_the_files"]


def test_a_filter_nesting_calls_past_the_parser_is_refused_unparsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: its parse took 90 s and 943 MB, then failed with a TypeError's message."""
    d = tmp_path / "rules"
    d.mkdir()
    deep = "x = " + "DIV0(" * 17 + "1" + ")" * 17
    (d / "sales.yaml").write_text(f"dialect: snowflake\nbenign_filters:\n  - '{deep}'\n")
    assert main(["rules", "check", str(d)]) == 2
    assert (
        "[benign_filters.0] nests function calls 17 deep, more than 10" in capsys.readouterr().err
    )


def test_every_problem_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "default.yaml").write_text("limit_min: 100\n")
    (d / "a.yaml").write_text('dialect: nope\nbenign_filters:\n  - "x ="\n  - "ok = 1"\n')
    (d / "b.yaml").write_text("sampling_rate: 2\n")
    (d / "c.yaml").write_text("- a list\n")
    (d / "e.yaml").write_text("column_mappings: {a: [1]\n")
    assert main(["rules", "check", str(d)]) == 2
    err = capsys.readouterr().err
    assert f"{d / 'a.yaml'}:1: [dialect] unknown sqlglot dialect 'nope'" in err
    assert f"{d / 'a.yaml'}:3: [benign_filters.0] not a SQL predicate: 'x ='" in err
    assert f"{d / 'b.yaml'}:1: [sampling_rate]" in err
    assert f"{d / 'c.yaml'}:1: top level must be a mapping" in err
    assert f"{d / 'e.yaml'}:" in err and "not valid YAML" in err
    assert "5 problems in" in err


def test_check_ok_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "check", str(ROOT / "rules")]) == 0
    assert "ok" in capsys.readouterr().out


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    assert main(["rules", "check", str(tmp_path / "absent")]) == 2


def test_single_file_applies_to_every_app(tmp_path: Path) -> None:
    f = tmp_path / "one.yaml"
    f.write_text("limit_min: 50\n")
    ruleset = load_rules(f)
    assert ruleset.for_app("anything").limit_min == 50


def test_version_changes_with_content(tmp_path: Path) -> None:
    f = tmp_path / "one.yaml"
    f.write_text("limit_min: 50\n")
    v1 = load_rules(f).version
    f.write_text("limit_min: 51\n")
    assert load_rules(f).version != v1


def test_tier_order_enforced() -> None:
    with pytest.raises(ValueError):
        AppRules.model_validate({"tiers": {"excellent": 50, "good": 75, "marginal": 20}})


def test_watcher_keeps_last_good(tmp_path: Path) -> None:
    d = tmp_path / "rules"
    d.mkdir()
    f = d / "default.yaml"
    f.write_text("limit_min: 10\n")
    outcomes: list[str] = []
    w = RulesWatcher(d, on_reload=outcomes.append, settle_s=0.0)
    assert w.rules.default.limit_min == 10
    assert w.check() is None
    f.write_text("limit_min: 20\n# changed\n")
    assert w.check() == "success"
    assert w.rules.default.limit_min == 20
    f.write_text("limit_min: [\n")
    assert w.check() == "error"
    assert w.rules.default.limit_min == 20
    assert outcomes == ["success", "error"]
