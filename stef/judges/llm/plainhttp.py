"""Chat-completion POSTs to a plain ``http://`` endpoint over the standard library's
:mod:`http.client`, with its own pool of kept-alive connections.

A local or in-cluster model server (llama.cpp, vLLM, TGI, a gateway sidecar) answers in a few
hundred milliseconds, and there the client's own interpreter time decides how many records one
replica judges: every record's request and answer pass through one interpreter lock. ``httpx``
(the transport under the ``openai`` package) spent about 0.7 ms of it on each POST (its request
and response models, the connection pool's bookkeeping, the h11 state machine); this path spends
about a third of that, and the LLM path judged about 15% more records a second at 64 calls in
flight (``bench.llm``).

The ``httpx`` client stays for everything this path does not do, so nothing an operator relies
on changes: ``https://`` (its TLS settings and trust store), an endpoint that an environment proxy
variable routes (``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, read as ``httpx`` reads them), a
``base_url`` with credentials in it, and an endpoint that redirects (its first 3xx is followed by
``httpx`` as ``httpx`` would have, and every later request goes through ``httpx``).
Failures are raised as ``httpx``'s own exceptions (``ConnectTimeout``, ``ConnectError``,
``WriteTimeout``, ``ReadTimeout``, ``RemoteProtocolError``...), so the client's retries read them
as before; a request is never sent twice here (a lost one is the client's counted retry, as with
``httpx``). A kept-alive connection that the server closed while it was idle is dropped before it
is used. Interim ``1xx`` answers are passed over (``http.client`` itself skips only ``100``); a
``101`` nobody asked for breaks the exchange. An answer the server sends before it has read the
whole request (a ``413``) is read, not lost to the failed write. Every read of the answer (status
line, headers, body, a chunked body's framing and trailers) is bounded by the time left before
the call's deadline: ``http.client`` reads lines in loops of its own, and a line trickled a byte
at a time held a call past it.
"""

from __future__ import annotations

import functools
import http.client
import io
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

try:  # the transport under openai >= 3
    import httpx2 as _http
except ImportError:  # pragma: no cover - earlier openai releases run on httpx
    import httpx as _http  # type: ignore[no-redef,import-not-found,unused-ignore]

