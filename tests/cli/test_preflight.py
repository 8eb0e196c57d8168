"""A broken LLM setup is loud (issue 25 §1): the endpoint is checked before any record is read,
``stef check`` checks settings, rules and endpoint, and judge errors are logged with their reason,
listed in the replay summary and fail a replay where the judge failed on every record."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from stef.cli import main
from stef.exits import Exit
from stef.judges.llm import preflight
from stef.models import JudgeInfo, Result
from stef.service.judge_errors import JudgeErrorLog
from stef.testing.fake_server import Error, FakeLlmServer, Raw, Reply
from tests.calibrate.conftest import labels_file
from tests.conftest import write_jsonl

RIGHT = "sk-right-key-0123456789"
WRONG = "sk-wrong-key-9876543210"
RECORD = {"question": "How many orders in 2023?", "sql": "SELECT COUNT(*) FROM orders"}


@pytest.fixture
def server() -> Iterator[FakeLlmServer]:
    with FakeLlmServer(api_key=RIGHT) as fake:
        yield fake


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log.jsonl"
    write_jsonl(path, ({**RECORD, "id": str(i)} for i in range(4)))
    return path


def _endpoint(mp: pytest.MonkeyPatch, url: str, key: str, **more: str) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("STEF_"):
            mp.delenv(name)
    mp.setenv("STEF_LLM_BASE_URL", url)
    mp.setenv("STEF_LLM_MODEL", "fake-model")
    mp.setenv("STEF_LLM_API_KEY", key)
    mp.setenv("STEF_LLM_MAX_RETRIES", "0")
    for name, value in more.items():
        mp.setenv(name, value)


def _commands(log: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "replay": ["replay", str(log), "--no-progress", "-o", str(tmp_path / "out.jsonl")],
        "run": [
            "run",
            "--source",
            f"file:{log}",
            "--results",
            f"file:{tmp_path / 'run.jsonl'}",
            "--metrics-port",
            "off",
        ],
        # Nothing listens on port 9: the preflight fails before the broker is tried.
        "backfill": [
            "backfill",
            "--source",
            "kafka://127.0.0.1:9/topic",
            "--from",
            "2026-01-01T00:00Z",
        ],
        "calibrate": ["calibrate", str(labels_file(tmp_path)), "--no-progress"],
        "check": ["check"],
    }


@pytest.mark.parametrize("command", ["replay", "run", "backfill", "calibrate", "check"])
def test_a_wrong_key_stops_every_command_before_any_record(
    command: str,
    server: FakeLlmServer,
    log: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _endpoint(monkeypatch, server.base_url, WRONG)
    out = tmp_path / "out.jsonl"
    out.write_text("kept\n")
    assert main(_commands(log, tmp_path)[command]) == Exit.JUDGE_ERROR
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if "LLM endpoint" in x]
    assert len(line) == 1, err
    assert server.base_url in line[0] and "HTTP 401" in line[0] and "Incorrect API key" in line[0]
    assert WRONG not in err and "Traceback" not in err
    assert server.chat_requests() == []  # no record reached the judge
    assert out.read_text() == "kept\n"  # a replay that cannot judge replaces nothing
    assert not (tmp_path / "run.jsonl").exists()


def test_an_unreachable_endpoint_is_named(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _endpoint(monkeypatch, f"http://127.0.0.1:{port}/v1", RIGHT)
    assert main(["replay", str(log), "--no-progress"]) == Exit.JUDGE_ERROR
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:{port}/v1" in err and "cannot connect" in err


def test_the_preflight_can_be_turned_off(
    server: FakeLlmServer, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _endpoint(monkeypatch, server.base_url, WRONG, STEF_LLM_PREFLIGHT="false")
    # Every record is then a judge error, and that fails the replay too.
    assert main(["replay", str(log), "--no-progress"]) == Exit.JUDGE_ERROR
    assert len(server.chat_requests()) == 4


def test_check_passes_with_the_right_key_and_names_the_judge(
    server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _endpoint(monkeypatch, server.base_url, RIGHT)
    assert main(["check"]) == Exit.OK
    out = capsys.readouterr().out
    assert "settings: ok" in out and "rules: ok" in out
    assert "model fake-model" in out and server.base_url in out


def test_check_without_an_endpoint_names_the_heuristic_and_refuses_bad_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY", "STEF_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["check"]) == Exit.OK
    assert "judge: heuristic" in capsys.readouterr().out
    bad = tmp_path / "rules.yaml"
    bad.write_text("sampling_rate: lots\n")
    assert main(["check", "--rules", str(bad)]) == Exit.USAGE


def test_judge_errors_are_logged_with_their_reason_listed_and_fail_the_replay(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = "The model `fake-model` does not exist"
    with FakeLlmServer(default=lambda r: Error(404, missing)) as server:
        _endpoint(monkeypatch, server.base_url, RIGHT)
        # Before: exit 0, nothing on stderr about why.
        assert main(["replay", str(log), "--no-progress"]) == Exit.JUDGE_ERROR
    captured = capsys.readouterr()
    lines = [json.loads(x) for x in captured.err.splitlines() if x.startswith("{")]
    warnings = [x for x in lines if x["event"] == "judge_error"]
    # Rate-limited: the first at once, the rest counted in one line at the end of the run.
    assert [w["count"] for w in warnings] == [1, 3]
    assert {w["reason"] for w in warnings} == {"http_404"}
    assert all(w["level"] == "warning" and missing in w["error"] for w in warnings)
    assert "judge error reasons: http_404 x4" in captured.out and missing in captured.out
    assert "failed on every judged record" in captured.err


@pytest.mark.parametrize(("bound", "status"), [("0.2", Exit.JUDGE_ERROR), ("0.5", Exit.OK)])
def test_max_judge_error_rate_bounds_the_share(
    bound: str, status: int, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeLlmServer() as server:
        server.script(Error(404, "scripted"))  # one record of four: 25%
        _endpoint(monkeypatch, server.base_url, "")
        args = ["replay", str(log), "--no-progress", "--max-judge-error-rate", bound]
        assert main(args) == status


def test_the_error_log_counts_per_reason_between_lines() -> None:
    now = [0.0]
    errors = JudgeErrorLog(interval_s=60, clock=lambda: now[0])

    def failed(error: str) -> Result:
        return Result(
            id="r",
            app="sales",
            outcome="judge_error",
            error=error,
            judge=JudgeInfo(backend="llm", model="m", prompt_version="v"),
        )

    with capture_logs() as logs:
        for _ in range(5):
            errors.observe(failed("timeout: no answer within 60 s"))
        errors.observe(failed("http_401: HTTP 401 from the LLM endpoint: bad key"))
        now[0] = 61.0
        errors.observe(failed("timeout: no answer within 60 s"))
        errors.flush()
    said = [(x["reason"], x["count"], x["total"]) for x in logs]
    assert said == [("timeout", 1, 1), ("http_401", 1, 1), ("timeout", 5, 6)]
    assert errors.totals["timeout"][0] == 6


def test_check_says_when_the_models_list_does_not_name_the_model(
    server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _endpoint(monkeypatch, server.base_url, RIGHT, STEF_LLM_MODEL="my-deployment")
    # The test call answers: a note, not a failure (Azure lists models, not deployments).
    assert main(["check"]) == Exit.OK
    out = capsys.readouterr().out
    assert "does not name the configured model" in out and "test verdict ok" in out
    assert "1 model listed" in out


def _check_fails(capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    assert main(["check"]) == Exit.JUDGE_ERROR
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("{")]
    assert len(err) == 1 and err[0].startswith("stef check: "), err
    assert all(n in err[0] for n in needles), err


HTML = b"<!doctype html><html><body>Welcome to our site</body></html>"


def test_check_fails_on_an_endpoint_that_answers_a_web_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeLlmServer(models=HTML, default=lambda r: Raw(200, HTML)) as server:
        _endpoint(monkeypatch, server.base_url, "")
        _check_fails(capsys, server.base_url, "not an OpenAI models list")


@contextmanager
def _models_answering(body: Callable[[socket.socket], None]) -> Iterator[str]:
    """A server on 127.0.0.1 that reads a request's head and answers with ``body(connection)``
    (which writes the whole answer, status line included); its base URL."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head:
                if not (got := self.request.recv(4096)):
                    return
                head += got
            with contextlib.suppress(OSError):
                body(self.request)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _endless(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % 65536 + b"[" * 65536 + b"\r\n"
    for _ in range(100_000):  # 6.5 GB, if it were read to the end
        connection.sendall(chunk)


def _trickle(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100_000):
        connection.sendall(b" ")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("body", "needle"),
    [(_endless, "answered more than 4,194,304 bytes"), (_trickle, "still arriving 1 s after")],
    ids=["endless", "trickle"],
)
def test_a_models_answer_without_end_fails_the_check_within_its_bounds(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: Callable[[socket.socket], None],
    needle: str,
) -> None:
    """Read whole, an endless answer filled memory at the rate it came (2.2 GB in 6 s) and a
    trickled one held the start for as long as it went on, deaf to SIGTERM."""
    monkeypatch.setattr(preflight, "CHECK_TIMEOUT_S", 1.0)
    with _models_answering(body) as url:
        _endpoint(monkeypatch, url, RIGHT)
        _check_fails(capsys, url, needle)


