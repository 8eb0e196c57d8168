"""Every exception STEF raises, under one root.

StefError
├── ConfigError              settings or config file invalid (fails at start)
│   ├── RulesError           a rules file is invalid; carries file:line problems
│   └── TemplateError        a prompt template failed to compile or render
├── FileError                a file cannot be read as asked (unreadable, not a regular file,
│                            too large, not UTF-8, a line not JSON); names the file and line
├── InvalidInput             a record cannot be judged; becomes a dead letter
├── CpuBudgetSpent           a record's CPU budget ran out inside a stage (reference mode);
│                            the pipeline makes it a limits_exceeded dead letter, and the
│                            execution on generated databases a not_run
├── JudgeError               a judge backend could not decide; outcome judge_error
│   │                        (also ``internal``: any other exception inside a backend)
│   ├── LlmTransportError    timeouts, connection errors, 429/5xx, bodies that are not a
│   │                        chat completion (``bad_response``), after retries
│   └── LlmReplyError        refused, or empty/cut off/not JSON/invalid after the re-ask
├── EndpointError            the LLM endpoint is unusable at start (the preflight check):
│                            unreachable, refused the key, no chat API at the URL
├── ReplyInvalid             one LLM reply unusable; internal to the LLM judge, which re-asks
│                            once and then raises LlmReplyError (never leaves the judge)
├── SinkError                a sink could not acknowledge a write; ``rejected`` when the sink
│                            refused that one message (it is replaced by a minimal dead letter)
├── CommitError              a source could not commit acknowledged positions (Kafka offsets,
│                            a file checkpoint); retried at the next commit, counted, escalated
└── SourceLost               a running source stayed unusable (no broker answering) past its
                             bound; the command exits 1 and a restart starts afresh

Private control-flow errors (the LLM client's ``_BadBody``, retried and then raised as
LlmTransportError) derive from StefError too and never leave their module. Third-party errors are
translated where they enter STEF's code (``raise ... from exc``).
"""

from __future__ import annotations

from dataclasses import dataclass


class StefError(Exception):
    """Root of every exception raised by the stef package."""


class ConfigError(StefError):
    """Process settings or the config file are invalid."""


@dataclass(frozen=True)
class RuleProblem:
    """One problem in a rules file, located by line when the YAML allows it."""

    path: str
    line: int | None
    location: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        loc = f" [{self.location}]" if self.location else ""
        return f"{where}:{loc} {self.message}"


