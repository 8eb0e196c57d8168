"""The shipped alerts on the example log's two releases (issue 31 §5): each release is judged
through the record path of ``stef run`` (settings, backend and pipeline wired as the service
wires them), its metric series are replayed to promtool as an hour of steady traffic, and the
quality alerts stay quiet on 2.0 and fire on 2.1, with the judge the settings configure."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from stef.metrics import Metrics
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer
from tests.deploy.conftest import PROM_DIR, ROOT, run

LOG = ROOT / "examples" / "agent_log.jsonl"
SERIES = ("stef_evaluations_total", "stef_records_total", "stef_score_sum", "stef_score_count")
QUALITY = ("StefDetectedErrorShareHigh", "StefMeanScoreDrop")
MINUTES = 90


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


def _expected(series: Mapping[str, float]) -> list[dict[str, object]]:
    alerts = []
    for app, share in sorted(_shares(series).items()):
        evaluations = sum(
            v for k, v in series.items() if k.startswith("stef_evaluations_total{") and app in k
        )
        if share > 0.15 and evaluations * 30 / 60 >= 20:
            alerts.append(
                {
                    "exp_labels": {"app": app, "severity": "warning"},
                    "exp_annotations": {
                        "summary": f"{app}: an error found in {100 * share:.4g}% of judged "
                        "requests",
                        "description": "Over the last 30 minutes an error was found (verdict "
                        "Incorrect, or a question filter not applied) in more than 15% of the "
                        f"evaluated requests of app {app}.",
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


def _check(promtool: str, tmp_path: Path, env: Mapping[str, str]) -> dict[str, list[str]]:
    cases, fired = [], {}
    for version in ("2.0", "2.1"):
        series = _series(version, env)
        fire = _expected(series)
        fired[version] = [str(a["exp_labels"]["app"]) for a in fire]  # type: ignore[index]
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
    return fired


def test_default_judge_quiet_on_2_0_fires_on_2_1(promtool: str, tmp_path: Path) -> None:
    fired = _check(promtool, tmp_path, {})
    assert fired == {"2.0": [], "2.1": ["sales"]}


def test_fake_llm_quiet_on_2_0_fires_on_2_1(
    promtool: str, tmp_path: Path, fake_llm: dict[str, str]
) -> None:
    fired = _check(promtool, tmp_path, fake_llm)
    assert fired["2.0"] == [] and fired["2.1"] == ["sales"]
