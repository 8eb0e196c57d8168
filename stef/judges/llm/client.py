"""The HTTP side of the LLM judge: one chat completion through the ``openai`` client, with our own
bounded retries and the ``json_schema`` -> ``json_object`` fallback.

The request goes through the client's ``post`` with a body serialized here (its errors, headers,
auth and timeouts unchanged); the reply schema is built once per shape (:func:`reply_schema`).

The ``openai`` client's own retries are off (``max_retries=0``): retries here are counted, bounded
by count and by total time, logged and measured, and they honour ``Retry-After`` as a lower bound.
Errors of the ``openai`` package are translated into :class:`~stef.errors.LlmTransportError` where
they enter our code. The body of a 200 is read raw and validated here against a lenient model of
the chat-completion envelope, so a body that is not one (HTML from a gateway, a JSON array, no
``choices``) is a retried ``bad_response``, never an exception of another kind. Any text of the
endpoint goes through :func:`redact` before it reaches an exception or a log.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import openai
import structlog

try:  # the transport under openai >= 3
    from httpx2 import Response as _HttpResponse
except ImportError:  # pragma: no cover - earlier openai releases run on httpx
    from httpx import Response as _HttpResponse  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]
from pydantic import BaseModel, ConfigDict, ValidationError

from stef.errors import ConfigError, LlmTransportError, StefError
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.reply import response_format
from stef.metrics import Metrics

log = structlog.get_logger(__name__)

# Statuses worth another try; the openai client retries the same set.
_RETRY_STATUSES = frozenset({408, 409, 429})
# Statuses some servers answer to a response_format they do not support.
_REJECT_STATUSES = frozenset({400, 422})
_REJECT_HINTS = ("response_format", "json_schema", "schema", "grammar", "guided", "structured")

Messages = list[dict[str, str]]

# Request parameters a server may refuse for a model (GPT-5 and the o-series refuse
# ``temperature`` and ``max_tokens``): a 400 naming one makes the client adapt, once per model.
_ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "reasoning_effort")
# Words of a refusal of a parameter itself (not of its value being too large, say).
_UNSUPPORTED = re.compile(
    r"unsupported|not supported|does not support|unrecognized|unknown|not permitted|"
    r"not allowed|extra (?:inputs|fields)",
    re.IGNORECASE,
)
# Reasoning models by name: they take max_completion_tokens and only the default temperature.
# ``gpt-5-chat`` is GPT-5's non-reasoning variant, which takes a temperature.
_REASONING = re.compile(r"^(?:o\d|gpt-5)(?!.*-chat)", re.IGNORECASE)
# The completion cap of a reasoning model when none is set: its reasoning counts against the cap,
# and 1024 tokens often end in reasoning, with no content.
REASONING_MAX_TOKENS = 8192

# Endpoint text in an exception or a log is cut to this many characters, after redaction.
DETAIL_LIMIT = 300
# Redaction scans at most this much of a body (a gateway may answer megabytes of HTML).
_SCAN_LIMIT = 20_000
_REDACTED = "[REDACTED]"
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_TYPES[type(None)] = "null"
# Credentials an endpoint may echo back: header values (JSON-quoted or not), bearer tokens,
# OpenAI-style keys, key query parameters. Over-redacting an error message costs nothing.
_SECRET_PATTERNS = (
    # A known scheme and its one token; any other value up to the end of the header value.
    re.compile(
        r"""((?:proxy-)?authorization["']?\s*[:=]\s*["']?)"""
        r"""(?:(?:bearer|basic|token|digest|negotiate|apikey|key)\s+[^\s"',;}]+|[^"'\r\n,;}]+)""",
        re.IGNORECASE,
    ),
    re.compile(
        r"""((?:x-)?(?:api|access|secret)[-_]?key["']?\s*[:=]\s*["']?)[^\s"',;&}]+""",
        re.IGNORECASE,
    ),
    re.compile(r"""([?&](?:api[-_]?)?key=)[^\s"'&#]+""", re.IGNORECASE),
    re.compile(r"(\bBearer\s+)[^\s\"',;}]+", re.IGNORECASE),
    re.compile(r"()\bsk-[A-Za-z0-9_\-]{6,}"),
)


