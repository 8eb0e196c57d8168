"""An answer is read within bounds: at most ``max_reply_bytes`` of it, and all of it within
``timeout_s`` of sending the request, whatever the server does with its body (an endless one, a
trickle of one byte at a time), against a real HTTP server on 127.0.0.1 that writes its body in
chunks as it likes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stef.errors import LlmTransportError
from stef.judges.llm.client import ChatClient
from stef.judges.llm.config import LlmConfig
from stef.testing.fake_server import completion_body

CAP = 256 * 1024

# The chunks of one answer's body: given a stop event (set when the test is over), yields the
# bytes to send; the server counts what it sent.
Body = Callable[[threading.Event], Iterator[bytes]]


@contextmanager
def _server(status: int, body: Body) -> Iterator[tuple[str, list[int]]]:
    """A server answering every POST with ``status`` and ``body`` (chunked); yields its base
    URL and the bytes it sent per answer."""
    sent: list[int] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            count = 0
            try:
                for chunk in body(stop):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    count += len(chunk)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client hung up: what it wanted is read
                self.close_connection = True
            finally:
                sent.append(count)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", sent
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _complete(base_url: str, **config: object) -> Exception:
    client = ChatClient(
        LlmConfig(base_url=base_url, model="m", max_retries=0, max_reply_bytes=CAP, **config)
    )
    try:
        with pytest.raises(LlmTransportError) as caught:
            client.complete(lambda mode: [{"role": "user", "content": "ping"}])
        return caught.value
    finally:
        client.close()


def _endless(stop: threading.Event) -> Iterator[bytes]:
    """A JSON object that never ends (bounded at 512 MiB, so a client that reads it all ends)."""
    yield b"{"
    for _ in range(8192):
        if stop.is_set():
            return
        yield b" " * 65536


def test_an_endless_answer_is_read_no_further_than_the_cap() -> None:
    with _server(200, _endless) as (url, sent):
        error = _complete(url, timeout_s=30)
        deadline = time.monotonic() + 10
        while not sent and time.monotonic() < deadline:
            time.sleep(0.05)  # the server sees the hang-up at its next write
    assert error.reason == "bad_response"
    assert "max_reply_bytes" in error.detail
    # What the client read, plus what the kernel's socket buffers held when it hung up.
    assert sent and sent[0] < 64 * 1024 * 1024


def test_an_error_answer_past_the_cap_keeps_its_status() -> None:
    def error_page(stop: threading.Event) -> Iterator[bytes]:
        yield json.dumps({"error": {"message": "overloaded"}}).encode()
        yield from _endless(stop)

    with _server(503, error_page) as (url, _):
        error = _complete(url, timeout_s=30)
    assert error.reason == "http_503"
    assert error.status_code == 503


def test_a_trickling_answer_ends_at_the_timeout() -> None:
    """One byte every 50 ms: each read's own timeout never fires, the answer's deadline does."""
    whole = completion_body([{"index": 0, "message": {"role": "assistant", "content": "x"}}])

    def trickle(stop: threading.Event) -> Iterator[bytes]:
        for _ in range(600):  # 30 s of blanks before the body: far past the timeout
            if stop.wait(0.05):
                return
            yield b" "
        yield whole

    with _server(200, trickle) as (url, _):
        started = time.monotonic()
        error = _complete(url, timeout_s=1.0)
        waited = time.monotonic() - started
    assert error.reason == "timeout"
    assert waited < 15  # about 1 s; the trickle alone lasts 30 s


def test_an_answer_in_many_chunks_within_bounds_is_read_whole() -> None:
    whole = completion_body([{"index": 0, "message": {"role": "assistant", "content": "pong"}}])

    def chunks(stop: threading.Event) -> Iterator[bytes]:
        for i in range(0, len(whole), 7):
            yield whole[i : i + 7]

    with _server(200, chunks) as (url, _):
        client = ChatClient(
            LlmConfig(base_url=url, model="m", max_retries=0, max_reply_bytes=CAP, timeout_s=30)
        )
        try:
            completion = client.complete(lambda mode: [{"role": "user", "content": "ping"}])
        finally:
            client.close()
    assert completion.text == "pong"
