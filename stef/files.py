"""The files STEF reads whole or line by line, read one way: a bounded reader for files read
whole (rules, settings, few-shot examples, secrets, checkpoints) and a JSON Lines reader for
files read a line at a time (results, labels, references, agent logs). Every problem is one
:class:`~stef.errors.FileError` naming the file and, where there is one, the line; each caller
says the file's role (``config``, ``references``, ``llm.few_shot_file``) in its own error.

A file read whole has its type checked before it is opened (opening a FIFO would block for
ever) and its size bounded; a JSON Lines file is streamed, and may be a pipe.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from stef.errors import FileError


def _size(n: int) -> str:
    """``1 MiB`` for a whole number of MiB, else the bytes."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def regular_file(
    path: str | Path, limit: int | None, *, kind: str | None = None, too_large: str = ""
) -> os.stat_result:
    """The file's status, once it is known to be a regular file of at most ``limit`` bytes.

    Args:
        limit: the largest size; None: any.
        kind: what the file should be (``rules file``): a directory is said to be one instead.
        too_large: said after the size when the file is larger than ``limit`` (what such a
            file should hold, say).

    Raises:
        FileError: it cannot be reached, is not a regular file, or is larger than ``limit``.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise FileError(path, f"cannot be read: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a NUL byte in the path
        raise FileError(repr(str(path)), f"not a usable path ({exc})") from None
    if kind is not None and stat.S_ISDIR(info.st_mode):
        raise FileError(path, f"is a directory, not a {kind}")
    if not stat.S_ISREG(info.st_mode):
        raise FileError(path, "is not a regular file")
    if limit is not None and info.st_size > limit:
        raise FileError(path, f"larger than {_size(limit)} ({info.st_size} bytes){too_large}")
    return info


def read_bounded(
    path: str | Path, limit: int, *, kind: str | None = None, too_large: str = ""
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (checked before and after the
    read: a file may grow in between); ``kind`` and ``too_large`` as :func:`regular_file`.

    Raises:
        FileError: as :func:`regular_file`, or the read fails.
    """
    regular_file(path, limit, kind=kind, too_large=too_large)
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise FileError(path, f"cannot be read: {exc.strerror or exc}") from exc
    if len(raw) > limit:
        raise FileError(path, f"larger than {_size(limit)}{too_large}")
    return raw


def utf8_text(raw: bytes, path: str | Path) -> str:
    """``raw`` as UTF-8 text.

    Raises:
        FileError: not UTF-8, located at the line and byte of the first bad byte.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise FileError(path, _not_utf8(raw, exc), line) from None


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    return f"not UTF-8: byte 0x{raw[exc.start]:02x} ({exc.reason})"


# A lone surrogate, escaped ("\\ud83d": half an emoji, as a model cut between two tokens writes it)
# or raw: JSON reads it into a string UTF-8 cannot hold. A pair escaped matches too (harmless).
SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")


def unicode_json(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD. A walk,
    not a recursion: JSON nested as deep as the parser allows left no room for one."""
    root = [value]
    todo: list[tuple[Any, Any]] = [(root, 0)]
    while todo:
        container, key = todo.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = _whole(item)
        elif isinstance(item, list):
            todo.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            fixed = {_whole(k): v for k, v in item.items()}
            container[key] = fixed
            todo.extend((fixed, k) for k in fixed)
    return root[0]


