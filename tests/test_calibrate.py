"""stef calibrate: the agreement statistics, the threshold search, judging and the report."""

from __future__ import annotations

import json
import random
import statistics
import struct
import zlib
from pathlib import Path

import pytest

from stef.calibrate.core import (
    DIMENSIONS,
    Confusion,
    Item,
    Labelled,
    accuracy,
    balanced_accuracy,
    best_threshold,
    binomial,
    confusion,
    confusion_at,
    judge_all,
    kappa,
    kappa_ci,
    read_labels,
    reformat_sql,
    report,
    sensitivity,
    specificity,
    without_sampling,
)
from stef.calibrate.plot import histogram_png, shares
from stef.cli import main
from stef.errors import JudgeError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo
from stef.pipeline import Pipeline
from stef.rules import load_rules
from tests.conftest import ROOT, SHARED_DATA

KEYS = {
    "n",
    "accuracy",
    "kappa",
    "kappa_ci",
    "balanced_accuracy",
    "sensitivity",
    "specificity",
    "confusion",
    "judge_errors",
    "breakdown",
}

# ------------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        # The textbook table: po = 35/50 = 0.7, pe = 0.6*0.5 + 0.4*0.5 = 0.5, κ = 0.2/0.5.
        ((20, 5, 15, 10), 0.4),
        ((30, 0, 20, 0), 1.0),  # perfect agreement
        ((25, 25, 25, 25), 0.0),  # chance
        ((0, 10, 0, 10), -1.0),  # perfect disagreement, balanced marginals
        # po = 0.85, labels 50/100 positive, predictions 45/100: pe = .5*.45 + .5*.55 = 0.5
        ((40, 5, 45, 10), 0.7),
        # Constant predictions carry no information: κ = 0.
        ((60, 40, 0, 0), 0.0),
    ],
)
def test_kappa_hand_computed(cells: tuple[int, int, int, int], expected: float) -> None:
    assert kappa(Confusion(*cells)) == pytest.approx(expected)


def test_kappa_undefined_with_one_label_class() -> None:
    # Every item wrong (an error-type group): κ says nothing whatever the judge does.
    assert kappa(Confusion(tp=0, fp=3, tn=7, fn=0)) is None
    assert kappa(Confusion(tp=5, fp=0, tn=0, fn=2)) is None
    assert kappa(Confusion()) is None


def test_rates_hand_computed() -> None:
    c = Confusion(tp=20, fp=5, tn=15, fn=10)
    assert accuracy(c) == pytest.approx(0.7)
    assert sensitivity(c) == pytest.approx(20 / 30)
    assert specificity(c) == pytest.approx(15 / 20)
    assert balanced_accuracy(c) == pytest.approx((20 / 30 + 0.75) / 2)
    only_wrong = Confusion(fp=2, tn=3)
    assert sensitivity(only_wrong) is None
    assert balanced_accuracy(only_wrong) is None
    assert specificity(only_wrong) == pytest.approx(0.6)


def test_judge_errors_count_as_wrong_predictions() -> None:
    labels = [True, True, False, False, True, False]
    predicted: list[bool | None] = [True, None, False, None, False, True]
    # Error on a correct item -> false negative; on a wrong item -> false positive.
    assert confusion(labels, predicted) == Confusion(tp=1, fp=2, tn=1, fn=2)


def test_items_without_score_are_errors_at_every_threshold() -> None:
    items = [Item(True, None), Item(False, None), Item(True, 90.0), Item(False, 10.0)]
    for t in (0.0, 50.0, 100.0):
        c = confusion_at(items, t)
        assert c.fn >= 1 and c.fp >= 1
    assert confusion_at(items, 75.0) == Confusion(tp=1, fp=1, tn=1, fn=1)


def test_binomial_matches_its_moments() -> None:
    rng = random.Random(3)
    for n, p in [(2000, 0.3), (40, 0.1), (500, 0.8), (7, 0.5)]:
        xs = [binomial(rng, n, p) for _ in range(6000)]
        assert all(0 <= x <= n for x in xs)
        assert statistics.mean(xs) == pytest.approx(n * p, rel=0.03, abs=0.1)
        assert statistics.variance(xs) == pytest.approx(n * p * (1 - p), rel=0.1)
    assert binomial(rng, 10, 0.0) == 0
    assert binomial(rng, 10, 1.0) == 10


def test_kappa_ci_properties() -> None:
    c = Confusion(tp=400, fp=100, tn=350, fn=150)
    k = kappa(c)
    ci = kappa_ci(c, resamples=2000, seed=7)
    assert k is not None and ci is not None
    lo, hi = ci
    assert lo < k < hi
    assert kappa_ci(c, resamples=2000, seed=7) == ci  # seeded: reproducible
    # Ten times the data: a narrower interval around the same κ.
    big = kappa_ci(Confusion(4000, 1000, 3500, 1500), resamples=2000, seed=7)
    assert big is not None and big[1] - big[0] < (hi - lo) / 2
    assert kappa_ci(Confusion(fp=3, tn=4), resamples=2000) is None


