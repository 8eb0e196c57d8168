"""The LLM judge backend (SPEC §2 "Judge"): an OpenAI-compatible endpoint asked about each record.

:class:`LlmJudge` builds what both verdict modes share (:class:`~stef.judges.llm.parts.JudgeParts`:
the client, prompts, cache, model watch and few-shot examples) and hands each record to its mode:
:class:`~stef.judges.llm.structured.StructuredJudge` (one structured chat completion, re-asked
once, voted over ``llm.samples``) or, with ``llm.verdict: probability``,
:class:`~stef.judges.llm.probability_judge.ProbabilityJudge` (one Yes/No token; P(Yes) decides).
What a record's calls cost is kept in a :class:`~stef.judges.llm.ledger.Ledger`.

:meth:`LlmJudge.judge` raises nothing but :class:`~stef.errors.JudgeError`: whatever the endpoint
answers becomes a reply or a reason, and a bug of ours becomes reason ``internal``, so one
record's failure is that record's ``judge_error`` result and never aborts a replay.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import structlog

from stef.errors import ConfigError, JudgeError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.llm import examples as few_shot
from stef.judges.llm.cache import JudgeCache
from stef.judges.llm.client import ChatClient, Messages
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.hooks import Attempt, Hooks
from stef.judges.llm.identity import ModelWatch
from stef.judges.llm.ledger import Ledger
from stef.judges.llm.parts import JudgeParts
from stef.judges.llm.probability import TEMPLATES
from stef.judges.llm.probability_judge import ProbabilityJudge
from stef.judges.llm.reply import reply_schema
from stef.judges.llm.structured import StructuredJudge, prompt_context
from stef.metrics import Metrics
from stef.models import JudgeInfo
from stef.prompts import Prompts
from stef.redact import redact

log = structlog.get_logger(__name__)

BACKEND = "llm"


class LlmJudge:
    """The :class:`~stef.judges.base.Judge` backed by an OpenAI-compatible endpoint. Thread-safe.

    Args:
        config: endpoint and bounds.
        metrics: optional; LLM calls, tokens, cost and cache hits are observed.
        prompts_dir: template folder (default ``prompts/`` or ``$STEF_PROMPTS_DIR``).
        sleep: how to wait between retries.
        model_watch: the reported-model watch to report to; None makes this judge's own. A
            second judge of the same endpoint (the canary's) shares the first one's, so a swap
            is seen once, in the order the replies came.
        mode: ``structured`` or ``probability``; None: ``config.verdict`` (``cascade`` asks
            the model in structured mode; the cascade itself decides which records reach it).

    Attributes:
        hooks: the observers of this judge's calls (:mod:`stef.judges.llm.hooks`): the metrics
            and the model watch first; add more before the first record.

    Raises:
        TemplateError: a template is missing or does not compile (at construction, not per record).
    """

    def __init__(
        self,
        config: LlmConfig,
        metrics: Metrics | None = None,
        *,
        prompts_dir: str | Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
        model_watch: ModelWatch | None = None,
        mode: str | None = None,
    ) -> None:
        self.config = config
        self.mode = mode or ("probability" if config.verdict == "probability" else "structured")
        if self.mode not in ("structured", "probability"):
            raise ConfigError(f"unknown LLM verdict mode {self.mode!r}")
        schema_json = json.dumps(reply_schema(), sort_keys=True)
        self.prompts = Prompts.load(prompts_dir, extra_version=schema_json)
        examples = few_shot.load_configured(self.prompts, config.few_shot, config.few_shot_file)
        # A judge shown examples is another judge (its calibration is its own): k and the
        # examples template are in its prompt version; without them the version is as before.
        # Which examples a record saw is in its result (judge.examples).
        version = self.prompts.version
        if examples is not None:
            version = self.prompts.digest(few_shot.TEMPLATE, f"few_shot={config.few_shot}")
        # The system prompt is static per mode: render both once.
        system = {
            "json_schema": self.prompts.render("system.j2", schema_json=""),
            "json_object": self.prompts.render("system.j2", schema_json=schema_json),
        }
        self.hooks = Hooks()
        if metrics is not None:
            self.hooks.attempts.append(_metered(metrics))
        self._client = ChatClient(config, hooks=self.hooks, sleep=sleep)
        cache = JudgeCache(
            config.cache_size,
            config.cache_path,
            on_failure=metrics.observe_cache_failure if metrics is not None else None,
        )
        if self.mode == "probability":
            self.prompts.require(*TEMPLATES)
        info = JudgeInfo(
            backend=BACKEND, model=config.model, prompt_version=version, mode=self.mode
        )
        self._closed = threading.Event()
        watch = model_watch or ModelWatch(config.model or "", metrics)
        self.hooks.completions.append(lambda c: watch.observe(c.reported_model))
        if metrics is not None:
            metrics.prime_model(config.model or "")
        self._parts = JudgeParts(
            config, metrics, self.prompts, self._client, cache, watch, info, examples, self.hooks
        )
        self._structured = StructuredJudge(self._parts, system)
        self._probability = ProbabilityJudge(self._parts)
        if config.samples > 1 and config.temperature == 0:
            # Not an error: the vote still runs, but every sample is the same answer.
            log.warning(
                "llm_samples_at_temperature_zero",
                model=config.model,
                samples=config.samples,
                hint="set llm.temperature above 0, or the samples cannot disagree",
            )

    @property
    def info(self) -> JudgeInfo:
        return self._parts.info

    @property
    def response_mode(self) -> str:
        """The structured-output mode this endpoint settled on (``auto`` before the first call)."""
        return self._client.mode

    @property
    def cache(self) -> JudgeCache:
        return self._parts.cache

    @property
    def model_watch(self) -> ModelWatch:
        """The reported-model watch of this judge's configured model."""
        return self._parts.watch

    def preflight(self) -> None:
        """Check, with one call of one token, that the endpoint can serve this judge's mode.

        Structured mode needs nothing checked. Probability mode needs log-probabilities
        (:meth:`ProbabilityJudge.preflight`).

        Raises:
            ConfigError: probability mode, and the endpoint sent no log-probabilities.
        """
        if self.mode == "probability":
            self._probability.preflight()

    def close(self) -> None:
        """Close the HTTP connection pool and the cache file. Idempotent; later calls of
        :meth:`judge` raise ``JudgeError("closed")``."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._client.close()
        self._parts.cache.close()

    def __enter__(self) -> LlmJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ judge

    def messages(self, request: JudgeRequest, mode: str = "json_schema") -> Messages:
        """The system and user messages for one request (structured mode)."""
        return self._structured.messages(request, mode)

    def request_body(self, request: JudgeRequest) -> bytes:
        """The body of the structured request this judge sends for ``request`` (the first call,
        before any re-ask): what ``bench/llm.py``'s plain client sends."""
        return self._structured.request_body(request)

    def probability_messages(self, request: JudgeRequest) -> Messages:
        """The system and user messages of one request in probability mode."""
        return self._probability.messages(request)

    def judge(self, request: JudgeRequest) -> JudgeReply:
        """Judge one record.

        Raises:
            LlmTransportError: the endpoint kept failing past the retry budget (``timeout``,
                ``connection_error``, ``rate_limited``, ``http_<status>``, ``bad_response``).
            LlmReplyError: the model refused (``refused``), or its reply was still empty
                (``empty_reply``), cut off (``truncated``), not JSON (``invalid_json``) or not
                valid (``invalid_reply``) after one re-ask.
            JudgeError: ``closed`` after :meth:`close`; ``internal`` for any other exception,
                translated here so that nothing else leaves a backend.
        """
        if self._closed.is_set():
            raise JudgeError("closed", "the LLM judge is closed", attempts=0)
        ledger = Ledger()
        try:
            if self.mode == "probability":
                return self._probability.judge(request, ledger)
            return self._structured.judge(request, ledger)
        except JudgeError:
            raise
        except Exception as exc:
            attempts = ledger.attempts
            summary = f"{type(exc).__name__}: {redact(exc, self._client.secrets)}"
            frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "unknown"
            log.error(
                "llm_judge_internal_error",
                model=self.config.model,
                error=summary,
                where=where,
                attempts=attempts,
            )
            raise JudgeError("internal", summary, attempts=attempts) from exc


def _metered(metrics: Metrics) -> Callable[[Attempt], None]:
    """The metrics' observer of each HTTP attempt."""

    def observe(a: Attempt) -> None:
        metrics.observe_llm_call(
            a.model,
            a.outcome,
            a.seconds,
            prompt_tokens=a.prompt_tokens,
            completion_tokens=a.completion_tokens,
            cost_usd=a.cost_usd,
        )

    return observe


__all__ = ["BACKEND", "LlmJudge", "prompt_context"]
