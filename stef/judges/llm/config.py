"""Settings of the LLM judge backend: endpoint, model, retry and concurrency bounds, prices, cache.

Read from the environment (``STEF_LLM_*``) once at start, validated, frozen. The API key is a
``SecretStr``: it is sent only as the ``Authorization`` header and never logged or printed.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from stef.errors import ConfigError, FileError
from stef.files import read_bounded

ResponseFormatMode = Literal["auto", "json_schema", "json_object"]
ReasoningEffort = Literal["minimal", "low", "medium", "high"]
TokenParam = Literal["auto", "max_tokens", "max_completion_tokens"]

# How the LLM gives its verdict (docs/llm.md, "Verdict modes"): the structured reply, one
# Yes/No token read as P(Yes), or the deterministic judge first and the LLM only where it is unsure.
VerdictMode = Literal["structured", "probability", "cascade"]


# The environment variable of each field, for from_env and for its error messages: STEF_LLM_<FIELD>
# (_ENV_VARS, derived from the model below) but for these, and none for the retry backoff (the
# tests shorten it).
_OWN_VARIABLES = {"cache_path": "STEF_LLM_CACHE"}
_NO_VARIABLE = frozenset({"backoff_base_s", "backoff_max_s"})

# Process settings (``llm_requests_per_s``, ``llm_tokens_per_min``: per-replica budgets that apply
# to any backend) whose variables share the prefix; they are not LlmConfig's.
PROCESS_LLM_VARIABLES = frozenset({"STEF_LLM_REQUESTS_PER_S", "STEF_LLM_TOKENS_PER_MIN"})

# A secret file larger than this is not a key (a wrong path to a log or a binary).
_SECRET_FILE_LIMIT = 64 * 1024


class ModelPrice(BaseModel):
    """US dollars per one million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)


