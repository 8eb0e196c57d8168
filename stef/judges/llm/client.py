"""The HTTP side of the LLM judge: one chat completion through the ``openai`` client, with our own
bounded retries and the ``json_schema`` -> ``json_object`` fallback.

The ``openai`` client's own retries are off (``max_retries=0``): retries here are counted, bounded
by count and by total time, logged and measured, and they honour ``Retry-After`` as a lower bound.
Errors of the ``openai`` package are translated into :class:`~stef.errors.LlmTransportError` where
they enter our code.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
import structlog

from stef.errors import ConfigError, LlmTransportError
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


@dataclass(frozen=True)
class Completion:
    """The text of one successful call and what the calls behind it cost.

    Attributes:
        text: the message content (None when the model sent none, e.g. a refusal).
        finish_reason: as the server reported it.
        mode: the response_format mode that produced it.
        prompt_tokens, completion_tokens: summed over every call that got a reply.
        attempts: HTTP calls made (retries and the fallback included).
    """

    text: str | None
    finish_reason: str | None
    mode: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int


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
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._lock = threading.Lock()
        # The structured-output mode this endpoint accepts; "auto" until the first answer.
        self._mode: str = config.response_format

    @property
    def mode(self) -> str:
        """``json_schema``, ``json_object``, or ``auto`` before the endpoint has answered."""
        with self._lock:
            return self._mode

    def _current_mode(self) -> str:
        mode = self.mode
        return "json_schema" if mode == "auto" else mode

    def close(self) -> None:
        self._client.close()

    def complete(self, build: Callable[[str], Messages]) -> Completion:
        """One chat completion.

        Args:
            build: the messages for a response_format mode (the ``json_object`` mode puts the
                schema in the prompt).

        Raises:
            LlmTransportError: every attempt failed, or the endpoint refused the request.
        """
        started = time.monotonic()
        attempts = retries = 0
        prompt_tokens = completion_tokens = 0
        mode = self._current_mode()
        fell_back = False
        while True:
            attempts += 1
            t0 = time.monotonic()
            try:
                with self._slots:
                    t0 = time.monotonic()
                    result = self._create(build(mode), mode)
            except openai.APIStatusError as exc:
                elapsed = time.monotonic() - t0
                status = exc.status_code
                if self._rejects_schema(exc, mode) and not fell_back:
                    # Not a retry: the same request in the mode the server may support.
                    self._observe("retry", elapsed)
                    log.warning(
                        "llm_json_schema_rejected",
                        status=status,
                        model=self.model,
                        fallback="json_object",
                    )
                    mode, fell_back = "json_object", True
                    continue
                retryable = status in _RETRY_STATUSES or status >= 500
                wait = retry_after_s(exc.response.headers) if retryable else None
                reason = "rate_limited" if status == 429 else f"http_{status}"
                detail = f"HTTP {status} from the LLM endpoint: {_message(exc)}"
                if not retryable:
                    self._observe("error", elapsed)
                    raise LlmTransportError(
                        reason, detail, attempts=attempts, status_code=status
                    ) from exc
                self._backoff_or_raise(
                    exc, reason, detail, retries, attempts, started, elapsed, wait, status
                )
                retries += 1
                continue
            except openai.APITimeoutError as exc:
                elapsed = time.monotonic() - t0
                detail = f"no answer within {self.config.timeout_s} s"
                self._backoff_or_raise(exc, "timeout", detail, retries, attempts, started, elapsed)
                retries += 1
                continue
            except openai.APIConnectionError as exc:
                elapsed = time.monotonic() - t0
                detail = f"cannot reach the LLM endpoint: {exc.__cause__ or exc}"
                self._backoff_or_raise(
                    exc, "connection_error", detail, retries, attempts, started, elapsed
                )
                retries += 1
                continue
            except openai.OpenAIError as exc:
                # A 200 whose body is not a chat completion, and anything else the client raises.
                elapsed = time.monotonic() - t0
                self._observe("error", elapsed)
                raise LlmTransportError(
                    "bad_response",
                    f"unusable answer from the LLM endpoint: {exc}",
                    attempts=attempts,
                ) from exc
            elapsed = time.monotonic() - t0
            usage = getattr(result, "usage", None)
            p = int(getattr(usage, "prompt_tokens", 0) or 0)
            c = int(getattr(usage, "completion_tokens", 0) or 0)
            prompt_tokens += p
            completion_tokens += c
            self._observe("ok", elapsed, p, c)
            self._settle_mode(mode)
            choices = getattr(result, "choices", None) or []
            if not choices:
                raise LlmTransportError(
                    "bad_response", "the LLM endpoint answered without choices", attempts=attempts
                )
            message = choices[0].message
            return Completion(
                text=message.content,
                finish_reason=choices[0].finish_reason,
                mode=mode,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                attempts=attempts,
            )

    # ------------------------------------------------------------------------------- internals

    def _create(self, messages: Messages, mode: str) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "response_format": response_format(mode),
        }
        if self.config.max_tokens is not None:
            kwargs["max_tokens"] = self.config.max_tokens
        return self._client.chat.completions.create(**kwargs)

    def _rejects_schema(self, exc: openai.APIStatusError, mode: str) -> bool:
        """The endpoint refused the structured-output request itself (not the call in general)."""
        if mode != "json_schema" or self.config.response_format != "auto":
            return False
        if exc.status_code in _REJECT_STATUSES:
            return True
        if exc.status_code < 500:
            return False
        # Some servers answer 500 to a schema they cannot compile. Until json_schema has worked
        # once on this endpoint, a 5xx is taken as that; afterwards only with a hint in the body.
        text = _message(exc).lower()
        return self.mode == "auto" or any(h in text for h in _REJECT_HINTS)

    def _settle_mode(self, mode: str) -> None:
        with self._lock:
            if self._mode == "auto" or (self._mode == "json_schema" and mode == "json_object"):
                if self._mode != mode:
                    log.info("llm_response_format", model=self.model, mode=mode)
                self._mode = mode

    def _backoff_or_raise(
        self,
        exc: Exception,
        reason: str,
        detail: str,
        retries: int,
        attempts: int,
        started: float,
        elapsed: float,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        """Sleep before the next attempt, or raise when the retry budget is spent."""
        cfg = self.config
        backoff = random.uniform(0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2**retries))
        wait = max(backoff, retry_after or 0.0)
        spent = time.monotonic() - started
        if retries >= cfg.max_retries or spent + wait > cfg.max_total_retry_s:
            self._observe("error", elapsed)
            budget = (
                f"{retries} retries"
                if retries >= cfg.max_retries
                else f"retry budget of {cfg.max_total_retry_s} s"
            )
            raise LlmTransportError(
                reason,
                f"{detail} (gave up after {attempts} attempts, {budget})",
                attempts=attempts,
                status_code=status,
            ) from exc
        self._observe("retry", elapsed)
        log.info(
            "llm_retry",
            model=self.model,
            reason=reason,
            attempt=attempts,
            wait_s=round(wait, 3),
            retry_after_s=retry_after,
        )
        self._sleep(wait)

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


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(exc.message)[:300]
