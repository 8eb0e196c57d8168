"""The canary (stef.service.canary): labelled records re-judged on a schedule. Its agreement follows
the judge (the fake LLM server answering right, then wrong), its runs never reach the results nor
the live record metrics, a failing run is counted and the service goes on, and a bad canary file
stops ``stef run`` at start with exit 2."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from stef.cli import main
from stef.errors import ConfigError
from stef.exits import Exit
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.llm import LlmJudge
from stef.judges.ratelimit import RateLimitedJudge
from stef.labels_file import LabelledRecord, read_labels
from stef.metrics import Metrics
from stef.prompts import data_blocks
from stef.rules import load_rules
from stef.service import canary
from stef.service.canary import build_canary, load_canary, stratified_sample
from stef.service.wiring import build_backend, build_canary_backend
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer, Received, Step, judge_like
from tests.brokers import free_port
from tests.service.conftest import ROOT, ServiceProcess, make_log

CANARY = ROOT / "examples" / "canary.jsonl"
RULES = ROOT / "rules"


class Labeller:
    """The fake LLM's answers: on a canary record, the label's verdict (``right``) or the
    opposite; on any other record, the server's default."""

    def __init__(self, path: Path) -> None:
        self.truth = {r.payload["sql"]: r.label for r in read_labels(path)}
        self.right = True
        self.canary_calls = 0
        self._lock = threading.Lock()

    def __call__(self, received: Received) -> Step:
        label = self.truth.get(data_blocks(received.text("user")).get("sql"))
        if label is None:
            return judge_like(received)
        with self._lock:
            self.canary_calls += 1
        correct = label if self.right else not label
        return judge_like(received, verdict="Correct" if correct else "Incorrect", confidence=0.95)


@pytest.fixture
def labeller_server() -> Iterator[tuple[FakeLlmServer, Labeller]]:
    labeller = Labeller(CANARY)
    with FakeLlmServer(default=labeller) as server:
        yield server, labeller


def _labelled(n_true: int, n_false: int) -> list[LabelledRecord]:
    labels = [True] * n_true + [False] * n_false
    return [LabelledRecord(i + 1, {"question": "q", "sql": "SELECT 1"}, lab, None, ()) for i, lab in
            enumerate(labels)]  # fmt: skip


# ------------------------------------------------------------------------------------ sampling


@pytest.mark.parametrize(("n_true", "n_false", "size"), [(10, 10, 6), (18, 2, 5), (2, 30, 4)])
def test_sample_is_bounded_and_keeps_both_classes(n_true: int, n_false: int, size: int) -> None:
    records = _labelled(n_true, n_false)
    for seed in range(50):
        sample = stratified_sample(records, size, random.Random(seed))
        assert len(sample) == size
        assert {r.label for r in sample} == {True, False}
        assert len({r.line for r in sample}) == size
        assert [r.line for r in sample] == sorted(r.line for r in sample)
    even = stratified_sample(_labelled(10, 10), 6, random.Random(0))
    assert sum(r.label for r in even) == 3


def test_a_file_smaller_than_the_sample_is_judged_whole() -> None:
    records = _labelled(3, 2)
    assert stratified_sample(records, 20, random.Random(0)) == records


def test_the_shipped_canary_file_is_valid_and_balanced() -> None:
    records = load_canary(CANARY)
    assert len(records) == 20
    assert sum(r.label for r in records) == 10
    apps = {r.payload["app"] for r in records}
    assert apps == {"sales", "support"}
    # Every wrong record names its mistake; no right one does.
    assert all(bool(r.error_types) != r.label for r in records)


# ---------------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ('{"question": "q", "sql": "SELECT 1", "label": true}\nnot json\n', ":2: not JSON"),
        ('{"question": "q", "sql": "SELECT 1", "label": "yes"}\n', ":1: 'label' must be true"),
        ('{"question": "q", "sql": "SELECT 1", "label": true}\n', "labelled true and false"),
        ("\n", "labelled true and false"),
    ],
)
def test_a_bad_canary_file_is_a_config_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "canary.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_canary(path)


def test_a_fifo_or_a_folder_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    # Opening a FIFO with no writer would block the canary (and stef run's start) forever.
    fifo = tmp_path / "canary.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_canary(path)


def test_an_oversized_canary_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(canary, "CANARY_MAX_BYTES", 100)
    path = tmp_path / "canary.jsonl"
    path.write_text('{"question": "q", "sql": "SELECT 1", "label": true}\n' * 3, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"larger than 100 bytes .*not a dataset"):
        load_canary(path)


