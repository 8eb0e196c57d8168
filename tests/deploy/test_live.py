"""Live: a real Prometheus on 127.0.0.1 scrapes real `stef run` processes fed with the sample log,
loads our recording and alert rules, and answers every dashboard query with data.

Two STEF processes, as a fleet would run them:
- the consumer: Kafka source (a Tansu broker on loopback), heuristic judge; it exports the
  consumer lag;
- the sidecar: a followed JSONL file, the LLM judge against the package's fake OpenAI-compatible
  server on loopback, and the example canary; it exports the LLM latency, token, cost and cache
  metrics and the canary's.
Input arrives in chunks while Prometheus scrapes every second, so rates are not zero. Then a
``stef backfill`` of a small topic runs (the LLM judge at 0.3 s per answer, so it lasts a few
scrapes) with its own ``--metrics-port``, scraped under its own job, as a Kubernetes Job would be.
Nothing is written into Prometheus but what it scrapes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from stef.testing.fake_server import FakeLlmServer
from tests.brokers import FAST_GROUP, Broker, free_port, tansu_broker
from tests.deploy.conftest import (
    ROOT,
    RULE_FILES,
    VENV_BIN,
    Query,
    dashboard_queries,
    metric_names,
    recorded_names,
    rule_queries,
    variable_queries,
)

pytestmark = pytest.mark.integration

SAMPLE = ROOT / "examples" / "agent_log.jsonl"
CANARY = ROOT / "examples" / "canary.jsonl"
RULES_DIR = ROOT / "rules"
LLM_MODEL = "fake-judge"
# Names the rules read that Prometheus itself makes, not STEF.
PROMETHEUS_SERIES = {"up"}
CHUNKS = 4
RUNBOOK_BASE = "https://runbooks.example.org/stef"


@dataclass
class Live:
    prometheus: str
    metrics_urls: list[str]
    log: list[str] = field(default_factory=list)
    # What the backfill exported while it ran (it has exited by the time the tests run).
    backfill_exported: set[str] = field(default_factory=set)

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as reply:
            body = json.load(reply)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.prometheus + path, timeout=10) as reply:
            return json.load(reply)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what}", pytrace=False)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return int(reply.status) == 200
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes], name: str, codes: dict[str, int | None]) -> None:
    """SIGTERM, wait for the drain, SIGKILL only if it hangs; remember the exit status."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            codes[name] = None
            return
    codes[name] = process.returncode


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}


