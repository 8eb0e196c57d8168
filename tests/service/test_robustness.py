"""No record, reply or file stops a command: the attack corpus through ``stef run`` (followed file
and the real Kafka broker), ``stef replay`` and ``stef judge``. Records in = results + dead letters,
every dead letter names its reason, the process keeps going (or exits with its documented code)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stef.cli import main
from stef.exits import Exit
from stef.io.deadletter import DEFAULT_MAX_BYTES
from stef.io.jsonl import FileSource, JsonlSink
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import DEAD_LETTER_REASONS
from stef.models import JudgeInfo
from stef.service.loop import Service
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer, Raw, completion_body
from tests.attack_corpus import corpus
from tests.brokers import Broker, tansu_broker
from tests.service.conftest import ROOT, ServiceProcess, caught_up, kafka_config, read_jsonl

# Every reason a record may be dead-lettered for, as the metrics know them.
REASONS = set(DEAD_LETTER_REASONS)


def _write_corpus(path: Path) -> list[tuple[str, bytes]]:
    # One record per line: a payload holding a raw newline would be two lines of a log file.
    entries = [(k, p) for k, p in corpus() if b"\n" not in p]
    path.write_bytes(b"".join(p + b"\n" for _, p in entries))
    return entries


def _check_accounting(n: int, results: list[dict[str, Any]], letters: list[dict[str, Any]]) -> None:
    assert len(results) + len(letters) == n
    assert all(letter["reason"] in REASONS for letter in letters), {
        letter["reason"] for letter in letters
    }
    assert all(letter["error"] for letter in letters)
    assert {r["outcome"] for r in results} <= {"evaluated", "judge_error", "skipped_sampling"}


def test_the_corpus_has_at_least_sixty_kinds() -> None:
    assert len(corpus()) >= 60


def test_replay_accounts_for_every_hostile_line(tmp_path: Path) -> None:
    log = tmp_path / "attack.jsonl"
    entries = _write_corpus(log)
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    argv = ["replay", str(log), "-o", str(out), "--dead-letters", str(dead)]
    argv += ["--rules", str(ROOT / "rules"), "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "stef.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    _check_accounting(len(entries), read_jsonl(out), read_jsonl(dead))


def test_replay_fail_on_gates_a_ci_job(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        json.dumps({"question": "How many orders?", "sql": "SELECT COUNT(*) FROM o"})
        + "\nnot json\n"
    )
    assert main(["replay", str(log), "--no-progress"]) == Exit.OK
    assert main(["replay", str(log), "--no-progress", "--fail-on", "invalid"]) == Exit.GATE
    assert main(["replay", str(log), "--no-progress", "--fail-on", "judge_error"]) == Exit.OK
    assert main(["replay", str(log), "--no-progress", "--fail-on", "bogus"]) == Exit.USAGE


def test_replay_and_summary_of_a_missing_file_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == Exit.FAILURE
    assert main(["summary", str(tmp_path / "missing.jsonl")]) == Exit.FAILURE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("missing.jsonl" in line for line in err)


def test_replay_to_an_unwritable_output_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "q?", "sql": "SELECT 1"}) + "\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["replay", str(log), "-o", str(blocker / "out.jsonl")]) == Exit.FAILURE
    assert "stef replay:" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", ["replay", "run"])
def test_an_output_the_write_check_passes_but_open_refuses_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """/proc passes the writable check (root may write there) and refuses a new file. Before: a
    traceback (exit 1 all the same), naming replay's temporary file, not the output."""
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "q?", "sql": "SELECT 1"}) + "\n")
    target = "/proc/stef-out.jsonl"
    dead = f"file:{tmp_path / 'dead.jsonl'}"
    args = {
        "replay": ["replay", str(log), "-o", target, "--no-progress"],
        "run": ["run", "--source", f"file:{log}", "--results", f"file:{target}"],
    }[command]
    if command == "run":
        args += ["--metrics-port", "off"]
    assert main([*args, "--dead-letters", dead]) == Exit.FAILURE
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("{")]
    assert len(err) == 1 and err[0].startswith(f"stef {command}: {target}: "), err


def test_judge_never_raises_on_any_hostile_record(monkeypatch: pytest.MonkeyPatch) -> None:
    codes = {}
    for kind, payload in corpus():
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
        codes[kind] = main(["judge", "--rules", str(ROOT / "rules")])
    assert set(codes.values()) <= {Exit.OK, Exit.FAILURE, Exit.JUDGE_ERROR}, codes
    assert codes["missing_sql"] == Exit.FAILURE


