"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks the wire format of ``POST /v1/chat/completions`` (and ``GET /v1/models``), records every
request it receives, and answers each one from a script, then from a default::

    from stef.testing.fake_server import Delay, Error, FakeLlmServer, Reply

    with FakeLlmServer() as server:               # port 0: the OS picks a free port
        server.base_url                           # "http://127.0.0.1:PORT/v1"
        server.script(
            Error(429, retry_after=1),            # 429 with a Retry-After: 1 header
            Error(500),                           # a 5xx
            Delay(5.0),                           # answer (the default) after 5 s: past a timeout
            Reply("not json"),                    # content that is not JSON
            Reply({"verdict": "Correct"}),        # JSON that violates the reply schema
            Reply(my_dict, prompt_tokens=900),    # a valid reply with set usage
            Raw(200, b"{oops"),                   # an HTTP body that is not JSON at all
            Reply(refusal="I cannot help"),       # content null, message.refusal set
            Reply(model="other-model"),           # the default reply, reporting another model
            Raw(200, completion_body([])),        # a chat completion with empty choices
            Reply("Yes", token_probs={"Yes": 0.7, " Yes": 0.1, "No": 0.2}),  # P(Yes) = 0.8
            Reply("No", logprobs=False),          # no log-probabilities in this answer
        )
        ...                                       # point the judge at server.base_url
        server.requests                           # [Received(...)], in arrival order

Steps are consumed one per request, in order, by whichever request comes next. When the script
is empty the server answers with its default, :func:`judge_like`: it reads the numbered
predicates from the prompt's ``sql_predicates`` block and marks one question filter per predicate
STEF did not already match (``stef_matched``) as matched, verdict ``Likely Correct``, confidence
0.9 (score 80 through the pipeline when STEF matched every predicate and no rule fires; a claim
whose text is not in the question is dropped by the verify stage).
``FakeLlmServer(default=fn)`` replaces it; ``fn(received)`` returns a step.

Log-probabilities: a request with ``logprobs: true`` gets a ``logprobs.content`` block, one entry
per token of the reply (words, spaces and punctuation as tokens), each with its ``top_logprobs``
(at most the number asked). Every token has probability 1 except at the decision: the first token
of a plain-text reply, or the first token of the ``verdict`` value of a JSON reply. There the
alternatives are ``Reply.token_probs`` (token -> probability), else the reply's own token and its
opposite (``Correct``/``Incorrect``), weighted by the reply's ``confidence``. A request without
``response_format`` (probability mode, its probe) gets ``Yes`` by default, with P(Yes) = 0.85
spread over the spellings ``Yes``, `` Yes`` and ``yes`` against ``No``.
``FakeLlmServer(logprobs=False)`` never sends log-probabilities (a server without them);
``Reply(logprobs=False)`` leaves them out of one answer.

``FakeLlmServer(reject_json_schema=400)`` answers every request that asks for ``response_format``
``json_schema`` with that status (a server without structured-output support), to exercise the
fallback to ``json_object``. ``latency_s`` adds a fixed delay to every answer (benchmarks).
``FakeLlmServer(unsupported_params=("temperature", "max_tokens"))`` answers like GPT-5 and the
o-series: a request carrying one of those parameters gets OpenAI's 400 naming it (``param``,
``code`` ``unsupported_parameter`` or ``unsupported_value``), the first one sent in that order.
``FakeLlmServer(api_key="sk-...")`` answers 401 to every request (the models list included) whose
bearer token is not that key, with OpenAI's error body (which echoes the key it got).
Usage numbers, unless scripted, estimate tokens as characters / 4.

From a shell (a stand-in endpoint for ``stef replay`` or a benchmark; stops on SIGINT/SIGTERM)::

    python -m stef.testing.fake_server --port 8399 --latency-s 0.2 [--reject-json-schema 400] \
        [--no-logprobs]

prints its base URL on the first line of stdout.

The server only binds the loopback interface. ``close()`` (or leaving the ``with`` block) shuts
down open connections and joins every handler thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from stef.prompts import data_blocks

