"""``stef review`` in a real headless browser: labels by keyboard, hostile records stay text,
and the JSON API refuses requests that do not come from the page."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stef.results_file import read_results
from stef.review.labels import append_label, read_label_lines
from stef.review.server import Review, ReviewServer

HOSTILE_IMG = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_SCRIPT = "Orders <script>document.title='pwned'</script> in EMEA"


def _result(rid: str, question: str, *, p: float | None = None, **extra: Any) -> dict[str, Any]:
    judge: dict[str, Any] = {"backend": "heuristic", "prompt_version": "v1"}
    if p is not None:
        judge["p_correct"] = p
    return {
        "id": rid,
        "app": "sales",
        "outcome": "evaluated",
        "score": 80.0,
        "tier": "good",
        "issues": ["none"],
        "rationale": "fine",
        "judge": judge,
        "input": {"question": question, "enriched_question": None, "sql": "select 1"},
        **extra,
    }


def _serve(tmp_path: Path, results: list[dict[str, Any]], reviewer: str = "ann") -> Any:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in results))
    review = Review(read_results(path), tmp_path / "labels.jsonl", reviewer=reviewer)
    server = ReviewServer(review, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    results = [
        _result("far", "far from a coin toss", p=0.95),
        _result("near", "nearest a coin toss", p=0.52),
        _result("flagged", "flagged for review", p=0.9, needs_review=True),
        _result("img", HOSTILE_IMG, p=0.99),
        _result("script", HOSTILE_SCRIPT, p=0.98),
    ]
    # The few-shot examples the judge was shown are named (as text) beside the flags.
    results[4]["judge"]["examples"] = [HOSTILE_IMG, "e-2"]
    server = _serve(tmp_path, results)
    yield server
    server.shutdown()
    server.server_close()


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def test_three_labels_by_keyboard_reach_the_labels_file(browser: Any, served: Any) -> None:
    expect = _expect()
    page = browser.new_page()
    page.goto(f"http://127.0.0.1:{served.port}/")
    page.wait_for_selector("#r-id:not(:empty)")
    # Teaching order: needs_review first, then p_correct nearest 0.5.
    assert page.text_content("#r-id") == "flagged"
    # No name yet: the page asks for one (and puts the cursor there) and writes nothing.
    page.keyboard.press("c")
    assert "type your name" in (page.text_content("#error") or "")
    assert page.evaluate("document.activeElement.id") == "who"
    assert not served.review.labels.exists()
    page.fill("#who", "ann")
    page.keyboard.press("Enter")
    page.keyboard.press("c")
    expect(page.locator("#r-id")).to_have_text("near")
    page.keyboard.press("n")
    page.keyboard.type("wrong join")
    page.keyboard.press("Escape")
    page.keyboard.press("i")
    expect(page.locator("#r-id")).to_have_text("far")
    page.keyboard.press("s")
    expect(page.locator("#r-id")).to_have_text("script")
    lines = read_label_lines(served.review.labels)
    assert [(x["id"], x["label"], x["note"]) for x in lines] == [
        ("flagged", True, ""),
        ("near", False, "wrong join"),
        ("far", None, ""),
    ]
    assert lines[1]["reviewer"] == "ann" and lines[1]["p_correct"] == 0.52
    assert lines[1]["judge"]["prompt_version"] == "v1" and lines[1]["queue"] == "teaching"
    # A reload resumes at the first record nobody labelled.
    page.reload()
    page.wait_for_selector("#r-id:not(:empty)")
    assert page.text_content("#r-id") == "script"


def test_hostile_markup_in_a_record_shows_as_text(browser: Any, served: Any) -> None:
    expect = _expect()
    page = browser.new_page()
    page.goto(f"http://127.0.0.1:{served.port}/")
    page.wait_for_selector("#r-id:not(:empty)")
    for _ in range(3):  # flagged, near, far, then the two hostile records
        page.keyboard.press("ArrowRight")
    expect(page.locator("#r-id")).to_have_text("script")
    assert page.text_content("#r-q") == HOSTILE_SCRIPT
    assert f"shown examples: {HOSTILE_IMG}, e-2" in (page.text_content("#r-flags") or "")
    assert page.locator("#r-flags img").count() == 0
    page.keyboard.press("ArrowRight")
    expect(page.locator("#r-id")).to_have_text("img")
    assert page.text_content("#r-q") == HOSTILE_IMG
    assert page.locator("#r-q img, #r-q script").count() == 0
    assert page.title() == "STEF review"


def _post(port: int, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/label", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_posts_need_the_pages_origin_and_session_token(served: Any) -> None:
    port, token = served.port, served.review.token
    body = json.dumps({"id": "far", "label": True}).encode()
    good = {"Origin": f"http://127.0.0.1:{port}", "X-Stef-Token": token}
    assert _post(port, body, {**good, "Origin": "http://evil.example"}) == 403
    assert _post(port, body, {**good, "X-Stef-Token": "guess"}) == 403
    assert _post(port, body, {"Origin": good["Origin"]}) == 403
    assert _post(port, b'{"id": "nope", "label": true}', good) == 400
    assert not served.review.labels.exists()
    assert _post(port, body, good) == 200
    assert [x["id"] for x in read_label_lines(served.review.labels)] == ["far"]


def test_two_writers_lose_no_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    note = "x" * 5000  # longer than a pipe buffer's atomic write

    def write(who: str) -> None:
        for n in range(100):
            append_label(path, {"id": f"{who}{n}", "label": True, "note": note})

    threads = [threading.Thread(target=write, args=(w,)) for w in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = {x["id"] for x in read_label_lines(path)}
    assert len(ids) == 200


def test_host_and_origin_rules(tmp_path: Path) -> None:
    review = Review([], tmp_path / "labels.jsonl", reviewer="ann")
    review.bind("127.0.0.1", 8765)
    assert review.host_ok("localhost:8765") and review.host_ok("127.0.0.1:8765")
    assert not review.host_ok("rebound.example:8765")  # DNS rebinding reads nothing
    assert review.origin_ok("http://127.0.0.1:8765", "127.0.0.1:8765")
    assert not review.origin_ok("http://rebound.example:8765", "127.0.0.1:8765")
    review.bind("0.0.0.0", 8765)  # --host 0.0.0.0: any name, Origin must match the Host
    assert review.host_ok("10.1.2.3:8765")
    assert review.origin_ok("http://10.1.2.3:8765", "10.1.2.3:8765")
    assert not review.origin_ok("http://evil.example", "10.1.2.3:8765")
    assert not review.origin_ok(None, "10.1.2.3:8765")
