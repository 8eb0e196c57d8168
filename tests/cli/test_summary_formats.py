"""``stef summary``: one screen of text, the full figures as JSON, CSV and Markdown, and coverage
and sampled-out reported apart (deploy/README's definitions)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from stef.cli import main
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def sample_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("summary")
    results, dead = out / "results.jsonl", out / "dead.jsonl"
    code = main(
        [
            "replay",
            str(ROOT / "examples" / "agent_log.jsonl"),
            "--rules",
            str(ROOT / "rules"),
            "-o",
            str(results),
            "--dead-letters",
            str(dead),
            "--no-progress",
        ]
    )
    assert code == 0
    return results, dead


def _summary(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["summary", *args]) == 0
    return capsys.readouterr().out


def test_text_fits_120_columns_and_names_the_columns(
    sample_results: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, dead = sample_results
    text = _summary(capsys, str(results), "--dead-letters", str(dead))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120
    # The first line says which confidence the results carry (issue 22), then the table.
    assert lines[0].startswith("confidence: ")
    assert lines[1].split() == [
        "app",
        "agent@version",
        "records",
        "mean",
        "p10",
        "coverage",
        "sampled",
        "error",
        "undec.",
        "review",
        "excel.",
        "good",
        "marg.",
        "poor",
    ]
    assert "invalid input lines (dead letters): 16" in text


def test_first_screen_tells_the_release_story(
    sample_results: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """What the judge found, per release: the detected-error share and the issue shares of
    sales 2.0 and 2.1 (filters_missing rises), and the estimate or its reason."""
    results, _ = sample_results
    text = _summary(capsys, str(results))
    issues = [line for line in text.splitlines() if line.startswith("issues sales")]
    shares = {
        line.split()[2].rstrip(":"): dict(
            (part.split()[0], int(part.split()[1].rstrip("%")))
            for part in line.split(": ", 1)[1].split(", ")
        )
        for line in issues
    }
    assert shares["sql-agent@2.1"]["filters_missing"] > 2 * shares["sql-agent@2.0"].get(
        "filters_missing", 0
    )
    assert any(line.startswith("accuracy without labels: ") for line in text.splitlines())
    data = json.loads(_summary(capsys, str(results), "--format", "json"))
    mix = {(g["app"], g["version"]): g["verdict_mix"] for g in data["groups"]}
    assert mix[("sales", "2.1")]["error"] > 2 * mix[("sales", "2.0")]["error"]
    assert all(abs(sum(m.values()) - 1) < 0.01 for m in mix.values())


def test_markdown_fits_a_pull_request_comment(
    sample_results: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, _ = sample_results
    text = _summary(capsys, str(results), "--format", "markdown")
    head = text.splitlines()[0]
    assert head.startswith("| app |") and head.count("|") - 1 <= 10


def test_coverage_and_sampled_out_are_apart(
    sample_results: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, _ = sample_results
    data = json.loads(_summary(capsys, str(results), "--format", "json"))
    rows = {(g["app"], g["agent"], g["version"]): g for g in data["groups"]}
    support = rows[("support", "sql-agent", "2.0")]
    # rules/support samples half its traffic: what was not sampled is not "covered".
    assert support["skipped_sampling"] > 0
    assert support["coverage"] == round(support["evaluated"] / support["records"], 4)
    assert support["sampled_out"] == round(support["skipped_sampling"] / support["records"], 4)
    assert support["coverage"] < 1.0
    assert support["coverage"] + support["sampled_out"] == pytest.approx(
        1.0 - support["judge_errors"] / support["records"], abs=1e-3
    )
    assert sum(support["tier_counts"].values()) == support["evaluated"]
    assert data["invalid"] is None  # no --dead-letters: not counted, not zero
    assert data["total"]["records"] == sum(g["records"] for g in data["groups"]) == 400


def test_csv_and_markdown_carry_every_group(
    sample_results: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, _ = sample_results
    rows = list(csv.DictReader(io.StringIO(_summary(capsys, str(results), "--format", "csv"))))
    assert [r["app"] for r in rows][-1] == "TOTAL"
    assert {(r["app"], r["version"]) for r in rows[:-1]} == {
        ("sales", "2.0"),
        ("sales", "2.1"),
        ("support", "2.0"),
        ("support", "2.1"),
    }
    assert sum(int(r["records"]) for r in rows[:-1]) == int(rows[-1]["records"])
    md = _summary(capsys, str(results), "--format", "markdown").splitlines()
    assert md[0].startswith("| app | agent@version | records |")
    assert sum(1 for line in md if line.startswith("| sales |")) == 2


def test_long_app_and_agent_names_still_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    record = {"question": "q?", "sql": "SELECT 1", "app": "A" * 500, "agent": "G" * 500}
    log.write_text(json.dumps({**record, "agent_version": "V" * 500}) + "\n")
    out = tmp_path / "r.jsonl"
    assert main(["replay", str(log), "-o", str(out), "--no-progress"]) == 0
    text = _summary(capsys, str(out))
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "AAAA" in text and "…" in text
    full = json.loads(_summary(capsys, str(out), "--format", "json"))
    # The full formats keep the 40-character cap of every name, never the terminal's.
    assert full["groups"][0]["agent"] == "G" * 39 + "…"


def test_names_are_shown_never_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An app's or agent's name is the agent's to choose. Before: ESC[2J in it cleared the
    terminal (and a cut one left half a sequence), =HYPERLINK(...) ran as a formula in a
    spreadsheet opening the CSV, ![](url) showed an image in a pull-request comment."""
    log = tmp_path / "log.jsonl"
    record = {"question": "q?", "sql": "SELECT 1", "agent": '=HYPERLINK("http://x")'}
    log.write_text(json.dumps({**record, "app": "s\x1b[2J\u202e![](http://x/i.png)"}) + "\n")
    out = tmp_path / "r.jsonl"
    assert main(["replay", str(log), "-o", str(out), "--no-progress"]) == 0
    text = _summary(capsys, str(out))
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2J" in text
    rows = list(csv.DictReader(io.StringIO(_summary(capsys, str(out), "--format", "csv"))))
    assert rows[0]["agent"].startswith("'=HYPERLINK")
    md = _summary(capsys, str(out), "--format", "markdown")
    assert "![](" not in md and "\\!\\[\\](http://x/i.png)" in md