# ----------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion. ``content``: text as is, a dict as JSON, None for the default.

    With ``refusal`` set, the message is a refusal: content null, ``refusal`` that text.
    ``model`` is the model the body reports (None: the one the request named), to script an
    endpoint that swaps models behind the configured name. ``token_probs``: the alternatives
    at the decision token when log-probabilities are asked (see the module docstring);
    ``logprobs=False`` sends none in this answer.
    """

    content: str | dict[str, Any] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    refusal: str | None = None
    model: str | None = None
    token_probs: dict[str, float] | None = None
    logprobs: bool = True


@dataclass(frozen=True)
class Error:
    """An HTTP error with an OpenAI-style error body; ``retry_after`` sets the header."""

    status: int
    message: str = "scripted error"
    retry_after: float | str | None = None
    param: str | None = None  # OpenAI's ``error.param``: the request parameter at fault
    code: str | None = None  # ``error.code``; None: the status


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then answer with ``then`` (None: the default)."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Raw:
    """Any status and body bytes, verbatim."""

    status: int
    body: bytes
    content_type: str = "application/json"


Step = Reply | Error | Delay | Raw


@dataclass(frozen=True)
class Received:
    """One request as the server saw it.

    Attributes:
        method, path: the request line.
        headers: header names lower-cased.
        body: the decoded JSON body (``{}`` when there was none).
        at: ``time.monotonic()`` on arrival.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def text(self, role: str) -> str:
        """The content of every message of ``role``, joined by blank lines."""
        return "\n\n".join(str(m.get("content", "")) for m in self.messages if m["role"] == role)

    @property
    def response_format_type(self) -> str | None:
        rf = self.body.get("response_format")
        return rf.get("type") if isinstance(rf, dict) else None


def completion_body(choices: Any, *, without: tuple[str, ...] = (), **fields: Any) -> bytes:
    """A chat-completion body for :class:`Raw`, with ``choices`` sent verbatim (any JSON value).

    ``fields`` add or replace top-level keys; ``without`` drops keys (``("choices",)`` for a body
    with no choices at all).
    """
    body: dict[str, Any] = {
        "id": "chatcmpl-fake-raw",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10},
    }
    body.update(fields)
    for key in without:
        body.pop(key, None)
    return json.dumps(body).encode()


# -------------------------------------------------------------------------------- default reply


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


# P(Yes) of the default answer to a plain-text request, over three spellings of Yes.
DEFAULT_YES = {"Yes": 0.7, " Yes": 0.1, "yes": 0.05, "No": 0.15}


def judge_like(
    received: Received, *, verdict: str = "Likely Correct", confidence: float = 0.9
) -> Reply:
    """A valid judge reply built from the prompt: each SQL predicate that STEF did not already
    match (the ``stef_matched`` block) is claimed as a matched question filter, in the reply
    shape where each filter carries its own match. A request without ``response_format`` (the
    probability mode's Yes/No question) is answered ``Yes`` with :data:`DEFAULT_YES`."""
    if received.response_format_type is None:
        return Reply("Yes", token_probs=DEFAULT_YES)
    blocks = data_blocks(received.text("user"))
    predicates = blocks.get("sql_predicates") or []
    settled = {i for m in blocks.get("stef_matched") or [] for i in m.get("predicates", [])}
    filters = [
        {
            "text": str(p.get("text", "")),
            "lhs": None,
            "op": "=",
            "rhs": str(p.get("text", "")),
            "status": "matched",
            "predicates": [p["id"]],
        }
        for p in predicates
        if p.get("id") not in settled
    ]
    content = {
        "question_spec": {
            "outputs": [],
            "aggregations": [],
            "filters": filters,
            "group_by": [],
            "ordering_requested": False,
            "top_k": None,
        },
        "enrichment": {"status": "faithful", "dropped": [], "added": []},
        "issues": ["none"],
        "rationale": "Scripted judge: every SQL predicate matches a question filter.",
        "verdict": verdict,
        "confidence": confidence,
    }
    return Reply(content)