# A 3xx with a Location: followed by httpx (ChatClient).
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 65536

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read whole: its status, headers (``get`` case-insensitive: the standard
    library's or httpx's) and body."""

    status_code: int
    headers: Any
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_redirect(self) -> bool:
        return self.status_code in _REDIRECTS and bool(self.headers.get("location"))


class TooLarge(Exception):
    """A 2xx body longer than the cap; the rest was not read."""


class PlainPool:
    """POSTs to one ``http://`` URL over kept-alive connections. Thread-safe.

    Args:
        host, port, path: where the POSTs go.
        headers: sent with every request (``Host``, ``Content-Length`` and
            ``Accept-Encoding: identity`` are added).
        timeout_s: the bound of the connect and of each write and read.
        size: connections kept idle at most (the client's concurrency).
    """

    def __init__(
        self, host: str, port: int, path: str, headers: dict[str, str], timeout_s: float, size: int
    ) -> None:
        self._host, self._port, self._path = host, port, path
        self._headers = headers
        self._timeout = timeout_s
        self._size = size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def post(self, body: bytes, deadline: float, cap: int) -> Answer:
        """The answer to one POST of ``body`` (a redirect too: the caller follows it).

        Args:
            body: the request body (JSON).
            deadline: the ``time.monotonic()`` past which the body is no longer waited for.
            cap: the most bytes of body read; a 2xx past it raises :class:`TooLarge`, another
                status keeps its first ``cap`` bytes (an error's message is at its start).

        Raises:
            httpx.TimeoutException: the connect, a write or a read took ``timeout_s``, or the
                body was still arriving at ``deadline``.
            httpx.TransportError: the server cannot be reached, or broke the exchange.
            TooLarge: a 2xx body longer than ``cap``.
        """
        conn = self._take()
        try:
            answer, keep = self._exchange(conn, body, deadline, cap)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        """Close the idle connections; those in use close when they come back. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _new(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def _take(self) -> http.client.HTTPConnection:
        """An idle connection the server has not closed (newest first), else a new one."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new()
            if conn.sock is not None and not _readable(conn.sock):
                return conn
            conn.close()  # closed by the server (or it sent what nobody asked for)

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        body: bytes,
        deadline: float,
        cap: int,
    ) -> tuple[Answer, bool]:
        """One request and its whole answer; and whether the connection can be kept."""
        if conn.sock is None:
            _connect(conn)
        else:
            conn.sock.settimeout(self._timeout)  # the last answer's reads shortened it
        try:
            _guarded(
                lambda: conn.request("POST", self._path, body=body, headers=self._headers),
                _http.WriteTimeout,
                _http.WriteError,
            )
        except _http.WriteError as unsent:
            # The server may have answered (a 413) and closed before reading the whole body:
            # that answer is the call's, as httpx reads it. None there: the write failed.
            response = _early_answer(conn, deadline, self._timeout)
            if response is None:
                raise unsent from None
        else:
            # A callable, not a class: http.client only calls it (typeshed says a class).
            conn.response_class = _deadline_response(deadline, self._timeout)  # type: ignore[assignment]
            response = _guarded(conn.getresponse, _http.ReadTimeout, _http.ReadError)
        while 100 < response.status < 200:
            if response.status == 101:
                raise _http.RemoteProtocolError("101 Switching Protocols, and no upgrade was asked")
            # An interim answer (102 Processing, 103 Early Hints): the answer comes after it.
            response.headers = None  # type: ignore[assignment]  # begin() reads the next one
            _guarded(response.begin, _http.ReadTimeout, _http.ReadError)
        content, whole = _body(response, cap)
        ok = 200 <= response.status < 300
        content = _decoded(content, response.headers.get("content-encoding"), cap, ok)
        keep = whole and not response.will_close
        return Answer(response.status, response.headers, content), keep


def _readable(sock: socket.socket) -> bool:
    """An idle kept-alive socket with something to read: the server closed it (EOF). Polled,
    not selected: ``select`` refuses descriptors past 1023, which a busy replica reaches."""
    try:
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        return bool(poll.poll(0))
    except (OSError, ValueError):
        return True


def _connect(conn: http.client.HTTPConnection) -> None:
    try:
        conn.connect()
    except TimeoutError as exc:
        raise _http.ConnectTimeout(f"connect: {exc or 'timed out'}") from exc
    except OSError as exc:
        raise _http.ConnectError(f"connect: {exc}") from exc


def _guarded(
    step: Callable[[], T],
    timeout: type[_http.TimeoutException],
    failed: type[_http.NetworkError],
) -> T:
    """``step`` with its failures as httpx's: ``timeout``, ``RemoteProtocolError`` for an answer
    that is not HTTP or a connection closed before it, else ``failed``."""
    try:
        return step()
    except TimeoutError as exc:
        raise timeout(str(exc) or "timed out") from exc
    except http.client.RemoteDisconnected as exc:
        raise _http.RemoteProtocolError(
            str(exc) or "the server closed the connection without an answer"
        ) from exc
    except http.client.HTTPException as exc:
        raise _http.RemoteProtocolError(f"{type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise failed(str(exc)) from exc


class _DeadlineReader(io.RawIOBase):
    """The socket read for one answer, each receive bounded by the time left before the call's
    deadline (and by ``timeout_s``). It holds the socket's own reader until it is closed: that
    keeps the socket open while the answer is read after ``http.client`` closed the connection
    (an answer that ends with it, such as HTTP/1.0's)."""

    def __init__(self, sock: socket.socket, hold: Any, deadline: float, timeout: float) -> None:
        self._sock, self._hold, self._deadline, self._timeout = sock, hold, deadline, timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the answer was still arriving {self._timeout} s after the request")
        self._sock.settimeout(min(self._timeout, left))
        return self._sock.recv_into(buffer)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._hold.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An answer read through :class:`_DeadlineReader`: the connection's response class for one
    request, bound to its deadline by :func:`_deadline_response`."""

    def __init__(
        self, sock: socket.socket, *args: Any, deadline: float, timeout: float, **kwargs: Any
    ) -> None:
        super().__init__(sock, *args, **kwargs)
        reader = _DeadlineReader(sock, self.fp, deadline, timeout)
        self.fp = io.BufferedReader(reader, _CHUNK)


def _deadline_response(deadline: float, timeout: float) -> Callable[..., _DeadlineResponse]:
    """The connection's response class for one request (``http.client`` only calls it): the
    class bound to the request's deadline. A class built per request cost more than the rest of
    the exchange's own code, and each one lived until the cyclic collector found it."""
    return functools.partial(_DeadlineResponse, deadline=deadline, timeout=timeout)


def _early_answer(
    conn: http.client.HTTPConnection, deadline: float, timeout: float
) -> http.client.HTTPResponse | None:
    """The answer a server sent before the request's write failed, if it can be read."""
    if conn.sock is None:
        return None
    response = _deadline_response(deadline, timeout)(conn.sock, method="POST")
    try:
        response.begin()
    except (OSError, http.client.HTTPException):
        response.close()
        return None
    response.will_close = True  # the request was not sent whole: the connection is done
    return response


def _body(response: http.client.HTTPResponse, cap: int) -> tuple[bytes, bool]:
    """The body, read as it arrives (each receive within the deadline: :class:`_DeadlineReader`),
    at most ``cap`` bytes of it (:meth:`PlainPool.post`); and whether it was read to its end
    (else the connection is not kept)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = _guarded(lambda: response.read1(_CHUNK), _http.ReadTimeout, _http.ReadError)
        if not chunk:
            if response.length:  # the connection ended before the Content-Length did
                raise _http.RemoteProtocolError(
                    f"the answer ended {response.length} bytes short of its Content-Length"
                )
            response.close()  # read whole: the connection is free for the next request
            return b"".join(chunks), True
        if size + len(chunk) > cap:
            if 200 <= response.status < 300:
                raise TooLarge
            chunks.append(chunk[: cap - size])
            response.close()
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)


def _decoded(content: bytes, encoding: str | None, cap: int, ok: bool) -> bytes:
    """The body of a server that compressed it though asked not to (``gzip``, ``deflate``), at
    most ``cap`` bytes of it, as httpx decoded it (past the cap: a 2xx raises
    :class:`TooLarge`, another status keeps its start); any other body as it came."""
    kind = (encoding or "").strip().lower()
    if kind not in ("gzip", "deflate") or not content:
        return content
    # gzip's header; deflate as zlib's stream, else raw (servers send both, as httpx reads them).
    tries = (16 + zlib.MAX_WBITS,) if kind == "gzip" else (zlib.MAX_WBITS, -zlib.MAX_WBITS)
    for i, wbits in enumerate(tries):
        try:
            out = zlib.decompressobj(wbits).decompress(content, cap + 1)
            break
        except zlib.error as exc:
            if i == len(tries) - 1:
                raise _http.DecodingError(f"{kind} body: {exc}") from exc
    if len(out) > cap and ok:
        raise TooLarge
    return out[:cap]
