"""The seams of the run loop: callbacks around an acknowledged record, commits, and what the
probes say when either fails (issue 21, section 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from stef.exits import Exit
from stef.io import AckCallback, Envelope
from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import Processed
from stef.service.loop import Service
from tests.service.conftest import ROOT, file_settings, read_jsonl, valid_log, valid_record


def _run_bounded(service: Service, timeout_s: float = 30.0) -> int | None:
    """The service's exit status, or None when it did not finish in time (it is then stopped)."""
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(service.run()), daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        service.request_stop()
        thread.join(10)
        return None
    return status[0]


class SilentSink:
    """A results sink that takes every message and never acknowledges any."""

    def __init__(self) -> None:
        self.held: list[AckCallback] = []

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        self.held.append(on_ack)

    def flush(self, timeout_s: float) -> None:
        """Nothing is ever written."""

    def close(self) -> None:
        """Nothing to release."""


def test_an_observer_that_raises_leaks_no_slot(tmp_path: Path) -> None:
    """Before: every raising observer kept a slot; with 3 slots the fourth record never ran."""
    log = valid_log(tmp_path, 30)
    calls: list[int] = []

    def observer(envelope: Envelope, processed: Processed) -> None:
        calls.append(envelope.position["line"])
        raise OSError(28, "No space left on device")  # a progress line on a full stderr

    registry = CollectorRegistry()
    settings = file_settings(tmp_path, log, concurrency=2, max_inflight=3, record_timeout_s=5)
    service = Service(settings, backend=HeuristicJudge(), registry=registry, observer=observer)
    assert _run_bounded(service) == 0
    assert len(read_jsonl(tmp_path / "results.jsonl")) == 30
    assert sorted(calls) == list(range(1, 31))
    assert registry.get_sample_value("stef_callback_errors_total", {"callback": "observer"}) == 30
    assert registry.get_sample_value("stef_inflight") == 0


def test_a_done_callback_that_raises_stops_the_service_and_releases_its_slot(
    tmp_path: Path,
) -> None:
    """The source cannot commit past a record whose done callback raised: exit 1, no hang."""
    log = valid_log(tmp_path, 10)
    registry = CollectorRegistry()
    settings = file_settings(tmp_path, log, concurrency=1, max_inflight=1, record_timeout_s=5)
    service = Service(settings, backend=HeuristicJudge(), registry=registry)
    poll = service.source.poll

    def poll_with_a_bad_callback(max_records: int, timeout_s: float) -> list[Envelope]:
        out = poll(max_records, timeout_s)
        for envelope in out:
            if envelope.position["line"] == 3:
                envelope.on_done = lambda: 1 / 0
        return out

    service.source.poll = poll_with_a_bad_callback  # type: ignore[method-assign]
    assert _run_bounded(service) == 1
    assert registry.get_sample_value("stef_callback_errors_total", {"callback": "source"}) == 1
    assert registry.get_sample_value("stef_inflight") == 0


def test_healthz_fails_when_records_are_held_and_none_is_acknowledged(tmp_path: Path) -> None:
    """Every worker idle, records in flight, no acknowledgement: the probe must not stay green."""
    log = valid_log(tmp_path, 5)
    sink = SilentSink()
    settings = file_settings(tmp_path, log, record_timeout_s=0.5, drain_timeout_s=0.1)
    service = Service(settings, backend=HeuristicJudge(), results=sink)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while len(sink.held) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sink.held) == 5
        time.sleep(0.7)
        ok, why = service.health.healthy()
        assert not ok
        assert "no acknowledgement" in why
    finally:
        thread.join(10)
    assert not thread.is_alive()


def test_healthz_waits_a_whole_timeout_from_the_first_record_after_idling(tmp_path: Path) -> None:
    """An idle stretch longer than the timeout is not a missing acknowledgement."""
    log = valid_log(tmp_path, 1)
    settings = file_settings(tmp_path, log, record_timeout_s=0.5)
    service = Service(settings, backend=HeuristicJudge(), results=SilentSink())
    time.sleep(0.6)  # idle since the service was built
    service.source.start()
    service._submit(service.source.poll(1, 0))
    assert service.health.healthy() == (True, "ok")
    service.source.close()
    service.dead_letters.close()