# ---------------------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Idle keep-alive connections are dropped after this many seconds.
    timeout = 30

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _refused(self, received: Received | None = None) -> bool:
        """Answer 401 when the server wants a key and the request's bearer token is not it;
        ``received`` is recorded first (a refused request is a request received too), so a
        client that has its answer finds its request in :attr:`FakeLlmServer.requests`."""
        owner = self.server.owner
        want = owner.api_key
        got = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if want is None or got == want:
            return False
        if received is not None:
            with owner._lock:
                owner._requests.append(received)
        body = {
            "error": {
                "message": f"Incorrect API key provided: {got}.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
        self._send(401, json.dumps(body).encode())
        return True

    def do_GET(self) -> None:
        if self._refused():
            return
        if self.path.rstrip("/").endswith("/models"):
            models = self.server.owner.models
            if isinstance(models, bytes):  # not a models list: a web page at a wrong base URL
                self._send(200, models, content_type="text/html")
                return
            body = {"object": "list", "data": [{"id": m, "object": "model"} for m in models]}
            self._send(200, json.dumps(body).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        received = Received(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body if isinstance(body, dict) else {},
            at=time.monotonic(),
        )
        owner = self.server.owner
        if self._refused(received):
            return
        owner._inflight(+1)
        try:
            step = owner._next_step(received)
            if owner.latency_s and owner._closing.wait(owner.latency_s):
                return
            self._answer(step, received)
        finally:
            owner._inflight(-1)

    def _answer(self, step: Step, received: Received) -> None:
        owner = self.server.owner
        if isinstance(step, Delay):
            if owner._closing.wait(step.seconds):
                return
            self._answer(step.then if step.then is not None else owner._default(received), received)
        elif isinstance(step, Error):
            headers = {}
            if step.retry_after is not None:
                headers["Retry-After"] = str(step.retry_after)
            error: dict[str, Any] = {
                "message": step.message,
                "type": "fake",
                "code": step.code or str(step.status),
            }
            if step.param is not None:
                error["param"] = step.param
            body = {"error": error}
            self._send(step.status, json.dumps(body).encode(), headers)
        elif isinstance(step, Raw):
            self._send(step.status, step.body, content_type=step.content_type)
        else:
            self._send(200, json.dumps(owner._completion(step, received)).encode())

    def _send(
        self,
        status: int,
        payload: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:
            # The client gave up (its timeout) and closed the connection: nothing to answer.
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default listen backlog (5) refuses connections when a benchmark opens 64 at once.
    request_queue_size = 256
    owner: FakeLlmServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Connections reset by clients that timed out are expected here, not errors.
        pass


class FakeLlmServer:
    """The scripted server (see the module docstring).

    Args:
        default: the answer when the script is empty; default :func:`judge_like`.
        reject_json_schema: status to answer ``json_schema`` requests with (None: accept them).
        logprobs: send log-probabilities when a request asks for them (False: a server
            without them, which ignores the parameters).
        latency_s: fixed delay before every answer.
        port: the loopback port to bind (0: any free one).
        api_key: the bearer token every request must carry (None: any, or none).
        unsupported_params: request parameters answered with a 400 naming them (a model that
            refuses them, as GPT-5 refuses ``temperature`` and ``max_tokens``).
        models: the ids ``GET /models`` lists; bytes: that body as is, with status 200 (an HTML
            page, as a web server at a wrong base URL answers).
    """

    def __init__(
        self,
        *,
        default: Callable[[Received], Step] | None = None,
        reject_json_schema: int | None = None,
        latency_s: float = 0.0,
        port: int = 0,
        api_key: str | None = None,
        unsupported_params: tuple[str, ...] = (),
        logprobs: bool = True,
        models: tuple[str, ...] | bytes = ("fake-model",),
    ) -> None:
        self.default = default or judge_like
        self.models = models
        self.api_key = api_key
        self.unsupported_params = unsupported_params
        self.logprobs = logprobs
        self.port = port
        self.reject_json_schema = reject_json_schema
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._script: deque[Step] = deque()
        self._requests: list[Received] = []
        self._conns: set[socket.socket] = set()
        self._closing = threading.Event()
        self._seq = 0
        self._in_flight = 0
        self._peak = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------- lifecycle

    def start(self) -> FakeLlmServer:
        httpd = _Server(("127.0.0.1", self.port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, drop open connections, join the handler threads."""
        httpd = self._httpd
        if httpd is None:
            return
        self._httpd = None
        self._closing.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeLlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake LLM server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # ---------------------------------------------------------------------------------- script

    def script(self, *steps: Step) -> None:
        """Append steps; each answers one request, in order."""
        with self._lock:
            self._script.extend(steps)

    @property
    def pending(self) -> int:
        """Scripted steps not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[Received]:
        """Every request received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def peak_inflight(self) -> int:
        """The most chat requests this server was answering at the same time."""
        with self._lock:
            return self._peak

    def chat_requests(self) -> list[Received]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    # -------------------------------------------------------------------------------- internals

    def _inflight(self, delta: int) -> None:
        with self._lock:
            self._in_flight += delta
            self._peak = max(self._peak, self._in_flight)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _next_step(self, received: Received) -> Step:
        with self._lock:
            self._requests.append(received)
            if self.reject_json_schema is not None and received.response_format_type == (
                "json_schema"
            ):
                return Error(
                    self.reject_json_schema,
                    "response_format json_schema is not supported by this server",
                )
            refused = self._refused_param(received)
            if refused is not None:
                return refused
            if self._script:
                return self._script.popleft()
        return self._default(received)

    def _refused_param(self, received: Received) -> Error | None:
        """OpenAI's answer to a parameter the model does not take, for the first one sent."""
        for param in self.unsupported_params:
            if param not in received.body:
                continue
            if param == "max_tokens":
                message = (
                    "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead."
                )
                return Error(400, message, param=param, code="unsupported_parameter")
            value = received.body[param]
            message = (
                f"Unsupported value: '{param}' does not support {value} with this model. "
                "Only the default (1) value is supported."
                if param == "temperature"
                else f"Unsupported parameter: '{param}' is not supported with this model."
            )
            code = "unsupported_value" if param == "temperature" else "unsupported_parameter"
            return Error(400, message, param=param, code=code)
        return None

    def _default(self, received: Received) -> Step:
        return self.default(received)

    def _completion(self, step: Reply, received: Received) -> dict[str, Any]:
        reply = (
            step
            if step.content is not None or step.refusal is not None
            else self._default_reply(received)
        )
        content = reply.content
        text: str | None
        if reply.refusal is not None:
            text = None
        else:
            text = content if isinstance(content, str) else json.dumps(content)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reply.refusal is not None:
            message["refusal"] = reply.refusal
        prompt_text = "".join(str(m.get("content", "")) for m in received.messages)
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else estimate_tokens(prompt_text)
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else estimate_tokens(text if text is not None else reply.refusal or "")
        )
        with self._lock:
            self._seq += 1
            seq = self._seq
        return {
            "id": f"chatcmpl-fake-{seq}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": step.model or reply.model or str(received.body.get("model", "fake-model")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason,
                    "logprobs": self._logprobs(reply, text, received),
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _logprobs(self, reply: Reply, text: str | None, received: Received) -> Any:
        """The ``logprobs`` block of one answer, or None (not asked, not sent, no text)."""
        if not (received.body.get("logprobs") is True and self.logprobs and reply.logprobs):
            return None
        if text is None:
            return None
        top_n = received.body.get("top_logprobs")
        top_n = top_n if isinstance(top_n, int) and not isinstance(top_n, bool) else 0
        pieces = _TOKEN.findall(text)
        at = _decision_index(pieces, text)
        content = []
        for i, piece in enumerate(pieces):
            probs = _decision_probs(reply, piece) if i == at else {piece: 1.0}
            chosen = probs.get(piece, 1e-6)
            ranked = sorted(probs.items(), key=lambda kv: -kv[1])[: max(top_n, 0)]
            content.append(
                {
                    "token": piece,
                    "logprob": math.log(chosen),
                    "bytes": list(piece.encode()),
                    "top_logprobs": [
                        {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
                        for t, p in ranked
                    ],
                }
            )
        return {"content": content}

    def _default_reply(self, received: Received) -> Reply:
        step = self.default(received)
        if isinstance(step, Reply) and step.content is not None:
            return step
        return judge_like(received)


# The fake tokenizer: runs of word characters, runs of whitespace, single punctuation marks.
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_OPPOSITE = {"Correct": "Incorrect", "Likely": "Incorrect", "Potentially": "Correct"}
_OPPOSITE["Incorrect"] = "Correct"


def _decision_index(pieces: list[str], text: str) -> int:
    """The token whose alternatives carry the decision: the verdict value's first token in a
    JSON reply, the first token of anything else."""
    key = text.rfind('"verdict"')
    if key < 0:
        return 0
    colon = text.find(":", key + len('"verdict"'))
    start = text.find('"', colon + 1) + 1 if colon >= 0 else 0
    offset = 0
    for i, piece in enumerate(pieces):
        if offset >= start and piece.strip():
            return i
        offset += len(piece)
    return 0


def _decision_probs(reply: Reply, piece: str) -> dict[str, float]:
    if reply.token_probs is not None:
        return dict(reply.token_probs)
    content = reply.content
    confidence = content.get("confidence") if isinstance(content, dict) else None
    opposite = _OPPOSITE.get(piece)
    if opposite is None or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        return {piece: 1.0}
    return {piece: float(confidence), opposite: 1.0 - float(confidence)}


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; print the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m stef.testing.fake_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--reject-json-schema", type=int, default=None, metavar="STATUS")
    parser.add_argument("--no-logprobs", action="store_true", help="never send logprobs")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeLlmServer(
        latency_s=args.latency_s,
        reject_json_schema=args.reject_json_schema,
        port=args.port,
        logprobs=not args.no_logprobs,
    ) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        print(f"requests: {len(server.chat_requests())}", flush=True)
    return 0


__all__ = [
    "DEFAULT_YES",
    "Delay",
    "Error",
    "FakeLlmServer",
    "Raw",
    "Received",
    "Reply",
    "Step",
    "completion_body",
    "estimate_tokens",
    "judge_like",
]


if __name__ == "__main__":
    raise SystemExit(main())
