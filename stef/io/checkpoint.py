"""The read position of a followed file source, kept across restarts (the file's "commit").

A small JSON state file holds the identity of the file being read (device, inode, and the
sha256 of its first bytes) and the byte offset just past the last line whose result or dead
letter a sink acknowledged. It is replaced atomically (write a temporary file, fsync, rename,
fsync the directory), so a crash leaves either the old position or the new one, never a torn
file: a restart redelivers at most what was in flight, and never skips a line. The temporary
file is a spare kept from the previous save and rewritten in place, so a save needs no new disk
space: when the results fill the disk the checkpoint beside them still records what was written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import json
import os
import stat
import zlib
from pathlib import Path
from typing import BinaryIO

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stef.errors import ConfigError, FileError
from stef.files import read_bounded

log = structlog.get_logger(__name__)

# How much of a file's start identifies it: enough to tell two logs apart even when the
# filesystem hands a deleted file's inode to a new one.
HEAD_BYTES = 4096

_VERSION = 1
# A checkpoint is a few hundred bytes; a larger file is not one (and is not read into memory).
_MAX_BYTES = 64 * 1024

# A saved position is padded to a whole slot (JSON ignores the spaces), so the file it is
# written into can be reused in place by the next save.
_SLOT = 4096


class FileIdentity(BaseModel):
    """Which file a position belongs to.

    Attributes:
        dev: the device of the file.
        ino: its inode.
        head_len: how many of its first bytes ``head_sha256`` covers (fewer than
            :data:`HEAD_BYTES` while the file was shorter).
        head_sha256: hex sha256 of those bytes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dev: int = Field(ge=0)
    ino: int = Field(ge=0)
    # A negative length would read the whole file, or fail the read at start.
    head_len: int = Field(ge=0, le=HEAD_BYTES)
    head_sha256: str

    @classmethod
    def of(cls, dev: int, ino: int, head: bytes) -> FileIdentity:
        return cls(dev=dev, ino=ino, head_len=len(head), head_sha256=_sha(head))

    def matches(self, path: str | os.PathLike[str]) -> bool:
        """True when ``path`` is this file: same device and inode, same first bytes."""
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != (self.dev, self.ino):
                    return False
                return _sha(f.read(self.head_len)) == self.head_sha256
        except OSError:
            return False


