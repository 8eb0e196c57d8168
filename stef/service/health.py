"""The service's HTTP endpoints: ``/metrics`` (Prometheus), ``/healthz`` (the loop and every worker
are alive and moving) and ``/readyz`` (started, and the source is reachable)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from stef.errors import ConfigError
from stef.io.http_server import BoundedServer

# Connections served at once (a thread each); more are closed at once. Probes and a scrape need
# a handful: the bound keeps idle or slow clients from growing a thread per connection.
MAX_CONNECTIONS = 32
# A connection that sends no complete request within this is dropped (its thread ends).
IDLE_TIMEOUT_S = 10.0


class HealthState:
    """What the probes report. The run loop calls :meth:`beat` every turn.

    Args:
        stall_after_s: ``/healthz`` fails when the loop has not turned for this long.

    Attributes:
        ready: set by the loop once the source is started.
        failed: why the service failed for good (a sink outage), or None.
        liveness: further checks for ``/healthz``; each returns None when fine, else why not
            (a dead or stalled worker).
        readiness: further checks for ``/readyz`` (the source is reachable).
    """

    def __init__(self, stall_after_s: float = 60.0) -> None:
        self.stall_after_s = stall_after_s
        self.ready = False
        self.failed: str | None = None
        self.liveness: list[Callable[[], str | None]] = []
        self.readiness: list[Callable[[], str | None]] = []
        self._beat = time.monotonic()

    def beat(self) -> None:
        self._beat = time.monotonic()

    def healthy(self) -> tuple[bool, str]:
        if self.failed is not None:
            return False, f"failed: {self.failed}"
        stalled = time.monotonic() - self._beat
        if stalled > self.stall_after_s:
            return False, f"run loop stalled for {stalled:.0f} s"
        return _first_problem(self.liveness, "ok")

    def is_ready(self) -> tuple[bool, str]:
        if self.failed is not None:
            return False, f"failed: {self.failed}"
        if not self.ready:
            return False, "not ready"
        return _first_problem(self.readiness, "ready")


def _first_problem(checks: list[Callable[[], str | None]], fine: str) -> tuple[bool, str]:
    for check in checks:
        try:
            problem = check()
        except Exception as exc:  # a probe that fails is an answer: not ok, and why
            problem = f"check failed: {type(exc).__name__}: {exc}"
        if problem is not None:
            return False, problem
    return True, fine


class HealthServer:
    """A small threaded HTTP server for metrics and probes, bound to ``host:port``.

    Args:
        registry: the service's metrics registry.
        state: the probes' state.
        host: interface to bind (127.0.0.1 by default in the settings).
        port: 0 lets the system pick one; read :attr:`port` after :meth:`start`.
        max_connections: connections served at once (one thread each); more are closed.
        idle_timeout_s: a connection silent for this long is dropped.

    Raises:
        ConfigError: the address cannot be bound (the port is taken, the host is not local).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        state: HealthState,
        host: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        handler = _handler(registry, state, idle_timeout_s)
        try:
            self._server = BoundedServer((host, port), handler, max_connections)
        except OSError as exc:
            raise ConfigError(
                f"metrics server {host}:{port}: {exc.strerror or exc} (set metrics_port to a "
                "free port, 0 for any, or off)"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stef-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler(
    registry: CollectorRegistry, state: HealthState, idle_timeout_s: float = IDLE_TIMEOUT_S
) -> type[BaseHTTPRequestHandler]:
    routes: dict[str, Callable[[], tuple[int, bytes, str]]] = {
        "/metrics": lambda: (200, generate_latest(registry), CONTENT_TYPE_LATEST),
        "/healthz": lambda: _probe(*state.healthy()),
        "/readyz": lambda: _probe(*state.is_ready()),
    }

    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout_s  # the socket's timeout: a silent client ends its thread

        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                status, body, ctype = 404, b"not found\n", "text/plain"
            else:
                status, body, ctype = route()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Probes every few seconds would flood the logs."""

    return Handler


def _probe(ok: bool, text: str) -> tuple[int, bytes, str]:
    return (200 if ok else 503), (text + "\n").encode(), "text/plain; charset=utf-8"
