"""The values each metric label may take: fixed sets, bounded input values, buckets.

Label values come from configuration, never raw from input: an app that is not configured is
``unknown``; an agent not in ``known_agents`` is ``other``. Without that configuration the first
distinct values seen are used (``max_agents`` agents, ``max_apps`` apps), and only when they look
like labels (short, printable, ``[A-Za-z0-9._@:/-]``): a record cannot put a 10,000-character or
multi-line value into every scrape.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime

# Every 10 points plus the tier edges (50, 75, 90) and 85/95: coarser buckets (the tier edges
# alone) left histogram_quantile nothing to interpolate, so the dashboard's P90 was a flat line.
SCORE_BUCKETS = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 100.0)
CONFIDENCE_BUCKETS = (0.5, 0.65, 0.85, 1.0)
# LLM calls routinely take tens of seconds; the default buckets stop at 10 s.
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

# "internal_error": a record that made a stage raise; it went to the dead letters like invalid
# input (reason internal_error), and the command went on.
RECORD_OUTCOMES = ("evaluated", "judge_error", "skipped_sampling", "invalid", "internal_error")

# Why a record became a dead letter: the validation reasons (stef.stages.validate), a stage that
# raised (internal_error), a result or letter the sink refused (sink_rejected).
DEAD_LETTER_REASONS = (
    "not_utf8",
    "not_json",
    "not_object",
    "missing_field",
    "wrong_type",
    "too_large",
    "limits_exceeded",
    "unknown_dialect",
    "unreadable",
    "not_otlp",
    "trace_incomplete",
    "internal_error",
    "sink_rejected",
)
# Why a judge could not decide (JudgeError.reason); an HTTP status other than 429 is http_<code>.
JUDGE_ERROR_REASONS = (
    "timeout",
    "connection_error",
    "bad_response",
    "rate_limited",
    "empty_reply",
    "invalid_json",
    "invalid_reply",
    "truncated",
    "refused",
    "internal",
    "closed",
    "no_logprobs",
    "no_yes_no",
)
# How one LLM sample ended: a usable verdict, or a failure after its own retries and re-ask.
SAMPLE_OUTCOMES = ("answered", "failed")
# Distinct reported model names kept as labels; the endpoint chooses them, so they are bounded.
MAX_REPORTED_MODELS = 10
_HTTP_REASON = re.compile(r"http_[1-5][0-9][0-9]")
# How a canary run ended (stef.service.canary): every sampled record scored; the judge failed on
# some; the run could not judge at all (the file unreadable, an unexpected error).
CANARY_OUTCOMES = ("ok", "judge_error", "failed")
# Where a callback around an acknowledged record raised (stef.service.loop): the command's
# observer (replay's summary and progress), the source's done callback, the record's handling
# outside the pipeline (logging, sending).
CALLBACKS = ("observer", "source", "worker")
# The kinds of source whose commits (Kafka offsets, a followed file's checkpoint) can fail.
COMMIT_SOURCES = ("kafka", "file")

# What a label value taken from input, not from configuration, must look like to be used as is.
_SANE_LABEL = re.compile(r"[A-Za-z0-9._@:/-]{1,64}")


def sane_label(value: str) -> bool:
    """Short, printable, no spaces or quotes: fit for a label value nobody configured."""
    return _SANE_LABEL.fullmatch(value) is not None


class BoundedLabels:
    """The values one label may take when they come from input (apps, agents, model names).

    Configured values (``known``) are used as they are and any other value is ``overflow``;
    with nothing configured, the first ``limit`` label-like values seen are kept. Thread-safe.

    Args:
        limit: distinct values kept when none are configured.
        overflow: the label of every other value.
        known: the configured values; None: none configured.
    """

    def __init__(self, limit: int, overflow: str, known: Iterable[str] | None = None) -> None:
        self.known: set[str] | None = set(known) if known is not None else None
        self.limit = limit
        self.overflow = overflow
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if self.known is not None:
            return value if value in self.known else self.overflow
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit or not sane_label(value):
                return self.overflow
            self._seen.add(value)
            return value


class AppAgentLabels:
    """The app and agent labels of records: configured values, or the first label-like ones.

    Args:
        known_apps, known_agents: the configured values; None: none configured.
        max_apps, max_agents: distinct values kept when none are configured.
    """

    def __init__(
        self,
        known_apps: list[str] | None,
        known_agents: list[str] | None,
        max_apps: int,
        max_agents: int,
    ) -> None:
        self.apps = BoundedLabels(max_apps, "unknown", known_apps)
        self.agents = BoundedLabels(max_agents, "other", known_agents)

    def app(self, app: str | None) -> str:
        """The app's label: configured apps as they are, any other ``unknown``."""
        return "default" if app is None else self.apps(app)

    def agent(self, agent: str | None, version: str | None) -> str:
        """``agent@version``: when in ``known_agents``, or (none configured) among the first
        ``max_agents`` label-like values seen; any other agent is ``other``."""
        if agent is None:
            return "unknown"
        return self.agents(f"{agent}@{version}" if version else agent)


def judge_error_reason(error: str | None) -> str:
    """The bounded reason label of a result's ``error`` (``"<reason>: <detail>"``)."""
    reason = (error or "").split(":", 1)[0].strip()
    if reason in JUDGE_ERROR_REASONS or _HTTP_REASON.fullmatch(reason):
        return reason
    return "other"


def record_time(timestamp: str | None) -> float | None:
    """Unix seconds of a record's ISO 8601 timestamp (``Z`` or an offset; naive means UTC), or
    None when it is absent or not ISO 8601."""
    if not timestamp:
        return None
    try:
        when = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
