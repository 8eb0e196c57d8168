"""Issue 22: probability figures, fitting a calibration, applying it at judge time, the summary's
confidence line and the accuracy estimated without labels."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from stef.accuracy import Transfer, label_free
from stef.calibrate.fit import Point, fit, fit_isotonic, fit_platt
from stef.calibrate.measures import Scored, auc, brier, drop_figures, ece
from stef.calibration import (
    Calibration,
    Judged,
    MonotoneMap,
    SourceMeans,
    TransferSpread,
    calibration_for,
    default_path,
    load_calibration,
    published,
)
from stef.cli import main
from stef.errors import ConfigError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.llm import build_llm_judge
from stef.judges.llm.config import LlmConfig
from stef.metrics import Metrics
from stef.models import JudgeInfo, Result
from stef.pipeline import Cascade, Pipeline, PipelineOptions
from stef.rules import AppRules, RuleSet
from stef.summary import Summary
from stef.testing.fake_server import FakeLlmServer
from tests.calibrate.conftest import labels_file

RECORD = {"id": "r1", "question": "How many singers are there?", "sql": "SELECT COUNT(*) FROM s"}


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY", "STEF_CALIBRATION"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------------------ measures


def test_auc_brier_ece_on_known_points() -> None:
    perfect = [Scored(0.9, True), Scored(0.8, True), Scored(0.2, False), Scored(0.1, False)]
    assert auc(perfect) == 1.0
    assert auc([Scored(0.5, True), Scored(0.5, False)]) == 0.5  # a tie counts half
    assert auc([Scored(0.5, True)]) is None  # one class: undefined
    assert brier([Scored(1.0, True), Scored(0.0, True)]) == 0.5
    # The base rate as a constant: ECE 0, AUC 0.5 (why ECE is read beside AUC).
    constant = [Scored(0.5, True), Scored(0.5, False)] * 10
    assert ece(constant) == 0.0 and auc(constant) == 0.5
    assert ece([Scored(0.95, False)] * 4) == pytest.approx(0.95)


def test_detectable_drop_shrinks_with_resolution_and_window() -> None:
    rng = random.Random(1)
    strong = [Scored(rng.uniform(0.6, 1.0), True) for _ in range(200)]
    strong += [Scored(rng.uniform(0.0, 0.4), False) for _ in range(200)]
    weak = [Scored(rng.uniform(0.45, 0.6), True) for _ in range(200)]
    weak += [Scored(rng.uniform(0.4, 0.55), False) for _ in range(200)]
    s, w = drop_figures(strong, 1000), drop_figures(weak, 1000)
    assert s["resolution"] > 0.5 > w["resolution"] > 0
    assert s["min_drop"] < w["min_drop"]
    assert drop_figures(strong, 4000)["min_drop"] < s["min_drop"]
    lo, hi = w["min_drop_ci"]
    assert lo <= w["min_drop"] <= hi


# ------------------------------------------------------------------------------ fitting


def test_platt_and_isotonic_are_monotone_and_never_certain() -> None:
    xs = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9] * 5
    ys = [False, False, True, False, True, True] * 5
    ws = [1.0] * len(xs)
    for m in (fit_platt(xs, ys, ws), fit_isotonic(xs, ys, ws)):
        ps = [m(x / 10) for x in range(11)]
        assert ps == sorted(ps)
        assert min(ps) > 0 and max(ps) < 1
    # A signal that ranks backwards is not turned around: the map goes flat (the base rate).
    backwards = fit_platt(xs, [not y for y in ys], ws)
    assert backwards.a == 0.0


def _points(n: int, seed: int = 0) -> list[Point]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.random() < 0.6
        raw = min(1.0, max(0.0, rng.gauss(0.65 if label else 0.45, 0.15)))
        out.append(Point(raw, label, "big" if i % 5 else f"small{i % 2}", raw >= 0.75))
    return out


def test_fit_records_the_judge_threshold_and_cross_source_figures() -> None:
    judge = Judged(backend="heuristic")
    cal = fit(_points(400), judge, labels_file="x.jsonl")
    assert cal.judge == judge and cal.labels == 400
    assert cal.map.kind in ("platt", "isotonic")
    assert 0 < cal.threshold < 1
    cross = cal.metrics["cross_source"]
    assert set(cross["per_source"]) == {"big", "small0", "small1"}
    assert {"auc", "brier", "ece", "kappa", "kappa_raw"} <= set(cross["mean_over_sources"])
    share = cal.metrics["weighting"]["weight_share"]
    # 1/sqrt(n) per record: the big source weighs less than its share of records.
    assert share["big"]["weight"] < share["big"]["records"]
    assert cal.resolution > 0


def test_the_threshold_is_a_p_correct_as_results_carry_it() -> None:
    # Results write p_correct to 4 decimals: a threshold between two of those values (0.54775)
    # would fail the records whose p it was chosen on (written 0.5477).
    cal = fit(_points(400), Judged(backend="heuristic"))
    assert cal.threshold == published(cal.threshold)
    passing = [pt for pt in _points(400) if published(cal.map(pt.raw)) >= cal.threshold]
    assert passing, "the fitted threshold passes some records"


def test_fit_refuses_one_class() -> None:
    with pytest.raises(ValueError, match="two correct and two wrong"):
        fit([Point(0.5, True, "a", True)] * 5, Judged(backend="heuristic"))


def test_calibration_for_another_judge_is_refused_in_one_line(tmp_path: Path) -> None:
    cal = Calibration(
        judge=Judged(backend="llm", model="m1", mode="probability"),
        map=MonotoneMap(kind="platt", a=2.0, b=-1.0),
        threshold=0.5,
        labels=10,
        mean_p_correct=0.7,
        mean_p_wrong=0.3,
    )
    path = tmp_path / "cal.json"
    path.write_text(cal.model_dump_json(), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        calibration_for(str(path), JudgeInfo(backend="llm", model="m2"))
    assert "model" in str(err.value) and "\n" not in str(err.value)
    assert calibration_for("none", HeuristicJudge().info) is None
    with pytest.raises(ConfigError, match="not JSON"):
        path.write_text("{", encoding="utf-8")
        load_calibration(path)


def test_calibrate_fit_then_a_different_judge_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = labels_file(tmp_path)
    rows = [json.loads(line) for line in labels.read_text().splitlines() if line.strip()]
    # Enough of both classes to fit: the two judgeable records, repeated under new ids.
    more = [dict(r, id=f"{r['id']}{k}") for k in range(4) for r in rows[:2]]
    labels.write_text("".join(json.dumps(r) + "\n" for r in more), encoding="utf-8")
    out = tmp_path / "cal.json"
    assert main(["calibrate", str(labels), "--fit", str(out), "--json", "--no-progress"]) == 0
    written = load_calibration(out)
    assert written.judge.backend == "heuristic" and written.labels == 8
    printed = json.loads(capsys.readouterr().out)
    assert printed["fit"] == str(out) and "cross_source" in printed["metrics"]
    # --fit fits the raw signal whatever calibration is loaded (the default one here).
    plain = tmp_path / "plain.json"
    args = ["calibrate", str(labels), "--fit", str(plain), "--calibration", "none", "--json"]
    assert main(args) == 0
    capsys.readouterr()
    unloaded = load_calibration(plain)
    assert unloaded.map == written.map and unloaded.threshold == written.threshold
    assert unloaded.metrics["kappa_raw"] == written.metrics["kappa_raw"]
    data = json.loads(out.read_text())
    data["judge"]["backend"] = "llm"
    out.write_text(json.dumps(data), encoding="utf-8")
    assert main(["calibrate", str(labels), "--calibration", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fitted for backend 'llm'" in err


def test_calibrate_json_reports_probability_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", str(labels_file(tmp_path)), "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("auc", "brier", "ece", "per_source", "reliability", "resolution", "min_drop"):
        assert key in out
    assert set(out["per_source"]) == {"S1", "S2"}
    assert len(out["reliability"]) == 10
    # The default heuristic calibration decides pass/fail on p_correct.
    assert out["pass_rule"].startswith("p_correct >= ")
    assert 0 < out["pass_threshold"] < 1  # on p_correct's scale, as the rule says
    assert out["probability"] == "p_correct"


# --------------------------------------------------------------------- applied at judge time


def _judge(calibration: Calibration | None, review_below: float | None = None) -> Result:
    registry = CollectorRegistry()
    pipeline = Pipeline(
        RuleSet(AppRules()),
        HeuristicJudge(),
        PipelineOptions(calibration=calibration, review_below=review_below),
        metrics=Metrics(registry),
    )
    processed = pipeline.process(json.dumps({**RECORD, "app": "a"}).encode(), {"line": 1})
    assert processed.result is not None
    _judge.registry = registry  # type: ignore[attr-defined]
    return processed.result


def test_default_heuristic_calibration_is_applied_and_never_says_certain() -> None:
    path = default_path("heuristic")
    assert path is not None
    cal = calibration_for(None, HeuristicJudge().info)
    assert cal is not None and cal.labels >= 2000
    plain = _judge(None)
    calibrated = _judge(cal)
    assert plain.components is not None and calibrated.components is not None
    assert plain.components.confidence_source == "self_reported"
    assert plain.judge.p_correct is None
    assert calibrated.components.confidence_source == "calibrated"
    p = calibrated.judge.p_correct
    assert p is not None and 0 < p < 1
    # The raw signal is the uncalibrated score, whatever calibration is loaded.
    assert calibrated.components.raw_signal == plain.components.raw_signal == plain.score / 100
    assert calibrated.components.confidence == round(p, 4)  # a passing verdict: p itself
    assert calibrated.components.confidence < 1.0
    assert calibrated.tier != "excellent"


def test_needs_review_below_the_bound_is_flagged_and_counted() -> None:
    cal = calibration_for(None, HeuristicJudge().info)
    flagged = _judge(cal, review_below=0.99)
    assert flagged.needs_review is True
    registry: CollectorRegistry = _judge.registry  # type: ignore[attr-defined]
    assert registry.get_sample_value("stef_needs_review_total", {"app": "a"}) == 1.0
    assert _judge(cal, review_below=0.01).needs_review is False


class _TokenJudge:
    """The heuristic's answer with a token probability, as an LLM in probability mode gives."""

    def __init__(self, p: float) -> None:
        self.inner, self.p = HeuristicJudge(), p

    @property
    def info(self) -> JudgeInfo:
        return JudgeInfo(backend="llm", model="fake")

    def judge(self, request: JudgeRequest) -> JudgeReply:
        reply = self.inner.judge(request)
        out = reply.output.model_copy(update={"token_probability": self.p})
        return JudgeReply(output=out, usage=reply.usage)

    def close(self) -> None:
        pass


