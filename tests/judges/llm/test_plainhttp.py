"""The plain ``http://`` path of the LLM client (stef.judges.llm.plainhttp): kept-alive connections,
a connection the server closed, redirects, interim answers, a compressed or cut-short body,
trailers without end, and which endpoints keep httpx (https, an environment proxy, credentials
in the URL). The server here is a raw socket on 127.0.0.1 that
answers each request with scripted bytes, so what goes over the wire is exactly what is tested.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from stef.errors import LlmTransportError
from stef.judges.llm.client import ChatClient
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.plainhttp import PlainPool
from stef.testing.fake_server import completion_body

# One scripted answer: the request's path -> the bytes to send, and whether to close after.
Answer = Callable[[str], tuple[bytes, bool]]


def _http(status: int, body: bytes, *headers: str, close: bool = False) -> tuple[bytes, bool]:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body, close


def _ok(text: str, *headers: str, encode: Callable[[bytes], bytes] = bytes) -> Answer:
    body = completion_body([{"index": 0, "message": {"role": "assistant", "content": text}}])
    return lambda path: _http(200, encode(body), "Content-Type: application/json", *headers)


@dataclass
class WireServer:
    """Answers requests in arrival order from ``script``; counts connections and requests."""

    script: list[Answer]
    connections: int = 0
    requests: list[str] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            while True:
                line = f.readline()
                if not line:
                    return
                method, path = (part.decode() for part in line.split()[:2])
                length, cookie = 0, ""
                while (header := f.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                    elif name.lower() == "cookie":
                        cookie = value.strip()
                f.read(length)
                with self._lock:
                    self.requests.append(path if method == "POST" else f"{method} {path}")
                    self.cookies.append(cookie)
                    answer = self.script.pop(0)
                data, close = answer(path)
                try:
                    conn.sendall(data)
                except OSError:  # the client gave up on an answer without end
                    return
                if close:
                    return


@pytest.fixture
def wire() -> Iterator[Callable[..., WireServer]]:
    made: list[WireServer] = []

    def make(*script: Answer) -> WireServer:
        made.append(WireServer(list(script)))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _client(server: WireServer, **overrides: object) -> ChatClient:
    settings: dict[str, object] = {"max_retries": 0, "timeout_s": 5, **overrides}
    config = LlmConfig(base_url=server.base_url, model="m", **settings)
    client = ChatClient(config)
    assert client._plain is not None  # the plain path under test
    return client


def _ask(client: ChatClient, content: str = "hi") -> str | None:
    return client.complete(lambda mode: [{"role": "user", "content": content}]).text


def _failure(client: ChatClient, content: str = "hi") -> str:
    """The reason the client's one call fails with; the client is closed."""
    try:
        with pytest.raises(LlmTransportError) as err:
            _ask(client, content)
    finally:
        client.close()
    return err.value.reason


