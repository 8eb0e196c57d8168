"""``stef calibrate --json`` carries what the text report shows: backend, pass threshold, the
kappa-maximising threshold, positive class, how the SQL was read, the bootstrap settings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stef.cli import main
from stef.cli.conclusion import conclusion
from tests.conftest import ROOT

LABELS = ROOT / "examples" / "judge-sample.jsonl"


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    args = ["calibrate", str(LABELS), "--rules", str(ROOT / "rules"), "--no-progress", *extra]
    assert main(args) == 0
    return capsys.readouterr().out


def test_json_has_every_figure_of_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    # --calibration none: the score threshold decides only without a calibration.
    flags = [
        "--pass-threshold",
        "70",
        "--resamples",
        "2500",
        "--seed",
        "3",
        "--calibration",
        "none",
    ]
    text = _run(capsys, *flags)
    data = json.loads(_run(capsys, "--json", *flags))
    head = re.search(r"judge: (\S+)\s+pass threshold: score >= (\S+)", text)
    assert head is not None
    assert data["backend"] == head.group(1) == "heuristic"
    assert data["pass_threshold"] == float(head.group(2)) == 70.0
    best = re.search(
        r"kappa-maximising threshold: score >= (\S+) \(kappa (\S+), balanced accuracy (\S+)%\)",
        text,
    )
    assert best is not None
    assert data["best_threshold"]["value"] == float(best.group(1))
    assert f"{data['best_threshold']['kappa']:.3f}" == best.group(2)
    assert f"{100 * data['best_threshold']['balanced_accuracy']:.1f}" == best.group(3)
    assert data["positive_class"] == "correct" and "positive class: correct" in text
    assert data["sql"] == "as_logged" and "sql: as logged" in text
    assert (data["resamples"], data["seed"]) == (2500, 3)
    assert data["plot"] is None
    assert data["n"] == 40 and set(data["breakdown"]) == {
        "source",
        "app",
        "complexity",
        "error_type",
        "verdict",
    }


def test_json_says_the_sql_was_reformatted(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(_run(capsys, "--json", "--reformat", "--limit", "10"))
    assert data["sql"] == "reformatted"
    assert data["n"] == 10


def test_the_text_ends_with_a_plain_conclusion_and_the_plot_names_its_axis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figures = json.loads(_run(capsys, "--json"))
    plot = tmp_path / "p.svg"
    text = _run(capsys, "--plot", str(plot))
    said = " ".join(text[text.index("In short:") :].split())
    assert f"on {figures['n']} labelled records" in said
    assert f"(kappa {figures['kappa']:.2f}, 95% interval {figures['kappa_ci'][0]:.2f}" in said
    assert f"catches {figures['specificity']:.0%} of the wrong SQL" in said
    assert "fewer than 100 labels" in said  # 40 labels: the intervals are wide
    # With a calibration the bars are p_correct x 100, and the axis says so (before: "score").
    svg = plot.read_text()
    assert "P(correct) x 100" in svg and ">score<" not in svg
    plain = tmp_path / "raw.svg"
    _run(capsys, "--calibration", "none", "--plot", str(plain))
    assert ">score<" in plain.read_text()


@pytest.mark.parametrize(
    ("kappa", "ci", "says", "never"),
    [
        (-0.2, [-0.33, -0.05], "less often than chance would", "reaches 0"),
        (-0.05, [-0.2, 0.1], "less often than chance would", "lies below 0"),
        (0.1, [-0.1, 0.3], "slightly beyond chance", "lies below 0"),
    ],
)
def test_the_conclusion_reads_a_kappa_below_chance(
    kappa: float, ci: list[float], says: str, never: str
) -> None:
    """A negative kappa read "no better than chance beyond chance", and an interval wholly
    below 0 "reaches 0"."""
    said = conclusion({"n": 120, "kappa": kappa, "kappa_ci": ci})
    assert says in said and never not in said and "chance beyond chance" not in said
    assert ("lies below 0" in said) == (ci[1] < 0)
