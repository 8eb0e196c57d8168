"""Helpers of the service tests: agent logs with known invalid lines, ``stef run`` as a real
subprocess (stopped by PID in a finalizer), its /metrics scraped over loopback, and the Tansu
broker fixture from :mod:`tests.brokers`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from stef.settings import Settings, load_settings
from tests.brokers import FAST_GROUP, kafka_broker  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]

_SQL = [
    ("Total revenue in {y}", "SELECT SUM(revenue) FROM orders WHERE year = {y}"),
    (
        "How many customers are in {r}?",
        "SELECT COUNT(*) FROM customers WHERE region = '{r}'",
    ),
    (
        "Revenue by region for {y}",
        "SELECT region, SUM(revenue) FROM orders WHERE year = {y} GROUP BY region",
    ),
    ("List open tickets for team {r}", "SELECT id FROM tickets WHERE team = '{r}' AND open = 1"),
]
_REGIONS = ["EMEA", "APAC", "Americas", "Nordics", "Iberia"]


def valid_record(i: int, app: str = "sales", agent: str = "sql-agent") -> dict[str, Any]:
    q, s = _SQL[i % len(_SQL)]
    y, r = 2000 + i % 25, _REGIONS[i % len(_REGIONS)]
    return {
        "id": f"r-{i:06d}",
        "app": app,
        "agent": agent,
        "agent_version": "2.1",
        "question": q.format(y=y, r=r),
        "sql": s.format(y=y, r=r),
    }


def invalid_payload(i: int) -> bytes:
    """An invalid line, in one of several ways, unique per ``i`` (so it can be recognised)."""
    kind = (i // 10) % 7
    if kind == 0:
        return b'{"id": "bad-%d", "question": "unterminated' % i
    if kind == 1:
        return b'["a list", %d]' % i
    if kind == 2:
        return json.dumps({"id": f"bad-{i}", "question": "no sql here"}).encode()
    if kind == 3:
        return json.dumps({"id": f"bad-{i}", "question": 42, "sql": "SELECT 1"}).encode()
    if kind == 4:
        return b'{"id": "bad-%d", "question": "caf\xe9 \xff", "sql": "SELECT 1"}' % i
    if kind == 5:
        big = "SELECT " + ", ".join(f"c{j}" for j in range(12_000)) + f" FROM t{i}"
        return json.dumps({"id": f"bad-{i}", "question": "huge", "sql": big}).encode()
    return json.dumps({"id": f"bad-{i}", "question": "   ", "sql": "SELECT 1"}).encode()


@dataclass
class AgentLog:
    """``n`` lines, every tenth invalid: the payloads and what must come out."""

    payloads: list[bytes]
    valid_ids: set[str]
    invalid: set[bytes]


def make_log(n: int, *, invalid_every: int = 10) -> AgentLog:
    payloads: list[bytes] = []
    valid: set[str] = set()
    invalid: set[bytes] = set()
    for i in range(n):
        if invalid_every and i % invalid_every == invalid_every - 1:
            p = invalid_payload(i)
            invalid.add(p)
        else:
            rec = valid_record(i)
            valid.add(rec["id"])
            p = json.dumps(rec).encode()
        payloads.append(p)
    return AgentLog(payloads, valid, invalid)


@dataclass
class ServiceProcess:
    """``stef run`` in a subprocess with its stderr (JSON logs) in a file."""

    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _port: int | None = None

    def start(self) -> ServiceProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
        env.update(self.env)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stef.cli", "run", *self.args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def metrics_port(self) -> int:
        """The port the run bound (it is given 0, so no other process can take a port chosen
        beforehand): its ``metrics_serving`` line. Not logged yet: ConnectionRefusedError, as
        a scrape of a server not yet listening would be."""
        if self._port is None:
            serving = self.events("metrics_serving")
            if not serving:
                raise ConnectionRefusedError("stef run has not said its metrics port yet")
            self._port = int(serving[0]["port"])
        return self._port

    def get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            # Generous: on two loaded cores a scrape of a busy service once took over 2 s.
            with urllib.request.urlopen(url, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"stef run exited early:\n{self.log_text()[-3000:]}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"stef run not ready in time:\n{self.log_text()[-3000:]}")

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample: (name, sorted labels) -> value."""
        _, text = self.get("/metrics")
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }

    def families(self) -> set[str]:
        _, text = self.get("/metrics")
        return {fam.name for fam in text_string_to_metric_families(text)}

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return sum(
            v
            for (n, lbls), v in self.metrics().items()
            if n == name and all((k, val) in lbls for k, val in labels.items())
        )

    def wait_for(
        self, predicate: Callable[[], bool], timeout_s: float = 60.0, what: str = "condition"
    ) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: OSError | None = None
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except OSError as exc:  # a scrape refused or timed out (busy or starting): not yet
                last_error = exc
            if not self.alive():
                tail = self.log_text()[-3000:]
                raise AssertionError(f"stef run exited waiting for {what}:\n{tail}")
            time.sleep(0.1)
        why = "" if last_error is None else f" (last error: {last_error!r})"
        raise AssertionError(f"timed out waiting for {what}{why}:\n{self.log_text()[-3000:]}")

    def signal(self, signum: int) -> None:
        if self.alive():
            os.kill(self.pid, signum)

    def wait(self, timeout_s: float = 60.0) -> int:
        assert self.process is not None
        rc = self.process.wait(timeout=timeout_s)
        self._log.close()
        return rc

    def stop(self) -> None:
        """Finalizer: SIGKILL by PID if still running."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        if hasattr(self, "_log") and not self._log.closed:
            self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_text().splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("event") == name:
                out.append(obj)
        return out


@pytest.fixture
def service_factory(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """``make(*args, config=dict|None, env=dict|None)``: a started ``stef run`` subprocess with its
    own metrics port and log file; every one is SIGKILLed by PID at teardown if still running."""
    started: list[ServiceProcess] = []

    def make(
        *args: str, config: dict[str, Any] | None = None, env: dict[str, str] | None = None
    ) -> ServiceProcess:
        n = len(started)
        argv = [*args, "--metrics-host", "127.0.0.1", "--metrics-port", "0"]
        if config is not None:
            cfg = tmp_path / f"config-{n}.yaml"
            cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
            argv += ["--config", str(cfg)]
        proc = ServiceProcess(argv, tmp_path / f"service-{n}.log", dict(env or {}))
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.stop()


def kafka_config(**extra: Any) -> dict[str, Any]:
    """Service settings for the Tansu broker: its JoinGroup delay is session_timeout / 2. These
    tests produce before the service joins, so a new group starts at the earliest offset."""
    return {
        "kafka_consumer": dict(FAST_GROUP),
        "commit_interval_s": 0.2,
        "auto_offset_reset": "earliest",
        **extra,
    }


def valid_log(tmp_path: Path, n: int) -> Path:
    """``log.jsonl`` in ``tmp_path``: ``n`` valid records."""
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(valid_record(i)) + "\n" for i in range(n)))
    return path


def file_settings(tmp_path: Path, log: Path, **extra: object) -> Settings:
    """The in-process service's settings on ``log``: results and dead letters in ``tmp_path``,
    no metrics port, no environment."""
    return load_settings(
        overrides={
            "source": f"file:{log}",
            "results": f"file:{tmp_path / 'results.jsonl'}",
            "dead_letters": f"file:{tmp_path / 'dead.jsonl'}",
            "metrics_port": "off",
            **extra,
        },
        env={},
    )


def follow_log(
    service_factory: Callable[..., ServiceProcess],
    log: Path,
    results: Path,
    dead: Path,
    *args: str,
    ready: bool = True,
    **config: Any,
) -> ServiceProcess:
    """A ready ``stef run`` following ``log``, its results and dead letters in those files, with
    ``args`` after those flags and ``config`` (if any) as its config file. With ``ready=False``
    it is returned as soon as it starts, not waited for: a run that may stop before it is ready
    (a full disk) would fail the wait."""
    proc = service_factory(
        "--source",
        f"file:{log}",
        "--follow",
        "--results",
        f"file:{results}",
        "--dead-letters",
        f"file:{dead}",
        *args,
        config=config or None,
    )
    if ready:
        proc.wait_ready()
    return proc


def follow_empty_log(
    service_factory: Callable[..., ServiceProcess],
    tmp_path: Path,
    *args: str,
    **config: Any,
) -> tuple[ServiceProcess, Path, Path]:
    """A ready ``stef run`` (:func:`follow_log`, with ``args`` and ``config``) following an empty
    ``agent.jsonl`` in ``tmp_path``, its results in ``results.jsonl`` and its dead letters in
    ``dead.jsonl`` there: the process, the log and the results file."""
    log, results = tmp_path / "agent.jsonl", tmp_path / "results.jsonl"
    log.touch()
    proc = follow_log(service_factory, log, results, tmp_path / "dead.jsonl", *args, **config)
    return proc, log, results


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of ``path``: a line without its newline is still being written.

    Tests poll the service's output while it writes; a long result can reach the file in more than
    one write, so the last line may be half there. Counts asserted afterwards catch a line never
    finished.
    """
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line]


def caught_up(proc: ServiceProcess, partitions: int) -> bool:
    """The replica reports a lag for each of its ``partitions``, all zero, and nothing in flight."""
    samples = proc.metrics()
    lags = [v for (name, _), v in samples.items() if name == "stef_consumer_lag"]
    inflight = samples.get(("stef_inflight", ()), 1.0)
    return len(lags) == partitions and all(v == 0 for v in lags) and inflight == 0
