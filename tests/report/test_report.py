"""``stef report``: the per-app figures, escaped records, labels' sections, one file with no
network request (opened in headless Chromium)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def _rec(rid: str, app: str, score: float | None, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": rid,
        "app": app,
        "outcome": "evaluated" if score is not None else "judge_error",
        "score": score,
        "tier": None if score is None else ("excellent" if score >= 90 else "poor"),
        "issues": ["none"] if score and score >= 90 else ["filters_missing"],
        "judge": {"backend": "llm", "p_correct": (score or 0) / 100},
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.001},
        "input": {"question": f"question {rid}", "enriched_question": None, "sql": "SELECT 1"},
    }
    rec.update(extra)
    return rec


RECORDS = [
    _rec("a1", "sales", 95.0),
    _rec("a2", "sales", 10.0, needs_review=True, safety={"mutating": True}),
    _rec("a3", "sales", 50.0, input={"question": HOSTILE, "sql": "SELECT 1"}),
    _rec("b1", "hr", 92.0),
    _rec("b2", "hr", None, error="timeout: no answer in 30 s"),
    _rec("b3", "hr", None, error="http_status: 500"),
]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _report(tmp_path: Path, *extra: str, labels: list[dict[str, Any]] | None = None) -> str:
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    argv = ["report", str(results), "-o", str(tmp_path / "out" / "report.html"), *extra]
    if labels is not None:
        path = tmp_path / "l.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in labels))
        argv += ["--labels", str(path)]
    assert main(argv) == 0
    return (tmp_path / "out" / "report.html").read_text()


def test_report_figures_and_escaping(tmp_path: Path) -> None:
    page = _report(tmp_path, "--worst", "2")
    parsed = _Tags()
    parsed.feed(page)
    text = " ".join(parsed.text)
    assert "script" not in parsed.tags and "img" not in parsed.tags  # no markup from records
    assert "link" not in parsed.tags  # nothing to fetch
    assert HOSTILE in text  # shown, as text
    assert "timeout 1" in text and "http_status 1" in text  # judge errors with their reasons
    assert "600 / 60" in text  # tokens in / out of all six records
    assert "Reliability" not in text  # no labels, no reliability diagram
    assert parsed.tags.count("svg") == 1
    worst = page.split("lowest scores", 1)[1]
    # --worst 2: a2 (10) and a3 (50), not the high scores
    assert "question a2" in worst and HOSTILE.replace("<", "&lt;")[:20] in worst
    assert "question a1" not in worst and "question b1" not in worst


def test_labels_add_the_reliability_diagram(tmp_path: Path) -> None:
    labels = [
        {"id": "a1", "label": True},
        {"id": "a2", "label": False},
        {"id": "b1", "label": True},
    ]
    page = _report(tmp_path, labels=labels)
    assert "Reliability" in page and page.count("<svg") == 2
    assert "+ 3 labels" in page  # PPI++: the judge or the labels alone, whichever is narrower


def test_labels_picked_by_doubt_do_not_correct_the_accuracy(tmp_path: Path) -> None:
    labels = [
        {"id": "a1", "label": True, "queue": "random"},
        {"id": "a2", "label": False, "queue": "random"},
        {"id": "b1", "label": False, "queue": "teaching"},
    ]
    page = _report(tmp_path, labels=labels)
    assert "+ 2 labels" in page and "+ 3 labels" not in page
    assert "Reliability" in page  # every label draws the diagram


def test_report_bad_results_line_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(RECORDS[0]) + "\n{not json\n")
    assert main(["report", str(results), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert f"{results}:2:" in err and "Traceback" not in err
    assert not (tmp_path / "x.html").exists()


def test_report_opens_with_no_network_request(tmp_path: Path, browser: Any) -> None:
    _report(tmp_path, labels=[{"id": "a1", "label": True}, {"id": "a2", "label": False}])
    url = (tmp_path / "out" / "report.html").as_uri()
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    assert requests == [url]
    assert dialogs == []  # the hostile record ran nothing
    assert page.locator("svg").count() == 2
    assert HOSTILE in page.text_content("body")


@pytest.fixture(scope="module")
def example_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import ROOT

    out = tmp_path_factory.mktemp("example") / "results.jsonl"
    log = str(ROOT / "examples" / "agent_log.jsonl")
    argv = ["replay", log, "--rules", str(ROOT / "rules"), "-o", str(out), "--no-progress"]
    assert main(argv) == 0
    return out


def test_report_tells_the_release_story(example_results: Path, tmp_path: Path) -> None:
    """Rows per app and release with the verdict mix beside the poor tier, the issue shares
    (filters_missing rises on sales 2.1), and the estimate or its reason (issue 31 §5-6)."""
    page_path = tmp_path / "report.html"
    assert main(["report", str(example_results), "-o", str(page_path)]) == 0
    page = page_path.read_text(encoding="utf-8")
    assert "Per release: what the judge could tell" in page
    rows = {
        m.split("</td>", 1)[0]: m
        for m in page.split("<tr><td>")[1:]
        if m.startswith(("sales sql-agent@", "support sql-agent@"))
    }
    assert set(rows) == {f"{a} sql-agent@{v}" for a in ("sales", "support") for v in ("2.0", "2.1")}

    def share(row: str, issue: str) -> int:
        return int(row.split(issue + " ", 1)[1].split("%", 1)[0])

    assert share(rows["sales sql-agent@2.1"], "filters_missing") > 2 * share(
        rows["sales sql-agent@2.0"], "filters_missing"
    )
    assert "error found" in page and "undecided" in page and "needs review" in page
    assert "Judge: heuristic." in page
    # The estimate is a number with its interval, or no number with the reason.
    assert "no estimate" in page or "[" in rows["sales sql-agent@2.0"]


def test_template_text_and_a_lone_surrogate_in_a_record_are_shown_as_text(tmp_path: Path) -> None:
    """A record's text is data, never template or markup; a lone surrogate (JSON allows
    ``"\\ud800"``; STEF never writes one) cannot stop the page: it is written as U+FFFD."""
    results = tmp_path / "r.jsonl"
    odd = _rec("odd\ud800", "{{ 7 * 7 }}", 5.0, rationale="{% raw %}{{ source }} & <b>")
    results.write_text(json.dumps(odd) + "\n")
    out = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "<td>odd\ufffd</td>" in page and "<td>{{ 7 * 7 }}</td>" in page
    assert "<td>49</td>" not in page
    assert "{% raw %}{{ source }} &amp; &lt;b&gt;" in page


def test_report_to_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """``-o -`` is stdout, as for every command (it wrote a file named ``-``)."""
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(results), "-o", "-"]) == 0
    page = capsysbinary.readouterr().out.decode()
    assert page.lower().startswith("<!doctype html>")
    assert not (tmp_path / "-").exists()