def test_judge_rejects_an_unknown_dialect_flag(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["judge", "-q", "How many?", "-s", "SELECT 1", "--dialect", "klingon"])
    assert rc == Exit.USAGE
    assert "klingon" in capsys.readouterr().err


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_run_on_a_followed_file_accounts_for_every_hostile_line(
    tmp_path: Path, service_factory: Any
) -> None:
    log = tmp_path / "attack.jsonl"
    entries = _write_corpus(log)
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    proc: ServiceProcess = service_factory(
        "--source", f"file:{log}", "--follow", "--results", f"file:{out}",
        "--dead-letters", f"file:{dead}", "--rules", str(ROOT / "rules"), "--concurrency", "1",
    )  # fmt: skip
    proc.wait_ready()
    proc.wait_for(
        lambda: len(read_jsonl(out)) + len(read_jsonl(dead)) >= len(entries),
        timeout_s=240,
        what="every line judged or dead-lettered",
    )
    assert proc.get("/healthz")[0] == 200
    # Label values come from configuration only: no raw 10,000-character agent or app.
    _, text = proc.get("/metrics")
    labels = [
        v
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        for v in s.labels.values()
    ]
    assert max(len(v) for v in labels) <= 64
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    _check_accounting(len(entries), read_jsonl(out), read_jsonl(dead))


class _DyingJudge(HeuristicJudge):
    """Kills the worker thread that calls it (an error no guard may swallow silently)."""

    class Death(BaseException):
        pass

    def judge(self, request: JudgeRequest) -> JudgeReply:
        raise self.Death("worker killed")

    @property
    def info(self) -> JudgeInfo:
        return JudgeInfo(backend="heuristic")


def test_a_dead_worker_fails_healthz_and_the_run(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "How many?", "sql": "SELECT 1"}) + "\n")
    settings = load_settings(
        overrides={
            "source": f"file:{log}",
            "metrics_port": "0",
            "concurrency": 1,
            "record_timeout_s": 3,
        },
        env={},
    )
    service = Service(
        settings,
        backend=_DyingJudge(),
        source=FileSource(str(log)),
        results=JsonlSink(str(tmp_path / "r.jsonl")),
        dead_letters=JsonlSink(str(tmp_path / "d.jsonl")),
    )
    seen: list[tuple[int, str]] = []

    def probe() -> None:
        while service.server is None:
            threading.Event().wait(0.05)
        port = service.server.port
        for _ in range(100):
            status, body = _get(port, "/healthz")
            if status != 200:
                seen.append((status, body))
                return
            threading.Event().wait(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    assert service.run() == Exit.FAILURE  # a record never finished at the end of the file
    prober.join(10)
    assert seen and seen[0][0] == 503 and "worker died" in seen[0][1]


@pytest.mark.integration
def test_kafka_hostile_messages_never_stop_the_partition(
    kafka_broker: Broker, service_factory: Any
) -> None:
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"in-{tag}", 1)
    results = kafka_broker.create_topic(f"results-{tag}", 1)
    dead = kafka_broker.create_topic(f"dead-{tag}", 1)
    payloads = [p for _, p in corpus()]
    payloads.append(bytes(range(256)) * 3200)  # 800 KB of binary: its dead letter is capped
    payloads.append(json.dumps({"id": "last", "question": "How many?", "sql": "SELECT 1"}).encode())
    kafka_broker.produce(source, payloads)
    proc: ServiceProcess = service_factory(
        "--source", kafka_broker.url(source, f"g-{tag}"), "--results", kafka_broker.url(results),
        "--dead-letters", kafka_broker.url(dead), "--rules", str(ROOT / "rules"),
        config=kafka_config(kafka_consumer={"session_timeout_ms": 3000,
                                            "heartbeat_interval_ms": 500,
                                            "auto_offset_reset": "earliest"}),
    )  # fmt: skip
    proc.wait_ready()
    proc.wait_for(lambda: caught_up(proc, 1), timeout_s=240, what="every message handled")
    res = kafka_broker.consume_all(results, expect=1, timeout_s=30)
    letters = kafka_broker.consume_all(dead, expect=1, timeout_s=30)
    assert proc.alive()
    assert proc.get("/healthz")[0] == 200
    assert len(res) + len(letters) >= len(payloads)  # at least once: duplicates, never losses
    assert "last" in {m.key.decode() for m in res}
    decoded = [json.loads(m.value) for m in letters]
    assert all(len(m.value) <= DEFAULT_MAX_BYTES for m in letters)
    capped = [d for d in decoded if d.get("payload_bytes") == 256 * 3200]
    assert capped and capped[0]["payload_truncated"] and len(capped[0]["payload_sha256"]) == 64
    assert {d["reason"] for d in decoded} <= REASONS
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0


def _follow(
    tmp_path: Path, service_factory: Any, log: Path, *extra: str, **kw: Any
) -> tuple[ServiceProcess, Path, Path]:
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    proc: ServiceProcess = service_factory(
        "--source", f"file:{log}", "--follow", "--results", f"file:{out}",
        "--dead-letters", f"file:{dead}", *extra, **kw,
    )  # fmt: skip
    proc.wait_ready()
    return proc, out, dead


