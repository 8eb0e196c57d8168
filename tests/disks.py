"""A small real filesystem that fills: the disk-full tests of the checkpoint, the LLM cache and
the service (root may mount a tmpfs; a test skips where mounting is not permitted)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(where: Path, kib: int) -> Iterator[Path]:
    """A tmpfs of ``kib`` KiB mounted at ``where`` (made if missing), unmounted on exit."""
    where.mkdir(exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