def test_kappa_ci_agrees_with_resampling_items() -> None:
    c = Confusion(tp=60, fp=20, tn=50, fn=30)
    cells = [0] * c.tp + [1] * c.fp + [2] * c.tn + [3] * c.fn
    rng = random.Random(11)
    naive = []
    for _ in range(2000):
        d = rng.choices(cells, k=len(cells))
        k = kappa(Confusion(d.count(0), d.count(1), d.count(2), d.count(3)))
        assert k is not None
        naive.append(k)
    naive.sort()
    ci = kappa_ci(c, resamples=2000, seed=1)
    assert ci is not None
    assert ci[0] == pytest.approx(naive[50], abs=0.04)
    assert ci[1] == pytest.approx(naive[1949], abs=0.04)


def test_best_threshold_maximises_kappa() -> None:
    # Correct items score 60-70, wrong ones 30-50 and a few at 80: 60 separates best.
    items = [Item(True, s) for s in (60.0, 65.0, 70.0, 70.0, 65.0)]
    items += [Item(False, s) for s in (30.0, 40.0, 50.0, 50.0)]
    items += [Item(False, 80.0)]
    best = best_threshold(items, 75.0)
    assert best is not None
    assert best.value == 60.0
    assert best.kappa == pytest.approx(kappa(confusion_at(items, 60.0)))
    for t in (30.0, 40.0, 50.0, 65.0, 70.0, 75.0, 80.0, 81.0):
        k = kappa(confusion_at(items, t))
        assert k is None or k <= best.kappa


def test_best_threshold_ties_go_to_the_nearest_default() -> None:
    items = [Item(True, 90.0), Item(False, 10.0)]
    # Every threshold in (10, 90] separates perfectly; 90 is the candidate nearest 75.
    best = best_threshold(items, 75.0)
    assert best is not None and best.value == 90.0 and best.kappa == pytest.approx(1.0)
    assert best_threshold([Item(True, None)], 75.0) is None


