"""The preflight check of an LLM endpoint: one request before any record is read, so a wrong key,
URL or server fails the command at start with its reason, not every record as a judge error.

The check asks for the models list (``GET {base_url}/models``, served by OpenAI, Azure's v1 API,
vLLM, Ollama and LiteLLM); an endpoint without one (404, 405) gets a one-token chat completion
instead, which tells a missing route (a base URL without its ``/v1``) from a server that only
lists no models. A model the list does not name is reported, not refused: gateways list base
models under other names (Azure lists models, not deployments).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai

try:  # the transport under openai >= 3
    import httpx2 as _http
    from httpx2 import Response as _HttpResponse
except ImportError:  # pragma: no cover - earlier openai releases run on httpx
    import httpx as _http  # type: ignore[no-redef,import-not-found,unused-ignore]
    from httpx import Response as _HttpResponse  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]

from stef.errors import EndpointError
from stef.judges.llm.client import _message
from stef.judges.llm.config import LlmConfig
from stef.redact import redact

# The check waits at most this long for an answer (a record's call may take the full timeout_s),
# and for its body once the headers came, however slowly it trickles.
CHECK_TIMEOUT_S = 10.0
# The most of an answer the check reads: a models list of thousands of models is far less. An
# answer without end filled memory at the rate it came (2.2 GB in 6 s), deaf to SIGTERM.
MAX_CHECK_BYTES = 4 * 1024 * 1024
# Statuses meaning "this route does not exist here", not "the endpoint is broken".
_NO_ROUTE = frozenset({404, 405, 501})
DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Checked:
    """A passed check.

    Attributes:
        url: the base URL checked.
        how: ``models`` (the models list answered) or ``chat`` (a one-token completion did).
        models: the model ids listed (empty for ``chat``).
        model_listed: the configured model is among them; None when there was no list.
    """

    url: str
    how: str
    models: tuple[str, ...]
    model_listed: bool | None

    def describe(self) -> str:
        """One line for ``stef check`` and the start log."""
        if self.how == "chat":
            return f"{self.url}: ok (answered a one-token chat completion)"
        listed = f"{len(self.models)} model{'' if len(self.models) == 1 else 's'} listed"
        if self.model_listed is False:
            shown = ", ".join(self.models[:5]) + (" ..." if len(self.models) > 5 else "")
            return (
                f"{self.url}: ok, but its models list does not name the configured model "
                f"({listed}: {shown})"
            )
        if not self.models:
            return f"{self.url}: ok (an empty models list)"
        return f"{self.url}: ok ({listed}, the configured one among them)"


def check_endpoint(config: LlmConfig) -> Checked:
    """Check that the endpoint answers and accepts the key.

    Raises:
        EndpointError: no answer (connection refused, DNS, TLS, timeout), or a non-2xx status
            other than a missing models route (401 wrong key, 403, 429 no quota, 5xx), or no
            chat-completions route either. The message is the endpoint's own, redacted.
    """
    url = config.base_url or DEFAULT_BASE_URL
    key = config.api_key.get_secret_value() if config.api_key is not None else ""
    secrets = (key,) if key else ()
    timeout = min(config.timeout_s, CHECK_TIMEOUT_S)

    def bounded(response: Any) -> None:
        """Before the body is read: read it within the bounds."""
        response.stream = _BoundedStream(response.stream, timeout)

    client = openai.OpenAI(
        api_key=key or "none",
        base_url=url,
        organization=None,
        project=None,
        timeout=timeout,
        max_retries=0,
        http_client=_http.Client(follow_redirects=True, event_hooks={"response": [bounded]}),
    )
    try:
        try:
            raw = client.get("/models", cast_to=_HttpResponse)
        except openai.APIStatusError as exc:
            if exc.status_code not in _NO_ROUTE:
                raise
            return _chat_check(client, config, url)
        models = _model_ids(raw.content)
        if models is None:
            raise EndpointError(url, raw.status_code, _not_openai(raw.content))
        listed = None if not models else (config.model in models)
        return Checked(url=url, how="models", models=models, model_listed=listed)
    except openai.APIStatusError as exc:
        raise EndpointError(url, exc.status_code, _message(exc, secrets)) from None
    except openai.APITimeoutError:
        raise EndpointError(url, None, f"no answer within {client.timeout} s") from None
    except _Unbounded as exc:  # the body is read outside openai's own error handling
        raise EndpointError(url, None, str(exc)) from None
    except openai.APIConnectionError as exc:
        cause = redact(exc.__cause__ or exc, secrets)
        raise EndpointError(url, None, f"cannot connect: {cause}") from None
    except openai.OpenAIError as exc:
        raise EndpointError(url, None, f"unusable answer: {redact(exc, secrets)}") from None
    finally:
        client.close()


class _Unbounded(Exception):
    """An answer larger than :data:`MAX_CHECK_BYTES`, or still arriving the check's timeout
    after its headers."""


class _BoundedStream(_http.SyncByteStream):
    def __init__(self, inner: Any, timeout_s: float) -> None:
        self._inner = inner
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for chunk in self._inner:
            size += len(chunk)
            if size > MAX_CHECK_BYTES:
                raise _Unbounded(f"answered more than {MAX_CHECK_BYTES:,} bytes to the check")
            if time.monotonic() > self._deadline:
                raise _Unbounded(
                    f"its answer was still arriving {self._timeout_s:g} s after its headers"
                )
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _not_openai(content: bytes) -> str:
    start = content[:60].decode("utf-8", "replace").strip().replace("\n", " ")
    return (
        f"/models answered something that is not an OpenAI models list ({start!r}...); "
        "is the base URL the API's (often ending in /v1), not a web page's?"
    )


def _chat_check(client: openai.OpenAI, config: LlmConfig, url: str) -> Checked:
    """A one-token completion: any answer but a missing route shows the chat API is there (a 400
    about a parameter is the judge client's to adapt to, not a broken endpoint)."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
    }
    try:
        client.post("/chat/completions", cast_to=_HttpResponse, body=body)
    except openai.APIStatusError as exc:
        if exc.status_code in _NO_ROUTE:
            raise EndpointError(
                url,
                exc.status_code,
                "neither /models nor /chat/completions is served here "
                "(does the base URL end in /v1?)",
            ) from None
        if exc.status_code not in (400, 422):
            raise
    return Checked(url=url, how="chat", models=(), model_listed=None)


def _model_ids(content: bytes) -> tuple[str, ...] | None:
    """The ids of an OpenAI-style models list; None when the body is not one (an HTML page: a
    base URL that points at a web server, not at the API)."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return tuple(str(m["id"]) for m in items if isinstance(m, dict) and "id" in m)