@pytest.mark.parametrize(
    ("flags", "statuses"),
    [((), (0, 4)), (("--fail-on", "invalid"), (Exit.GATE,))],
    ids=["plain", "fail-on-gate"],
)
def test_replay_with_stderr_full_writes_every_output(
    tmp_path: Path, flags: tuple[str, ...], statuses: tuple[int, ...]
) -> None:
    """Issue 21's case: ``stef replay ... 2>/dev/full`` hung after 217 of 416 records. With
    ``--fail-on invalid`` the gate's exit 4 came out as 1: its own line to stderr raised."""
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    log = ROOT / "examples" / "agent_log.jsonl"
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stef.cli",
                "replay",
                str(log),
                "--rules",
                str(ROOT / "rules"),
                "--output",
                str(out),
                "--dead-letters",
                str(dead),
                *flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=full,
            cwd=ROOT,
            timeout=120,
        )
    written = len(read_jsonl(out)) + len(read_jsonl(dead))
    assert written == sum(1 for line in log.read_bytes().splitlines() if line.strip())
    assert written == 416
    assert proc.returncode in statuses


def test_failed_commits_are_counted_exported_and_fail_healthz_after_n(tmp_path: Path) -> None:
    """Before: a checkpoint that could not be saved was a log line, nothing more."""
    log = valid_log(tmp_path, 0)
    blocked = tmp_path / "state"
    registry = CollectorRegistry()
    settings = file_settings(
        tmp_path,
        log,
        follow=True,
        file_checkpoint=str(blocked / "cp"),
        commit_interval_s=0.05,
        commit_failures_unhealthy=3,
    )
    service = Service(settings, backend=HeuristicJudge(), registry=registry)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    try:
        _wait(lambda: service.health.is_ready()[0])
        shutil.rmtree(blocked, ignore_errors=True)  # the checkpoint's directory, made at start
        blocked.write_text("a file where the checkpoint's directory should be")
        log.write_text("".join(json.dumps(valid_record(i)) + "\n" for i in range(4)))
        _wait(lambda: value("stef_commit_failures_total", source="file") >= 3)
        assert value("stef_uncommitted_records") == 4
        ok, why = service.health.healthy()
        assert not ok
        assert "commits in a row failed" in why
        blocked.unlink()  # the disk is back: the next commit saves, the probe recovers
        _wait(lambda: value("stef_uncommitted_records") == 0)
        _wait(lambda: service.health.healthy()[0])
        assert json.loads((blocked / "cp").read_text())["line"] == 4
    finally:
        service.request_stop()
        thread.join(10)
    assert value("stef_commit_failures_total", source="kafka") == 0


def _wait(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_without_rules_the_first_app_names_seen_are_labels(tmp_path: Path) -> None:
    """docs/metrics.md: without a rules directory the first 20 label-like app names are kept.
    Before: every app of the example log was counted as ``unknown``."""
    log = ROOT / "examples" / "agent_log.jsonl"
    registry = CollectorRegistry()
    service = Service(file_settings(tmp_path, log), backend=HeuristicJudge(), registry=registry)
    assert service.settings.rules is None
    assert service.run() == 0
    evaluated = registry.get_sample_value(
        "stef_records_total", {"app": "sales", "outcome": "evaluated"}
    )
    assert evaluated is not None and evaluated > 0
    apps = {
        s.labels["app"]
        for family in registry.collect()
        if family.name == "stef_records"
        for s in family.samples
    }
    assert {"sales", "support"} <= apps
    assert len(apps - {"default", "unknown"}) <= 20


def test_with_rules_an_app_without_a_file_stays_unknown(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sales.yaml").write_text("app: sales\n")
    log = ROOT / "examples" / "agent_log.jsonl"
    registry = CollectorRegistry()
    settings = file_settings(tmp_path, log, rules=str(rules))
    assert Service(settings, backend=HeuristicJudge(), registry=registry).run() == 0
    for app, outcome in (("sales", "evaluated"), ("unknown", "evaluated")):
        value = registry.get_sample_value("stef_records_total", {"app": app, "outcome": outcome})
        assert value is not None and value > 0
    assert (
        registry.get_sample_value("stef_records_total", {"app": "support", "outcome": "evaluated"})
        is None
    )
