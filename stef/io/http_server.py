"""A threaded HTTP server with a bound on its threads: the probe and metrics server of the service
and the review page share it, so no number of idle connections grows threads without end.

Idle connections never take a thread: an accepted connection waits in a lobby (one selector, one
thread) until its request head has arrived (its blank line, read without taking it), and only
then gets a handler thread. The lobby holds at most ``max_waiting`` connections, each for at most
``first_byte_timeout_s``; past the bound the longest-waiting one is closed. A client sending its
request a byte at a time so waits in the lobby too, and is closed at the timeout (admitted at its
first byte, 32 such clients held every slot of the probe server for as long as they went on).
So 2,000 idle connections to the probe port cost descriptors for
a few seconds, never the slots: a liveness probe, which sends its request at once, is answered
(a thread per connection let 32 idle ones hold every slot for the idle timeout, and every later
connection, the probe included, was closed unanswered).
"""

from __future__ import annotations

import collections
import contextlib
import resource
import selectors
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A connection whose request head has not all arrived this long after it was accepted is closed:
# probes and scrapes send their request at once.
FIRST_BYTE_TIMEOUT_S = 5.0
# Connections waiting for their request head, at most (and at most a quarter of the descriptors).
MAX_WAITING = 1024


def _max_waiting() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_WAITING
    return max(16, min(MAX_WAITING, soft // 4))


# A request head is looked for in the first HEAD_PEEK bytes (a longer one is admitted: the
# handler answers 431); a connection whose head is partly in is looked at again after REST_S.
HEAD_PEEK = 65536
REST_S = 0.05


def _head_arrived(conn: Any) -> bool:
    """Whether the connection's request head is all in, read without taking it (the handler
    reads it): a blank line, the end of the stream, or more than a head may hold."""
    try:
        head = conn.recv(HEAD_PEEK, socket.MSG_PEEK)
    except OSError:
        return True  # the handler meets the error and closes
    return not head or b"\r\n\r\n" in head or b"\n\n" in head or len(head) >= HEAD_PEEK


class _Lobby:
    """Accepted connections waiting for their request head, watched by one thread; a
    connection whose head is in is handed to ``admit``, one without it too long (or the
    longest-waiting one, past ``max_waiting``) is handed to ``drop``."""

    def __init__(self, admit: Any, drop: Any, timeout_s: float, max_waiting: int) -> None:
        self._admit, self._drop = admit, drop
        self._timeout_s, self._max = timeout_s, max_waiting
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)  # a full pipe already wakes the lobby: never wait on it
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._arrived: collections.deque[tuple[Any, Any]] = collections.deque()
        # Waiting connections in arrival order (so also in deadline order): conn -> (addr, by).
        self._waiting: collections.OrderedDict[Any, tuple[Any, float]] = collections.OrderedDict()
        # Waiting connections whose head is partly in, not watched until the time given.
        self._resting: dict[Any, float] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="stef-http-lobby", daemon=True)
        self._thread.start()

    def park(self, conn: Any, addr: Any) -> None:
        """From the accepting thread: wait for ``conn``'s request head."""
        self._arrived.append((conn, addr))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        # The lobby's thread drops what waits and closes its selector as it stops (so nothing
        # is closed under it while it still admits a batch on a loaded machine).
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._closed:
                for key, _ in self._selector.select(timeout=self._next_timeout()):
                    if key.fileobj is self._wake_r:
                        self._take_arrivals()
                    elif not self._closed:
                        self._ready(key.fileobj)
                self._expire()
                self._wake_resting()
        finally:
            for conn in list(self._waiting):
                self._drop(conn)
            self._waiting.clear()
            while self._arrived:
                self._drop(self._arrived.popleft()[0])
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _ready(self, conn: Any) -> None:
        """A waiting connection with bytes to read: admitted once its request head is whole
        (or at its end, or past the size a head may have); before that it rests a moment and
        is looked at again. One no longer waiting is passed over: the arrivals before it in
        the same batch evicted and closed it."""
        entry = self._waiting.get(conn)
        if entry is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        if not _head_arrived(conn):
            # Not yet: no thread for it (a client sending a byte every few seconds held a
            # slot for as long as it liked, and 32 of them every slot of the probe server).
            self._resting[conn] = time.monotonic() + REST_S
            return
        del self._waiting[conn]
        self._admit(conn, entry[0])

    def _wake_resting(self) -> None:
        """Connections whose rest is over are watched again (still waiting: not expired)."""
        now = time.monotonic()
        for conn, until in list(self._resting.items()):
            if until > now:
                continue
            del self._resting[conn]
            if conn in self._waiting:
                try:
                    self._selector.register(conn, selectors.EVENT_READ)
                except (OSError, ValueError, KeyError):
                    self._evict(conn)

    def _next_timeout(self) -> float:
        wait = 1.0
        if self._waiting:
            _, by = next(iter(self._waiting.values()))
            wait = min(wait, by - time.monotonic())
        if self._resting:
            wait = min(wait, min(self._resting.values()) - time.monotonic())
        return max(0.0, wait)

    def _take_arrivals(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while self._arrived:
            conn, addr = self._arrived.popleft()
            try:
                self._selector.register(conn, selectors.EVENT_READ)
            except (OSError, ValueError):  # closed by the client already
                self._drop(conn)
                continue
            self._waiting[conn] = (addr, time.monotonic() + self._timeout_s)
            while len(self._waiting) > self._max:
                self._evict(next(iter(self._waiting)))

    def _expire(self) -> None:
        now = time.monotonic()
        while self._waiting:
            conn, (_, by) = next(iter(self._waiting.items()))
            if by > now:
                return
            self._evict(conn)

    def _evict(self, conn: Any) -> None:
        del self._waiting[conn]
        self._resting.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        self._drop(conn)


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection that sent a request, at most ``max_connections`` of them. Past
    the bound a connection waits up to ``slot_wait_s`` for a slot (0: not at all), then is
    closed instead of growing another thread. Before its request head a connection waits in the
    lobby (see the module docstring), taking no thread and no slot."""

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
        first_byte_timeout_s: float = FIRST_BYTE_TIMEOUT_S,
        max_waiting: int | None = None,
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        self._slot_wait_s = slot_wait_s
        waiting = max_waiting if max_waiting is not None else _max_waiting()
        # Before the bind: a failed bind calls server_close, which closes the lobby.
        self._lobby = _Lobby(self._admit, self.shutdown_request, first_byte_timeout_s, waiting)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._lobby.park(request, client_address)

    def _admit(self, request: Any, client_address: Any) -> None:
        """The connection's request head arrived: a handler thread, if a slot is free."""
        wait = self._slot_wait_s
        acquired = self._slots.acquire(timeout=wait) if wait > 0 else self._slots.acquire(False)
        if not acquired:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread started (the lobby thread must go on): free the slot
            self._slots.release()
            self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def server_close(self) -> None:
        self._lobby.close()
        super().server_close()