def _check_refuses(capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    """A settings error: exit 2, as replay and run give for it, never "unreachable" (3)."""
    assert main(["check"]) == Exit.USAGE
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("{")]
    assert len(err) == 1 and err[0].startswith("stef check: "), err
    assert all(n in err[0] for n in needles), err


def test_check_refuses_a_missing_model_as_replay_does(
    server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 3, where replay, run and judge exit 2 on the same settings."""
    _endpoint(monkeypatch, server.base_url, RIGHT)
    monkeypatch.delenv("STEF_LLM_MODEL")
    _check_refuses(capsys, "STEF_LLM_MODEL")
    assert server.requests == []


def test_check_refuses_a_cache_file_that_is_not_sqlite(
    server: FakeLlmServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Before: "ok" and exit 0, where replay stopped on the same file with exit 2."""
    cache = tmp_path / "cache.sqlite"
    cache.write_text("not a database\n")
    _endpoint(monkeypatch, server.base_url, RIGHT)
    monkeypatch.setenv("STEF_LLM_CACHE", str(cache))
    _check_refuses(capsys, str(cache), "not a usable SQLite cache")
    assert server.requests == []


def test_check_fails_on_a_model_neither_listed_nor_served(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = "The model `fake-model` does not exist"
    with FakeLlmServer(models=("gpt-other",), default=lambda r: Error(404, gone)) as server:
        _endpoint(monkeypatch, server.base_url, "")
        _check_fails(capsys, "does not name it (1 listed: gpt-other)", gone)


@pytest.mark.parametrize(
    ("verdict", "reply"),
    [
        ("structured", Reply("Sure! The query looks right to me.")),
        ("probability", Reply("Yes", logprobs=False)),
    ],
)
def test_check_fails_when_the_test_call_is_not_the_verdict_modes_shape(
    verdict: str,
    reply: Reply,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeLlmServer(default=lambda r: reply) as server:
        _endpoint(monkeypatch, server.base_url, "", STEF_LLM_VERDICT=verdict)
        _check_fails(capsys, f"verdict mode {verdict}")
        assert server.chat_requests()  # the test call reached the model


def test_check_is_ok_when_the_test_call_gives_a_verdict(
    server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _endpoint(monkeypatch, server.base_url, RIGHT)
    assert main(["check"]) == Exit.OK
    assert "test verdict ok" in capsys.readouterr().out
    assert len(server.chat_requests()) == 1


def test_judge_error_counts_agree_between_the_summary_and_the_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    rows = [{**RECORD, "id": str(i)} for i in range(4)]
    rows[0]["sql"] = "DELETE FROM orders"  # judge failed, scored by the safety override
    write_jsonl(log, rows)
    with FakeLlmServer(default=lambda r: Raw(200, HTML)) as server:
        _endpoint(monkeypatch, server.base_url, "", STEF_LLM_PREFLIGHT="false")
        assert main(["replay", str(log), "--no-progress"]) == Exit.JUDGE_ERROR
    out = capsys.readouterr().out
    # Before: "judge errors: 3" in the table, "bad_response x4" on the line after it.
    counts = {int(n) for n in re.findall(r"bad_response x(\d+)", out)}
    assert "judge errors: 3;" in out and counts == {3}, out
    assert "1 more record had a judge error but unsafe SQL" in out
