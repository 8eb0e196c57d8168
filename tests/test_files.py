"""The one reader of the files STEF reads whole or by line (``stef.files``): every problem is a
``FileError`` naming the file and, where there is one, the line; nothing blocks, nothing crashes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stef.errors import FileError, StefError
from stef.files import iter_jsonl, iter_lines, read_bounded, utf8_text


def test_a_bounded_read_returns_the_bytes_of_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert read_bounded(path, 3) == b"abc"


@pytest.mark.parametrize(
    ("make", "kind", "said"),
    [
        (lambda p: p.mkdir(), "rules file", "is a directory, not a rules file"),
        (lambda p: p.mkdir(), None, "is not a regular file"),
        (os.mkfifo, None, "is not a regular file"),  # refused before an open that would block
        (lambda p: p.write_bytes(b"x" * 11), None, "larger than 10 bytes (11 bytes)"),
        (lambda p: p.write_bytes(b"x" * (2 << 20)), None, "larger than 1 MiB (2097152 bytes)"),
        (lambda p: None, None, "cannot be read: No such file or directory"),
    ],
    ids=["directory-of-a-kind", "directory", "fifo", "too-large", "too-large-mib", "missing"],
)
def test_a_file_that_cannot_be_read_whole_is_one_error(
    tmp_path: Path, make: object, kind: str | None, said: str
) -> None:
    path = tmp_path / "f"
    make(path)  # type: ignore[operator]
    limit = 1 << 20 if "MiB" in said else 10
    with pytest.raises(FileError) as info:
        read_bounded(path, limit, kind=kind)
    assert isinstance(info.value, StefError)
    assert str(info.value) == f"{path}: {said}"
    assert info.value.path == str(path) and info.value.problem == said and info.value.line is None


def test_a_missing_file_keeps_its_cause(tmp_path: Path) -> None:
    with pytest.raises(FileError) as info:
        read_bounded(tmp_path / "gone", 10)
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_text_that_is_not_utf8_is_located_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(FileError) as info:
        utf8_text(b"a: 1\nb: \xff\n", tmp_path / "f")
    assert (
        info.value.line == 2 and info.value.problem == "not UTF-8: byte 0xff (invalid start byte)"
    )


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{oops", "not JSON (Expecting property name enclosed in double quotes, column 2)"),
        ("[1, 2]", "not a JSON object"),
        ("[" * 100_000, "not JSON (nested too deeply)"),
        ('{"n": ' + "9" * 5000 + "}", "not JSON (an integer of too many digits)"),
    ],
    ids=["broken", "array", "deep", "long-integer"],
)
def test_a_jsonl_line_that_is_not_an_object_names_its_line(
    tmp_path: Path, line: str, said: str
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"a": 1}\n\n' + line + "\n", encoding="utf-8")
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(FileError) as info:
        next(rows)
    assert (info.value.line, info.value.problem) == (3, said)


def test_the_lenient_reader_passes_over_what_is_not_an_object(tmp_path: Path) -> None:
    # An agent log holds the bad lines its dead letters were made of.
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\nnot json\n[1]\n{"b": "\xff"}\n' + b"[" * 100_000 + b"\n")
    assert list(iter_jsonl(path, lenient=True)) == [(1, {"a": 1}), (4, {"b": "\ufffd"})]
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(FileError, match="not UTF-8"):
        list(iter_jsonl(path))


def test_a_jsonl_file_that_cannot_be_opened_is_one_error(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.jsonl"):
        with pytest.raises(FileError, match="cannot be read"):
            list(iter_jsonl(path, lenient=True))


def test_lines_end_at_lf_a_bom_is_passed_over_and_a_bad_byte_is_located(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    # A CR inside a line is JSON whitespace, not a line break (JSON Lines ends lines at LF).
    path.write_bytes(b'\xef\xbb\xbf{"a":\r 1}\n{"b": 2}\n{"c": "\xff"}\n')
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1}) and next(rows) == (2, {"b": 2})
    with pytest.raises(FileError) as info:
        next(rows)
    assert (info.value.line, info.value.problem) == (3, "not UTF-8: byte 0xff (invalid start byte)")


def test_a_path_with_a_nul_byte_is_one_error(tmp_path: Path) -> None:
    for read in (lambda p: list(iter_jsonl(p)), lambda p: read_bounded(p, 10)):
        with pytest.raises(FileError, match="not a usable path"):
            read(f"{tmp_path}/a\0b")


@pytest.mark.parametrize("end", [b"\n", b""], ids=["lf", "at-eof"])
def test_a_line_longer_than_the_bound_is_refused_at_its_number(tmp_path: Path, end: bytes) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x" * 5 + b"\n" + b"y" * 5 + end)
    assert [text for _, text in iter_lines(path, max_line_bytes=5)] == [
        "x" * 5 + "\n",
        "y" * 5 + end.decode(),
    ]
    path.write_bytes(b"x" * 5 + b"\n" + b"y" * 6 + end)
    with pytest.raises(FileError, match=r"f\.jsonl:2: longer than 5 bytes, why$"):
        list(iter_lines(path, max_line_bytes=5, too_long=", why"))


def test_the_bom_before_the_first_line_is_not_counted_in_its_bound(tmp_path: Path) -> None:
    """The BOM is passed over, as without a bound: a first line at the bound after one was
    refused as 3 bytes too long."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"x" * 5 + b"\n" + b"y" * 5 + b"\n")
    assert list(iter_lines(path, max_line_bytes=5)) == [(1, "x" * 5 + "\n"), (2, "y" * 5 + "\n")]
    path.write_bytes(b"\xef\xbb\xbf" + b"x" * 6 + b"\n")
    with pytest.raises(FileError, match=r"f\.jsonl:1: longer than 5 bytes$"):
        list(iter_lines(path, max_line_bytes=5))
