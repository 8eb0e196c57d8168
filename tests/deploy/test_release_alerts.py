"""The shipped alerts on the example log's two releases (issue 31 §5): each release is judged
through the record path of ``stef run`` (settings, backend and pipeline wired as the service
wires them), its metric series are replayed to promtool as an hour of steady traffic, and the
quality alerts stay quiet on 2.0 and fire on 2.1, with the judge the settings configure: the
default heuristic, the LLM judge (the package's fake server), and the heuristic with the example
log's golden set (``examples/references.jsonl``). What fires is computed from the series of the
run and the rule's own threshold, never from hard-coded shares; and every app's share must keep
``MARGIN`` from the threshold, so a judge change that brings a release near it fails here, not in
production."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from prometheus_client import CollectorRegistry

from stef.metrics import Metrics
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer
from tests.deploy.conftest import PROM_DIR, ROOT, rules, run

LOG = ROOT / "examples" / "agent_log.jsonl"
REFERENCES = ROOT / "examples" / "references.jsonl"
SERIES = (
    "stef_evaluations_total",
    "stef_records_total",
    "stef_score_sum",
    "stef_score_count",
    "stef_reference_verdicts_total",
    "stef_unsafe_sql_total",
)
MINUTES = 90
# How far (in share points) every app's detected-error share must stay from the threshold.
MARGIN = 0.03


def _rule() -> tuple[float, int, str]:
    """StefDetectedErrorShareHigh's threshold, minimum evaluations and description template."""
    (rule,) = [r for r in rules() if r.get("alert") == "StefDetectedErrorShareHigh"]
    m = re.search(
        r"ratio_rate30m > ([0-9.]+)\s+and on \(app\) app:stef_evaluations:increase30m >= (\d+)",
        rule["expr"],
    )
    assert m, rule["expr"]
    return float(m.group(1)), int(m.group(2)), str(rule["annotations"]["description"])


def _release(version: str) -> list[bytes]:
    out = []
    for line in LOG.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("agent_version") == version:
            out.append(line.encode("utf-8"))
    return out


def _series(version: str, env: Mapping[str, str]) -> dict[str, float]:
    """``series selector -> final value`` after judging the release with ``env``'s settings."""
    settings = load_settings(None, {"rules": str(ROOT / "rules")}, env=env)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    backend = build_backend(settings, metrics)
    try:
        pipeline = build_pipeline(settings, load_rules(settings.rules), backend, metrics)
        if pipeline.options.calibration is not None:
            metrics.set_calibration(pipeline.options.calibration)
        for n, raw in enumerate(_release(version), start=1):
            pipeline.process(raw, {"file": str(LOG), "line": n})
    finally:
        backend.close()
    out: dict[str, float] = {}
    for family in registry.collect():
        for s in family.samples:
            if s.name in SERIES and s.value:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
    return out


def _shares(series: Mapping[str, float]) -> dict[str, float]:
    """Per app, the share of evaluations with verdict Incorrect or a question filter not
    applied (what the alert reads)."""
    total: dict[str, float] = {}
    found: dict[str, float] = {}
    for name, value in series.items():
        if not name.startswith("stef_evaluations_total{"):
            continue
        app = name.split('app="', 1)[1].split('"', 1)[0]
        total[app] = total.get(app, 0.0) + value
        if 'verdict="Incorrect"' in name or 'filter_status="not_applied"' in name:
            found[app] = found.get(app, 0.0) + value
    return {app: found.get(app, 0.0) / n for app, n in total.items()}


def _total(series: Mapping[str, float], name: str, app: str) -> float:
    return sum(v for k, v in series.items() if k.startswith(name + "{") and f'app="{app}"' in k)


def _evaluations(series: Mapping[str, float], app: str) -> float:
    return _total(series, "stef_evaluations_total", app)


def _expected(series: Mapping[str, float]) -> list[dict[str, object]]:
    """The alerts the rule must give on an hour of ``series``: its threshold, its minimum
    volume (an hour's evaluations, half of them in the 30-minute window)."""
    threshold, minimum, description = _rule()
    alerts = []
    for app, share in sorted(_shares(series).items()):
        if share > threshold and _evaluations(series, app) * 30 / 60 >= minimum:
            alerts.append(
                {
                    "exp_labels": {"app": app, "severity": "warning"},
                    "exp_annotations": {
                        "summary": f"{app}: an error found in {100 * share:.4g}% of judged "
                        "requests",
                        "description": description.replace("{{ $labels.app }}", app),
                        "runbook_url": "deploy/README.md#stefdetectederrorsharehigh",
                    },
                }
            )
    return alerts