def test_stef_run_with_a_missing_canary_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.jsonl").write_text("", encoding="utf-8")
    code = main(
        ["run", "--source", "file:log.jsonl", "--results", "file:out.jsonl",
         "--metrics-port", "off", "--canary", "missing.jsonl"]
    )  # fmt: skip
    assert code == Exit.USAGE
    assert (
        "canary missing.jsonl: cannot be read: No such file or directory" in capsys.readouterr().err
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_canary_block_of_the_config_file_and_its_env_variable() -> None:
    settings = load_settings(
        None, env={"STEF_CANARY": "{path: c.jsonl, interval_s: 60, sample_size: 5}"}
    )
    assert settings.canary.path == Path("c.jsonl")
    assert (settings.canary.interval_s, settings.canary.sample_size) == (60, 5)
    assert settings.canary.concurrency == 1
    with pytest.raises(ConfigError, match=r"canary\.sample_size"):
        load_settings(None, {"canary": {"path": "c.jsonl", "sample_size": 1}}, env={})


# ------------------------------------------------------------------------- runs, heuristic judge


def _canary_settings(tmp_path: Path, canary: Path, **extra: Any) -> Any:
    overrides: dict[str, Any] = {
        "rules": str(RULES),
        "canary": {"path": str(canary), "sample_size": 20},
        **extra,
    }
    return load_settings(None, overrides, env={})


def test_a_failing_run_is_counted_and_the_next_one_recovers(tmp_path: Path) -> None:
    canary = tmp_path / "canary.jsonl"
    canary.write_bytes(CANARY.read_bytes())
    settings = _canary_settings(tmp_path, canary)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    rules = load_rules(RULES)
    live = build_backend(settings)
    runner = build_canary(settings, lambda: rules, live, metrics)
    assert runner is not None
    labels = {"backend": "heuristic", "model": "none"}
    try:
        first = runner.run_once()
        assert first.outcome == "ok" and first.scored == 20
        kappa = registry.get_sample_value("stef_canary_agreement", {**labels, "measure": "kappa"})
        assert kappa == pytest.approx(first.kappa) and kappa is not None and kappa > 0.4
        stamp = registry.get_sample_value("stef_canary_last_run_timestamp_seconds", labels)
        assert stamp is not None
        canary.unlink()  # the file goes away under a running service
        broken = runner.run_once()
        assert broken.outcome == "failed"
        assert registry.get_sample_value("stef_canary_runs_total", {"outcome": "failed"}) == 1
        # A failed run measured nothing: the figures and their time stay those of the last run.
        same = registry.get_sample_value("stef_canary_agreement", {**labels, "measure": "kappa"})
        assert same == kappa
        assert registry.get_sample_value("stef_canary_last_run_timestamp_seconds", labels) == stamp
        canary.write_bytes(CANARY.read_bytes())
        assert runner.run_once().outcome == "ok"
        assert registry.get_sample_value("stef_canary_runs_total", {"outcome": "ok"}) == 2
    finally:
        runner.stop()
        live.close()
    # The canary judged 40 records; the live record metrics saw none of them.
    counted = [s.value for f in registry.collect() if f.name == "stef_records" for s in f.samples]
    assert sum(counted) == 0


def test_the_canary_twin_shares_the_rate_limits_and_has_no_cache(tmp_path: Path) -> None:
    settings = _canary_settings(tmp_path, CANARY, llm_requests_per_s=50)
    live = build_backend(settings)
    assert isinstance(live, RateLimitedJudge)
    twin = build_canary_backend(settings, live)
    assert isinstance(twin, RateLimitedJudge) and isinstance(twin.backend, HeuristicJudge)
    assert twin.backend is not live.backend
    assert twin._requests is live._requests and twin._tokens is live._tokens


def test_the_llm_twin_has_no_cache_and_shares_the_model_watch(tmp_path: Path) -> None:
    llm = {"base_url": "http://127.0.0.1:9/v1", "model": "fake-judge", "cache_path": str(
        tmp_path / "cache.sqlite")}  # fmt: skip
    settings = _canary_settings(tmp_path, CANARY, llm=llm)
    live = build_backend(settings)
    twin = build_canary_backend(settings, live)
    try:
        assert isinstance(live, LlmJudge) and isinstance(twin, LlmJudge)
        assert twin.config.cache_size == 0 and twin.config.cache_path is None
        assert live.config.cache_path is not None
        # One watch: a swap the canary's replies reveal is counted once, not once per judge.
        assert twin.model_watch is live.model_watch
        assert twin.info == live.info
    finally:
        twin.close()
        live.close()


# ----------------------------------------------------------------------- the LLM judge, end to end


@pytest.mark.integration
def test_an_unreachable_endpoint_is_a_judge_error_run_that_measures_nothing(
    tmp_path: Path,
) -> None:
    llm = {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "fake-judge",
           "max_retries": 0, "timeout_s": 1}  # fmt: skip
    settings = _canary_settings(tmp_path, CANARY, llm=llm)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    rules = load_rules(RULES)
    live = build_backend(settings, metrics)
    runner = build_canary(settings, lambda: rules, live, metrics)
    assert runner is not None
    try:
        run = runner.run_once()
    finally:
        runner.stop()
        live.close()
    assert (run.outcome, run.sampled, run.scored, run.kappa) == ("judge_error", 20, 0, None)
    assert registry.get_sample_value("stef_canary_runs_total", {"outcome": "judge_error"}) == 1
    # Nothing measured: no agreement and no time of a measured run, rather than zeros.
    names = ("stef_canary_agreement", "stef_canary_last_run_timestamp_seconds")
    assert not [s for f in registry.collect() if f.name in names for s in f.samples]


@pytest.mark.integration
@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_canary_keeps_to_its_own_concurrency(tmp_path: Path, concurrency: int) -> None:
    # Each call held 0.2 s: its workers' calls overlap however slowly the machine runs the CPU
    # work between them (at 50 ms, three at once was not sure on a loaded machine).
    with FakeLlmServer(latency_s=0.2) as server:
        llm = {"base_url": server.base_url, "model": "fake-judge"}
        settings = _canary_settings(tmp_path, CANARY, llm=llm)
        canary = settings.canary.model_copy(update={"concurrency": concurrency})
        settings = settings.model_copy(update={"canary": canary})
        metrics = Metrics(CollectorRegistry())
        rules = load_rules(RULES)
        live = build_backend(settings, metrics)
        runner = build_canary(settings, lambda: rules, live, metrics)
        assert runner is not None
        try:
            assert runner.run_once().outcome == "ok"
        finally:
            runner.stop()
            live.close()
        assert len(server.chat_requests()) >= 20
        assert server.peak_inflight == concurrency


def _kappa(service: ServiceProcess, measure: str = "kappa") -> float | None:
    for (name, labels), value in service.metrics().items():
        if name == "stef_canary_agreement" and ("measure", measure) in labels:
            assert dict(labels) == {"backend": "llm", "model": "fake-judge", "measure": measure}
            return value
    return None


@pytest.mark.integration
def test_canary_agreement_follows_the_judge_and_never_reaches_the_results(
    tmp_path: Path, labeller_server: tuple[FakeLlmServer, Labeller]
) -> None:
    """`stef run --canary` against the fake LLM: right answers give kappa 1, wrong ones drop it
    below 0 (scraped from /metrics); the canary's records are in no result and no live metric."""
    server, labeller = labeller_server
    log = make_log(30, invalid_every=0)
    source = tmp_path / "agent.jsonl"
    source.write_bytes(b"\n".join(log.payloads) + b"\n")
    config = tmp_path / "stef.yaml"
    config.write_text(
        yaml.safe_dump({"canary": {"interval_s": 0.5, "sample_size": 20, "concurrency": 2}}),
        encoding="utf-8",
    )
    results = tmp_path / "results.jsonl"
    service = ServiceProcess(
        ["--config", str(config), "--source", f"file:{source}", "--follow",
         "--results", f"file:{results}", "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
         "--rules", str(RULES), "--metrics-port", "0", "--canary", str(CANARY)],
        tmp_path / "stef.log",
        env={"STEF_LLM_BASE_URL": server.base_url, "STEF_LLM_MODEL": "fake-judge"},
    ).start()  # fmt: skip
    try:
        service.wait_ready()
        service.wait_for(lambda: _kappa(service) is not None, what="a first canary run")
        assert _kappa(service) == 1.0 and _kappa(service, "accuracy") == 1.0
        assert service.total("stef_canary_agreement_floor", measure="kappa") == 0.4
        labeller.right = False
        done = service.total("stef_canary_runs_total", outcome="ok")
        # Two more runs: the second began after the answers turned wrong.
        service.wait_for(
            lambda: service.total("stef_canary_runs_total", outcome="ok") >= done + 2,
            what="two canary runs with wrong answers",
        )
        kappa, accuracy = _kappa(service), _kappa(service, "accuracy")
        assert kappa is not None and kappa < 0 and accuracy is not None and accuracy <= 0.1
        service.wait_for(
            lambda: service.total("stef_records_total") >= 30, what="the live records judged"
        )
        assert service.total("stef_records_total") == 30
        assert service.total("stef_canary_runs_total", outcome="failed") == 0
        assert service.total("stef_canary_last_run_timestamp_seconds") > 1.7e9
    finally:
        service.signal(signal.SIGTERM)
        code = service.wait()
    assert code == 0
    ids = {json.loads(line)["id"] for line in results.read_text(encoding="utf-8").splitlines()}
    assert ids == log.valid_ids
    canary_ids = {r.payload["id"] for r in read_labels(CANARY)}
    assert not ids & canary_ids
    # Every run asked the model again (the canary never reads the judge cache).
    assert labeller.canary_calls >= 3 * 20
