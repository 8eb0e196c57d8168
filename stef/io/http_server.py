"""A threaded HTTP server with a bound on its threads: the probe and metrics server of the service
and the review page share it, so no number of idle connections grows threads without end."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` of them. Past the bound a new
    connection waits up to ``slot_wait_s`` for a slot (0: not at all), then is closed instead of
    growing another thread."""

    daemon_threads = True
    # The default backlog (5) drops connections arriving faster than one accept: a client then
    # waits a second or more for its SYN to be sent again, probes included.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        *,
        slot_wait_s: float = 0.0,
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        self._slot_wait_s = slot_wait_s
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        wait = self._slot_wait_s
        acquired = self._slots.acquire(timeout=wait) if wait > 0 else self._slots.acquire(False)
        if not acquired:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started: its slot is free again
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