@contextlib.contextmanager
def _raw_endpoint(handler: Callable[[socket.socket], None]) -> Iterator[str]:
    """A base URL whose first connection ``handler`` serves, in a thread, on a raw socket."""

    def serve(listener: socket.socket) -> None:
        conn = listener.accept()[0]
        with conn:
            handler(conn)

    with socket.create_server(("127.0.0.1", 0)) as listener:
        thread = threading.Thread(target=serve, args=(listener,), daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        thread.join(5)


def test_one_kept_alive_connection_carries_the_requests(wire: Callable[..., WireServer]) -> None:
    server = wire(_ok("a"), _ok("b"), _ok("c"))
    client = _client(server)
    try:
        assert [_ask(client) for _ in range(3)] == ["a", "b", "c"]
    finally:
        client.close()
    assert server.connections == 1
    assert server.requests == ["/v1/chat/completions"] * 3


def test_a_connection_the_server_closed_is_replaced(wire: Callable[..., WireServer]) -> None:
    # The first answer closes its connection without saying so (no "Connection: close"), as a
    # server's idle timeout does; the second request must not be lost to it.
    server = wire(lambda path: (_ok("a")(path)[0], True), _ok("b"))
    client = _client(server)
    try:
        assert _ask(client) == "a"
        time.sleep(0.2)  # the close reaches the idle connection, as an idle timeout's would
        assert _ask(client) == "b"
    finally:
        client.close()
    assert server.connections == 2


@pytest.mark.parametrize("retries", [0, 1])
def test_a_request_lost_on_a_reused_connection_is_a_counted_retry(
    wire: Callable[..., WireServer], retries: int
) -> None:
    # The server reads the second request and closes without an answer (the keep-alive race):
    # never sent again behind the client's back, as with httpx; its own retries decide.
    server = wire(_ok("a"), lambda path: (b"", True), _ok("b"))
    client = _client(server, max_retries=retries, backoff_base_s=0.01)
    try:
        assert _ask(client) == "a"
        if retries:
            assert _ask(client) == "b"
        else:
            with pytest.raises(LlmTransportError) as err:
                _ask(client)
            assert err.value.reason == "connection_error"
    finally:
        client.close()
    assert len(server.requests) == 2 + retries


def test_a_redirect_is_followed_once_and_then_httpx_sends(
    wire: Callable[..., WireServer],
) -> None:
    def moved(path: str) -> tuple[bytes, bool]:
        return _http(307, b"", "Location: /v1/moved/chat/completions")

    server = wire(moved, _ok("there"), moved, _ok("again"))
    client = _client(server)
    try:
        assert _ask(client) == "there"
        assert client._plain is None
        assert _ask(client) == "again"
    finally:
        client.close()
    # The redirected POST is not sent twice: httpx follows the answer the plain path got.
    assert server.requests == ["/v1/chat/completions", "/v1/moved/chat/completions"] * 2


def test_a_303_is_followed_with_a_get(wire: Callable[..., WireServer]) -> None:
    server = wire(lambda path: _http(303, b"", "Location: /v1/done"), _ok("done"))
    client = _client(server)
    try:
        assert _ask(client) == "done"
    finally:
        client.close()
    assert server.requests == ["/v1/chat/completions", "GET /v1/done"]


def test_interim_answers_are_passed_over(wire: Callable[..., WireServer]) -> None:
    # 103 Early Hints and 102 Processing come before the answer, on the same connection; each
    # record must get its own answer, not the one before it.
    hints = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"

    def hinted(text: str) -> Answer:
        return lambda path: (hints + _ok(text)(path)[0], False)

    server = wire(hinted("first"), hinted("second"), _ok("third"))
    client = _client(server)
    try:
        assert [_ask(client) for _ in range(3)] == ["first", "second", "third"]
    finally:
        client.close()
    assert server.connections == 1


_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"


@pytest.mark.parametrize(
    ("head", "unit", "pause"),
    [
        (_CHUNKED, b"X-Trailer: y\r\n" * 100, 0.0),  # trailers without end
        (b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a", 0.05),  # a header line a byte at a time
    ],
    ids=["trailers", "trickled-line"],
)
def test_an_answer_without_end_stops_at_the_timeout(head: bytes, unit: bytes, pause: float) -> None:
    # http.client reads header lines and a chunked body's trailers in loops of its own; neither
    # may hold the call past its deadline.
    def endless(conn: socket.socket) -> None:
        conn.recv(65536)
        try:
            conn.sendall(head)
            while True:
                conn.sendall(unit)
                time.sleep(pause)
        except OSError:
            return

    with _raw_endpoint(endless) as url:
        client = ChatClient(LlmConfig(base_url=url, model="m", max_retries=0, timeout_s=1))
        started = time.monotonic()
        assert _failure(client) == "timeout"
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_body_is_read(wire: Callable[..., WireServer], encoding: str) -> None:
    import zlib

    encode = gzip.compress if encoding == "gzip" else zlib.compress
    server = wire(_ok("packed", f"Content-Encoding: {encoding}", encode=encode))
    client = _client(server)
    try:
        assert _ask(client) == "packed"
    finally:
        client.close()


def test_a_compressed_body_past_the_reply_cap_is_a_bad_response(
    wire: Callable[..., WireServer],
) -> None:
    bomb = gzip.compress(json.dumps({"pad": "x" * 2_000_000}).encode())
    server = wire(lambda path: _http(200, bomb, "Content-Encoding: gzip"))
    assert _failure(_client(server, max_reply_bytes=100_000)) == "bad_response"


def test_an_answer_that_ends_with_its_connection_is_read(wire: Callable[..., WireServer]) -> None:
    # HTTP/1.0, no Content-Length: the body runs to the close, and http.client closes the
    # connection before the body is read.
    body = completion_body([{"index": 0, "message": {"role": "assistant", "content": "whole"}}])
    server = wire(lambda path: (b"HTTP/1.0 200 OK\r\n\r\n" + body, True), _ok("next"))
    client = _client(server)
    try:
        assert _ask(client) == "whole"
        assert _ask(client) == "next"
    finally:
        client.close()
    assert server.connections == 2


def test_a_101_nobody_asked_for_breaks_the_exchange(wire: Callable[..., WireServer]) -> None:
    # The answer after the 101 must not stay on a kept connection for the next record to read.
    switch = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"
    server = wire(lambda path: (switch + _ok("first")(path)[0], False), _ok("second"))
    client = _client(server)
    try:
        with pytest.raises(LlmTransportError) as err:
            _ask(client)
        assert err.value.reason == "connection_error"
        assert _ask(client) == "second"
    finally:
        client.close()


def test_an_answer_sent_before_the_whole_request_is_read() -> None:
    # A server refusing a large request (413) answers after its head and closes: the answer is
    # the call's, as httpx reads it, not a connection error retried with the body sent again.
    def refuse(conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        conn.sendall(_http(413, b'{"error": {"message": "too large"}}')[0])

    with _raw_endpoint(refuse) as url:
        client = ChatClient(LlmConfig(base_url=url, model="m", max_retries=0))
        assert _failure(client, "x" * 6_000_000) == "http_413"


def test_a_redirect_keeps_its_cookie_and_odd_header_bytes(
    wire: Callable[..., WireServer],
) -> None:
    # Header bytes past ASCII (a UTF-8 Location, a latin-1 note) and a Set-Cookie on the 3xx:
    # httpx follows them from the plain path's answer as it would from its own.
    moved = (
        "HTTP/1.1 307 X\r\nLocation: /v1/café/chat/completions\r\nX-Note: caf\xe9\r\n"
        "Set-Cookie: s=1; Path=/\r\nContent-Length: 0\r\n\r\n"
    ).encode("latin-1")
    server = wire(
        lambda path: (moved.replace("é".encode("latin-1"), "é".encode()), False), _ok("ok")
    )
    client = _client(server)
    try:
        assert _ask(client) == "ok"
    finally:
        client.close()
    assert server.requests == ["/v1/chat/completions", "/v1/caf%C3%A9/chat/completions"]
    assert server.cookies == ["", "s=1"]


def test_a_compressed_error_past_the_reply_cap_keeps_its_status(
    wire: Callable[..., WireServer],
) -> None:
    error = json.dumps({"error": {"message": "bad request " + "x" * 2_000_000}}).encode()
    server = wire(lambda path: _http(400, gzip.compress(error), "Content-Encoding: gzip"))
    assert (
        _failure(_client(server, max_reply_bytes=100_000, response_format="json_schema"))
        == "http_400"
    )


def test_a_body_cut_short_is_a_connection_error(wire: Callable[..., WireServer]) -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b'{"choices": ['
    server = wire(lambda path: (cut, True))
    assert _failure(_client(server)) == "connection_error"


def test_nothing_listening_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    client = ChatClient(LlmConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0))
    assert _failure(client) == "connection_error"


@pytest.mark.parametrize(
    ("url", "env", "plain"),
    [
        ("http://127.0.0.1:8000/v1", {}, True),
        ("https://api.example.com/v1", {}, False),
        ("http://10.1.2.3:8000/v1", {"HTTP_PROXY": "http://127.0.0.1:3128"}, False),
        ("http://10.1.2.3:8000/v1", {"ALL_PROXY": "http://127.0.0.1:3128"}, False),
        (
            "http://10.1.2.3:8000/v1",
            {"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "10.1.2.3"},
            True,
        ),
        ("http://gw:secret@10.1.2.3:8000/v1", {}, False),
    ],
)
def test_https_and_proxied_endpoints_keep_httpx(
    monkeypatch: pytest.MonkeyPatch, url: str, env: dict[str, str], plain: bool
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = ChatClient(LlmConfig(base_url=url, model="m"))
    try:
        assert isinstance(client._plain, PlainPool) is plain
    finally:
        client.close()