def redact(text: object, secrets: Iterable[str] = (), *, limit: int | None = DETAIL_LIMIT) -> str:
    """Endpoint text made safe for an exception detail or a log line.

    Removes every value in ``secrets`` (the configured API key) wherever it appears, then
    ``Authorization`` / ``api-key`` / ``x-api-key`` values, bearer tokens and ``sk-...`` keys;
    folds whitespace runs (HTML bodies) to one space; cuts the result to ``limit`` characters.

    Args:
        text: anything; ``str()`` of it is redacted.
        secrets: literal values to remove (empty ones are ignored).
        limit: maximum length of the result (None: no cap).
    """
    out = str(text)[:_SCAN_LIMIT]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        out = out.replace(secret, _REDACTED)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: m.group(1) + _REDACTED, out)
    out = " ".join(out.split())
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "\u2026"
    return out


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the most likely alternatives there.

    Attributes:
        token: the token as generated.
        logprob: its natural log-probability.
        top: ``(token, logprob)`` of the alternatives the endpoint listed (``top_logprobs``).
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


class TokenLogprobs(Sequence[TokenLogprob]):
    """The generated tokens of one reply, read lazily.

    Each token's text and log-probability are checked when the reply arrives (an entry that is
    not a token is left out, as before); its alternatives are read only when its position is.
    A structured reply has hundreds of tokens, each with up to ``top_logprobs`` alternatives,
    and the judge reads one position: reading them all cost more CPU than the rest of the call.

    Attributes:
        texts: every token's text, in order (the reply as the tokens spell it).
    """

    __slots__ = ("_entries", "_read", "texts")

    def __init__(self, entries: list[tuple[str, float, object]]) -> None:
        self._entries = entries
        self.texts: tuple[str, ...] = tuple(e[0] for e in entries)
        self._read: dict[int, TokenLogprob] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> TokenLogprob: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[TokenLogprob, ...]: ...

    def __getitem__(self, index: int | slice) -> TokenLogprob | tuple[TokenLogprob, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        i = range(len(self._entries))[index]  # negative indexes and IndexError as a tuple's
        read = self._read.get(i)
        if read is None:
            token, logprob, top = self._entries[i]
            alternatives = [_token_pair(t) for t in top] if isinstance(top, list) else []
            read = TokenLogprob(token, logprob, tuple(a for a in alternatives if a is not None))
            self._read[i] = read
        return read


@dataclass(frozen=True)
class Completion:
    """The text of one successful call and what the calls behind it cost.

    Attributes:
        text: the message content (None when the model sent none: no choice, a null message,
            null content, a refusal).
        refusal: the model's refusal, redacted and capped, when it sent one.
        finish_reason: as the server reported it.
        mode: the response_format mode that produced it.
        prompt_tokens, completion_tokens: summed over every call that got a reply.
        attempts: HTTP calls made (retries and the fallback included).
        reported_model: the ``model`` the endpoint named in its reply, if any.
        logprobs: the generated tokens with their log-probabilities, when they were asked for
            and the endpoint sent them; None otherwise.
    """

    text: str | None
    refusal: str | None
    finish_reason: str | None
    mode: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    reported_model: str | None = None
    logprobs: Sequence[TokenLogprob] | None = None


class _Lenient(BaseModel):
    # Only the fields read here are modelled; servers differ in everything else.
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Message(_Lenient):
    content: str | None = None
    refusal: str | None = None


class _Choice(_Lenient):
    message: _Message | None = None
    finish_reason: str | None = None
    # Read by _logprobs, leniently: a malformed block costs the signal, never the completion.
    logprobs: object = None


class _Usage(_Lenient):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Envelope(_Lenient):
    """The parts of a chat-completion body the judge reads."""

    choices: list[_Choice]
    usage: _Usage | None = None
    # Which model answered, as the endpoint says (a proxy may swap it behind the configured
    # name). Any JSON value: a server sending a number here still sent a usable completion.
    model: object = None


class _BadBody(StefError):
    """A 200 whose body is not a chat completion; ``detail`` is already redacted. Internal: the
    client retries it and then raises LlmTransportError ``bad_response``."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


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
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            parsed = email.utils.parsedate_tz(str(value))
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


class ChatClient:
    """Chat completions against one OpenAI-compatible endpoint. Thread-safe.

    Args:
        config: endpoint, model, timeouts and retry bounds.
        metrics: optional; every HTTP call is observed (outcome ok, retry or error).
        sleep: how to wait between retries (tests may pass a recorder).
    """

    def __init__(
        self,
        config: LlmConfig,
        metrics: Metrics | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.model:
            raise ConfigError("an LLM model name is required (STEF_LLM_MODEL)")
        self.config = config
        self.model: str = config.model
        self._metrics = metrics
        self._sleep = sleep
        key = config.api_key.get_secret_value() if config.api_key is not None else ""
        self._client = openai.OpenAI(
            # Local servers need no key; the placeholder keeps the client from reading
            # OPENAI_API_KEY from the environment behind the operator's back.
            api_key=key or "none",
            base_url=config.base_url or "https://api.openai.com/v1",
            organization=None,
            project=None,
            timeout=config.timeout_s,
            max_retries=0,
        )
        self._secrets: tuple[str, ...] = (key,) if key else ()
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._lock = threading.Lock()
        # The structured-output mode this endpoint accepts; "auto" until the first answer.
        self._mode: str = config.response_format
        self._params = _Params.of(config)
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
        """Close the connection pool. Idempotent."""
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
        except openai.APIStatusError as exc:
            self._on_status(exc, call, call.elapsed())
            return None
        except openai.APITimeoutError as exc:
            elapsed = call.elapsed()
            detail = f"no answer within {self.config.timeout_s} s"
            self._backoff_or_raise(call, exc, "timeout", detail, elapsed)
            return None
        except openai.APIConnectionError as exc:
            elapsed = call.elapsed()
            detail = f"cannot reach the LLM endpoint: {redact(exc.__cause__ or exc, self._secrets)}"
            self._backoff_or_raise(call, exc, "connection_error", detail, elapsed)
            return None
        except _NoSlot as exc:
            # Every slot busy for a whole timeout: retried like a timeout, within the budget.
            self._backoff_or_raise(call, None, "timeout", str(exc), call.elapsed())
            return None
        except _BadBody as exc:
            # A gateway's error page or a proxy's error object on a 200: often transient.
            self._backoff_or_raise(call, None, "bad_response", exc.detail, call.elapsed())
            return None
        except openai.OpenAIError as exc:
            # Anything else the client raises; its text may carry the body, so no chain.
            self._observe("error", call.elapsed())
            raise LlmTransportError(
                "bad_response",
                "unusable answer from the LLM endpoint: "
                f"{type(exc).__name__}: {redact(exc, self._secrets)}",
                attempts=call.attempts,
            ) from None
        elapsed = call.elapsed()
        completion = _completion(envelope, call.mode, call.attempts, self._secrets)
        self._observe("ok", elapsed, completion.prompt_tokens, completion.completion_tokens)
        self._settle_mode(call.mode)
        return completion

    def _send(self, build: Callable[[str], Messages], call: _Call) -> _Envelope:
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
        return _parse_body(raw.content, raw.headers.get("content-type"), self._secrets)

    def _on_status(self, exc: openai.APIStatusError, call: _Call, elapsed: float) -> None:
        """A non-2xx answer: fall back to json_object, back off, or raise.

        Raises:
            LlmTransportError: the status is not worth a retry, or the retry budget is spent.
        """
        status = exc.status_code
        message = _message(exc, self._secrets)
        if call.top_logprobs and call.mode != "text" and _rejects_logprobs(status, message):
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
        wait = retry_after_s(exc.response.headers) if retryable else None
        reason = "rate_limited" if status == 429 else f"http_{status}"
        detail = f"HTTP {status} from the LLM endpoint: {message}"
        # No cause chained: the openai exception's text embeds the raw body, which
        # may echo the credentials; the status and the redacted message are kept.
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
    ) -> Any:
        # The lean path: the openai client's own request (headers, auth, timeout, its error
        # classes for every failure) with a body serialized here. ``chat.completions.create``
        # would walk the body (the reply schema included) through its typed-dict transform
        # first, which costs more CPU than the HTTP call. The raw response is returned: the
        # body is validated by _parse_body, not by the openai models, whose parser lets a
        # non-JSON body escape as a JSONDecodeError.
        return self._client.post(
            "/chat/completions",
            cast_to=_HttpResponse,
            content=_serialized(self.model, messages, mode, schema, params, call),
        )

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

    def _adapt(self, exc: openai.APIStatusError, message: str, call: _Call) -> bool:
        """The server refused a request parameter by name (a 400 such as GPT-5's "Unsupported
        parameter: 'max_tokens'"): change it for this model and send again. Not a retry, and
        each parameter once per call, so a server that refuses every variant ends the call."""
        if exc.status_code not in _REJECT_STATUSES:
            return False
        param = _refused_param(exc.body, message, call.sent)
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
        if status in _REJECT_STATUSES:
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

    def _observe(self, outcome: str, seconds: float, p: int = 0, c: int = 0) -> None:
        if self._metrics is not None:
            self._metrics.observe_llm_call(
                self.model,
                outcome,
                seconds,
                prompt_tokens=p,
                completion_tokens=c,
                cost_usd=self.config.cost(self.model, p, c) if (p or c) else None,
            )


@dataclass
class _Params:
    """The sampling and length parameters sent to one model, as adapted so far (the client's
    lock guards it).

    Attributes:
        token_key: ``max_tokens`` or ``max_completion_tokens``.
        max_tokens: the completion cap (None: not sent).
        temperature: None when the model takes only its default.
        reasoning_effort: None when not configured or refused.
    """

    token_key: str
    max_tokens: int | None
    temperature: float | None
    reasoning_effort: str | None

    @classmethod
    def of(cls, config: LlmConfig) -> _Params:
        reasoning = bool(config.model and _REASONING.match(config.model.rsplit("/", 1)[-1]))
        key = config.token_param
        if key == "auto":
            key = "max_completion_tokens" if reasoning else "max_tokens"
        cap = config.max_tokens
        if reasoning and "max_tokens" not in config.model_fields_set:
            cap = REASONING_MAX_TOKENS
        return cls(
            token_key=key,
            max_tokens=cap,
            temperature=None if reasoning else config.temperature,
            reasoning_effort=config.reasoning_effort,
        )

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out[self.token_key] = self.max_tokens
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        return out

    def adapt(self, param: str) -> str:
        """Stop sending ``param`` in the refused form; returns what changed, for the log."""
        if param in ("max_tokens", "max_completion_tokens"):
            other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
            self.token_key = other
            return f"{param} sent as {other}"
        if param == "temperature":
            self.temperature = None
        else:
            self.reasoning_effort = None
        return f"{param} no longer sent"


def _refused_param(body: object, message: str, sent: dict[str, Any]) -> str | None:
    """The request parameter a 400 refuses, if it names one that was sent: OpenAI's error
    ``param`` field, else a sent parameter's name in a message that says it is unsupported."""
    err = body.get("error", body) if isinstance(body, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    if isinstance(param, str) and param in sent and param in _ADAPTABLE:
        return param
    if not _UNSUPPORTED.search(message):
        return None
    named = [
        (m.start(), p)
        for p in _ADAPTABLE
        if p in sent and (m := re.search(rf"\b{p}\b", message)) is not None
    ]
    return min(named)[1] if named else None


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


def _rejects_logprobs(status: int, message: str) -> bool:
    """The endpoint refused the ``logprobs`` / ``top_logprobs`` parameters themselves."""
    return status in _REJECT_STATUSES and "logprob" in message.lower()


def _message(exc: openai.APIStatusError, secrets: Iterable[str]) -> str:
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


def _parse_body(content: bytes, content_type: str | None, secrets: Iterable[str]) -> _Envelope:
    """The chat-completion envelope of a 200 body.

    Raises:
        _BadBody: not JSON, not an object, or no ``choices`` list of choice objects. The detail
            names what was wrong and quotes the body (or its ``error.message``), redacted.
    """
    text = content[:_SCAN_LIMIT].decode("utf-8", "replace")
    kind = content_type.split(";")[0].strip() if content_type else "no content type"
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        raise _BadBody(
            f"the LLM endpoint answered 200 with a body that is not JSON ({kind}): "
            f"{redact(text, secrets) or '<empty>'}"
        ) from None
    if not isinstance(data, dict):
        kind = _JSON_TYPES.get(type(data), "value")
        raise _BadBody(
            f"the LLM endpoint answered 200 with a JSON {kind}, not a chat completion: "
            f"{redact(text, secrets)}"
        )
    try:
        return _Envelope.model_validate(data)
    except ValidationError as exc:
        err = data.get("error")
        said = err.get("message") if isinstance(err, dict) else err
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:3]
        )
        quoted = f"error: {said}" if said else problems
        raise _BadBody(
            "the LLM endpoint answered 200 with a body that is not a chat completion: "
            + redact(quoted, secrets)
        ) from None


def _reported_model(value: object, secrets: Iterable[str]) -> str | None:
    """The reply's ``model`` as text (redacted, capped), None when absent, blank or not a string."""
    if not isinstance(value, str) or not value.strip():
        return None
    return redact(value, secrets, limit=200)


def _completion(
    envelope: _Envelope, mode: str, attempts: int, secrets: Iterable[str]
) -> Completion:
    """The completion of a valid envelope: first choice's text, refusal (redacted) and usage."""
    usage = envelope.usage
    choice = envelope.choices[0] if envelope.choices else None
    message = choice.message if choice is not None else None
    refusal = message.refusal if message is not None else None
    return Completion(
        text=message.content if message is not None else None,
        refusal=redact(refusal, secrets) if refusal else None,
        finish_reason=choice.finish_reason if choice is not None else None,
        mode=mode,
        prompt_tokens=max(0, (usage.prompt_tokens if usage else None) or 0),
        completion_tokens=max(0, (usage.completion_tokens if usage else None) or 0),
        attempts=attempts,
        reported_model=_reported_model(envelope.model, secrets),
        logprobs=_logprobs(choice.logprobs if choice is not None else None),
    )


def _logprobs(block: object) -> TokenLogprobs | None:
    """The tokens of a choice's ``logprobs`` block (``{"content": [{"token", "logprob",
    "top_logprobs": [...]}]}``); None when absent or not that shape. Entries that are not
    token objects are skipped: the rest of the block still says what it says. Alternatives are
    read when their position is (:class:`TokenLogprobs`)."""
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list) or not content:
        return None
    entries: list[tuple[str, float, object]] = []
    for entry in content:
        if type(entry) is dict:
            # The common shape checked inline (a few hundred tokens a reply); NaN fails <= 0.
            token, logprob = entry.get("token"), entry.get("logprob")
            if type(token) is str and type(logprob) is float and logprob <= 0:
                entries.append((token, logprob, entry.get("top_logprobs")))
                continue
        pair = _token_pair(entry)
        if pair is not None:
            entries.append((pair[0], pair[1], entry.get("top_logprobs")))
    return TokenLogprobs(entries) if entries else None


def _token_pair(entry: object) -> tuple[str, float] | None:
    if not isinstance(entry, dict):
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if not isinstance(token, str) or isinstance(logprob, bool):
        return None
    if not isinstance(logprob, int | float) or logprob != logprob or logprob > 0:
        return None  # NaN or a positive log-probability is no probability
    return token, float(logprob)
