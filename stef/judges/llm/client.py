"""The HTTP side of the LLM judge: one chat completion, POSTed to ``{base_url}/chat/completions``
over a pooled HTTP client, with our own bounded retries and the ``json_schema`` -> ``json_object``
fallback.

The request is the transport's own (``httpx2``, the one under the ``openai`` package, or ``httpx``
under earlier releases): a body serialized here, the bearer key, one timeout for connect, write,
read and pool. Going through the ``openai`` client's ``post`` cost about 1.5 ms of interpreter time
per call (its request options model, headers and response wrapper), more than half of what the
whole HTTP exchange costs; its behaviour is kept: redirects followed, a timeout is ``timeout``,
any other transport failure ``connection_error``, a non-2xx status its error body.

Retries here are counted, bounded by count and by total time, logged and measured, and they honour
``Retry-After`` as a lower bound. The body of a 200 is read raw and validated here against a lenient
model of the chat-completion envelope, so a body that is not one (HTML from a gateway, a JSON
array, no ``choices``) is a retried ``bad_response``, never an exception of another kind. Any text
of the endpoint goes through :func:`redact` before it reaches an exception or a log.

The reply envelope and the completion made of it are in :mod:`stef.judges.llm.wire`, the request
parameters and their adaptation in :mod:`stef.judges.llm.params`, redaction in
:mod:`stef.redact`; this module keeps the calls, the retries and the fallback.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from pydantic_core import to_json

try:  # the transport under openai >= 3
    import httpx2 as _http
except ImportError:  # pragma: no cover - earlier openai releases run on httpx
    import httpx as _http  # type: ignore[no-redef,import-not-found,unused-ignore]

from stef.errors import ConfigError, LlmTransportError, StefError
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.hooks import Attempt, AttemptOutcome, Hooks
from stef.judges.llm.params import (
    REASONING_MAX_TOKENS,
    REJECT_STATUSES,
    Params,
    refused_param,
    rejects_logprobs,
)
from stef.judges.llm.plainhttp import Answer, PlainPool, TooLarge
from stef.judges.llm.reply import response_format
from stef.judges.llm.wire import (
    BadBody,
    Completion,
    Envelope,
    TokenLogprob,
    TokenLogprobs,
    completion_of,
    parse_body,
)
from stef.redact import DETAIL_LIMIT, redact

log = structlog.get_logger(__name__)

# Statuses worth another try; the openai client retries the same set.
_RETRY_STATUSES = frozenset({408, 409, 429})
_REJECT_HINTS = ("response_format", "json_schema", "schema", "grammar", "guided", "structured")

Messages = list[dict[str, str]]


class _Status(Exception):
    """A non-2xx answer: its status, headers and error body (the ``error`` object of a JSON body,
    else the body's text). Internal: handled by :meth:`ChatClient._on_status`."""

    def __init__(self, response: Any) -> None:
        self.status_code: int = response.status_code
        self.headers = response.headers
        text = response.content.decode("utf-8", "replace").strip()
        body: Any = text
        with contextlib.suppress(ValueError, RecursionError):  # an error body nested deep: text
            body = json.loads(text)
        self.body: Any = body.get("error", body) if isinstance(body, dict) else body
        self.message = text or f"HTTP {self.status_code}"
        super().__init__(f"HTTP {self.status_code}")


_TRANSPORT_ERRORS = (_http.HTTPError, _http.InvalidURL, _http.StreamError)


class _NoSlot(StefError):
    """No concurrency slot came free within ``timeout_s``. Internal: retried, then raised as
    LlmTransportError ``timeout``."""


@dataclass
class _Call:
    """The state of one :meth:`ChatClient.complete` across its attempts (mutable, one thread).

    Attributes:
        started: when the first attempt began (the retry budget counts from here).
        mode: the response_format mode of the next attempt.
        attempts: HTTP calls made so far.
        retries: backoffs slept so far (the json_object fallback is not one).
        fell_back: the fallback to ``json_object`` was taken (it is taken once).
        adapted: request parameters changed after the server refused them (each once).
        sent: the adaptable parameters of the last attempt's request.
        t0: when the current attempt began, reset once it holds a concurrency slot.
        schema: the request's JSON schema for ``json_schema`` mode (None: the generic one).
        top_logprobs: alternatives to ask per token; 0 asks for no log-probabilities.
        max_tokens: the completion cap of this call (None: the configured one).
    """

    started: float
    mode: str
    schema: dict[str, Any] | None = None
    top_logprobs: int = 0
    max_tokens: int | None = None
    attempts: int = 0
    retries: int = 0
    fell_back: bool = False
    t0: float = 0.0
    adapted: set[str] = field(default_factory=set)
    sent: dict[str, Any] = field(default_factory=dict)

    def elapsed(self) -> float:
        """Seconds the current attempt has taken."""
        return time.monotonic() - self.t0


def retry_after_s(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if any."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        with contextlib.suppress(ValueError):
            return max(0.0, float(value) / scale)
        parsed = email.utils.parsedate_tz(str(value))
        # A date it cannot place (year 10000 and past) is no date: as if there were none.
        with contextlib.suppress(ValueError, OverflowError):
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


class ChatClient:
    """Chat completions against one OpenAI-compatible endpoint. Thread-safe.

    Args:
        config: endpoint, model, timeouts and retry bounds.
        hooks: the observers of every HTTP attempt (outcome ok, retry or error); None: none.
        sleep: how to wait between retries (tests may pass a recorder).
    """

    def __init__(
        self,
        config: LlmConfig,
        *,
        hooks: Hooks | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.model:
            raise ConfigError("an LLM model name is required (STEF_LLM_MODEL)")
        self.config = config
        self.model: str = config.model
        self._hooks = hooks or Hooks()
        self._sleep = sleep
        key = config.api_key.get_secret_value() if config.api_key is not None else ""
        # Nothing is read from OPENAI_* variables: the endpoint and key are STEF's settings.
        base_url = (config.base_url or "https://api.openai.com/v1").rstrip("/")
        headers = {
            # Local servers need no key; the placeholder is what the openai client sent.
            "Authorization": f"Bearer {key or 'none'}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "stef",
        }
        self._client = _http.Client(
            base_url=base_url + "/",
            headers=headers,
            timeout=config.timeout_s,
            follow_redirects=True,
            limits=_http.Limits(
                max_connections=config.max_concurrency,
                max_keepalive_connections=config.max_concurrency,
            ),
        )
        # Joined once (as the client joins a relative path, on every request otherwise).
        base = self._client.base_url
        self._completions = base.copy_with(raw_path=base.raw_path + b"chat/completions")
        self._plain = _plain_pool(self._client, self._completions, headers, config)
        self._secrets: tuple[str, ...] = (key,) if key else ()
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._lock = threading.Lock()
        # The structured-output mode this endpoint accepts; "auto" until the first answer.
        self._mode: str = config.response_format
        self._params = Params.of(config)
        # False once the endpoint refused the logprobs parameter of a structured request.
        self._logprobs_ok = True

    @property
    def mode(self) -> str:
        """``json_schema``, ``json_object``, or ``auto`` before the endpoint has answered."""
        with self._lock:
            return self._mode

    @property
    def logprobs_accepted(self) -> bool:
        """False once the endpoint refused ``logprobs`` on a structured request."""
        with self._lock:
            return self._logprobs_ok

    def _current_mode(self) -> str:
        mode = self.mode
        return "json_schema" if mode == "auto" else mode

    def close(self) -> None:
        """Close the connection pools. Idempotent."""
        if self._plain is not None:
            self._plain.close()
        self._client.close()

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values :func:`redact` removes from endpoint text: the configured API key."""
        return self._secrets

    def complete(
        self,
        build: Callable[[str], Messages],
        schema: dict[str, Any] | None = None,
        *,
        top_logprobs: int = 0,
        text: bool = False,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion.

        Args:
            build: the messages for a response_format mode (the ``json_object`` mode puts the
                schema in the prompt).
            schema: the request's reply schema for ``json_schema`` mode (its predicate ids).
            top_logprobs: ask for log-probabilities with this many alternatives per token (0:
                none). A structured request whose ``logprobs`` the endpoint refuses (400/422
                naming them) is sent again without, and later ones never ask (not a retry);
                a ``text`` request's refusal stands.
            text: plain text, no ``response_format`` (the probability mode's one token).
            max_tokens: the completion cap of this call (None: ``llm.max_tokens``).

        Returns:
            The completion; its ``text`` is None when the model sent no content (no choice, a
            null message, a refusal): judging that is the caller's business.

        Raises:
            LlmTransportError: every attempt failed (``timeout``, ``connection_error``,
                ``rate_limited``, ``http_<status>``, ``bad_response`` for a 200 whose body is not
                a chat completion), or the endpoint refused the request.
        """
        call = _Call(
            started=time.monotonic(),
            mode="text" if text else self._current_mode(),
            schema=schema,
            top_logprobs=top_logprobs if (text or self.logprobs_accepted) else 0,
            max_tokens=max_tokens,
        )
        while True:
            completion = self._attempt(build, call)
            if completion is not None:
                return completion

    # ------------------------------------------------------------------------------- internals

    def _attempt(self, build: Callable[[str], Messages], call: _Call) -> Completion | None:
        """One HTTP call: its completion, or None after a backoff or the json_object fallback.

        Raises:
            LlmTransportError: the failure is final, or the retry budget is spent.
        """
        call.attempts += 1
        call.t0 = time.monotonic()
        try:
            envelope = self._send(build, call)
        except _Status as exc:
            self._on_status(exc, call, call.elapsed())
            return None
        except _http.TimeoutException as exc:
            elapsed = call.elapsed()
            detail = f"no answer within {self.config.timeout_s} s"
            self._backoff_or_raise(call, exc, "timeout", detail, elapsed)
            return None
        except _TRANSPORT_ERRORS as exc:
            elapsed = call.elapsed()
            detail = f"cannot reach the LLM endpoint: {redact(exc, self._secrets)}"
            self._backoff_or_raise(call, exc, "connection_error", detail, elapsed)
            return None
        except _NoSlot as exc:
            # Every slot busy for a whole timeout: retried like a timeout, within the budget.
            self._backoff_or_raise(call, None, "timeout", str(exc), call.elapsed())
            return None
        except BadBody as exc:
            # A gateway's error page or a proxy's error object on a 200: often transient.
            self._backoff_or_raise(call, None, "bad_response", exc.detail, call.elapsed())
            return None
        elapsed = call.elapsed()
        completion = completion_of(envelope, call.mode, call.attempts, self._secrets)
        self._observe("ok", elapsed, completion.prompt_tokens, completion.completion_tokens)
        self._settle_mode(call.mode)
        return completion

    def _send(self, build: Callable[[str], Messages], call: _Call) -> Envelope:
        """Send the request in ``call.mode`` and read the envelope of its 200.

        ``call.t0`` is reset once a concurrency slot is free: the wait for one is not the call's
        time.
        """
        # Bounded: a record waiting for ever behind busy slots would outlast record_timeout_s
        # (llm.record_budget_s counts this wait as one timeout_s per attempt).
        if not self._slots.acquire(timeout=self.config.timeout_s):
            raise _NoSlot(
                f"no LLM concurrency slot free within {self.config.timeout_s} s "
                f"(llm.max_concurrency {self.config.max_concurrency})"
            )
        try:
            call.t0 = time.monotonic()
            with self._lock:
                call.sent = self._params.body()
            raw = self._create(build(call.mode), call.mode, call.schema, call.sent, call)
        finally:
            self._slots.release()
        if not raw.is_success:
            raise _Status(raw)
        return parse_body(raw.content, raw.headers.get("content-type"), self._secrets)

    def _on_status(self, exc: _Status, call: _Call, elapsed: float) -> None:
        """A non-2xx answer: fall back to json_object, back off, or raise.

        Raises:
            LlmTransportError: the status is not worth a retry, or the retry budget is spent.
        """
        status = exc.status_code
        message = _message(exc, self._secrets)
        if call.top_logprobs and call.mode != "text" and rejects_logprobs(status, message):
            # Not a retry: the same structured request without the optional log-probabilities.
            self._observe("retry", elapsed)
            log.warning("llm_logprobs_rejected", status=status, model=self.model, message=message)
            with self._lock:
                self._logprobs_ok = False
            call.top_logprobs = 0
            return
        if self._adapt(exc, message, call):
            self._observe("retry", elapsed)
            return
        if self._rejects_schema(status, message, call.mode) and not call.fell_back:
            # Not a retry: the same request in the mode the server may support.
            self._observe("retry", elapsed)
            log.warning(
                "llm_json_schema_rejected",
                status=status,
                model=self.model,
                fallback="json_object",
                message=message,
            )
            call.mode, call.fell_back = "json_object", True
            return
        retryable = status in _RETRY_STATUSES or status >= 500
        wait = retry_after_s(exc.headers) if retryable else None
        reason = "rate_limited" if status == 429 else f"http_{status}"
        detail = f"HTTP {status} from the LLM endpoint: {message}"
        # No cause chained: the raw body may echo the credentials; the status and the
        # redacted message are kept.
        if not retryable:
            self._observe("error", elapsed)
            raise LlmTransportError(
                reason, detail, attempts=call.attempts, status_code=status
            ) from None
        self._backoff_or_raise(call, None, reason, detail, elapsed, wait, status)

    def _create(
        self,
        messages: Messages,
        mode: str,
        schema: dict[str, Any] | None,
        params: dict[str, Any],
        call: _Call | None = None,
    ) -> Answer:
        """The answer, whatever its status (parse_body validates a 200's body), read whole:
        over the standard library for a plain ``http://`` endpoint (:mod:`.plainhttp`), else
        (and for a redirect) over httpx.

        Raises:
            BadBody: a 200 larger than ``max_reply_bytes``.
            httpx.ReadTimeout: the body still arriving ``timeout_s`` after the request was
                sent (each read's own timeout restarts with every byte: a server sending one
                byte a second held a record as long as it liked).
        """
        deadline = time.monotonic() + self.config.timeout_s
        body = _serialized(self.model, messages, mode, schema, params, call)
        plain = self._plain
        if plain is not None:
            try:
                answer = plain.post(body, deadline, self.config.max_reply_bytes)
            except TooLarge:
                raise self._too_large() from None
            if not answer.is_redirect:
                return answer
            # httpx follows this redirect as it would have, and sends every later request.
            self._plain = None
            plain.close()
        request = self._client.build_request("POST", self._completions, content=body)
        if plain is not None:
            request = self._redirected(request, answer)
        response = self._client.send(request, stream=True)
        try:
            content = self._body_of(response, deadline)
        finally:
            response.close()
        return Answer(response.status_code, response.headers, content)

    def _redirected(self, request: Any, answer: Answer) -> Any:
        """The request that follows ``answer``'s redirect, built by httpx's own rules (the
        method a 301/302/303 turns a POST into, the headers kept across origins, the cookies it
        set); the request itself, sent again, where this httpx builds none."""
        build = getattr(self._client, "_build_redirect_request", None)
        if build is None:
            return request
        # The headers' bytes as they came (http.client reads them as latin-1), as httpx has them.
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()]
        response = _http.Response(answer.status_code, headers=raw, request=request)
        self._client.cookies.extract_cookies(response)
        return build(request, response)

    def _too_large(self) -> BadBody:
        return BadBody(
            f"the LLM endpoint's answer is larger than llm.max_reply_bytes "
            f"({self.config.max_reply_bytes} bytes); the rest was not read"
        )

    def _body_of(self, response: Any, deadline: float) -> bytes:
        """The body, read as it arrives, at most ``max_reply_bytes`` of it: an answer without
        end filled memory at the rate it came (2 GB in 2 s)."""
        cap = self.config.max_reply_bytes
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if size + len(chunk) > cap:
                if response.is_success:
                    raise self._too_large()
                chunks.append(chunk[: cap - size])  # an error's message is at its start
                break
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                raise _http.ReadTimeout(
                    f"the answer was still arriving {self.config.timeout_s} s after the request",
                    request=response.request,
                )
        return b"".join(chunks)

    def request_body(
        self, messages: Messages, schema: dict[str, Any] | None = None, *, top_logprobs: int = 0
    ) -> bytes:
        """The body :meth:`complete` would send now for these messages, structured in the mode
        settled so far: what a benchmark's plain client sends, to compare like with like."""
        mode = self._current_mode()
        call = _Call(
            started=0.0,
            mode=mode,
            schema=schema,
            top_logprobs=top_logprobs if self.logprobs_accepted else 0,
        )
        with self._lock:
            params = self._params.body()
        return _serialized(self.model, messages, mode, schema, params, call)

    def _adapt(self, exc: _Status, message: str, call: _Call) -> bool:
        """The server refused a request parameter by name (a 400 such as GPT-5's "Unsupported
        parameter: 'max_tokens'"): change it for this model and send again. Not a retry, and
        each parameter once per call, so a server that refuses every variant ends the call."""
        if exc.status_code not in REJECT_STATUSES:
            return False
        param = refused_param(exc.body, message, call.sent)
        if param is None or param in call.adapted:
            return False
        call.adapted.add(param)
        with self._lock:
            if param not in self._params.body():
                return True  # another call adapted it meanwhile: send again as it is now
            change = self._params.adapt(param)
        log.warning(
            "llm_parameter_adapted",
            model=self.model,
            parameter=param,
            change=change,
            status=exc.status_code,
            message=message,
        )
        return True

    def _rejects_schema(self, status: int, message: str, mode: str) -> bool:
        """The endpoint refused the structured-output request itself (not the call in general)."""
        if mode != "json_schema" or self.config.response_format != "auto":
            return False
        if status in REJECT_STATUSES:
            return True
        if status < 500:
            return False
        # Some servers answer 500 to a schema they cannot compile. Until json_schema has worked
        # once on this endpoint, a 5xx is taken as that; afterwards only with a hint in the body.
        text = message.lower()
        return self.mode == "auto" or any(h in text for h in _REJECT_HINTS)

    def _settle_mode(self, mode: str) -> None:
        if mode == "text":  # a plain-text call says nothing about structured output
            return
        with self._lock:
            if self._mode == "auto" or (self._mode == "json_schema" and mode == "json_object"):
                if self._mode != mode:
                    log.info("llm_response_format", model=self.model, mode=mode)
                self._mode = mode

    def _backoff_or_raise(
        self,
        call: _Call,
        cause: BaseException | None,
        reason: str,
        detail: str,
        elapsed: float,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        """Sleep before the next attempt and count the retry, or raise when the budget is spent."""
        cfg = self.config
        backoff = random.uniform(0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2**call.retries))
        wait = max(backoff, retry_after or 0.0)
        spent = time.monotonic() - call.started
        if call.retries >= cfg.max_retries or spent + wait > cfg.max_total_retry_s:
            self._observe("error", elapsed)
            budget = (
                f"{call.retries} retries"
                if call.retries >= cfg.max_retries
                else f"retry budget of {cfg.max_total_retry_s} s"
            )
            raise LlmTransportError(
                reason,
                f"{detail} (gave up after {call.attempts} attempts, {budget})",
                attempts=call.attempts,
                status_code=status,
            ) from cause
        self._observe("retry", elapsed)
        log.info(
            "llm_retry",
            model=self.model,
            reason=reason,
            attempt=call.attempts,
            wait_s=round(wait, 3),
            retry_after_s=retry_after,
        )
        self._sleep(wait)
        call.retries += 1

    def _observe(self, outcome: AttemptOutcome, seconds: float, p: int = 0, c: int = 0) -> None:
        cost = self.config.cost(self.model, p, c) if (p or c) else None
        self._hooks.attempt(Attempt(self.model, outcome, seconds, p, c, cost))


def _serialized(
    model: str,
    messages: Messages,
    mode: str,
    schema: dict[str, Any] | None,
    params: dict[str, Any],
    call: _Call | None,
) -> bytes:
    """The JSON body of one chat-completion request."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "response_format": response_format(mode, schema),
        **params,
    }
    if call is not None:
        _with_call_options(body, call)
    try:
        # pydantic's serializer: a quarter of json.dumps' time on a 10 KB body; UTF-8 as it is.
        return to_json(body)
    except ValueError:
        # A lone surrogate (half an emoji in a reply quoted back by the re-ask) has no UTF-8:
        # JSON's escape carries it, as the reply that brought it did.
        return json.dumps(body, separators=(",", ":")).encode()


def _with_call_options(body: dict[str, Any], call: _Call) -> None:
    """The body with what one call asks beyond the settings: plain text (no
    ``response_format``), log-probabilities, its own completion cap (under the name the
    model takes: ``max_tokens`` or ``max_completion_tokens``, as adapted so far)."""
    if call.mode == "text":
        body.pop("response_format", None)
    if call.top_logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = call.top_logprobs
    if call.max_tokens is not None:
        key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        body[key] = call.max_tokens


def _plain_pool(
    client: _http.Client, url: _http.URL, headers: dict[str, str], config: LlmConfig
) -> PlainPool | None:
    """The standard library's pool for a plain ``http://`` endpoint that no environment proxy
    routes, by httpx's own choice of transport for the URL; None: httpx sends every request."""
    choose = getattr(client, "_transport_for_url", None)
    default = getattr(client, "_transport", None)
    if url.scheme != "http" or not url.host or url.userinfo:
        return None  # TLS, and credentials in the URL (basic auth), are httpx's
    if choose is None or choose(url) is not default:
        return None
    path = url.raw_path.decode("ascii")
    port = url.port or 80
    return PlainPool(url.host, port, path, headers, config.timeout_s, config.max_concurrency)


class _ErrorAnswer(Protocol):
    """A non-2xx answer as :class:`_Status` and ``openai.APIStatusError`` (the preflight's) hold
    it."""

    body: Any
    message: str


def _message(exc: _ErrorAnswer, secrets: Iterable[str]) -> str:
    """The error message of a non-2xx answer, redacted and capped."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return redact(err["message"], secrets)
        if isinstance(err, str):
            return redact(err, secrets)
    if isinstance(body, str):
        return redact(body, secrets)
    return redact(exc.message, secrets)


# Importable from here as before the reply envelope, the parameters and redaction moved out.
__all__ = [
    "DETAIL_LIMIT",
    "REASONING_MAX_TOKENS",
    "ChatClient",
    "Completion",
    "Messages",
    "TokenLogprob",
    "TokenLogprobs",
    "redact",
    "retry_after_s",
]
