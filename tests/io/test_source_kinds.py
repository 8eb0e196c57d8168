"""A source path that is no regular file (a FIFO, a directory, a socket, a symlink loop) or that
cannot be read: ``stef run`` and ``stef replay`` exit 2 with one line, and never hang."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stef.errors import ConfigError
from stef.io.jsonl import FileSource
from tests.conftest import run_stef

KINDS = ["fifo", "directory", "socket", "symlink_loop", "unreadable"]


@pytest.fixture(params=KINDS)
def bad_source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """The path, and the command prefix that makes it unreadable (root reads any file: it runs
    without the capabilities that let it)."""
    kind: str = request.param
    path = tmp_path / f"{kind}.jsonl"
    prefix: list[str] = []
    held: socket.socket | None = None
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.bind(str(path))
    elif kind == "symlink_loop":
        os.symlink(tmp_path / "other.jsonl", path)
        os.symlink(path, tmp_path / "other.jsonl")
    else:
        path.write_text('{"id": "a"}\n')
        path.chmod(0)
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("root reads any file, and setpriv (to drop that) is not installed")
            caps = "-dac_override,-dac_read_search"
            prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
    try:
        yield path, prefix
    finally:
        if held is not None:
            held.close()


def _stef(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_stef(*args, prefix=prefix, timeout=30)


def test_stef_run_exits_2_in_one_line(bad_source: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, prefix = bad_source
    args = ["run", "--source", f"file:{path}", "--follow", "--metrics-port", "off"]
    outputs = ["--results", f"file:{tmp_path / 'out'}", "--dead-letters", f"file:{tmp_path / 'dl'}"]
    proc = _stef(prefix, *args, *outputs)
    assert proc.returncode == 2, proc.stderr
    (error,) = _error_lines(proc.stderr)
    assert str(path) in error


def test_stef_replay_exits_2_in_one_line(bad_source: tuple[Path, list[str]]) -> None:
    path, prefix = bad_source
    proc = _stef(prefix, "replay", str(path))
    assert proc.returncode == 2, proc.stderr
    (error,) = _error_lines(proc.stderr)
    assert str(path) in error


def _error_lines(stderr: str) -> list[str]:
    """What stderr says besides the service's JSON log events (``rules_loaded`` at start)."""
    lines = []
    for line in stderr.strip().splitlines():
        try:
            json.loads(line)
        except ValueError:
            lines.append(line)
    return lines


@pytest.mark.parametrize("follow", [False, True], ids=["once", "follow"])
def test_the_file_source_refuses_it_at_start(
    bad_source: tuple[Path, list[str]], follow: bool
) -> None:
    path, prefix = bad_source
    if prefix:
        pytest.skip("this process reads any file (root); the CLI tests drop that")
    source = FileSource(str(path), follow=follow)
    with pytest.raises(ConfigError, match=str(path)):
        source.start()
    source.close()
