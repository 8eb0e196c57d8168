"""The probes and metrics endpoint over loopback: /healthz follows the loop's beat, a failure and
the liveness checks; /readyz follows start-up and the readiness checks; /metrics serves the
registry; any other path is 404."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from stef.service.health import HealthServer, HealthState


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("stef_test_records", "records seen by the test", registry=registry).inc(3)
    return registry


@pytest.fixture
def state() -> HealthState:
    return HealthState(stall_after_s=1.0)


@pytest.fixture
def server(registry: CollectorRegistry, state: HealthState) -> Iterator[HealthServer]:
    srv = HealthServer(registry, state, "127.0.0.1", 0).start()
    try:
        yield srv
    finally:
        srv.close()


def get(server: HealthServer, path: str) -> tuple[int, str, str]:
    """Status, body and content type of ``GET path``."""
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers["Content-Type"]


def test_the_system_picks_the_port(server: HealthServer) -> None:
    assert server.port > 0


def test_healthz_fails_once_the_loop_stops_beating(
    server: HealthServer, state: HealthState
) -> None:
    state.beat()
    assert get(server, "/healthz")[:2] == (200, "ok\n")
    time.sleep(1.3)  # past stall_after_s without a beat
    status, body, ctype = get(server, "/healthz")
    assert status == 503
    assert body.startswith("run loop stalled for ")
    assert ctype.startswith("text/plain")
    state.beat()
    assert get(server, "/healthz")[0] == 200  # the loop moved again


def test_healthz_and_readyz_fail_when_the_service_failed(
    server: HealthServer, state: HealthState
) -> None:
    state.ready = True
    state.beat()
    state.failed = "results sink unreachable"
    for path in ("/healthz", "/readyz"):
        assert get(server, path)[:2] == (503, "failed: results sink unreachable\n")


def test_healthz_reports_the_first_liveness_problem(
    server: HealthServer, state: HealthState
) -> None:
    worker: list[str | None] = ["worker 2 stalled"]
    state.liveness += [lambda: None, lambda: worker[0], lambda: "queue full"]
    state.beat()
    assert get(server, "/healthz")[:2] == (503, "worker 2 stalled\n")  # the first one that objects
    worker[0] = None
    assert get(server, "/healthz")[:2] == (503, "queue full\n")
    state.liveness.pop()
    assert get(server, "/healthz")[:2] == (200, "ok\n")


def test_a_check_that_raises_is_a_failed_probe(server: HealthServer, state: HealthState) -> None:
    def broken() -> str | None:
        raise RuntimeError("consumer closed")

    state.liveness.append(broken)
    state.beat()
    assert get(server, "/healthz")[:2] == (503, "check failed: RuntimeError: consumer closed\n")
    state.liveness.clear()
    state.ready = True
    state.readiness.append(broken)
    assert get(server, "/readyz")[:2] == (503, "check failed: RuntimeError: consumer closed\n")
    state.beat()
    assert get(server, "/healthz")[0] == 200  # a readiness check does not touch liveness


def test_readyz_before_ready_and_when_a_readiness_check_objects(
    server: HealthServer, state: HealthState
) -> None:
    assert get(server, "/readyz")[:2] == (503, "not ready\n")
    state.ready = True
    assert get(server, "/readyz")[:2] == (200, "ready\n")
    broker: list[str | None] = ["broker unreachable"]
    state.readiness.append(lambda: broker[0])
    assert get(server, "/readyz")[:2] == (503, "broker unreachable\n")
    broker[0] = None
    assert get(server, "/readyz")[:2] == (200, "ready\n")
    state.beat()
    assert get(server, "/healthz")[0] == 200  # not ready is not dead


def test_metrics_serves_the_registry(server: HealthServer, registry: CollectorRegistry) -> None:
    status, body, ctype = get(server, "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    assert "stef_test_records_total 3.0" in body.splitlines()
    # The live registry, not a copy taken at start.
    Counter("stef_test_more", "registered after start", registry=registry).inc()
    assert "stef_test_more_total 1.0" in get(server, "/metrics")[1].splitlines()
    assert get(server, "/metrics?name[]=x")[0] == 200  # a query string does not change the route


@pytest.mark.parametrize("path", ["/", "/health", "/metrics/extra", "/readyz/"])
def test_other_paths_are_not_found(server: HealthServer, path: str) -> None:
    assert get(server, path)[:2] == (404, "not found\n")


def test_idle_connections_hold_a_bounded_number_of_threads(
    registry: CollectorRegistry, state: HealthState
) -> None:
    import socket
    import threading

    state.ready = True
    before = threading.active_count()
    srv = HealthServer(
        registry, state, "127.0.0.1", 0, max_connections=8, idle_timeout_s=1.0
    ).start()
    idle: list[socket.socket] = []
    try:
        for _ in range(200):  # connected, never a request: each would hold a thread for ever
            idle.append(socket.create_connection(("127.0.0.1", srv.port)))
        time.sleep(0.5)
        # Before: 200 handler threads. The server's own thread, and at most 8 handlers.
        assert threading.active_count() - before <= 1 + 8
        time.sleep(1.5)  # the idle connections time out; the probes are answered again
        assert get(srv, "/readyz")[:2] == (200, "ready\n")
    finally:
        for s in idle:
            s.close()
        srv.close()


def test_healthz_answers_behind_two_thousand_idle_connections(registry: CollectorRegistry) -> None:
    """Issue 32, item 3: idle connections to the probe port (connected, never a byte) must not
    starve the probe. Before: the first 32 held every slot for the idle timeout (10 s) and each
    later connection, the probe's included, was closed unanswered. No run loop beats here, and
    opening the connections can take seconds on a loaded machine: the stall bound is the
    default's, so the probe answers about the connections, not a loop that does not exist."""
    import resource
    import socket

    state = HealthState()
    state.ready = True
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Each idle connection costs two descriptors in this process (client and server side).
    n = min(2000, (soft - 200) // 2)
    assert n >= 200, f"the descriptor limit ({soft}) is too low to show anything"
    srv = HealthServer(registry, state, "127.0.0.1", 0).start()
    idle: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.port))  # not waiting for the accept: a flood
            idle.append(s)
        status, body, _ = get(srv, "/healthz")
        assert (status, body) == (200, "ok\n")
        assert get(srv, "/readyz")[:2] == (200, "ready\n")
    finally:
        for s in idle:
            s.close()
        srv.close()
