"""Hot reload of the rules: a changed file is read again; each app keeps its last good rules.

A change is seen by each file's mtime, size and inode at every check, and by a sha256 of the
contents on a slower timer: an edit in place to the same size with its mtime restored (``cp -p``,
``rsync -t``, a config tool that preserves times) changes none of the three.

A change the stat check sees is read once it has stayed the same for :data:`SETTLE_S`: a file
written in place in more than one write can be read between two of them, and cut at a line
it may still be valid YAML (a list of benign filters without its tail), which would judge
records until the next check. The wait is for the whole rules path, so a change waiting longer
than :data:`SETTLE_MAX_S` is read anyway: another file of the directory rewritten every second
(a sidecar's, say) would otherwise hold a finished edit back for as long as it goes on. A change
only the hash sees, and a check asked for (SIGHUP), are read at once: the first is a tool that put
the times back after writing, the second an operator who says the edit is done.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from stef.errors import FileError
from stef.files import read_bounded
from stef.rules import AppRules, RuleSet, RulesScan, load_rules, rules_files, scan_rules
from stef.rules.safe_yaml import MAX_RULES_BYTES

log = structlog.get_logger(__name__)


def merge_scan(current: RuleSet, scan: RulesScan) -> tuple[RuleSet, list[str]]:
    """The rules after a reload: good files apply, a broken file keeps its app's last good rules.

    An app whose file is gone goes away (its records get the default); a new app whose first
    file is broken is not known yet. A scan with fatal problems changes nothing.

    Returns:
        The new rule set and the apps kept at their last good rules (``default`` included).
    """
    if scan.fatal or (scan.single_file and scan.broken):
        return current, sorted({"default", *current.apps})
    if scan.single_file:
        return scan.ruleset(), []
    kept = sorted(app for app in scan.broken if app == "default" or app in current.apps)
    default = scan.good.get("default")
    if default is None:
        default = current.default if "default" in scan.broken else AppRules()
    apps = {app: rules for app, rules in scan.good.items() if app != "default"}
    apps |= {app: current.apps[app] for app in kept if app != "default"}
    ruleset = RuleSet(default.model_copy(update={"app": None}), apps, source=scan.source)
    return ruleset, kept


# How often the contents are hashed (a few small files; the stat check runs every turn).
HASH_INTERVAL_S = 60.0
# How long a change the stat check sees must stay the same before it is read (module docstring).
SETTLE_S = 1.0
# How long a change may wait to settle before it is read all the same (module docstring).
SETTLE_MAX_S = 5.0


class RulesWatcher:
    """Hot reload: re-reads the rules path when a file changes; keeps each app's last good rules.

    ``hash_interval_s``: how often the contents are compared by hash as well (see the module
    docstring), by ``clock``. ``settle_s``: how long, by ``clock``, a change the stat check sees
    must stay the same before it is read (0: at the check that sees it), at most
    :data:`SETTLE_MAX_S` after the first check that saw the rules path change.

    At start a bad file fails loudly (:class:`RulesError`); afterwards :meth:`check` never raises.
    Every version that comes into effect (at start, after any reload, partial ones included) is
    logged as ``rules_loaded`` before any reader can see it, so every ``rules_version`` a result
    carries is in the log. Only one thread calls :meth:`check` (the run loop).
    """

    def __init__(
        self,
        path: str | Path | None,
        on_reload: Callable[[str], object] | None = None,
        *,
        hash_interval_s: float = HASH_INTERVAL_S,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        # Before the load: an edit during it is seen at the next check.
        self._stamp = self._fingerprint()
        self._digest = self._content_digest()
        self._rules = load_rules(self.path)
        self._hash_interval_s = hash_interval_s
        self._settle_s = settle_s
        # A changed stamp not read yet, when it was first seen, and when the first change of
        # those not read yet was seen (the wait's cap counts from it).
        self._pending: tuple[tuple[tuple[str, int, int, int], ...], float, float] | None = None
        self._clock = clock
        self._next_hash = clock() + hash_interval_s
        self._on_reload = on_reload
        log.info(
            "rules_loaded",
            path=str(self.path) if self.path is not None else None,
            rules_version=self._rules.version,
            previous_version=None,
            outcome="start",
        )

    @property
    def rules(self) -> RuleSet:
        with self._lock:
            return self._rules

    def _fingerprint(self) -> tuple[tuple[str, int, int, int], ...]:
        """What changes when a file is edited, replaced, added or removed; never raises."""
        if self.path is None:
            return ()
        try:
            files = rules_files(self.path) if self.path.is_dir() else [self.path]
        except (OSError, ValueError) as exc:
            return ((f"<unlistable: {exc}>", 0, 0, 0),)
        out = []
        for f in files:
            try:
                st = f.stat()
            except OSError:  # a dangling symlink or a file gone since listed: still a change
                out.append((str(f), -1, -1, -1))
                continue
            out.append((str(f), st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def _content_digest(self) -> str:
        """sha256 of every rules file's name and bytes; never raises. Only a regular file of
        at most the rules limit is read (the loader refuses any other): a FIFO among the rules
        held ``stef run`` at start for ever, deaf to SIGTERM, and a link to /dev/zero filled the
        memory, both before the loader could say what was wrong."""
        if self.path is None:
            return ""
        digest = hashlib.sha256()
        try:
            files = rules_files(self.path) if self.path.is_dir() else [self.path]
        except (OSError, ValueError) as exc:
            return f"<unlistable: {exc}>"
        for f in files:
            digest.update(str(f).encode("utf-8", "surrogateescape") + b"\0")
            try:
                digest.update(read_bounded(f, MAX_RULES_BYTES))
            except FileError:
                digest.update(b"\0<unreadable>")
            digest.update(b"\0")
        return digest.hexdigest()

    def _contents_changed(self, now_asked: bool = False) -> bool:
        """On the slow timer (or when asked): do the contents differ from those last loaded?"""
        now = self._clock()
        if now < self._next_hash and not now_asked:
            return False
        self._next_hash = now + self._hash_interval_s
        return self._content_digest() != self._digest

    def check(self, *, contents: bool = False) -> str | None:
        """Reload if anything changed; calls ``on_reload(outcome)`` after each reload.

        ``contents``: compare the contents by hash now, not only on the slow timer (SIGHUP).

        Returns:
            ``"success"``, ``"error"`` (some file had problems: the apps of the good files took
            their new rules, the others kept their last good ones), or None (no change).
        """
        try:
            outcome = self._reload_if_changed(contents)
        except Exception:  # last guard: the loop calling us must keep judging
            log.exception("rules_reload_failed", path=str(self.path))
            outcome = "error"
        if outcome is not None and self._on_reload is not None:
            try:
                self._on_reload(outcome)
            except Exception:  # the caller's metrics must not turn a reload into a crash
                log.exception("rules_reload_callback_failed", outcome=outcome)
        return outcome

    def _settling(self, stamp: tuple[tuple[str, int, int, int], ...]) -> bool:
        """Whether the changed ``stamp`` is too new to read (it may still be being written), and
        the rules path has not been waiting for :data:`SETTLE_MAX_S` already."""
        now = self._clock()
        if self._pending is None:
            self._pending = (stamp, now, now)
        elif self._pending[0] != stamp:
            self._pending = (stamp, now, self._pending[2])
        _, since, first = self._pending
        return now - since < self._settle_s and now - first < max(SETTLE_MAX_S, self._settle_s)

    def _reload_if_changed(self, contents: bool) -> str | None:
        stamp = self._fingerprint()
        if self.path is None:
            return None
        if stamp == self._stamp:
            self._pending = None  # a change undone before it settled
            if not self._contents_changed(contents):
                return None
        elif not contents and self._settling(stamp):
            return None
        self._pending = None
        self._stamp = stamp
        self._digest = self._content_digest()  # before the scan, as at start
        scan = scan_rules(self.path)
        current = self.rules
        rules, kept = merge_scan(current, scan)
        problems = scan.problems
        if rules.version != current.version:  # same content: keep the object callers hold
            # Logged before it is published: no result can carry a version the log never named
            # (a reload with errors applies the good files, so it makes a new version too).
            log.info(
                "rules_loaded",
                path=str(self.path),
                rules_version=rules.version,
                previous_version=current.version,
                outcome="error" if problems else "success",
            )
            with self._lock:
                self._rules = rules
        rules = self.rules
        if problems:
            log.error(
                "rules_reload_rejected",
                path=str(self.path),
                problems=[str(p) for p in problems],
                kept_last_good=kept,
                rules_version=rules.version,
            )
            return "error"
        log.info("rules_reloaded", path=str(self.path), rules_version=rules.version)
        return "success"
