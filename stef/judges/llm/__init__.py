"""The LLM seam: the OpenAI-compatible judge backend and a scripted fake server for tests.

``build_llm_judge(LlmConfig.from_env(), metrics)`` gives the backend the CLI and the service use
when ``STEF_LLM_BASE_URL`` or ``STEF_LLM_API_KEY`` is set; :mod:`stef.testing.fake_server` is
the local server the tests and the benchmark point it at.
"""

from __future__ import annotations

from stef.errors import ConfigError
from stef.judges.llm.cache import JudgeCache
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.identity import ModelWatch
from stef.judges.llm.judge import LlmJudge
from stef.metrics import Metrics

_NO_MODEL = "STEF_LLM_MODEL is required when an LLM endpoint is configured"


def check_local(config: LlmConfig) -> None:
    """The LLM settings checks that need no network, run before the endpoint is checked: a
    settings error must not be reported as an unreachable endpoint (exit 2, not 3).

    Raises:
        ConfigError: no model name is configured, or the cache file is not a usable SQLite
            cache (it is created when absent, as the judge would).
    """
    if not config.model:
        raise ConfigError(_NO_MODEL)
    if config.cache_path is not None:
        JudgeCache(0, config.cache_path).close()


def build_llm_judge(
    config: LlmConfig, metrics: Metrics | None = None, *, model_watch: ModelWatch | None = None
) -> LlmJudge:
    """The LLM judge for ``config``; templates are compiled here, at start, and the endpoint is
    checked for what the verdict mode needs (:meth:`LlmJudge.preflight`). ``model_watch``:
    another judge's reported-model watch to share (see :class:`LlmJudge`).

    Raises:
        ConfigError: no model name is configured, or probability mode on an endpoint that
            sends no log-probabilities.
        TemplateError: a prompt template is missing or does not compile.
    """
    if not config.model:
        raise ConfigError(_NO_MODEL)
    judge = LlmJudge(config, metrics, model_watch=model_watch)
    try:
        judge.preflight()
    except BaseException:
        judge.close()
        raise
    return judge


__all__ = ["LlmConfig", "LlmJudge", "build_llm_judge", "check_local"]
