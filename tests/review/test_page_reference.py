"""The review page shows the reference comparison (issue 30): its verdict and what decided it,
each differing component, and the counterexample database (its tables, both outputs) when the
rows differ; nothing of it for a record without a reference. Driven in headless Chromium on
results written by ``stef replay`` from a log with ``gold_sql``; screenshots go to
/tmp/shots/."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from stef.results_file import read_results
from stef.review.server import Review, ReviewServer
from tests.review.browser import browser  # noqa: F401 (the fixture)

SHOTS = Path("/tmp/shots")
ROWS = [
    {
        "id": "offset",
        "question": "Which singer has the second highest fee?",
        "sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 2, 1",
        "gold_sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 1, 1",
    },
    {
        "id": "same",
        "question": "List the singers from France",
        "sql": "SELECT name FROM singer WHERE country = 'France'",
        "gold_sql": "SELECT s.name FROM singer AS s WHERE (s.country = 'France')",
    },
    {
        "id": "keyed",
        "question": "For each shop, return the number of employees and the shop's name.",
        "sql": "SELECT COUNT(*), s.name FROM shop AS s JOIN hiring AS h "
        "ON s.shop_id = h.shop_id GROUP BY s.shop_id",
        "gold_sql": "SELECT COUNT(*), s.name FROM hiring AS h JOIN shop AS s "
        "ON h.shop_id = s.shop_id GROUP BY s.name",
    },
    {
        "id": "free",
        "question": "How many singers are there?",
        "sql": "SELECT COUNT(*) FROM singer",
    },
]


@pytest.fixture(autouse=True)
def _no_stef_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)


@pytest.fixture
def server(tmp_path: Path) -> Any:
    log, out = tmp_path / "refs.log.jsonl", tmp_path / "refs.results.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["replay", str(log), "--no-progress", "-o", str(out)]) == 0
    review = Review(read_results(out), tmp_path / "labels.jsonl", reviewer="r")
    running = ReviewServer(review, "127.0.0.1", 0)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.shutdown()
    running.server_close()


def _open(browser: Any, server: Any, record_id: str) -> Any:  # noqa: F811
    page = browser.new_page(viewport={"width": 1200, "height": 1100})
    page.goto(f"http://127.0.0.1:{server.port}/")
    page.wait_for_selector("#r-id:not(:empty)")
    for _ in range(len(ROWS)):
        if page.text_content("#r-id") == record_id:
            break
        page.keyboard.press("ArrowRight")
    assert page.text_content("#r-id") == record_id
    return page


def _reference_line(page: Any, shot: str) -> str:
    """The page's reference line, after a full-page screenshot named ``shot``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / shot), full_page=True)
    return page.text_content("#r-ref") or ""


def test_a_counterexample_shows_its_tables_and_both_outputs(
    browser: Any,  # noqa: F811
    server: Any,
) -> None:
    page = _open(browser, server, "offset")
    said = _reference_line(page, "review-counterexample.png")
    assert said.startswith("Incorrect, decided by execution")
    assert said.endswith("could tell)")  # no reason added to a plain difference
    assert page.text_content("#r-verdict") == "Incorrect"  # the reference's, not the judge's
    assert page.is_visible("#r-cex")
    assert page.text_content("#r-cex-tables caption") == "singer"
    headers = page.locator("#r-cex-tables th").all_text_contents()
    assert {"name", "fee"} <= set(headers)
    assert page.locator("#r-cex-tables td").count() >= 2 * len(headers)
    generated = page.locator("#r-cex-gen td").all_text_contents()
    reference = page.locator("#r-cex-ref td").all_text_contents()
    assert generated and reference and generated != reference
    assert any(d.startswith("limit: ") for d in page.locator("#r-diffs li").all_text_contents())


def test_agreeing_rows_show_no_counterexample_and_no_reference_shows_nothing(
    browser: Any,  # noqa: F811
    server: Any,
) -> None:
    page = _open(browser, server, "same")
    assert (page.text_content("#r-ref") or "").startswith("Correct, decided by execution")
    assert page.is_visible("#r-refcard") and not page.is_visible("#r-cex")
    page = _open(browser, server, "free")
    assert not page.is_visible("#r-refcard")


def test_rows_that_differ_but_pass_say_why_beside_the_counterexample(
    browser: Any,  # noqa: F811
    server: Any,
) -> None:
    page = _open(browser, server, "keyed")
    said = _reference_line(page, "review-keyed-groups.png")
    assert said.startswith("Likely Correct, decided by execution (rows different")
    assert "groups by their key" in said
    assert page.is_visible("#r-cex")