@pytest.mark.integration
def test_llm_reply_faults_under_run_are_judge_errors_not_dead_letters(
    tmp_path: Path, service_factory: Any
) -> None:
    faults = [
        Raw(200, completion_body([{"index": 0, "message": None, "finish_reason": "stop"}])),
        Raw(200, b"<html>bad gateway</html>", content_type="text/html"),
        Raw(200, completion_body([])),
        Raw(200, b"[1, 2, 3]"),
    ]
    n = 8
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "question": f"Orders in {2000 + i}?",
                        "sql": f"SELECT * FROM o WHERE year = {2000 + i}"}) + "\n"
            for i in range(n)
        )
    )  # fmt: skip
    with FakeLlmServer(default=lambda received: faults[0]) as fake:
        # Every call gets a fault: the four shapes in turn, then null messages.
        fake.script(*(faults * 10))
        proc, out, dead = _follow(
            tmp_path,
            service_factory,
            log,
            "--concurrency", "2",
            config={"llm": {"base_url": fake.base_url, "model": "fake", "max_retries": 1,
                            "backoff_base_s": 0.01, "backoff_max_s": 0.02, "timeout_s": 2}},
            env={"STEF_LLM_API_KEY": "sk-test-key-0123456789"},
        )  # fmt: skip
        proc.wait_for(lambda: len(read_jsonl(out)) >= n, timeout_s=120, what="a result per record")
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    results = read_jsonl(out)
    assert read_jsonl(dead) == []
    assert {r["outcome"] for r in results} == {"judge_error"}
    assert all(r["score"] is None and r["error"] for r in results)
    assert "sk-test-key-0123456789" not in proc.log_text()


def test_a_broken_rules_edit_keeps_the_last_good_rules_per_app(
    tmp_path: Path, service_factory: Any
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sales.yaml").write_text("limit_min: 1000\n")
    (rules / "support.yaml").write_text("limit_min: 1000\n")
    log = tmp_path / "log.jsonl"
    log.write_text("")
    proc, out, _ = _follow(
        tmp_path, service_factory, log, "--rules", str(rules),
        config={"rules_check_interval_s": 0.2},
    )  # fmt: skip
    # One team breaks its file (not UTF-8); the other turns its sampling off.
    (rules / "support.yaml").write_bytes(b"limit_min: \xff\xfe\n")
    (rules / "sales.yaml").write_text("limit_min: 1000\nsampling_rate: 0.0\n")
    proc.wait_for(
        lambda: proc.total("stef_rules_reload_total", outcome="error") >= 1,
        timeout_s=30,
        what="the broken edit counted",
    )
    with log.open("a") as f:
        for app in ("sales", "support"):
            f.write(json.dumps({"id": app, "app": app, "question": "How many orders?",
                                "sql": "SELECT COUNT(*) FROM orders"}) + "\n")  # fmt: skip
    proc.wait_for(lambda: len(read_jsonl(out)) >= 2, timeout_s=30, what="both records judged")
    assert proc.alive() and proc.get("/healthz")[0] == 200
    outcomes = {r["id"]: r["outcome"] for r in read_jsonl(out)}
    assert outcomes == {"sales": "skipped_sampling", "support": "evaluated"}
    problems = [e for e in proc.events("rules_reload_rejected")]
    assert problems and "support.yaml" in json.dumps(problems)
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


@pytest.mark.integration
def test_readyz_fails_while_the_broker_is_unreachable(service_factory: Any) -> None:
    with tansu_broker() as broker:
        topic = broker.create_topic(f"in-{uuid.uuid4().hex[:8]}", 1)
        proc: ServiceProcess = service_factory(
            "--source", broker.url(topic, f"g-{uuid.uuid4().hex[:8]}"), "--results", "-",
            "--dead-letters", "-",
            config=kafka_config(),
        )  # fmt: skip
        proc.wait_ready()
        assert proc.get("/readyz")[0] == 200
        broker.stop()
        proc.wait_for(lambda: proc.get("/readyz")[0] == 503, timeout_s=30, what="/readyz 503")
        assert "bootstrap" in proc.get("/readyz")[1]
        assert proc.get("/healthz")[0] == 200  # alive, waiting for the broker: not restarted
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_a_full_disk_stops_the_service_with_nothing_acknowledged(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(json.dumps({"question": f"q{i}?", "sql": "SELECT 1"}) + "\n" for i in range(5))
    )
    proc = subprocess.run(
        [sys.executable, "-m", "stef.cli", "run", "--source", f"file:{log}",
         "--results", "file:/dev/full", "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
         "--metrics-port", "off"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == Exit.FAILURE
    assert "No space left on device" in proc.stderr
    assert "Traceback" not in proc.stderr
    rc = main(["replay", str(log), "-o", "/dev/full", "--no-progress"])
    assert rc == Exit.FAILURE