def start_stef(
    tmp: Path, name: str, source: str, port: int, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    cmd = [
        str(VENV_BIN / "stef"), "run",
        "--source", source,
        "--results", f"file:{tmp / (name + '-results.jsonl')}",
        "--dead-letters", f"file:{tmp / (name + '-dead-letters.jsonl')}",
        "--rules", str(RULES_DIR),
        "--metrics-host", "127.0.0.1",
        "--metrics-port", str(port),
        "--concurrency", "4",
        "--drain-timeout", "10",
        "--log-level", "warning",
        *extra,
    ]  # fmt: skip
    if source.startswith("file:"):
        cmd.append("--follow")
    with (tmp / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=tmp
        )


def start_prometheus(
    binary: str, tmp: Path, port: int, targets: list[str], backfill: str
) -> subprocess.Popen[bytes]:
    config = {
        "global": {
            "scrape_interval": "1s",
            "evaluation_interval": "1s",
            "external_labels": {"runbook_base_url": RUNBOOK_BASE},
        },
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [
            {"job_name": "stef", "static_configs": [{"targets": targets}]},
            # Not "stef": StefDown would fire when the backfill ends.
            {"job_name": "stef-backfill", "static_configs": [{"targets": [backfill]}]},
        ],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with (tmp / "prometheus.log").open("wb") as log:
        return subprocess.Popen(
            [
                binary,
                f"--config.file={path}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=tmp,
        )


def metric_names_of(url: str) -> set[str]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    return {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def run_backfill(env: Live, broker: Broker, tmp: Path, port: int, llm_url: str) -> None:
    """A backfill of a 24-record topic, at 0.3 s per LLM answer and two at a time (about 3 s):
    scraped by Prometheus while it runs; what it exports is kept for the tests."""
    topic = broker.create_topic("agent-logs-backfill", partitions=1)
    start = datetime.now(UTC)
    time.sleep(0.1)
    for line in [ln for ln in SAMPLE.read_bytes().splitlines() if ln.strip()][:24]:
        broker.produce(topic, [line])  # singly: Tansu's end offsets are wrong after a batch
    cmd = [
        str(VENV_BIN / "stef"), "backfill", "--source", broker.url(topic),
        "--from", start.isoformat(), "--results", f"file:{tmp / 'backfill-results.jsonl'}",
        "--dead-letters", f"file:{tmp / 'backfill-dead-letters.jsonl'}",
        "--rules", str(RULES_DIR), "--concurrency", "2", "--no-progress",
        "--metrics-port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    backfill_env = {**base_env(), "STEF_LLM_BASE_URL": llm_url, "STEF_LLM_MODEL": LLM_MODEL}
    with (tmp / "backfill.log").open("wb") as log:
        process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=backfill_env, cwd=tmp
        )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_for("the backfill's /metrics", lambda: http_ok(url), timeout_s=30)
        env.backfill_exported = metric_names_of(url)
        wait_for(
            "the backfill scraped with records counted",
            lambda: bool(env.query('sum(stef_backfill_records_total{job="stef-backfill"}) > 0')),
            timeout_s=30,
        )
        assert process.wait(timeout=60) == 0, f"stef backfill failed (see {tmp}/backfill.log)"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def chunks(items: list[bytes], n: int) -> list[list[bytes]]:
    size = -(-len(items) // n)
    return [items[i : i + size] for i in range(0, len(items), size)]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, prometheus_bin: str) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("live")
    lines = [ln for ln in SAMPLE.read_bytes().splitlines() if ln.strip()]
    assert len(lines) > 400
    # The sidecar's share: 60 lines, then 10 of them again so the judge cache has hits.
    llm_lines = lines[:60] + lines[:10]
    codes: dict[str, int | None] = {}
    with ExitStack() as stack:
        llm = stack.enter_context(FakeLlmServer())
        broker = stack.enter_context(tansu_broker())
        topic = broker.create_topic("agent-logs", partitions=2)

        ports = {
            "consumer": free_port(),
            "sidecar": free_port(),
            "prometheus": free_port(),
            "backfill": free_port(),
        }
        consumer_env = {**base_env(), "STEF_KAFKA_CONSUMER": json.dumps(FAST_GROUP)}
        consumer = start_stef(
            tmp, "consumer", broker.url(topic, "stef-live"), ports["consumer"], consumer_env
        )
        stack.callback(stop, consumer, "consumer", codes)
        followed = tmp / "agent.jsonl"
        followed.write_bytes(b"")
        sidecar_env = {
            **base_env(),
            "STEF_LLM_BASE_URL": llm.base_url,
            "STEF_LLM_MODEL": LLM_MODEL,
            "STEF_LLM_PRICES": json.dumps({LLM_MODEL: {"prompt": 0.15, "completion": 0.6}}),
        }
        sidecar = start_stef(
            tmp, "sidecar", f"file:{followed}", ports["sidecar"], sidecar_env,
            "--canary", str(CANARY),
        )  # fmt: skip
        stack.callback(stop, sidecar, "sidecar", codes)

        metrics_urls = [f"http://127.0.0.1:{ports[n]}/metrics" for n in ("consumer", "sidecar")]
        for name in ("consumer", "sidecar"):
            wait_for(
                f"{name} /readyz", lambda n=name: http_ok(f"http://127.0.0.1:{ports[n]}/readyz")
            )

        prometheus = start_prometheus(
            prometheus_bin,
            tmp,
            ports["prometheus"],
            [f"127.0.0.1:{ports[n]}" for n in ("consumer", "sidecar")],
            f"127.0.0.1:{ports['backfill']}",
        )
        stack.callback(stop, prometheus, "prometheus", codes)
        env = Live(f"http://127.0.0.1:{ports['prometheus']}", metrics_urls)
        wait_for("prometheus /-/ready", lambda: http_ok(env.prometheus + "/-/ready"))
        # Both targets scraped before any input: counters start from their primed zeros.
        wait_for(
            "both targets up",
            lambda: len([r for r in env.query('up{job="stef"} == 1')]) == 2,
        )

        for kafka_part, file_part in zip(
            chunks(lines, CHUNKS), chunks(llm_lines, CHUNKS), strict=True
        ):
            broker.produce(topic, kafka_part)
            with followed.open("ab") as f:
                f.write(b"\n".join(file_part) + b"\n")
            time.sleep(2.0)

        total = len(lines) + len(llm_lines)

        def all_scraped() -> bool:
            got = env.query('sum(stef_records_total{job="stef"})')
            return bool(got) and float(got[0]["value"][1]) >= total

        wait_for(f"{total} records counted in Prometheus", all_scraped, timeout_s=120)
        slow_llm = stack.enter_context(FakeLlmServer(latency_s=0.3))
        run_backfill(env, broker, tmp, ports["backfill"], slow_llm.base_url)
        time.sleep(4.0)  # a few more scrapes and rule evaluations on the final counts
        yield env
    for name, code in codes.items():
        if name != "prometheus":
            assert code == 0, f"stef {name} exited with {code} after SIGTERM (see {tmp}/{name}.log)"


def test_every_dashboard_query_returns_data(live: Live) -> None:
    queries = dashboard_queries() + variable_queries()
    report = []
    empty = []
    for q in queries:
        result = live.query(q.concrete())
        report.append(f"{len(result):3d} series  {q.where}")
        if not result:
            empty.append(q.where)
    print("\nlive dashboard queries (series returned):\n" + "\n".join(report))
    assert empty == [], f"queries with no data: {empty}"
    assert len(queries) >= 30


def test_every_rule_evaluates_without_error(live: Live) -> None:
    groups = live.get("/api/v1/rules")["data"]["groups"]
    loaded = [r for g in groups for r in g["rules"]]
    assert len(loaded) == len(rule_queries())
    assert [(r["name"], r["lastError"]) for r in loaded if r["health"] != "ok"] == []
    for name in sorted(recorded_names()):
        if name.startswith("topic:"):
            continue  # lag is per topic; checked below
        assert live.query(name), f"recording rule {name} has no data"
    assert live.query("topic:stef_consumer_lag:sum")


def test_unsafe_sql_in_the_sample_fires_its_alert(live: Live) -> None:
    # The sample log has three unsafe statements; StefUnsafeSql has no `for`, so it fires.
    firing = {
        (a["labels"]["alertname"], a["labels"].get("app"))
        for a in live.get("/api/v1/alerts")["data"]["alerts"]
        if a["state"] == "firing"
    }
    assert ("StefUnsafeSql", "sales") in firing or ("StefUnsafeSql", "support") in firing, firing


def test_runbook_urls_take_the_configured_base(live: Live) -> None:
    alerts = live.get("/api/v1/alerts")["data"]["alerts"]
    urls = {a["annotations"]["runbook_url"] for a in alerts}
    assert f"{RUNBOOK_BASE}/deploy/README.md#stefunsafesql" in urls, urls
    assert all(u.startswith(RUNBOOK_BASE + "/deploy/README.md#") for u in urls), urls


def test_process_and_freshness_series_are_live(live: Live) -> None:
    """The night-shift panels read real values: CPU moves, RSS is megabytes, the newest record
    is the sample day, dead letters carry the sample's reasons."""
    assert all(float(r["value"][1]) > 10e6 for r in live.query("process_resident_memory_bytes"))
    assert len(live.query('process_cpu_seconds_total{job="stef"} > 0')) == 2
    newest = live.query("max(stef_newest_record_timestamp_seconds)")
    assert newest and 1748908800 <= float(newest[0]["value"][1]) < 1748995200  # 2025-06-03 UTC
    assert live.query('stef_dead_letters_total{reason="not_json"}')
    assert not [n for n in exported(live) if n.endswith("_created")]


def exported(live: Live) -> set[str]:
    names: set[str] = set()
    for url in live.metrics_urls:
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def test_every_metric_name_used_is_exported_by_stef(live: Live) -> None:
    queries: list[Query] = dashboard_queries() + variable_queries() + rule_queries()
    used = set().union(*(metric_names(q.expr) for q in queries))
    raw = used - recorded_names() - PROMETHEUS_SERIES
    assert len(raw) >= 15
    assert all(n.startswith(("stef_", "process_")) for n in raw), raw
    missing = sorted(raw - exported(live) - live.backfill_exported)
    assert missing == [], f"used in deploy/ but not exported by stef run: {missing}"
