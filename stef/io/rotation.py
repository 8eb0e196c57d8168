"""The rotated generations of a followed log, oldest first, ending with the live file.

logrotate keeps the older generations of ``app.log`` beside it: ``app.log.1``, ``app.log.2``
... (the higher, the older), or ``app.log-20261123`` ... with ``dateext``, each possibly
compressed to ``.gz`` (with ``delaycompress``, from the second generation on). A file source
that lags behind by more than one generation, or that was stopped across several rotations,
finds the file it was reading in this chain by its identity (its first bytes, and its inode
while it is not compressed), reads it to its end and then every newer generation in order,
so no generation is skipped.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from stef.io.checkpoint import FileIdentity

# app.log.3, app.log.3.gz (numbered: the higher, the older); app.log-20261123[.gz] (dateext).
_NUMBERED = re.compile(r"\.(\d+)(\.gz)?")
_DATED = re.compile(r"-(\d+)(\.gz)?")


@dataclass(frozen=True)
class Generation:
    """One file of the chain.

    Attributes:
        path: where it is.
        compressed: a ``.gz`` generation (read through gzip).
        dev: its device.
        ino: its inode (of the ``.gz`` file when compressed: the original's is gone).
        live: the file at the followed path itself (the newest generation).
    """

    path: str
    compressed: bool
    dev: int
    ino: int
    live: bool = False


def generations(path: str) -> list[Generation]:
    """The generations of ``path`` that exist now, oldest first, the live file (if any) last.

    A generation present both plain and compressed (logrotate between writing the ``.gz`` and
    removing the original) is listed once, plain: the two hold the same lines.
    """
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    found: dict[tuple[int, int, str], Generation] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    for name in names:
        if not name.startswith(base) or name == base:
            continue
        tail = name[len(base) :]
        numbered, dated = _NUMBERED.fullmatch(tail), _DATED.fullmatch(tail)
        if numbered is not None:
            # Numbered generations sort before dated ones only if both naming schemes coexist,
            # which logrotate never does for one log.
            key, compressed = (0, -int(numbered.group(1)), ""), numbered.group(2) is not None
        elif dated is not None:
            key, compressed = (1, 0, dated.group(1)), dated.group(2) is not None
        else:
            continue
        full = os.path.join(directory, name)
        st = _regular_stat(full)
        if st is None or (key in found and compressed):
            continue  # the plain twin is listed (or is about to replace this one)
        found[key] = Generation(full, compressed, st.st_dev, st.st_ino)
    chain = [found[key] for key in sorted(found)]
    st = _regular_stat(path)
    if st is not None:
        chain.append(Generation(path, False, st.st_dev, st.st_ino, live=True))
    return chain


def locate(chain: list[Generation], identity: FileIdentity, min_size: int = 0) -> int | None:
    """Where in ``chain`` the file ``identity`` names is, at least ``min_size`` bytes long
    (uncompressed); None when it is in no generation any more.

    The same inode with the same first bytes wins; a copy (copytruncate) or a generation
    compressed since is recognised by its first bytes alone. With several such copies the oldest is
    taken: reading a generation twice repeats lines, skipping one loses them.
    """
    same_inode: int | None = None
    same_head: int | None = None
    for i, gen in enumerate(chain):
        # A .gz generation read before has its own inode in ``identity``: matching it exactly
        # keeps two generations with the same first bytes apart.
        inode = (gen.dev, gen.ino) == (identity.dev, identity.ino)
        if identity.head_len == 0:
            # An empty file has no first bytes: only its inode names it.
            if inode and _size(gen) >= min_size:
                return i
            continue
        head = read_head(gen, identity.head_len)
        if head is None or _sha(head) != identity.head_sha256 or _size(gen) < min_size:
            continue
        if inode and same_inode is None:
            same_inode = i
        elif same_head is None:
            same_head = i
    return same_inode if same_inode is not None else same_head


# A file's mtime comes from the kernel's coarse clock, up to a tick (1-10 ms) behind the time
# read just before the write, and some filesystems keep whole seconds: a generation written
# right at ``since`` may say it was written before.
MTIME_SLACK_S = 1.0


def first_written_since(chain: list[Generation], since: float) -> Generation | None:
    """The oldest rotated generation of ``chain`` last written at or after ``since`` (epoch
    seconds), None when there is none: a source that starts following after them would
    otherwise skip lines written while its process was already running (its start takes
    seconds: imports, settings, the LLM endpoint check) and rotated away meanwhile."""
    for gen in chain:
        if gen.live:
            return None
        try:
            if os.stat(gen.path).st_mtime >= since - MTIME_SLACK_S:
                return gen
        except OSError:
            continue  # rotated again meanwhile: the chain is listed again next time
    return None


def process_started() -> float | None:
    """When this process started (epoch seconds), from ``/proc``; None where there is none."""
    try:
        with open("/proc/self/stat", "rb") as f:
            # The command name (field 2) may hold spaces: count fields after its ')'.
            after = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(int(ln.split()[1]) for ln in f if ln.startswith(b"btime "))
        return boot + int(after[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def open_generation(gen: Generation) -> BinaryIO:
    """A stream of the generation's lines (decompressed when it is a ``.gz``).

    Raises:
        OSError: it cannot be opened, or it is no longer the file listed (rotated meanwhile).
    """
    stream: BinaryIO = (
        gzip.GzipFile(gen.path, "rb")  # type: ignore[assignment]
        if gen.compressed
        else open(gen.path, "rb")  # noqa: SIM115 (the caller closes it)
    )
    st = os.fstat(stream.fileno())
    if (st.st_dev, st.st_ino) != (gen.dev, gen.ino):
        stream.close()
        raise FileNotFoundError(f"{gen.path} was rotated while being opened")
    return stream


def read_head(gen: Generation, n: int) -> bytes | None:
    """The first ``n`` bytes of the generation's lines (fewer when it is shorter); None when it
    cannot be read (gone, or a damaged ``.gz``)."""
    try:
        with open(gen.path, "rb") as raw:
            if not gen.compressed:
                return raw.read(n)
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                return gz.read(n)
    except (OSError, EOFError, zlib.error):
        return None


def _size(gen: Generation) -> int:
    """The length of the generation's lines: the file size, or a ``.gz`` file's recorded size
    of its contents (modulo 4 GiB; an older log of that size is not expected beside a sidecar)."""
    try:
        with open(gen.path, "rb") as raw:
            if not gen.compressed:
                return os.fstat(raw.fileno()).st_size
            raw.seek(-4, os.SEEK_END)
            return int(struct.unpack("<I", raw.read(4))[0])
    except (OSError, struct.error):
        return 0


def _regular_stat(path: str) -> os.stat_result | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