class RulesError(ConfigError):
    """A rules file (or directory) is invalid."""

    def __init__(self, problems: list[RuleProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


class FileError(StefError):
    """A file STEF reads (results, labels, references, examples, rules, settings, a secret)
    that cannot be read as asked. Each reader says the file's role in its own error; the
    message here is ``PATH[:LINE]: problem``.

    Attributes:
        path: the file.
        problem: what is wrong, without the path.
        line: the line (1-based) the problem is on; None for the whole file.

    When the file could not be reached, ``__cause__`` is the ``OSError`` (a missing file is a
    ``FileNotFoundError``).
    """

    def __init__(self, path: object, problem: str, line: int | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


class InvalidInput(StefError):
    """A record is not judgeable: not JSON, not an object, missing or ill-typed fields, too big.

    Attributes:
        reason: a short machine-readable reason (``not_json``, ``missing_field`` ...).
        detail: a human-readable explanation.
    """

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


class CpuBudgetSpent(StefError):
    """A record's CPU budget (``limits.max_record_cpu_s``) ran out inside a stage: raised by
    :meth:`stef.sql.budget.CpuDeadline.check` from the loops of reference mode, so the work
    stops where it is. The reference stage turns it into an execution that did not run; past
    it (the structural comparison), :class:`stef.pipeline.Pipeline` makes the record a
    ``limits_exceeded`` dead letter, as its own checks do."""


class JudgeError(StefError):
    """A judge backend could not decide; the record's outcome becomes ``judge_error``.

    Backends raise nothing else: an unexpected exception inside one becomes reason ``internal``.

    Attributes:
        reason: short machine-readable reason (``timeout``, ``rate_limited``,
            ``invalid_reply`` ...; ``internal`` for a bug, ``closed`` after ``close()``).
        detail: a human-readable explanation; any text of the endpoint in it is redacted
            (credentials removed) and capped.
        attempts: how many calls were made.
        prompt_tokens, completion_tokens: what the failed calls still cost (the record's usage).
    """

    def __init__(
        self,
        reason: str,
        detail: str,
        *,
        attempts: int = 1,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.attempts = attempts
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        super().__init__(f"{reason}: {detail}")


class LlmTransportError(JudgeError):
    """The LLM endpoint kept failing past the retry budget, or refused the request.

    Reasons: ``timeout``, ``connection_error``, ``rate_limited``, ``http_<status>``,
    ``bad_response`` (a 200 whose body is not a chat completion: HTML, a JSON array, no
    ``choices``).

    Attributes:
        status_code: the last HTTP status, when there was one.
    """

    def __init__(
        self, reason: str, detail: str, *, attempts: int = 1, status_code: int | None = None
    ) -> None:
        super().__init__(reason, detail, attempts=attempts)
        self.status_code = status_code


class LlmReplyError(JudgeError):
    """The model's reply cannot be used, even after one re-ask.

    Reasons: ``refused`` (a refusal or a content filter; not re-asked), ``empty_reply``,
    ``truncated`` (``finish_reason: length``), ``invalid_json``, ``invalid_reply`` (JSON that
    violates the schema or the request); in probability mode, not re-asked: ``no_logprobs``
    (the reply had no log-probabilities) and ``no_yes_no`` (neither Yes nor No among them).

    Attributes:
        raw: the last raw reply text, redacted (for debugging; never logged at info).
    """

    def __init__(
        self,
        reason: str,
        detail: str,
        *,
        attempts: int = 1,
        raw: str = "",
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        super().__init__(
            reason,
            detail,
            attempts=attempts,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        self.raw = raw


class ReplyInvalid(StefError):
    """One LLM reply that cannot be used; ``errors`` go back to the model in the re-ask.

    Control flow inside the LLM judge, not an outcome: the judge re-asks once and, if the second
    reply is unusable too, raises :class:`LlmReplyError` with this ``reason``.

    Attributes:
        errors: what is wrong, one sentence each.
        reason: the machine reason if the re-ask fails too: ``empty_reply``, ``invalid_json``,
            ``invalid_reply`` (JSON that violates the schema or the request), ``truncated``.
    """

    def __init__(self, errors: list[str], reason: str = "invalid_reply") -> None:
        self.errors = errors
        self.reason = reason
        super().__init__("; ".join(errors))


class TemplateError(ConfigError):
    """A prompt template failed to compile at start or to render."""


class SinkError(StefError):
    """A sink failed to acknowledge a write (the offset is then not committed).

    Attributes:
        rejected: the sink refused this one message (too large, say) but is otherwise working;
            False for an outage (broker unreachable, disk full), which stops the service.
    """

    def __init__(self, message: str, *, rejected: bool = False) -> None:
        super().__init__(message)
        self.rejected = rejected


class EndpointError(StefError):
    """The preflight check found the LLM endpoint unusable before any record was read.

    Attributes:
        url: the base URL checked.
        status: the HTTP status of the failed check; None when no answer came.
        message: what the endpoint said, redacted and capped, or why no answer came.
    """

    def __init__(self, url: str, status: int | None, message: str) -> None:
        self.url = url
        self.status = status
        self.message = message
        said = f"HTTP {status}: {message}" if status is not None else message
        super().__init__(f"LLM endpoint {url}: {said}")


class CommitError(StefError):
    """A source could not commit the positions of acknowledged records; nothing is lost (the
    next commit retries, a restart redelivers from the last commit).

    Attributes:
        source: the kind of source: ``kafka`` or ``file``.
    """

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class SourceLost(StefError):
    """A running source stayed unusable past ``source_unreachable_timeout_s``."""
