"""The review page shows what the judge decided and why a record is where it is (issue 34 §5):
the SQL STEF judged (out of its fence, formatted), the verdict and who decided it, the second
opinion, agent, version and time, the queue reason, a dash for a missing value (never "none"),
and the reviewer's name asked on the page and kept per browser. Driven in headless Chromium on
results written by ``stef replay`` from a fenced-SQL log (heuristic) and through an LLM (the
fake endpoint); screenshots go to /tmp/shots/."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from stef.results_file import read_results
from stef.review.labels import read_label_lines
from stef.review.server import Review, ReviewServer
from stef.testing.fake_server import FakeLlmServer
from tests.review.browser import browser  # noqa: F401 (the fixture)

SHOTS = Path("/tmp/shots")
FENCED = (
    "Here is the query:\n```sql\nselect region, sum(amount) as total from orders "
    "where year = 2023 group by region order by total desc\n```\nIt sums 2023 by region."
)
ROWS = [
    {
        "id": "fenced-1",
        "question": "Total order amount by region in 2023",
        "sql": FENCED,
        "agent": "sqlbot",
        "agent_version": "1.4",
        "timestamp": "2026-11-20T09:15:00Z",
    },
    {
        "id": "plain-2",
        "question": "How many orders from Canada?",
        "sql": "SELECT COUNT(*) FROM orders WHERE country = 'Canada'",
    },
]


@pytest.fixture(autouse=True)
def _no_stef_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)


def _replay(tmp_path: Path, name: str) -> Path:
    log, out = tmp_path / f"{name}.log.jsonl", tmp_path / f"{name}.results.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["replay", str(log), "--no-progress", "-o", str(out)]) == 0
    return out


def _serve(results: Path, labels: Path) -> Any:
    server = ReviewServer(
        Review(read_results(results), labels, reviewer="server-default"), "127.0.0.1", 0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def heuristic_results(tmp_path: Path) -> Path:
    return _replay(tmp_path, "heuristic")


@pytest.fixture
def llm_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with FakeLlmServer() as fake:
        monkeypatch.setenv("STEF_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
        monkeypatch.setenv("STEF_LLM_API_KEY", "sk-test")
        yield _replay(tmp_path, "llm")


def _open(browser: Any, server: Any, record_id: str, shot: str) -> Any:  # noqa: F811
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.goto(f"http://127.0.0.1:{server.port}/")
    page.wait_for_selector("#r-id:not(:empty)")
    for _ in range(5):
        if page.text_content("#r-id") == record_id:
            break
        page.keyboard.press("ArrowRight")
    assert page.text_content("#r-id") == record_id
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / shot), full_page=True)
    return page


def test_the_page_shows_the_judged_sql_the_verdict_and_the_queue_reason(
    browser: Any,  # noqa: F811
    heuristic_results: Path,
    tmp_path: Path,
) -> None:
    server = _serve(heuristic_results, tmp_path / "labels.jsonl")
    try:
        page = _open(browser, server, "fenced-1", "review-fenced-heuristic.png")
        sql = page.text_content("#r-sql") or ""
        # Before: the raw reply, "Here is the query: ```sql ...", with "is" as a keyword.
        assert "Here is" not in sql and "```" not in sql
        assert sql.startswith("SELECT") and "\n" in sql  # formatted by sqlglot
        assert "taken out" in (page.text_content("#r-sql-from") or "")
        assert page.locator("#r-sql .kw", has_text="is").count() == 0
        assert page.text_content("#r-verdict") in (
            "Correct",
            "Likely Correct",
            "Potentially Incorrect",
            "Incorrect",
        )
        assert (page.text_content("#r-decider") or "").startswith("heuristic")
        assert page.text_content("#r-agent") == "sqlbot@1.4"
        assert page.text_content("#r-time") == "2026-11-20T09:15:00Z"
        assert page.text_content("#r-why")
        card = page.text_content("#rec") or ""
        assert " none" not in card.replace("not labelled yet", "")
    finally:
        server.shutdown()
        server.server_close()


def test_llm_results_show_the_second_opinion_and_no_none(
    browser: Any,  # noqa: F811
    llm_results: Path,
    tmp_path: Path,
) -> None:
    server = _serve(llm_results, tmp_path / "labels.jsonl")
    try:
        page = _open(browser, server, "fenced-1", "review-fenced-llm.png")
        assert (page.text_content("#r-decider") or "").startswith("LLM (fake-model")
        assert (page.text_content("#r-second") or "").startswith("heuristic: ")
        # Before: "P(CORRECT) none" for an uncalibrated LLM.
        assert page.text_content("#r-p") == "—"
        assert "none" not in (page.text_content("#rec") or "").replace("not labelled yet", "")
        assert page.text_content("#r-why")
    finally:
        server.shutdown()
        server.server_close()


def _labels_reach(labels: Path, count: int) -> list[tuple[str, bool | None]]:
    """The labels file's (reviewer, label) pairs once it holds ``count`` lines: the page saves a
    label by a request of its own after the key, and moves on when it is answered."""
    deadline = time.monotonic() + 30
    while True:
        lines = read_label_lines(labels) if labels.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return [(x["reviewer"], x["label"]) for x in lines]
        time.sleep(0.05)


def test_each_browser_keeps_its_reviewers_name(
    browser: Any,  # noqa: F811
    heuristic_results: Path,
    tmp_path: Path,
) -> None:
    labels = tmp_path / "labels.jsonl"
    server = _serve(heuristic_results, labels)
    try:
        url = f"http://127.0.0.1:{server.port}/"
        ann = browser.new_context()
        page = ann.new_page()
        page.goto(url)
        page.wait_for_selector("#r-id:not(:empty)")
        page.fill("#who", "ann")
        page.keyboard.press("Enter")
        page.keyboard.press("c")
        assert _labels_reach(labels, 1) == [("ann", True)]
        page.reload()  # the name is kept by this browser
        page.wait_for_selector("#r-id:not(:empty)")
        assert page.input_value("#who") == "ann"
        page.keyboard.press("i")
        assert _labels_reach(labels, 2) == [("ann", True), ("ann", False)]
        bob = browser.new_context().new_page()  # another browser: asked again
        bob.goto(url)
        bob.wait_for_selector("#r-id:not(:empty)")
        assert bob.input_value("#who") == ""
        bob.fill("#who", "bob")
        bob.keyboard.press("Enter")
        bob.keyboard.press("ArrowLeft")
        bob.keyboard.press("s")
        assert _labels_reach(labels, 3) == [("ann", True), ("ann", False), ("bob", None)]
        SHOTS.mkdir(parents=True, exist_ok=True)
        bob.screenshot(path=str(SHOTS / "review-second-reviewer.png"), full_page=True)
    finally:
        server.shutdown()
        server.server_close()
