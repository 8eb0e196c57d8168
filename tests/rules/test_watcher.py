"""Hot reload: good files apply, a broken file keeps its app's last good rules, nothing raises."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import stef.rules
import stef.rules.watch
from stef.errors import RulesError
from stef.rules import RulesScan
from stef.rules.watch import RulesWatcher

_clock = itertools.count(1_700_000_000_000_000_000, 1_000_000_000)


def write(path: Path, content: str | bytes) -> None:
    """Write ``path`` with a fresh mtime, so the watcher sees a change even at equal size."""
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    stamp = next(_clock)
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    write(d / "default.yaml", "limit_min: 100\n")
    write(d / "sales.yaml", "dialect: snowflake\nlimit_min: 5000\n")
    write(d / "support.yaml", "dialect: postgres\nsampling_rate: 0.5\n")
    return d


def watch(path: Path | None) -> tuple[RulesWatcher, list[str]]:
    """A watcher that reads a change at the check that sees it (settling has its own tests)."""
    outcomes: list[str] = []
    return RulesWatcher(path, on_reload=outcomes.append, settle_s=0.0), outcomes


def rejected(logs: list[MutableMapping[str, Any]]) -> MutableMapping[str, Any]:
    (event,) = [e for e in logs if e["event"] == "rules_reload_rejected"]
    assert event["log_level"] == "error"
    return event


def test_one_app_breaks_the_other_app_edit_applies(rules_dir: Path) -> None:
    w, outcomes = watch(rules_dir)
    before = w.rules
    write(rules_dir / "sales.yaml", "dialect: snowflake\nlimit_min: [\n")
    write(rules_dir / "support.yaml", "dialect: postgres\nsampling_rate: 0.25\n")
    with capture_logs() as logs:
        assert w.check() == "error"
    after = w.rules
    assert after.for_app("support").sampling_rate == 0.25  # the good edit applied
    assert after.for_app("sales") is before.for_app("sales")  # the broken app kept its last good
    assert after.for_app("sales").limit_min == 5000
    assert after.known_apps == ["sales", "support"]
    assert after.version != before.version
    event = rejected(logs)
    (problem,) = event["problems"]
    assert problem.startswith(f"{rules_dir / 'sales.yaml'}:3: not valid YAML")
    assert event["kept_last_good"] == ["sales"]
    assert event["rules_version"] == after.version
    assert outcomes == ["error"]

    # Fixed: the app takes its new rules; no change since: no reload.
    write(rules_dir / "sales.yaml", "dialect: snowflake\nlimit_min: 6000\n")
    assert w.check() == "success"
    assert w.rules.for_app("sales").limit_min == 6000
    assert w.rules.for_app("support").sampling_rate == 0.25
    assert w.check() is None
    assert outcomes == ["error", "success"]


def test_broken_default_keeps_the_last_good_default(rules_dir: Path) -> None:
    w, _ = watch(rules_dir)
    write(rules_dir / "default.yaml", "limit_min: 0\n")
    write(rules_dir / "sales.yaml", "dialect: snowflake\nlimit_min: 7000\n")
    assert w.check() == "error"
    assert w.rules.default.limit_min == 100
    assert w.rules.for_app(None).limit_min == 100
    assert w.rules.for_app("sales").limit_min == 7000


def test_removed_file_removes_the_app(rules_dir: Path) -> None:
    w, outcomes = watch(rules_dir)
    (rules_dir / "support.yaml").unlink()
    assert w.check() == "success"
    assert w.rules.known_apps == ["sales"]
    assert w.rules.for_app("support") is w.rules.default
    (rules_dir / "default.yaml").unlink()
    assert w.check() == "success"
    assert w.rules.default.limit_min == 1000  # the built-in default
    assert outcomes == ["success", "success"]


def test_new_app_whose_first_file_is_broken_is_not_known(rules_dir: Path) -> None:
    w, _ = watch(rules_dir)
    version = w.rules.version
    write(rules_dir / "billing.yaml", "limitt: 3\n")
    with capture_logs() as logs:
        assert w.check() == "error"
    assert w.rules.known_apps == ["sales", "support"]
    assert w.rules.version == version
    event = rejected(logs)
    assert event["problems"] == [
        f"{rules_dir / 'billing.yaml'}:1: [limitt] unknown key (did you mean 'limit_min'?)"
    ]
    assert event["kept_last_good"] == []


@pytest.mark.parametrize(
    ("name", "breakage", "where"),
    [
        pytest.param("x.yaml", None, "x.yaml: is a directory", id="directory named x.yaml"),
        pytest.param("sales.yaml", b"limit_min: 1\n\xff\n", "sales.yaml:2: not UTF-8", id="utf8"),
        pytest.param(
            "sales.yaml", b"notes: " + b"[" * 10_000, "sales.yaml:1: nested deeper", id="nesting"
        ),
        pytest.param(
            "sales.yaml", b"limit_min: " + b"7" * 5000, "sales.yaml:1: integer of", id="bigint"
        ),
    ],
)
def test_unreadable_edits_keep_the_rules(
    rules_dir: Path, name: str, breakage: bytes | None, where: str
) -> None:
    w, outcomes = watch(rules_dir)
    before = w.rules
    if breakage is None:
        (rules_dir / name).mkdir()
    else:
        write(rules_dir / name, breakage)
    with capture_logs() as logs:
        assert w.check() == "error"
    assert w.rules is before  # nothing changed for any app: the same rule set object
    (problem,) = rejected(logs)["problems"]
    assert problem.startswith(f"{rules_dir}/{where}")
    assert outcomes == ["error"]
    assert w.check() is None  # reported once, not at every check


def test_rules_directory_gone_keeps_everything(rules_dir: Path) -> None:
    w, _ = watch(rules_dir)
    before = w.rules
    shutil.rmtree(rules_dir)
    with capture_logs() as logs:
        assert w.check() == "error"
    assert w.rules is before
    assert rejected(logs)["problems"] == [f"{rules_dir}: no such rules file or directory"]


def test_single_file_broken_then_fixed(tmp_path: Path) -> None:
    f = tmp_path / "rules.yaml"
    write(f, "limit_min: 10\n")
    w, outcomes = watch(f)
    write(f, b"limit_min: \xc3\n")
    assert w.check() == "error"
    assert w.rules.for_app("any").limit_min == 10
    write(f, "limit_min: 20\n")
    assert w.check() == "success"
    assert w.rules.for_app("any").limit_min == 20
    assert w.rules.single_file
    assert outcomes == ["error", "success"]


def test_check_never_raises(rules_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w, outcomes = watch(rules_dir)
    before = w.rules

    def failing_scan(path: object) -> RulesScan:
        raise MemoryError("a bug, or the host")

    monkeypatch.setattr(stef.rules.watch, "scan_rules", failing_scan)
    write(rules_dir / "sales.yaml", "limit_min: 1\n")
    with capture_logs() as logs:
        assert w.check() == "error"
    assert w.rules is before
    assert outcomes == ["error"]
    assert [e["event"] for e in logs] == ["rules_reload_failed"]


def test_failing_callback_does_not_escape(rules_dir: Path) -> None:
    def on_reload(outcome: str) -> None:
        raise RuntimeError(outcome)

    w = RulesWatcher(rules_dir, on_reload=on_reload, settle_s=0.0)
    write(rules_dir / "sales.yaml", "limit_min: 1\n")
    with capture_logs() as logs:
        assert w.check() == "success"
    assert w.rules.for_app("sales").limit_min == 1
    # (rules_reloaded is at info level, which the CLI's logging set-up may filter out)
    (failure,) = [e for e in logs if e["event"] == "rules_reload_callback_failed"]
    assert failure["outcome"] == "success" and failure["log_level"] == "error"


def test_bad_file_at_start_fails_loudly(rules_dir: Path) -> None:
    (rules_dir / "x.yaml").mkdir()
    write(rules_dir / "sales.yaml", b"notes: " + b"[" * 10_000)
    with pytest.raises(RulesError) as info:
        RulesWatcher(rules_dir)
    assert [str(p) for p in info.value.problems] == [
        f"{rules_dir / 'sales.yaml'}:1: nested deeper than 32",
        f"{rules_dir / 'x.yaml'}: is a directory, not a rules file",
    ]


def test_no_path_never_reloads() -> None:
    w, outcomes = watch(None)
    assert w.check() is None
    assert w.rules.default.limit_min == 1000 and outcomes == []


def test_every_version_in_effect_is_logged_before_a_reader_sees_it(rules_dir: Path) -> None:
    """Issue 21: under fast edits, results carried rules versions never logged as loaded (a
    reload with a broken file still applies the good ones: a new version, logged only as
    rejected). Each version in effect is logged ``rules_loaded`` before it is published, and
    each change is a counted reload."""
    unlogged: list[str] = []
    seen: set[str] = set()
    stop = threading.Event()
    with capture_logs() as logs:
        w, outcomes = watch(rules_dir)

        def reader() -> None:  # a worker judging records while the rules change
            while not stop.is_set():
                version = w.rules.version
                if version not in seen:
                    seen.add(version)
                    loaded = {
                        e["rules_version"] for e in list(logs) if e["event"] == "rules_loaded"
                    }
                    if version not in loaded:
                        unlogged.append(version)

        thread = threading.Thread(target=reader)
        thread.start()
        for i in range(50):
            broken = i % 3 == 0  # an editor's save caught half written
            write(rules_dir / "sales.yaml", "limit_min: [\n" if broken else f"limit_min: {i}\n")
            write(rules_dir / "support.yaml", f"dialect: postgres\nsampling_rate: 0.{i % 9 + 1}\n")
            w.check()
        stop.set()
        thread.join()
    loaded = [e for e in logs if e["event"] == "rules_loaded"]
    assert unlogged == []
    assert seen <= {e["rules_version"] for e in loaded}
    assert loaded[0]["outcome"] == "start"
    changes = loaded[1:]
    assert (
        len(changes) == len(outcomes) == 50
    )  # every edit changed support: one counted reload each
    assert [e["outcome"] for e in changes] == outcomes
    assert "error" in outcomes


def _edit_in_place_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """The same file (inode), the same size, its mtime put back: no stat field changes."""
    assert len(old) == len(new)
    before = path.stat()
    data = path.read_bytes()
    with path.open("r+b") as f:
        f.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_an_edit_that_keeps_size_mtime_and_inode_is_seen_by_its_hash(
    rules_dir: Path, kind: str
) -> None:
    """Issue 32, item 6. Before: the old rules stayed in effect for ever."""
    now = [1000.0]
    path = rules_dir if kind == "directory" else rules_dir / "sales.yaml"
    w = RulesWatcher(path, hash_interval_s=60.0, clock=lambda: now[0])
    sales = w.rules.for_app("sales") if kind == "directory" else w.rules.default
    assert sales.limit_min == 5000
    _edit_in_place_keeping_size_and_mtime(rules_dir / "sales.yaml", b"5000", b"7000")
    assert w.check() is None  # the stat check alone sees nothing
    now[0] += 61.0  # the slow timer: the contents are hashed
    assert w.check() == "success"
    sales = w.rules.for_app("sales") if kind == "directory" else w.rules.default
    assert sales.limit_min == 7000
    now[0] += 61.0
    assert w.check() is None  # hashed again, unchanged: no reload


def test_a_check_asked_for_compares_the_contents_at_once(rules_dir: Path) -> None:
    """SIGHUP's check (``contents=True``) sees an edit the stat check cannot, before the slow
    timer; asked again with nothing changed, it reloads nothing."""
    now = [1000.0]
    w = RulesWatcher(rules_dir, hash_interval_s=60.0, clock=lambda: now[0])
    _edit_in_place_keeping_size_and_mtime(rules_dir / "sales.yaml", b"5000", b"7000")
    assert w.check() is None
    assert w.check(contents=True) == "success"
    assert w.rules.for_app("sales").limit_min == 7000
    assert w.check(contents=True) is None


def _hung(signum: int, frame: object) -> None:
    raise AssertionError("the rules watcher hangs on a FIFO")


def test_a_fifo_among_the_rules_is_refused_not_read(rules_dir: Path) -> None:
    """The watcher hashed every file with read_bytes() before the loader checked its type: a
    FIFO held ``stef run`` at start for ever, deaf to SIGTERM (a link to /dev/zero filled the
    memory the same way, 3.9 GB before a MemoryError)."""
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(10)
    try:
        w, outcomes = watch(rules_dir)
        before = w.rules
        os.mkfifo(rules_dir / "zz.yaml")  # appears while running: the reload is refused
        with capture_logs() as logs:
            assert w.check(contents=True) == "error"
        assert w.rules is before and outcomes == ["error"]
        assert rejected(logs)["problems"] == [f"{rules_dir}/zz.yaml: is not a regular file"]
        with pytest.raises(RulesError, match=r"zz\.yaml: is not a regular file"):
            watch(rules_dir)  # there at start: the start is refused
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_change_is_read_once_it_has_stayed_the_same(rules_dir: Path) -> None:
    """A file written in place in two writes, checked between them, was read half written: cut
    at a line it is valid YAML (the ignored column kept, the sampling line still to come) and
    judged records with it until the next check. Now a change is read once it has stayed the same
    for ``settle_s``, and only then."""
    now = [1000.0]
    w = RulesWatcher(rules_dir, on_reload=(outcomes := []).append, clock=lambda: now[0])
    full = b"ignore_filters:\n  - tenant_id\nsampling_rate: 0.0\n"
    cut = full.index(b"sampling_rate")
    with (rules_dir / "sales.yaml").open("r+b") as f:
        f.truncate()
        f.write(full[:cut])
        f.flush()
        assert w.check() is None  # seen half written: not read
        now[0] += 0.5
        assert w.check() is None  # the same for half a second only
        f.write(full[cut:])
    now[0] += 0.9
    assert w.check() is None  # changed again since: the wait starts over
    assert w.rules.for_app("sales").sampling_rate == 1.0
    now[0] += 1.0
    assert w.check() == "success"
    sales = w.rules.for_app("sales")
    assert (sales.ignore_filters, sales.sampling_rate) == (["tenant_id"], 0.0)
    now[0] += 5.0
    assert w.check() is None
    assert outcomes == ["success"]  # one reload, of the whole file


def test_a_change_undone_before_it_settled_reads_nothing(rules_dir: Path) -> None:
    now = [1000.0]
    w = RulesWatcher(rules_dir, clock=lambda: now[0])
    before = w.rules
    moved = rules_dir / "sales.yaml.off"
    (rules_dir / "sales.yaml").rename(moved)
    assert w.check() is None
    moved.rename(rules_dir / "sales.yaml")  # back as it was: same inode, size and mtime
    now[0] += 2.0
    assert w.check() is None
    assert w.rules is before


def test_a_check_asked_for_reads_an_unsettled_change_at_once(rules_dir: Path) -> None:
    """SIGHUP is the operator saying the edit is done: no wait."""
    now = [1000.0]
    w = RulesWatcher(rules_dir, clock=lambda: now[0])
    write(rules_dir / "sales.yaml", "dialect: snowflake\nlimit_min: 6000\n")
    assert w.check(contents=True) == "success"
    assert w.rules.for_app("sales").limit_min == 6000
    now[0] += 2.0
    assert w.check() is None  # read already: nothing pending


def test_a_change_waits_at_most_settle_max_however_often_another_file_changes(
    rules_dir: Path,
) -> None:
    """The wait is for the whole directory: a file beside it touched every 0.8 s held a finished
    edit of another app back for as long as it went on (found by an attack, checks every 0.2 s).
    The wait is capped."""
    now = [1000.0]
    w = RulesWatcher(rules_dir, clock=lambda: now[0])
    write(rules_dir / "sales.yaml", "dialect: snowflake\nlimit_min: 6000\n")
    step = 0.2
    seen_at = None
    for i in range(100):
        if i % 4 == 0:
            write(rules_dir / "support.yaml", f"dialect: postgres\nsampling_rate: 0.{i % 9 + 1}\n")
        if w.check() is not None:
            seen_at = i * step
            break
        now[0] += step
    assert seen_at is not None
    assert stef.rules.watch.SETTLE_MAX_S <= seen_at < stef.rules.watch.SETTLE_MAX_S + step
    assert w.rules.for_app("sales").limit_min == 6000