class FilePosition(BaseModel):
    """What the checkpoint file holds.

    Attributes:
        version: the format version.
        source: the path of the followed source (a checkpoint of another source is refused).
        file: the identity of the file the position is in (after a rename rotation, the old
            file, until a line of the new one is acknowledged).
        offset: the byte offset just past the last acknowledged line.
        line: that line's number in its file (positions of later lines continue from it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = _VERSION
    source: str
    file: FileIdentity
    offset: int = Field(ge=0)
    line: int = Field(ge=0)


class Checkpoint:
    """The state file at ``path``: :meth:`load` at start, :meth:`save` after acknowledgements."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Hold the checkpoint for this process (``flock`` on ``.<name>.lock`` beside it, kept
        until :meth:`unlock` or the process ends): two replicas on one source and checkpoint
        judged every line twice, and the slower one's saves moved the checkpoint back.

        Raises:
            ConfigError: another process holds it, or the lock file is not a regular file.
        """
        if self._lock_fd is not None:
            return
        where = self.path.parent / f".{self.path.name}.lock"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:  # a read-only directory: no save will succeed either (logged)
            log.warning("checkpoint_lock_unavailable", path=str(where), error=str(exc))
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"checkpoint lock {where} is not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                raise ConfigError(
                    f"checkpoint {self.path} is in use by another stef process"
                    f"{f' (pid {holder})' if holder.isdigit() else ''}: two on one file source "
                    "would judge every line twice; stop it, or set file_checkpoint to another "
                    "path"
                ) from None
            except OSError as exc:  # a file system without locks
                log.warning("checkpoint_lock_unavailable", path=str(where), error=str(exc))
                os.close(fd)
                return
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        self._lock_fd = fd

    def unlock(self) -> None:
        """Let another process take the checkpoint (closing the lock file releases it)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def load(self, source: str) -> FilePosition | None:
        """The saved position of ``source``, None when there is none yet.

        Raises:
            ConfigError: the file is unreadable, not a checkpoint, or belongs to another source
                (starting over would re-judge a whole log; that is the operator's call).
        """
        try:
            raw = read_bounded(self.path, _MAX_BYTES)  # the type checked before the open
        except FileError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                return None
            raise ConfigError(f"checkpoint {exc}") from exc
        try:
            position = FilePosition.model_validate(json.loads(raw.decode("utf-8")))
        except (ValueError, ValidationError, RecursionError) as exc:
            # UnicodeDecodeError and an integer past the int-str limit are ValueErrors too.
            raise ConfigError(f"checkpoint {self.path}: not a file source checkpoint") from exc
        if position.source != source:
            raise ConfigError(
                f"checkpoint {self.path} belongs to source file:{position.source}, "
                f"not file:{source}; remove it or set file_checkpoint to another path"
            )
        return position

    def saved_at(self) -> float | None:
        """When the position was last saved (the state file's mtime, epoch seconds); None when
        it cannot be told."""
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return None

    def reserve(self) -> None:
        """Make the spare file the next save writes into, while there is room (at start): a
        checkpoint must still be saved when the disk it shares with the results fills."""
        spare = self._spare()
        with contextlib.suppress(OSError):
            spare.parent.mkdir(parents=True, exist_ok=True)
            if not spare.exists():
                self._write_into(spare, b"")

    def save(self, position: FilePosition) -> None:
        """Replace the state file atomically (and durably: fsync before and after the rename).

        The new position is written into the spare file, in place and padded to a whole slot,
        so on a full disk it needs no new blocks; the spare is then renamed over the state
        file, and the replaced state file (kept by a second link) becomes the next spare.
        """
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        spare, old = self._spare(), directory / f".{self.path.name}.old"
        if os.path.lexists(old):
            # Left by a save cut short: the spare exists, or the old link is the spare.
            if spare.exists():
                old.unlink()
            else:
                os.replace(old, spare)
        self._write_into(spare, position.model_dump_json().encode() + b"\n")
        try:
            os.link(self.path, old)
            linked = True
        except OSError:
            linked = False  # the first save, or no hard links here: the next save allocates
        os.replace(spare, self.path)
        if linked:
            os.replace(old, spare)
        # The rename itself must reach the disk, or a power cut may bring the old file back.
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _spare(self) -> Path:
        return self.path.parent / f".{self.path.name}.spare"

    @staticmethod
    def _write_into(path: Path, data: bytes) -> None:
        """Overwrite ``path`` in place with ``data`` padded by spaces (JSON ignores them) to at
        least its current size and a whole slot: no byte of an older, longer content is left."""
        # Not blocking: a FIFO in the spare's place (with no reader) held the run loop at its
        # first commit, deaf to SIGTERM. Only a regular file is written.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, f"{path} is not a regular file")
            size = max(os.fstat(fd).st_size, -(-len(data) // _SLOT) * _SLOT, _SLOT)
            view = memoryview(data + b" " * (size - len(data)))
            at = 0
            while at < len(view):
                at += os.pwrite(fd, view[at:], at)
            os.fsync(fd)
        finally:
            os.close(fd)


def find_rotated(path: str, identity: FileIdentity) -> str | None:
    """The file ``identity`` names, renamed away from ``path`` while the service was down: a
    sibling in the same directory (``app.log.1``, ``app.log-20261123`` ...), else None."""
    directory = os.path.dirname(path) or "."
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.inode() != identity.ino or not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        if identity.matches(entry.path):
            return entry.path
    return None


def line_start(stream: BinaryIO, offset: int, *, ended: bool = False) -> int:
    """Where the line that holds byte ``offset - 1`` of ``stream`` starts, and the stream moved
    there: ``offset`` itself when the byte before it ends a line, as at every offset a save
    writes. A file changed while STEF was stopped (in place, or the generation it was rotated
    to, same first bytes) moves lines under a saved offset: read from there, a line's tail was
    a dead letter and its head never judged; from its start it is judged again.

    ``ended``: the stream is a rotated-away generation, written no more, whose end ends its
    last line even without a newline (that line was judged whole): ``offset`` at its end stays.
    A ``.gz`` generation is read forward to ``offset`` (a gzip stream seeks back only by
    starting over), a plain file backward from it."""
    if isinstance(stream, gzip.GzipFile):
        at = _line_start_forward(stream, offset)
    else:
        at = _line_start_backward(stream, offset)
    if at != offset and ended and not _more(stream, offset):
        at = offset
    stream.seek(at)
    return at


def lines_before(stream: BinaryIO, offset: int) -> int:
    """How many lines end before byte ``offset`` of ``stream`` (its newlines there), the stream
    left at ``offset``: the number of the line that starts there, less one. Read from the
    start (a ``.gz`` decompressed again): only for a saved offset moved back to a line start,
    a file changed while STEF was stopped, whose line count before it is no longer known."""
    stream.seek(0)
    at = count = 0
    while at < offset:
        chunk = stream.read(min(_STEP, offset - at))
        if not chunk:
            break
        count += chunk.count(b"\n")
        at += len(chunk)
    stream.seek(offset)
    return count


def _more(stream: BinaryIO, offset: int) -> bool:
    """Whether ``stream`` holds a byte at ``offset``. A ``.gz`` cut short (its trailer lost,
    its compression interrupted) raises there instead: no more of it can be read, so its end
    is there too. Taken for unreadable, its checkpoint was taken for a file replaced, and the
    generations after it were never judged."""
    stream.seek(offset)
    try:
        return bool(stream.read(1))
    except (EOFError, zlib.error, gzip.BadGzipFile):
        return False


def _line_start_backward(stream: BinaryIO, offset: int) -> int:
    at = offset
    while at > 0:
        step = min(_STEP, at)
        stream.seek(at - step)
        end = stream.read(step).rfind(b"\n")
        if end >= 0:
            return at - step + end + 1
        at -= step
    return 0


def _line_start_forward(stream: BinaryIO, offset: int) -> int:
    stream.seek(0)
    at = start = 0
    while at < offset:
        chunk = stream.read(min(_STEP, offset - at))
        if not chunk:
            break
        end = chunk.rfind(b"\n")
        if end >= 0:
            start = at + end + 1
        at += len(chunk)
    return start


# How much :func:`line_start` reads at a time.
_STEP = 1 << 16


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