def _promtool_case(series: Mapping[str, float], fire: list[dict[str, object]]) -> dict[str, object]:
    return {
        "interval": "1m",
        "input_series": [
            {"series": name, "values": f"0+{value / 60:.6g}x{MINUTES}"}
            for name, value in sorted(series.items())
        ],
        "alert_rule_test": [
            {"eval_time": "60m", "alertname": "StefDetectedErrorShareHigh", "exp_alerts": fire},
            {"eval_time": "60m", "alertname": "StefMeanScoreDrop", "exp_alerts": []},
        ],
    }


@pytest.fixture
def fake_llm() -> Iterator[dict[str, str]]:
    with FakeLlmServer() as server:
        yield {"STEF_LLM_BASE_URL": server.base_url, "STEF_LLM_MODEL": "fake"}


class Checked(NamedTuple):
    fired: dict[str, list[str]]  # release -> apps the alert fires for
    series: dict[str, dict[str, float]]  # release -> its series


def _check(promtool: str, tmp_path: Path, env: Mapping[str, str]) -> Checked:
    """Judge both releases with ``env``'s settings, run the promtool suite on their series;
    the apps that fire and every app's share, by release."""
    cases: list[dict[str, object]] = []
    fired: dict[str, list[str]] = {}
    shares: dict[str, dict[str, float]] = {}
    by_version: dict[str, dict[str, float]] = {}
    for version in ("2.0", "2.1"):
        series = by_version[version] = _series(version, env)
        fire = _expected(series)
        fired[version] = [str(a["exp_labels"]["app"]) for a in fire]  # type: ignore[index]
        shares[version] = _shares(series)
        cases.append({"name": f"release {version}", **_promtool_case(series, fire)})
    suite = {
        "rule_files": [str(PROM_DIR / "recording.rules.yml"), str(PROM_DIR / "alerts.rules.yml")],
        "evaluation_interval": "1m",
        "tests": cases,
    }
    path = tmp_path / "releases.test.yml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
    result = run([promtool, "test", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    threshold, _, _ = _rule()
    for version, by_app in shares.items():
        for app, share in by_app.items():
            assert abs(share - threshold) >= MARGIN, (
                f"{app} {version}: detected-error share {share:.1%} is within "
                f"{100 * MARGIN:.0f} points of the alert's {threshold:.0%}: the threshold no "
                "longer separates the releases"
            )
    return Checked(fired, by_version)


def test_default_judge_quiet_on_2_0_fires_on_2_1(promtool: str, tmp_path: Path) -> None:
    assert _check(promtool, tmp_path, {}).fired == {"2.0": [], "2.1": ["sales"]}


def test_fake_llm_quiet_on_2_0_fires_on_2_1(
    promtool: str, tmp_path: Path, fake_llm: dict[str, str]
) -> None:
    assert _check(promtool, tmp_path, fake_llm).fired == {"2.0": [], "2.1": ["sales"]}


def test_with_references_quiet_on_2_0_fires_on_2_1(promtool: str, tmp_path: Path) -> None:
    """The example log's golden set: each question's SQL as the generator wrote it before any
    mistake (scripts/make_sample_log.py --references). The references decide the score and
    the tier; the alert reads the judge's verdict and STEF's filter check, which they leave."""
    env = {"STEF_REFERENCES": str(REFERENCES)}
    checked = _check(promtool, tmp_path, env)
    assert checked.fired == {"2.0": [], "2.1": ["sales"]}
    # The references were read: every evaluated record was compared with its question's SQL,
    # except the unsafe requests (their questions are not in the golden set).
    for series in checked.series.values():
        for app in ("sales", "support"):
            compared = _total(series, "stef_reference_verdicts_total", app)
            unsafe = _total(series, "stef_unsafe_sql_total", app)
            assert compared > 0 and compared == _evaluations(series, app) - unsafe
