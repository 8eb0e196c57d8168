"""The chat-completion reply as the judge reads it: the envelope of a 200 body as lenient models
(:class:`Envelope`: only the fields read, whatever else a server sends), the :class:`Completion`
made of it, and the log-probabilities of its tokens (:class:`TokenLogprobs`, read lazily). A
body that is not a chat completion is :class:`BadBody`, its detail redacted."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from pydantic_core import from_json

from stef.errors import StefError
from stef.redact import SCAN_LIMIT, redact

_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_TYPES[type(None)] = "null"


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

    def __init__(self, entries: list[tuple[str, float, object]], texts: tuple[str, ...]) -> None:
        self._entries = entries
        self.texts = texts
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

    @model_validator(mode="before")
    @classmethod
    def _refusal_parts(cls, value: object) -> object:
        """A refusal sent as a part of a content list (``[{"type": "refusal", "refusal":
        ...}]``, the shape OpenAI gives an assistant message's parts) is the message's refusal
        when it has no ``refusal`` string of its own. It was left out with the other parts
        that are not text: no content, so the judge re-asked a model that had refused."""
        if not isinstance(value, dict) or value.get("refusal"):
            return value
        content = value.get("content")
        if not isinstance(content, list):
            return value
        said = [text for text in _parts(content, "refusal") if text]
        return {**value, "refusal": " ".join(said)} if said else value

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts(cls, value: object) -> object:
        """Content sent as a list of parts (``[{"type": "text", "text": ...}]``, as Mistral's
        reasoning models and some gateways send it) is its text parts joined, any other part (a
        ``thinking`` one) left out; None when there is none. It was a bad_response, retried
        until the budget ran out."""
        if not isinstance(value, list):
            return value
        texts = _parts(value, "text")
        return "".join(texts) if texts else None


def _parts(content: list[object], kind: str) -> list[str]:
    """The strings of ``content``'s parts of type ``kind`` (``{"type": kind, kind: ...}``), in
    order; a part of another type, or whose ``kind`` is not a string, is left out."""
    return [
        part[kind]
        for part in content
        if isinstance(part, dict) and part.get("type") == kind and isinstance(part.get(kind), str)
    ]


class _Choice(_Lenient):
    message: _Message | None = None
    finish_reason: str | None = None
    # Read by read_logprobs, leniently: a malformed block costs the signal, never the completion.
    logprobs: object = None


class _Usage(_Lenient):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Envelope(_Lenient):
    """The parts of a chat-completion body the judge reads."""

    choices: list[_Choice]
    usage: _Usage | None = None
    # Which model answered, as the endpoint says (a proxy may swap it behind the configured
    # name). Any JSON value: a server sending a number here still sent a usable completion.
    model: object = None


class BadBody(StefError):
    """A 200 whose body is not a chat completion; ``detail`` is already redacted. Internal: the
    client retries it and then raises LlmTransportError ``bad_response``."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


def parse_body(content: bytes, content_type: str | None, secrets: Iterable[str]) -> Envelope:
    """The chat-completion envelope of a 200 body.

    Raises:
        BadBody: not JSON, not an object, or no ``choices`` list of choice objects. The detail
            names what was wrong and quotes the body (or its ``error.message``), redacted.
    """
    text = content[:SCAN_LIMIT].decode("utf-8", "replace")
    kind = content_type.split(";")[0].strip() if content_type else "no content type"
    try:
        data = _loads(content)
    except (ValueError, RecursionError):
        raise BadBody(
            f"the LLM endpoint answered 200 with a body that is not JSON ({kind}): "
            f"{redact(text, secrets) or '<empty>'}"
        ) from None
    if not isinstance(data, dict):
        kind = _JSON_TYPES.get(type(data), "value")
        raise BadBody(
            f"the LLM endpoint answered 200 with a JSON {kind}, not a chat completion: "
            f"{redact(text, secrets)}"
        )
    try:
        return Envelope.model_validate(data)
    except ValidationError as exc:
        err = data.get("error")
        said = err.get("message") if isinstance(err, dict) else err
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:3]
        )
        quoted = f"error: {said}" if said else problems
        raise BadBody(
            "the LLM endpoint answered 200 with a body that is not a chat completion: "
            + redact(quoted, secrets)
        ) from None


def _loads(content: bytes) -> object:
    """The JSON value of ``content``: read by pydantic's parser (jiter; a third of the standard
    library's time on a reply with log-probabilities), else by ``json``, so that whatever the
    standard library reads (another encoding, a lone surrogate, nesting past jiter's limit) reads
    as before."""
    try:
        return from_json(content)
    except ValueError:
        return json.loads(content)


def _reported_model(value: object, secrets: Iterable[str]) -> str | None:
    """The reply's ``model`` as text (redacted, capped), None when absent, blank or not a string."""
    if not isinstance(value, str) or not value.strip():
        return None
    return redact(value, secrets, limit=200)


def completion_of(
    envelope: Envelope, mode: str, attempts: int, secrets: Iterable[str]
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
        prompt_tokens=_tokens(usage.prompt_tokens if usage else None),
        completion_tokens=_tokens(usage.completion_tokens if usage else None),
        attempts=attempts,
        reported_model=_reported_model(envelope.model, secrets),
        logprobs=read_logprobs(choice.logprobs if choice is not None else None),
    )


# More tokens than any call has: a count past it is read as none (10**4000 tokens stopped the
# cost and the token counters, which compute in floats, and lost the reply's verdict).
_MAX_TOKENS = 10**12


def _tokens(count: int | None) -> int:
    """A usage count as counted: absent, negative or past :data:`_MAX_TOKENS` is 0."""
    return count if count is not None and 0 <= count <= _MAX_TOKENS else 0


def read_logprobs(block: object) -> TokenLogprobs | None:
    """The tokens of a choice's ``logprobs`` block (``{"content": [{"token", "logprob",
    "top_logprobs": [...]}]}``); None when absent or not that shape. Entries that are not
    token objects are skipped: the rest of the block still says what it says. Alternatives are
    read when their position is (:class:`TokenLogprobs`)."""
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list) or not content:
        return None
    entries: list[tuple[str, float, object]] = []
    texts: list[str] = []
    add, spell = entries.append, texts.append
    for entry in content:
        if type(entry) is dict:
            # The common shape checked inline (a few hundred tokens a reply); NaN fails <= 0.
            token, logprob = entry.get("token"), entry.get("logprob")
            if type(token) is str and type(logprob) is float and logprob <= 0:
                add((token, logprob, entry.get("top_logprobs")))
                spell(token)
                continue
        pair = _token_pair(entry)
        if pair is not None:
            add((pair[0], pair[1], entry.get("top_logprobs")))
            spell(pair[0])
    return TokenLogprobs(entries, tuple(texts)) if entries else None


def _token_pair(entry: object) -> tuple[str, float] | None:
    if not isinstance(entry, dict):
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if not isinstance(token, str) or isinstance(logprob, bool):
        return None
    if not isinstance(logprob, int | float) or logprob != logprob or logprob > 0:
        return None  # NaN or a positive log-probability is no probability
    try:
        return token, float(logprob)
    except OverflowError:  # an integer below any float: a probability of zero
        return token, -math.inf
