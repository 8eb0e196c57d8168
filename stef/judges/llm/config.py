"""Settings of the LLM judge backend: endpoint, model, retry and concurrency bounds, prices, cache.

Read from the environment (``STEF_LLM_*``) once at start, validated, frozen. The API key is a
``SecretStr``: it is sent only as the ``Authorization`` header and never logged or printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from stef.errors import ConfigError

ResponseFormatMode = Literal["auto", "json_schema", "json_object"]
# How the LLM gives its verdict (docs/llm.md, "Verdict modes"): the structured reply, one
# Yes/No token read as P(Yes), or the deterministic judge first and the LLM only where it is unsure.
VerdictMode = Literal["structured", "probability", "cascade"]


# The environment variable of each field, for from_env and for its error messages.
_ENV_VARS = {
    "base_url": "STEF_LLM_BASE_URL",
    "api_key": "STEF_LLM_API_KEY",
    "model": "STEF_LLM_MODEL",
    "timeout_s": "STEF_LLM_TIMEOUT_S",
    "max_retries": "STEF_LLM_MAX_RETRIES",
    "max_total_retry_s": "STEF_LLM_MAX_TOTAL_RETRY_S",
    "max_concurrency": "STEF_LLM_MAX_CONCURRENCY",
    "max_tokens": "STEF_LLM_MAX_TOKENS",
    "response_format": "STEF_LLM_RESPONSE_FORMAT",
    "cache_path": "STEF_LLM_CACHE",
    "cache_size": "STEF_LLM_CACHE_SIZE",
    "prices": "STEF_LLM_PRICES",
    "temperature": "STEF_LLM_TEMPERATURE",
    "samples": "STEF_LLM_SAMPLES",
    "second_opinion": "STEF_LLM_SECOND_OPINION",
    "verdict": "STEF_LLM_VERDICT",
    "top_logprobs": "STEF_LLM_TOP_LOGPROBS",
}


class ModelPrice(BaseModel):
    """US dollars per one million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)


class LlmConfig(BaseModel):
    """How to reach the judge model.

    Attributes:
        base_url: the OpenAI-compatible endpoint (``.../v1``); None means api.openai.com.
        api_key: bearer token; optional for local servers (vLLM, Ollama).
        model: the model name the endpoint serves.
        timeout_s: per HTTP request.
        max_retries: retries after the first call on timeouts, connection errors, 408/409/429/5xx.
        max_total_retry_s: no retry starts after this many seconds since the first call.
        backoff_base_s: first backoff; doubles per retry, with full jitter, capped at
            ``backoff_max_s``; a server's Retry-After is a lower bound.
        max_concurrency: HTTP calls in flight at once from this process.
        temperature: 0 for repeatable verdicts; above 0 when ``samples`` > 1 (at 0 the samples
            are the same answer N times).
        max_tokens: completion cap per call (None: the server's default). The default 1024 is
            five times a typical reply and stops a model that loops before the HTTP timeout.
        response_format: ``auto`` tries strict ``json_schema`` and falls back once to
            ``json_object`` when the endpoint rejects it; the other values force one mode.
        prices: per model, dollars per 1M prompt and completion tokens.
        cache_path: optional SQLite file shared across runs.
        cache_size: entries in the in-process LRU cache (0 disables it).
        samples: how many times the model is asked per record; the majority verdict decides and
            the share of samples that agree scales the confidence (docs/llm.md, "Samples").
        second_opinion: the heuristic judge also judges every record the LLM judged; its
            verdict is kept in the result and disagreements are counted.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    max_total_retry_s: float = Field(120.0, ge=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    max_concurrency: int = Field(8, ge=1, le=1024)
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(1024, ge=1)
    response_format: ResponseFormatMode = "auto"
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    cache_path: Path | None = None
    cache_size: int = Field(10_000, ge=0)
    samples: int = Field(1, ge=1, le=15)
    second_opinion: bool = True
    verdict: VerdictMode = "structured"
    top_logprobs: int = Field(10, ge=0, le=20)

    @model_validator(mode="after")
    def _probability_needs(self) -> LlmConfig:
        if self.verdict == "probability" and self.top_logprobs < 2:
            raise ValueError("verdict probability reads P(Yes) and P(No): top_logprobs >= 2")
        if self.verdict == "probability" and self.samples > 1:
            raise ValueError("verdict probability reads P(Yes) from one call: samples must be 1")
        return self

    @property
    def configured(self) -> bool:
        """An endpoint is configured: the LLM backend runs instead of the heuristic one."""
        return bool(self.base_url) or (
            self.api_key is not None and bool(self.api_key.get_secret_value())
        )

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for one call, or None when the model has no price."""
        price = self.prices.get(model)
        if price is None:
            return None
        return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LlmConfig:
        """Settings from ``STEF_LLM_*`` variables.

        ``STEF_LLM_BASE_URL``, ``STEF_LLM_API_KEY``, ``STEF_LLM_MODEL``, ``STEF_LLM_TIMEOUT_S``,
        ``STEF_LLM_MAX_RETRIES``, ``STEF_LLM_MAX_TOTAL_RETRY_S``, ``STEF_LLM_MAX_CONCURRENCY``,
        ``STEF_LLM_MAX_TOKENS``, ``STEF_LLM_RESPONSE_FORMAT``, ``STEF_LLM_CACHE`` (SQLite path),
        ``STEF_LLM_CACHE_SIZE``, ``STEF_LLM_PRICES`` (JSON: ``{"model": {"prompt": 0.15,
        "completion": 0.6}}``), ``STEF_LLM_TEMPERATURE``, ``STEF_LLM_SAMPLES``,
        ``STEF_LLM_SECOND_OPINION`` (``true``/``false``), ``STEF_LLM_VERDICT``,
        ``STEF_LLM_TOP_LOGPROBS``. Empty values count as unset.

        Raises:
            ConfigError: a value does not validate (the message names the variable, not the key).
        """
        source = os.environ if env is None else env
        data: dict[str, object] = {}
        for field, var in _ENV_VARS.items():
            value = source.get(var, "").strip()
            if not value:
                continue
            if field == "prices":
                try:
                    data[field] = json.loads(value)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{var} is not valid JSON: {exc.msg}") from exc
            else:
                data[field] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{_ENV_VARS.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else 'STEF_LLM_*'}: "
                f"{e['msg']}"
                for e in exc.errors()
            )
            raise ConfigError(f"invalid LLM settings: {problems}") from exc