def _whole(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def json_object(text: str, path: str | Path, line: int) -> dict[str, Any]:
    """One JSON Lines line as an object.

    Raises:
        FileError: not JSON (nested too deep and integers of too many digits included), or
            not an object.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileError(path, f"not JSON ({exc.msg}, column {exc.colno})", line) from None
    except ValueError:  # past the interpreter's limit on the digits of an integer
        raise FileError(path, "not JSON (an integer of too many digits)", line) from None
    except RecursionError:
        raise FileError(path, "not JSON (nested too deeply)", line) from None
    if not isinstance(obj, dict):
        raise FileError(path, "not a JSON object", line)
    return obj


# The longest line of a JSON Lines file read without a bound of its own (results, labels, agent
# logs). A result is about the size of its record (a 203 KB record of 3,000 projections, 2 KB
# short of the default limits, made a 268 KB result), so none comes near; a stream without line
# ends (/dev/zero) is refused here instead of read until memory runs out (a MemoryError after
# 3 GB). Reading a line this long takes about 230 MB (a 100 MB line took 390 MB).
MAX_LINE_BYTES = 64 << 20


def iter_lines(
    path: str | Path,
    *,
    lenient: bool = False,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    too_long: str = "",
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line, streamed (a results file may be larger
    than memory). Lines end at LF only, as JSON Lines has them (a CR is whitespace inside a
    line); a UTF-8 BOM before the first line is passed over. The file type is not checked: a
    results file may come through a pipe (``stef summary <(...)``).

    Args:
        lenient: read bytes that are not UTF-8 as U+FFFD.
        max_line_bytes: the longest line (without its LF); None: any. A longer one is refused
            once that many bytes of it are read, not held whole (a 200 MB line took 700 MB).
            Default :data:`MAX_LINE_BYTES`.
        too_long: said after the bound when a line is longer (why none may be).

    Raises:
        FileError: the file cannot be read; a line longer than ``max_line_bytes``; unless
            lenient, a line that is not UTF-8 (with the byte).
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below; the open's own errors said apart)
    except OSError as exc:
        raise FileError(path, f"cannot be read: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a NUL byte in the path
        raise FileError(repr(str(path)), f"not a usable path ({exc})") from None
    with f:
        try:
            for n, raw in enumerate(_lines(f, max_line_bytes), start=1):
                if n == 1:
                    raw = raw.removeprefix(_BOM)
                if max_line_bytes is not None and len(raw.removesuffix(b"\n")) > max_line_bytes:
                    raise FileError(path, f"longer than {_size(max_line_bytes)}{too_long}", n)
                text = _line_text(raw, path, n, lenient)
                if text.strip():
                    yield n, text
        except OSError as exc:
            raise FileError(path, f"cannot be read: {exc.strerror or exc}") from exc


_BOM = b"\xef\xbb\xbf"


def _lines(f: BinaryIO, limit: int | None) -> Iterator[bytes]:
    """The file's lines, each cut after ``limit`` + 1 bytes (its LF and one byte past the limit,
    enough to tell a line that is too long), the first 3 bytes more for a BOM, which is passed
    over, not counted (a first line at the limit after one was refused)."""
    if limit is None:
        yield from f
        return
    size = limit + 2 + len(_BOM)
    while raw := f.readline(size):
        yield raw
        size = limit + 2


def _line_text(raw: bytes, path: str | Path, n: int, lenient: bool) -> str:
    try:
        return raw.decode("utf-8", "replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        raise FileError(path, _not_utf8(raw, exc), n) from None


def iter_jsonl(
    path: str | Path,
    *,
    lenient: bool = False,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    too_long: str = "",
    replace_surrogates: bool = False,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line, read as :func:`iter_lines` reads.

    Args:
        lenient: pass over lines that are not JSON objects, and read bytes that are not UTF-8
            as U+FFFD (an agent log holds the bad lines its dead letters were made of).
        max_line_bytes, too_long: as :func:`iter_lines` takes them.
        replace_surrogates: read a lone surrogate (JSON ``"\\ud800"``) in any string or key as
            U+FFFD, for text that is shown or printed (results, review labels): it has no
            UTF-8, and printing it stopped stef estimate and calibrate --results with a
            traceback. Off for records a judge reads, which keep what was logged.

    Raises:
        FileError: the file cannot be read; a line longer than ``max_line_bytes``; unless
            lenient, a line that is not UTF-8 or not a JSON object.
    """
    lines = iter_lines(path, lenient=lenient, max_line_bytes=max_line_bytes, too_long=too_long)
    for n, text in lines:
        try:
            obj = json_object(text, path, n)
        except FileError:
            if lenient:
                continue
            raise
        yield n, unicode_json(obj) if replace_surrogates and SURROGATE.search(text) else obj