class _Across(ValueError):
    """A check across settings that fails: ``field`` is the one its message is about, whose
    variable the error names."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class LlmConfig(BaseModel):
    """How to reach the judge model.

    Attributes:
        base_url: the OpenAI-compatible endpoint (``.../v1``); None means api.openai.com.
        api_key: bearer token; optional for local servers (vLLM, Ollama).
        model: the model name the endpoint serves.
        timeout_s: per HTTP request: the connect, each read and each write; and the whole
            answer, its body read as it arrives, within this long of sending the request.
        max_reply_bytes: the largest answer read (after its content encoding); a 200 past it
            is a ``bad_response``, an error's body is cut there.
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
        cache_path: optional SQLite file shared across runs (``STEF_LLM_CACHE``; ``cache`` or
            ``cache_path`` in a config file).
        cache_size: entries in the in-process LRU cache (0 disables it).
        samples: how many times the model is asked per record; the majority verdict decides and
            the share of samples that agree scales the confidence (docs/llm.md, "Samples").
        second_opinion: the heuristic judge also judges every record the LLM judged; its
            verdict is kept in the result and disagreements are counted.
        api_key_file: read the key from this file (a mounted secret, ``/run/secrets/...``) at
            start, into ``api_key`` (this field is then None); its surrounding whitespace is
            dropped. Exclusive with ``api_key``.
        reasoning_effort: sent as ``reasoning_effort`` (reasoning models: GPT-5, o-series);
            None: not sent.
        token_param: the name of the completion cap in the request: ``auto`` sends
            ``max_completion_tokens`` to GPT-5 and o-series models and ``max_tokens`` to others,
            and switches once when the server names the one it rejects.
        preflight: ``replay``, ``run``, ``backfill`` and ``calibrate`` check the endpoint once
            (its models list) before reading any record, and stop when it is unusable.
        few_shot: labelled examples of the record's app shown in each prompt, the ones the
            judge got wrong first (:mod:`stef.judges.llm.examples`); 0: none.
        few_shot_file: the labelled examples (``stef canary add`` writes them from review
            labels); read once at start. Required when ``few_shot`` is above 0.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    timeout_s: float = Field(60.0, gt=0)
    max_reply_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_retries: int = Field(4, ge=0, le=20)
    max_total_retry_s: float = Field(120.0, ge=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    max_concurrency: int = Field(8, ge=1, le=1024)
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(1024, ge=1)
    response_format: ResponseFormatMode = "auto"
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # ``cache`` as well: a config file's keys are the STEF_LLM_* names, lower-case.
    cache_path: Path | None = Field(None, validation_alias=AliasChoices("cache_path", "cache"))
    cache_size: int = Field(10_000, ge=0)
    samples: int = Field(1, ge=1, le=15)
    second_opinion: bool = True
    api_key_file: Path | None = None
    reasoning_effort: ReasoningEffort | None = None
    token_param: TokenParam = "auto"
    preflight: bool = True

    @model_validator(mode="before")
    @classmethod
    def _key_from_file(cls, data: Any) -> Any:
        """``api_key_file`` read into ``api_key`` at start, so a secret need not sit in the
        environment; a file that cannot be read is a settings error naming the file."""
        if not isinstance(data, dict) or not data.get("api_key_file"):
            return data
        if data.get("api_key"):
            raise _Across("api_key_file", "give api_key or api_key_file, not both")
        # The path is not kept: the key is what the rest of STEF reads, and a merge of file and
        # environment settings must not see both.
        rest = {k: v for k, v in data.items() if k != "api_key_file"}
        return {**rest, "api_key": read_secret_file(str(data["api_key_file"]))}

    @field_validator("api_key")
    @classmethod
    def _one_line_key(cls, value: SecretStr | None) -> SecretStr | None:
        # A key with a line break cannot go in a header: every call would fail, and the HTTP
        # library's error quotes the header (the key) at debug level. Refused at start.
        if value is not None and any(
            ord(c) < 32 or ord(c) == 127 for c in value.get_secret_value()
        ):
            raise ValueError("contains a line break or a control character (a key is one line)")
        # Nor can a character outside ASCII: the HTTP library fails every call (the endpoint
        # check at start with a traceback). The message never shows the key.
        if value is not None and not value.get_secret_value().isascii():
            raise ValueError("contains a character outside ASCII (an HTTP header cannot carry it)")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        parts = urlsplit(value)
        # "localhost:8000/v1" parses as scheme "localhost": every record would then fail with a
        # connection error after five retries; say it once, at start.
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"must be an http:// or https:// URL with a host, e.g. http://{value}"
                if "://" not in value
                else "must be an http:// or https:// URL with a host"
            )
        return value

    verdict: VerdictMode = "structured"
    top_logprobs: int = Field(10, ge=0, le=20)
    few_shot: int = Field(0, ge=0, le=20)
    few_shot_file: Path | None = None

    @field_validator("few_shot", mode="before")
    @classmethod
    def _count_not_flag(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a number of examples (0-20), not true or false")
        return value

    @field_validator("few_shot_file", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _few_shot_needs_a_file(self, info: ValidationInfo) -> LlmConfig:
        # The environment alone may leave the file to the config file: checked once merged.
        partial = isinstance(info.context, dict) and info.context.get("partial")
        if self.few_shot > 0 and self.few_shot_file is None and not partial:
            raise _Across(
                "few_shot",
                f"few_shot {self.few_shot} needs few_shot_file: the labelled examples to show "
                "(stef canary add --canary FILE writes them from review labels)",
            )
        return self

    @model_validator(mode="after")
    def _probability_needs(self) -> LlmConfig:
        if self.verdict == "probability" and self.top_logprobs < 2:
            raise _Across(
                "verdict", "verdict probability reads P(Yes) and P(No): top_logprobs >= 2"
            )
        if self.verdict == "probability" and self.samples > 1:
            raise _Across(
                "verdict", "verdict probability reads P(Yes) from one call: samples must be 1"
            )
        return self

    @property
    def configured(self) -> bool:
        """An endpoint is configured: the LLM backend runs instead of the heuristic one."""
        return bool(self.base_url) or (
            self.api_key is not None and bool(self.api_key.get_secret_value())
        )

    @property
    def record_budget_s(self) -> float:
        """The longest one record's judgment can take, retries and waits included.

        One HTTP attempt waits at most ``timeout_s`` for a concurrency slot, then at most
        ``timeout_s`` for the answer. One call makes ``1 + max_retries`` attempts with a backoff
        of at most ``backoff_max_s`` between them, and starts no retry after
        ``max_total_retry_s``. A sample is a call and at most one re-ask; samples run one after
        the other.
        """
        attempt = 2 * self.timeout_s
        call = min(
            (self.max_retries + 1) * attempt + self.max_retries * self.backoff_max_s,
            self.max_total_retry_s + attempt,
        )
        return self.samples * 2 * call

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for one call, or None when the model has no price."""
        price = self.prices.get(model)
        if price is None:
            return None
        return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, partial: bool = False) -> LlmConfig:
        """Settings from ``STEF_LLM_*`` variables.

        ``STEF_LLM_BASE_URL``, ``STEF_LLM_API_KEY``, ``STEF_LLM_MODEL``, ``STEF_LLM_TIMEOUT_S``,
        ``STEF_LLM_MAX_REPLY_BYTES``,
        ``STEF_LLM_MAX_RETRIES``, ``STEF_LLM_MAX_TOTAL_RETRY_S``, ``STEF_LLM_MAX_CONCURRENCY``,
        ``STEF_LLM_MAX_TOKENS``, ``STEF_LLM_RESPONSE_FORMAT``, ``STEF_LLM_CACHE`` (SQLite path),
        ``STEF_LLM_CACHE_SIZE``, ``STEF_LLM_PRICES`` (JSON: ``{"model": {"prompt": 0.15,
        "completion": 0.6}}``), ``STEF_LLM_TEMPERATURE``, ``STEF_LLM_SAMPLES``,
        ``STEF_LLM_SECOND_OPINION`` (``true``/``false``), ``STEF_LLM_VERDICT``,
        ``STEF_LLM_TOP_LOGPROBS``, ``STEF_LLM_FEW_SHOT``, ``STEF_LLM_FEW_SHOT_FILE``.
        Empty values count as unset.

        Args:
            env: the variables (default ``os.environ``).
            partial: the variables are one part of the settings (a config file gives the rest):
                the checks that need a setting the variables do not give wait for the merge.

        Raises:
            ConfigError: a value does not validate (the message names the variable, not the key).
        """
        source = os.environ if env is None else env
        check_env_names(source)
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
                except (ValueError, RecursionError) as exc:  # a huge integer, a deep nesting
                    raise ConfigError(f"{var} is not a prices object: {_why(exc)}") from exc
            else:
                data[field] = value
        try:
            return cls.model_validate(data, context={"partial": partial})
        except ValidationError as exc:
            problems = "; ".join(
                f"{_variable(e['loc'], e.get('ctx'))}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"invalid LLM settings: {problems}") from exc


_ENV_VARS = {
    name: _OWN_VARIABLES.get(name, f"STEF_LLM_{name.upper()}")
    for name in LlmConfig.model_fields
    if name not in _NO_VARIABLE
}


def _why(exc: ValueError | RecursionError) -> str:
    """What is wrong with a JSON value that parses but cannot be held (our words, not Python's)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return "a number with too many digits"


def _variable(loc: tuple[int | str, ...], ctx: Mapping[str, Any] | None) -> str:
    """The variable of a validation error: its location's, or for a check across fields (no
    location) the one it names. Any other is the key file's (its errors name the file)."""
    if loc:
        return _ENV_VARS.get(str(loc[0]), str(loc[0]))
    error = (ctx or {}).get("error")
    return _ENV_VARS[error.field if isinstance(error, _Across) else "api_key_file"]


def check_env_names(source: Mapping[str, str]) -> None:
    """Every ``STEF_LLM_*`` name is one this module reads: a misspelt one (``STEF_LLM_BASEURL``)
    would otherwise leave the endpoint unset and swap the LLM judge for the heuristic one.

    Raises:
        ConfigError: names every unknown variable, with the nearest known name.
    """
    known = set(_ENV_VARS.values()) | PROCESS_LLM_VARIABLES
    unknown = sorted(n for n in source if n.startswith("STEF_LLM_") and n not in known)
    if not unknown:
        return
    said = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        said.append(f"{name} (did you mean {near[0]}?)" if near else name)
    raise ConfigError(
        f"unknown LLM variable{'s' if len(unknown) > 1 else ''} {', '.join(said)}; "
        f"the STEF_LLM_* variables are {', '.join(sorted(known))}"
    )


def read_secret_file(path: str) -> str:
    """The secret in a file (a Kubernetes or Docker secret), without surrounding whitespace.

    The file type is checked before it is opened: a FIFO would block the start for ever.

    Raises:
        ValueError: not a regular file, unreadable, too large, not UTF-8, or empty (the
            message names the file, never its content).
    """
    try:
        raw = read_bounded(path, _SECRET_FILE_LIMIT)
    except FileError as exc:
        raise ValueError(str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # not located: the message never shows a byte of a secret
        raise ValueError(f"{path}: not UTF-8 text") from None
    if not text.strip():
        raise ValueError(f"{path}: empty")
    return text.strip()