def test_token_probability_is_the_confidence_without_calibration() -> None:
    pipeline = Pipeline(RuleSet(AppRules()), _TokenJudge(0.7))
    result = pipeline.process(json.dumps(RECORD).encode(), {"line": 1}).result
    assert result is not None and result.components is not None
    assert result.components.confidence_source == "token_probability"
    assert result.components.raw_signal == 0.7
    assert result.components.confidence == 0.7


# --------------------------------------------------------------------------- summary


def test_summary_says_which_confidence_and_estimates_only_when_it_can(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    cal = calibration_for(None, HeuristicJudge().info)
    lines = [_judge(cal).to_json() for _ in range(3)]
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["summary", str(results)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("confidence: calibrated (heuristic, calibrated on 2,002 labels, AUC")
    assert main(["summary", str(results), "--format", "json"]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    # The heuristic cannot resolve accuracy on 3 records: no number, a reason.
    assert group["estimated_accuracy"] is None
    assert "without labels it cannot tell" in group["estimated_accuracy_note"]
    assert cal is not None
    strong = _strong(cal)
    summary = Summary().extend(Result.model_validate_json(line) for line in lines * 400)
    summary.calibration = strong
    est = summary.as_dict()["groups"][0]["estimated_accuracy"]
    assert est is not None and est["low"] <= est["value"] <= est["high"]


# ------------------------------------------------------------------ label shift (item 4)


def _strong(cal: Calibration) -> Calibration:
    """``cal`` as a judge that separates the classes on every source alike."""
    same = SourceMeans(n=100, mean_p_correct=0.99, mean_p_wrong=0.01)
    transfer = TransferSpread(
        sources={f"s{i}": same for i in range(5)},
        mean_p_correct=0.99,
        mean_p_wrong=0.01,
        sd_p_correct=0.005,
        sd_p_wrong=0.005,
        n_sources=5,
    )
    update = {"mean_p_correct": 0.99, "mean_p_wrong": 0.01, "transfer": transfer}
    return cal.model_copy(update=update)


def _window(rng: random.Random, n: int, accuracy: float, pos: float, neg: float) -> list[float]:
    """Scores drawn per class: correct ~ N(pos, 0.12), wrong ~ N(neg, 0.12), clipped."""
    out = []
    for _ in range(n):
        mu = pos if rng.random() < accuracy else neg
        out.append(min(0.99, max(0.01, rng.gauss(mu, 0.12))))
    return out


@pytest.mark.parametrize(("pos", "neg", "can_estimate"), [(0.8, 0.25, True), (0.56, 0.53, False)])
def test_accuracy_estimate_tracks_a_label_shift(pos: float, neg: float, can_estimate: bool) -> None:
    rng = random.Random(7)
    covered = shown = 0
    runs = 100
    for run in range(runs):
        truth = 0.8 if run % 2 else 0.5  # the agent's accuracy moved from 0.8 to 0.5
        ps = _window(rng, 1000, truth, pos, neg)
        spread = Transfer(pos, neg, 0.004, 0.004, 6)
        est = label_free(len(ps), sum(ps), sum(p * p for p in ps), pos, neg, spread).interval
        if est is not None:
            shown += 1
            covered += est.covers(truth)
    if can_estimate:
        assert shown == runs and covered >= 0.9 * runs  # nominal 95% coverage
    else:
        assert shown == 0  # a weak judge says it cannot, instead of printing a number


def test_estimated_accuracy_gauges_only_when_the_judge_can_resolve_it() -> None:
    weak = calibration_for(None, HeuristicJudge().info)
    assert weak is not None
    strong = _strong(weak)
    for cal, resolvable in ((strong, True), (weak, False)):
        registry = CollectorRegistry()
        metrics = Metrics(registry)
        metrics.set_calibration(cal)
        pipeline = Pipeline(
            RuleSet(AppRules()), HeuristicJudge(), PipelineOptions(calibration=cal), metrics=metrics
        )
        for i in range(200):
            pipeline.process(json.dumps({**RECORD, "id": f"r{i}", "app": "a"}).encode(), {})
        value = registry.get_sample_value("stef_estimated_accuracy", {"app": "a"})
        low = registry.get_sample_value("stef_estimated_accuracy_low", {"app": "a"})
        high = registry.get_sample_value("stef_estimated_accuracy_high", {"app": "a"})
        assert value is not None and low is not None and high is not None
        if resolvable:
            assert low <= value <= high and high - low <= 0.2
        else:
            assert math.isnan(value) and math.isnan(low) and math.isnan(high)


# ------------------------------------------------------------------------- cascade (item 5)


def test_cascade_sends_only_unsure_or_unsafe_records_to_the_llm_and_counts_the_savings() -> None:
    heuristic = HeuristicJudge()
    cal = calibration_for(None, heuristic.info)
    assert cal is not None
    records = [
        # Every question value found: the heuristic's most confident reading.
        {"id": "sure", "question": "How many orders in 'APAC'?",
         "sql": "SELECT COUNT(*) FROM orders WHERE region = 'APAC'", "app": "a"},
        # One of the question's values missing from the SQL: the heuristic is unsure.
        {"id": "unsure", "question": "How many orders in 'EMEA' in 2023?",
         "sql": "SELECT COUNT(*) FROM orders WHERE region = 'EMEA'", "app": "a"},
        # Unsafe SQL goes to the LLM whatever the heuristic's confidence.
        {"id": "unsafe", "question": "Remove old orders", "sql": "DELETE FROM orders", "app": "a"},
    ]  # fmt: skip
    plain = Pipeline(RuleSet(AppRules()), heuristic, PipelineOptions(calibration=cal))
    confidence = {}
    for r in records:
        res = plain.process(json.dumps(r).encode(), {}).result
        assert res is not None and res.components is not None
        confidence[r["id"]] = res.components.confidence
    below = (confidence["sure"] + confidence["unsure"]) / 2
    assert confidence["unsure"] < below < confidence["sure"]
    registry = CollectorRegistry()
    with FakeLlmServer() as server:
        llm = build_llm_judge(LlmConfig(base_url=server.base_url, model="m"))
        try:
            pipeline = Pipeline(
                RuleSet(AppRules()),
                heuristic,
                PipelineOptions(calibration=cal, cascade=Cascade(llm, None, below)),
                metrics=Metrics(registry),
            )
            results = {
                r["id"]: pipeline.process(json.dumps(r).encode(), {}).result for r in records
            }
        finally:
            llm.close()
        asked = len(server.requests)
    backends = {k: v.judge.backend for k, v in results.items() if v is not None}
    assert backends == {"sure": "heuristic", "unsure": "llm", "unsafe": "llm"}
    assert asked == 2  # the LLM saw two records of three
    sure = results["sure"]
    assert sure is not None and sure.components is not None
    assert sure.components.confidence_source == "calibrated"
    unsure = results["unsure"]
    assert unsure is not None and unsure.components is not None
    # The fake endpoint returns log-probabilities: the verdict token's probability is the signal.
    assert unsure.components.confidence_source == "token_probability"
    assert unsure.judge.model == "m"
    count = registry.get_sample_value
    assert count("stef_cascade_records_total", {"app": "a", "decided_by": "heuristic"}) == 1
    assert count("stef_cascade_records_total", {"app": "a", "decided_by": "llm"}) == 2
    summary = Summary().extend(r for r in results.values() if r is not None)
    cascade = summary.as_dict()["cascade"]
    assert cascade["llm_records"] == 2 and cascade["calls_saved"] == 1
    assert cascade["tokens_per_llm_record"] > 0
    assert summary.table().splitlines()[1].startswith("cascade: LLM judged 2 of 3 (67%)")


class _SureJudge(_TokenJudge):
    """An LLM that says "confidence 1.0" and gives no token probabilities."""

    def judge(self, request: JudgeRequest) -> JudgeReply:
        reply = self.inner.judge(request)
        out = reply.output.model_copy(update={"confidence": 1.0})
        return JudgeReply(output=out, usage=reply.usage)


def test_no_result_says_certain_on_a_judge_s_own_word() -> None:
    result = (
        Pipeline(RuleSet(AppRules()), _SureJudge(0.5))
        .process(json.dumps(RECORD).encode(), {})
        .result
    )
    assert result is not None and result.components is not None
    assert result.components.confidence_source == "self_reported"
    assert result.components.confidence == 0.99
    assert result.components.raw_signal == 1.0  # the verdict axis still reads the 1.0


def test_a_missing_calibration_file_is_a_usage_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEF_CALIBRATION", str(tmp_path / "missing.json"))
    assert main(["judge", "--question", "q", "--sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.json" in err


@pytest.mark.parametrize(
    ("a", "b", "p"),
    [
        (1e308, 0.0, 0.99),  # a x alone near the largest float
        (0.0, 1e308, 0.99),
        (0.0, -1e308, 0.01),  # exp(1e308) would overflow: only exp of z <= 0 is taken
        (1.7e308, 1.7e308, 0.99),  # a x + b overflows to +inf
        (1e308, -1.7e308, 0.01),  # a x + b < 0 for every raw signal in 0-1
    ],
)
def test_a_platt_map_of_huge_finite_numbers_gives_the_floor_or_the_ceiling(
    tmp_path: Path, a: float, b: float, p: float
) -> None:
    """Any finite map a calibration file may hold is computed: the logistic never overflows (an
    OverflowError would have made every record an internal_error dead letter)."""
    cal = load_calibration(default_path("heuristic") or "")
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({**cal.model_dump(), "map": {"kind": "platt", "a": a, "b": b}}))
    result = _judge(load_calibration(path))
    assert result.outcome == "evaluated"
    assert result.judge.p_correct == p