def test_report_keys_and_breakdowns() -> None:
    items = [
        Item(True, 90.0, "A", "bird", "easy", (), "Correct"),
        Item(False, 40.0, "A", "bird", "medium", ("Value Mismatch", "DISTINCT"), "Incorrect"),
        Item(False, 95.0, "B", "spider", "easy", ("DISTINCT",), "Correct"),
        Item(True, None, "B", "spider", None, (), None),
    ]
    rep = report(items, 75.0, resamples=2000, seed=0)
    assert set(rep) == KEYS
    assert rep["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert rep["judge_errors"] == 1
    assert len(rep["kappa_ci"]) == 2
    assert set(rep["breakdown"]) == set(DIMENSIONS)
    by_type = rep["breakdown"]["error_type"]
    assert by_type["DISTINCT"]["n"] == 2  # an item counts under each of its types
    assert by_type["Value Mismatch"]["n"] == 1
    assert by_type["DISTINCT"]["kappa"] is None and by_type["DISTINCT"]["specificity"] == 0.5
    assert rep["breakdown"]["verdict"]["judge_error"]["judge_errors"] == 1
    assert rep["breakdown"]["complexity"]["unknown"]["n"] == 1
    assert set(rep["breakdown"]["source"]["A"]) == KEYS - {"breakdown"}


# ---------------------------------------------------------------------------- plot and SQL


def test_plot_is_a_valid_png() -> None:
    data = histogram_png([90.0, 100.0, 80.0], [10.0, 55.0, 100.0], 75.0, best=80.0)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc
        chunks.append((kind, body))
        pos += 12 + length
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height = struct.unpack(">II", chunks[0][1][:8])
    raw = zlib.decompress(chunks[1][1])
    assert len(raw) == height * (1 + 3 * width)
    assert bytes((46, 160, 67)) in raw and bytes((215, 58, 73)) in raw  # both classes drawn


def test_histogram_bins() -> None:
    s = shares([0.0, 4.99, 5.0, 100.0])
    assert s[0] == 0.5 and s[1] == 0.25 and s[-1] == 0.25 and len(s) == 20


def test_reformat_normalises_keyword_case() -> None:
    out = reformat_sql("select count(distinct a) from t where b = 'x'", "sqlite")
    assert out == "SELECT COUNT(DISTINCT a) FROM t WHERE b = 'x'"
    assert reformat_sql("SELECT FROM WHERE ((", None) == "SELECT FROM WHERE (("


# ------------------------------------------------------------------------- judging records


class _Recording:
    """Wraps the heuristic judge: records what the judge saw; fails on a marked question."""

    def __init__(self) -> None:
        self.inner = HeuristicJudge()
        self.seen: list[JudgeRequest] = []

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.seen.append(request)
        if "FAIL" in request.record.question:
            raise JudgeError("timeout", "the fake endpoint timed out")
        return self.inner.judge(request)


def _labels_file(tmp_path: Path) -> Path:
    rows = [
        {"id": "a", "question": "How many singers are there?", "sql": "SELECT COUNT(*) FROM singer",
         "label": True, "source": "S1", "gold_sql": "SELECT COUNT(*) FROM gold_secret_table"},
        {"id": "b", "question": "Names of singers from France", "app": "bird",
         "sql": "select name from singer where country = 'Germany'", "label": False,
         "source": "S1", "error_types": ["Value Mismatch"],
         "gold_sql": "SELECT name FROM gold_secret_table WHERE country = 'France'"},
        {"id": "c", "question": "FAIL please", "sql": "SELECT 1", "label": True, "source": "S2"},
        {"id": "d", "question": 7, "sql": "SELECT 1", "label": False, "source": "S2"},
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n", encoding="utf-8")
    return path


def test_gold_sql_never_reaches_the_judge_and_errors_are_kept(tmp_path: Path) -> None:
    records = read_labels(_labels_file(tmp_path))
    assert [r.label for r in records] == [True, False, True, False]
    backend = _Recording()
    items = judge_all(Pipeline(load_rules(None), backend), records, concurrency=2)
    assert len(items) == 4
    assert all("gold_secret_table" not in r.model_dump_json() for r in backend.seen)
    assert items[2].score is None  # judge_error
    assert items[3].score is None  # invalid input (question is a number)
    assert items[1].error_types == ("Value Mismatch",)
    assert confusion_at(items, 75.0).n == 4


def test_results_keep_input_order_under_concurrency() -> None:
    records = [
        Labelled(
            n, {"id": str(n), "question": f"q {n}", "sql": f"SELECT {n}"}, n % 2 == 0, None, ()
        )
        for n in range(40)
    ]
    backend = _Recording()
    items = judge_all(Pipeline(load_rules(None), backend), records, concurrency=4)
    assert [i.label for i in items] == [r.label for r in records]


def test_reformat_changes_what_the_judge_sees() -> None:
    rec = Labelled(1, {"question": "How many?", "sql": "select count(*) from t"}, True, None, ())
    backend = _Recording()
    judge_all(Pipeline(load_rules(None), backend), [rec], reformat=True)
    assert backend.seen[0].record.sql == "SELECT COUNT(*) FROM t"


def test_sampling_is_switched_off() -> None:
    rules = without_sampling(load_rules(ROOT / "rules"))
    assert rules.for_app("support").sampling_rate == 1.0
    assert load_rules(ROOT / "rules").for_app("support").sampling_rate < 1.0


def test_read_labels_rejects_unlabelled_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "sql": "SELECT 1", "label": true}\n{"question": "q"}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_labels(path)
    assert len(read_labels(path, limit=1)) == 1


# ------------------------------------------------------------------------------------ CLI


def test_cli_json_has_exactly_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    plot = tmp_path / "hist.png"
    assert main(["calibrate", str(_labels_file(tmp_path)), "--json", "--plot", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == KEYS
    assert out["n"] == 4 and out["judge_errors"] == 1  # the invalid record (question: 7)
    assert set(out["confusion"]) == {"tp", "fp", "tn", "fn"}
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_cli_table_names_the_positive_class_and_best_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["calibrate", str(_labels_file(tmp_path)), "--pass-threshold", "60"]) == 0
    text = capsys.readouterr().out
    assert "positive class: correct" in text
    assert "pass threshold: score >= 60" in text
    assert "kappa-maximising threshold" in text
    for dim in ("by source", "by app", "by error type", "by verdict"):
        assert dim in text


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _labels_file(tmp_path)
    assert main(["calibrate", str(path), "--resamples", "100"]) == 2
    assert main(["calibrate", str(tmp_path / "missing.jsonl")]) == 1
    capsys.readouterr()


@pytest.mark.skipif(not (SHARED_DATA / "judge-dev.jsonl").exists(), reason="no shared dev set")
def test_dev_set_first_records(capsys: pytest.CaptureFixture[str]) -> None:
    dev = SHARED_DATA / "judge-dev.jsonl"
    rules = str(ROOT / "examples" / "rules-judge-dev")
    assert main(["calibrate", str(dev), "--rules", rules, "--limit", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 60
    c = out["confusion"]
    assert c["tp"] + c["fp"] + c["tn"] + c["fn"] == 60