def test_bad_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["summary", "x.jsonl", "--format", "yaml"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def _results_with_usage(tmp_path: Path) -> Path:
    """Three results as an LLM judge writes them: tokens, a cache hit, a price, a failure."""
    from stef.models import JudgeInfo, Result, Usage

    judge = JudgeInfo(backend="llm", model="m")
    rows = [
        Result(
            id="a", app="x", outcome="evaluated", score=90.0, tier="excellent", judge=judge,
            usage=Usage(prompt_tokens=300, completion_tokens=5, cost_usd=0.001),
        ),
        Result(
            id="b", app="x", outcome="evaluated", score=20.0, tier="poor",
            issues=["filters_missing"], judge=judge,
            usage=Usage(prompt_tokens=310, completion_tokens=4, cache_hit=True),
        ),
        Result(
            id="c", app="x", outcome="judge_error", error="http_401: wrong key", judge=judge,
            usage=Usage(prompt_tokens=0, completion_tokens=0),
        ),
    ]  # fmt: skip
    path = tmp_path / "results.jsonl"
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    return path


def test_summary_says_cost_tokens_cache_hits_and_why_the_judge_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _results_with_usage(tmp_path)
    text = _summary(capsys, str(path), "--calibration", "none")
    assert "judge error reasons: http_401 x1" in text
    assert "610 prompt + 9 completion tokens; cache hits: 1; cost: $0.0010" in text
    total = json.loads(_summary(capsys, str(path), "--format", "json", "--calibration", "none"))[
        "total"
    ]
    assert (total["prompt_tokens"], total["completion_tokens"], total["cache_hits"]) == (610, 9, 1)
    assert total["cost_usd"] == 0.001
    assert total["judge_error_reasons"] == {"http_401": 1}
    assert (total["p10"], total["p50"], total["p90"]) == (20.0, 20.0, 90.0)


def test_worst_n_lists_the_lowest_scores_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _results_with_usage(tmp_path)
    text = _summary(capsys, str(path), "--worst", "1", "--calibration", "none")
    worst = [line for line in text.splitlines() if line.startswith("worst:")]
    assert len(worst) == 1 and " b " in worst[0] and "filters_missing" in worst[0]
    data = json.loads(
        _summary(capsys, str(path), "--worst", "5", "--format", "json", "--calibration", "none")
    )
    assert [row["id"] for row in data["worst"]] == ["b", "a"]
    with pytest.raises(SystemExit) as stopped:  # a usage error of the parser (issue 36 §6)
        main(["summary", str(path), "--worst", "-1"])
    assert stopped.value.code == 2
    assert "--worst: must be at least 0" in capsys.readouterr().err


def test_worst_n_lists_a_record_judged_twice_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At least once: the same id and score twice compared the rows (dicts) and raised."""
    path = _results_with_usage(tmp_path)
    lines = path.read_text().splitlines()
    again = json.loads(lines[0])
    again["issues"] = ["filters_extra"]
    path.write_text("\n".join([*lines, json.dumps(again)]) + "\n")
    data = json.loads(
        _summary(capsys, str(path), "--worst", "5", "--format", "json", "--calibration", "none")
    )
    assert [row["id"] for row in data["worst"]] == ["b", "a", "a"]
