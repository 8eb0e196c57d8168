"""The same results file gives the same label-free accuracy in ``stef summary``, ``stef
report`` and the metrics' window (issue 31: one accuracy module, no second copy)."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from stef.calibration import SourceMeans, TransferSpread, calibration_for
from stef.cli import main
from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import Metrics
from stef.models import Result
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import AppRules, RuleSet, load_rules
from tests.conftest import ROOT

QUESTIONS = [
    ("How many orders in 'APAC'?", "SELECT COUNT(*) FROM orders WHERE region = 'APAC'"),
    ("How many orders in 'EMEA' in 2023?", "SELECT COUNT(*) FROM orders WHERE region = 'EMEA'"),
    ("Average age of singers", "SELECT AVG(age) FROM singer"),
]


def test_summary_report_and_metrics_print_the_same_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = HeuristicJudge()
    shipped = calibration_for(None, judge.info)
    assert shipped is not None
    # A calibration that separates the classes alike on every source, so there is a number.
    same = SourceMeans(n=100, mean_p_correct=0.62, mean_p_wrong=0.3)
    transfer = TransferSpread(
        sources={f"s{i}": same for i in range(5)},
        mean_p_correct=0.62,
        mean_p_wrong=0.3,
        sd_p_correct=0.002,
        sd_p_wrong=0.002,
        n_sources=5,
    )
    cal = shipped.model_copy(
        update={"mean_p_correct": 0.62, "mean_p_wrong": 0.3, "transfer": transfer}
    )
    cal_file = tmp_path / "cal.json"
    cal_file.write_text(cal.model_dump_json(), encoding="utf-8")
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.set_calibration(cal)
    pipeline = Pipeline(
        RuleSet(AppRules()), judge, PipelineOptions(calibration=cal), metrics=metrics
    )
    lines = []
    for i in range(600):
        q, sql = QUESTIONS[i % len(QUESTIONS)]
        raw = json.dumps({"id": f"r{i}", "app": "a", "question": q, "sql": sql}).encode()
        result = pipeline.process(raw, {}).result
        assert isinstance(result, Result)
        lines.append(result.to_json())
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert main(["summary", str(results), "--format", "json", "--calibration", str(cal_file)]) == 0
    est = json.loads(capsys.readouterr().out)["total"]["estimated_accuracy"]
    assert est is not None
    html = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(html), "--calibration", str(cal_file)]) == 0
    page = html.read_text(encoding="utf-8")
    shown = f"{100 * est['value']:.1f}% [{100 * est['low']:.1f}%, {100 * est['high']:.1f}%]"
    assert shown in page
    gauge = registry.get_sample_value("stef_estimated_accuracy", {"app": "a"})
    low = registry.get_sample_value("stef_estimated_accuracy_low", {"app": "a"})
    assert gauge == est["value"] and low == est["low"]
    assert re.search(r"judge only, no sampled labels", page)


def test_report_and_estimate_print_the_same_ppi_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a random sample of labels, the report's accuracy is stef estimate's (PPI++)."""
    judge = HeuristicJudge()
    cal = calibration_for(None, judge.info)
    pipeline = Pipeline(RuleSet(AppRules()), judge, PipelineOptions(calibration=cal))
    lines, labels = [], []
    for i in range(300):
        q, sql = QUESTIONS[i % len(QUESTIONS)]
        raw = json.dumps({"id": f"r{i}", "app": "a", "question": q, "sql": sql}).encode()
        result = pipeline.process(raw, {}).result
        assert isinstance(result, Result)
        lines.append(result.to_json())
        if i % 5 == 0:
            labels.append(json.dumps({"id": f"r{i}", "label": i % 3 != 1}))
    results, label_file = tmp_path / "results.jsonl", tmp_path / "labels.jsonl"
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    label_file.write_text("\n".join(labels) + "\n", encoding="utf-8")
    assert main(["estimate", "--results", str(results), "--labels", str(label_file), "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["(all)"]
    assert est["estimate"] is not None and est["n_labelled"] == 60
    html = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(html), "--labels", str(label_file)]) == 0
    shown = f"{100 * est['estimate']:.1f}% [{100 * est['low']:.1f}%, {100 * est['high']:.1f}%]"
    assert shown in html.read_text(encoding="utf-8")


def test_summary_report_and_metrics_decline_alike_on_the_example_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default judge on the example log: no label-free figure anywhere, and the same reason
    in the summary and the report; the metrics export NaN rather than a number."""
    judge = HeuristicJudge()
    cal = calibration_for(None, judge.info)
    assert cal is not None
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.set_calibration(cal)
    pipeline = Pipeline(
        load_rules(ROOT / "rules"), judge, PipelineOptions(calibration=cal), metrics=metrics
    )
    lines = []
    log = ROOT / "examples" / "agent_log.jsonl"
    for n, raw in enumerate(log.read_bytes().splitlines(), start=1):
        result = pipeline.process(raw, {"line": n}).result
        if isinstance(result, Result):
            lines.append(result.to_json())
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert main(["summary", str(results), "--format", "json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["estimated_accuracy"] is None
    reason = total["estimated_accuracy_note"]
    assert reason
    html = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert reason in unescape(page)  # as the page reads, whichever entity spells a quote
    for app in ("sales", "support"):
        gauge = registry.get_sample_value("stef_estimated_accuracy", {"app": app})
        assert gauge is not None and math.isnan(gauge)
