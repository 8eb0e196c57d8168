"""The run loop in-process: poison records, sink failures, the in-flight bound (the settings
themselves: tests/test_settings.py)."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

from stef.io import AckCallback, Envelope
from stef.io.jsonl import FileSource
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo
from stef.service.loop import Service
from tests.service.conftest import file_settings, read_jsonl, valid_log, valid_record


class ExplodingJudge:
    """The heuristic judge, except that one question makes it raise (a poison record)."""

    def __init__(self, poison: str, delay_s: float = 0.0) -> None:
        self.inner = HeuristicJudge()
        self.poison = poison
        self.delay_s = delay_s
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.delay_s)
            if request.record.question == self.poison:
                raise ZeroDivisionError("the judge tripped over this record")
            return self.inner.judge(request)
        finally:
            with self._lock:
                self.active -= 1


class FailingSink:
    """A results sink whose broker never acknowledges."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        self.sent += 1
        on_ack(OSError("broker unreachable"))

    def flush(self, timeout_s: float) -> None:
        """Nothing buffered."""

    def close(self) -> None:
        """Nothing to release."""


class CountingSource(FileSource):
    """A file source that records how many envelopes were handed out but not yet done."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.outstanding = 0
        self.peak = 0
        self.done: list[int] = []
        self._lock = threading.Lock()

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        out = super().poll(max_records, timeout_s)
        for e in out:
            e.on_done = self._done_cb(e.position["line"])
        with self._lock:
            self.outstanding += len(out)
            self.peak = max(self.peak, self.outstanding)
        return out

    def _done_cb(self, line: int) -> Callable[[], None]:
        def cb() -> None:
            with self._lock:
                self.outstanding -= 1
                self.done.append(line)

        return cb


def test_poison_record_becomes_a_dead_letter_and_the_loop_goes_on(tmp_path: Path) -> None:
    log = valid_log(tmp_path, 20)
    poison = valid_record(7)["question"]
    judge = ExplodingJudge(poison)
    registry = CollectorRegistry()
    service = Service(file_settings(tmp_path, log), backend=judge, registry=registry)
    assert service.run() == 0
    results = read_jsonl(tmp_path / "results.jsonl")
    letters = read_jsonl(tmp_path / "dead.jsonl")
    poisoned = {i for i in range(20) if valid_record(i)["question"] == poison}
    assert {r["id"] for r in results} == {f"r-{i:06d}" for i in range(20) if i not in poisoned}
    assert len(letters) == len(poisoned)
    assert {letter["reason"] for letter in letters} == {"internal_error"}
    assert "ZeroDivisionError" in letters[0]["error"]
    assert json.loads(letters[0]["payload"])["question"] == poison
    poison_count = registry.get_sample_value(
        "stef_records_total", {"app": "sales", "outcome": "internal_error"}
    )
    assert poison_count == len(poisoned)


def test_a_sink_failure_stops_the_service_without_acknowledging(tmp_path: Path) -> None:
    log = valid_log(tmp_path, 10)
    source = CountingSource(str(log))
    sink = FailingSink()
    service = Service(
        file_settings(tmp_path, log), backend=HeuristicJudge(), source=source, results=sink
    )
    assert service.run() == 1
    assert sink.sent >= 1
    assert source.done == []  # nothing may be committed past an unacknowledged write


def test_in_flight_work_stays_within_the_bound(tmp_path: Path) -> None:
    log = valid_log(tmp_path, 60)
    source = CountingSource(str(log))
    judge = ExplodingJudge("never asked", delay_s=0.01)
    settings = file_settings(tmp_path, log, concurrency=3, max_inflight=5)
    service = Service(settings, backend=judge, source=source)
    assert service.run() == 0
    assert source.peak <= 5
    assert judge.peak <= 3
    assert sorted(source.done) == list(range(1, 61))


def test_in_flight_bytes_stay_within_their_bound(tmp_path: Path) -> None:
    # Records of ~2 KB against a bound of 8 KiB and a records bound that never binds: at most
    # three fit, and a fourth may start while the bytes are under the bound.
    log = tmp_path / "log.jsonl"
    records = [{**valid_record(i), "metadata": {"pad": "x" * 2000}} for i in range(40)]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    size = len(json.dumps(records[0]))
    assert 2000 < size < 2400
    source = CountingSource(str(log))
    judge = ExplodingJudge("never asked", delay_s=0.01)
    settings = file_settings(
        tmp_path, log, concurrency=8, max_inflight=100, max_inflight_bytes=8192
    )
    service = Service(settings, backend=judge, source=source)
    assert service.run() == 0
    assert 2 <= source.peak <= 4
    assert sorted(source.done) == list(range(1, 41))


class HeldJudge:
    """The heuristic judge, held until released: records stay in flight."""

    def __init__(self) -> None:
        self.inner = HeuristicJudge()
        self.release = threading.Event()

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.release.wait(60)
        return self.inner.judge(request)


class QuitAtTheEnd(FileSource):
    """A file source during whose last poll (the one that finds the end) SIGQUIT comes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.signals: list[int] = []  # the replica's, once it is built

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        out = super().poll(max_records, timeout_s)
        if not out and self.exhausted and not self.signals:
            self.signals.append(signal.SIGQUIT)  # what the handler records
        return out


def test_sigquit_at_the_end_of_a_file_is_a_stop(tmp_path: Path) -> None:
    """SIGQUIT during the poll that found the end of the file, its records still in flight:
    the drain ended at once, but as the end of a file with records that never finished (exit
    1, no stop logged), where SIGQUIT a poll earlier, or SIGTERM then, is a stop and exits 0."""
    log = valid_log(tmp_path, 2)
    judge = HeldJudge()
    settings = file_settings(tmp_path, log)
    source = QuitAtTheEnd(str(log))
    service = Service(settings, backend=judge, source=source)
    source.signals = service.lifecycle.signals
    try:
        assert service.run() == 0
        assert service.lifecycle.stop_at is not None
    finally:
        judge.release.set()
