"""A JSONL file output that replaces its file only once the run has started: the lines go to a
temporary sibling, renamed over the target when the sink closes. A start refused by a setting,
a rules file, the endpoint or the source leaves an existing file byte-identical (``stef
replay``; ``stef run``'s outputs append and do not use this)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from stef.io.jsonl import JsonlSink


def partial_path(target: str) -> str:
    """The temporary sibling of ``target``: same directory (so the rename is atomic), hidden."""
    directory, name = os.path.split(os.path.abspath(target))
    return os.path.join(directory, f".{name}.{os.getpid()}.partial")


class ReplacingJsonlSink(JsonlSink):
    """A :class:`JsonlSink` on a temporary sibling of ``target``, renamed over it on
    :meth:`close` when the run opened it; unopened, it leaves nothing behind."""

    def __init__(self, target: str) -> None:
        # Through a symlink to the file it names: the rename replaces that file, not the link.
        self.target = os.path.realpath(target)
        partial = partial_path(self.target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)  # a leftover of a killed run with the same pid
        super().__init__(partial)
        if os.path.exists(target) and not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), target)

    @property
    def output(self) -> str:
        return self.target

    def close(self) -> None:
        opened = self._stream is not None
        super().close()
        if opened and os.path.exists(self.path):
            with contextlib.suppress(OSError):  # the replaced file keeps its permissions
                os.chmod(self.path, stat.S_IMODE(os.stat(self.target).st_mode))
            os.replace(self.path, self.target)
