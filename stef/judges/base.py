"""The judge seam: what every backend (LLM or heuristic) receives and must return (SPEC §2)."""

from __future__ import annotations

from typing import Protocol

from stef.models import JudgeInfo
from stef.request import JudgeReply, JudgeRequest

# The request and the reply live in stef.request, below the stages that read them (verify).
__all__ = ["Judge", "JudgeReply", "JudgeRequest"]


class Judge(Protocol):
    """A judge backend. Thread-safe: the service calls it from several workers at once."""

    @property
    def info(self) -> JudgeInfo:
        """Backend name, model and prompt version for every result (rules_version comes later)."""
        ...

    def judge(self, request: JudgeRequest) -> JudgeReply:
        """Judge one record.

        Raises:
            JudgeError: the backend could not decide; the record's outcome becomes ``judge_error``.
        """
        ...

    def close(self) -> None:
        """Release what the backend holds (HTTP connections, a cache file); idempotent."""
        ...
