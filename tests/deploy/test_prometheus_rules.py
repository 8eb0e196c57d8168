"""Prometheus recording and alert rules: promtool checks them, runs their unit tests, and every
alert has a test that fires it and one that does not."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.deploy.conftest import DEPLOY, PROM_DIR, RULE_FILES, rules, run

ALERT_TESTS = PROM_DIR / "tests" / "alerts.test.yml"


def alerts() -> list[dict[str, object]]:
    return [r for r in rules() if "alert" in r]


def test_promtool_check_rules(promtool: str) -> None:
    result = run([promtool, "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr
    counts = [int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", result.stdout)]
    assert counts == [20, 14], result.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    result = run([promtool, "test", "rules", str(ALERT_TESTS)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_catch_a_broken_threshold(promtool: str, tmp_path: Path) -> None:
    # The unit tests are not vacuous: moving the detected-error threshold past 30% breaks them.
    for path in RULE_FILES:
        text = path.read_text(encoding="utf-8")
        if path.name == "alerts.rules.yml":
            rule = "app:stef_detected_error:ratio_rate30m > "
            assert rule + "0.12" in text
            text = text.replace(rule + "0.12", rule + "0.5")
        (tmp_path / path.name).write_text(text, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / ALERT_TESTS.name).write_text(ALERT_TESTS.read_text(encoding="utf-8"))
    result = run([promtool, "test", "rules", str(tmp_path / "tests" / ALERT_TESTS.name)])
    assert result.returncode != 0
    assert "StefDetectedErrorShareHigh" in result.stdout + result.stderr


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    suite = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in suite["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {str(a["alert"]) for a in alerts()}
    assert len(names) == 14
    assert names - firing == set(), "alerts without a firing test"
    assert names - quiet == set(), "alerts without a not-firing test"


def test_the_issue_alerts_exist() -> None:
    names = {str(a["alert"]) for a in alerts()}
    assert {
        "StefDetectedErrorShareHigh",
        "StefMeanScoreDrop",
        "StefCoverageLow",
        "StefJudgeErrorRateHigh",
        "StefUnsafeSql",
        "StefConsumerLagGrowing",
        "StefNoRecords",
        "StefCanaryAgreementLow",
        "StefCanaryAgreementDrop",
    } <= names


RUNBOOK_PREFIX = "{{ with $externalLabels.runbook_base_url }}{{ . }}/{{ end }}"


def test_alerts_carry_severity_summary_and_a_runbook_section() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", readme, flags=re.MULTILINE)
    }
    for alert in alerts():
        labels = alert["labels"]
        annotations = alert["annotations"]
        assert isinstance(labels, dict) and isinstance(annotations, dict)
        assert labels["severity"] in ("warning", "critical"), alert["alert"]
        assert annotations["summary"] and annotations["description"], alert["alert"]
        url = str(annotations["runbook_url"])
        # The base URL comes from the external label runbook_base_url when it is set.
        assert url.startswith(RUNBOOK_PREFIX + "deploy/README.md#"), url
        url = url.removeprefix(RUNBOOK_PREFIX)
        assert url.split("#", 1)[1] in anchors, f"{alert['alert']}: no README section {url}"


def test_every_alert_has_a_row_in_the_thresholds_table() -> None:
    """deploy/README.md says why each default is what it is; StefEstimatedAccuracyDrop had a
    runbook section but no row."""
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| (Stef\w+) \|", readme, flags=re.MULTILINE))
    assert {str(a["alert"]) for a in alerts()} == rows
