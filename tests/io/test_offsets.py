"""Commits advance in offset order: an unfinished record holds back everything after it."""

from __future__ import annotations

import threading

from stef.io.offsets import OffsetTracker


def test_out_of_order_completion_commits_only_the_contiguous_run() -> None:
    t = OffsetTracker()
    for offset in range(10, 15):
        t.add(offset)
    t.done(12)
    t.done(11)
    assert t.committable() is None  # 10 is still in flight
    t.done(10)
    assert t.committable() == 13  # 10, 11, 12 done; 13 is not
    t.mark_committed(13)
    assert t.committable() is None  # nothing moved since the commit
    t.done(14)
    assert t.committable() is None  # 13 still holds the commit back
    t.done(13)
    assert t.committable() == 15
    assert t.in_flight == 0


def test_closed_tracker_ignores_late_completions() -> None:
    t = OffsetTracker()
    t.add(0)
    t.add(1)
    t.done(0)
    t.close()
    t.done(1)  # abandoned work finishing after a revocation
    assert t.position == 1


def test_close_counts_what_the_next_owner_judges_again() -> None:
    t = OffsetTracker()
    for offset in (10, 11, 12, 13):
        t.add(offset)
    for offset in (10, 11, 12):
        assert t.claim(offset)
    t.done(10)  # in order: the commit covers it
    t.done(12)  # done behind 11, still being judged: the commit stops at 11
    assert t.committable() == 11
    # 11 (being judged) and 12 (done, uncommitted) are redelivered; 13 never started.
    assert t.close() == 2
    assert t.close() == 0  # counted once


def test_wait_idle_returns_when_the_last_record_is_done() -> None:
    t = OffsetTracker()
    t.add(5)
    assert t.wait_idle(0.01) is False
    threading.Timer(0.05, t.done, args=(5,)).start()
    assert t.wait_idle(5.0) is True
    assert t.committable() == 6


def test_rewind_forgets_pending_offsets() -> None:
    t = OffsetTracker()
    t.add(7)
    t.add(8)
    t.add(3)  # the consumer was reset to an earlier offset
    assert t.in_flight == 1
    t.done(3)
    assert t.committable() == 4


def test_after_revoke_no_record_starts_and_the_commit_stops_at_the_first_skipped() -> None:
    t = OffsetTracker()
    for offset in (10, 11, 12, 13):
        t.add(offset)
    assert t.claim(10) and t.claim(11)
    t.revoke()
    # 12 and 13 were fetched but not started: they are left to the partition's next owner.
    assert t.claim(12) is False and t.claim(13) is False
    assert t.started == 2
    assert t.wait_started(0.01) is False
    t.done(10)
    t.done(11)
    assert t.wait_started(0.01) is True
    # The commit covers what was judged in order and stops at the first skipped record,
    # where the next owner (or this replica, seeking to low_water) reads again.
    assert t.committable() == 12
    assert t.low_water == 12


def test_uncommitted_counts_records_done_and_not_yet_committed() -> None:
    t = OffsetTracker()
    for offset in (10, 11, 15, 16):  # a gap: records, not offsets, are counted
        t.add(offset)
    t.done(16)
    assert t.uncommitted == 1  # done out of order: still not committed
    t.done(10)
    t.done(11)
    offset = t.committable()
    assert offset == 12
    assert t.uncommitted == 3
    t.mark_committed(offset)
    assert t.uncommitted == 1
    t.done(15)
    assert t.committable() == 17
    assert t.uncommitted == 2  # the failed commit is not marked: both still wait


def test_the_position_past_markers_moves_the_commit_once_every_record_is_done() -> None:
    # A transaction of records 0-2, its commit marker at 3: the consumer's position is 4.
    t = OffsetTracker()
    for offset in range(3):
        t.add(offset)
    t.done(0)
    t.advance(4)
    assert t.committable() == 1  # 1 and 2 are in flight: the position moves nothing yet
    t.done(2)
    t.done(1)
    assert t.committable() == 3
    t.advance(4)
    assert t.committable() == 4  # past the marker
    assert t.low_water == 4  # what the lag is measured from
    t.mark_committed(4)
    t.advance(4)
    assert t.committable() is None  # nothing moved since the commit


def test_a_position_behind_the_commit_or_on_a_closed_tracker_moves_nothing() -> None:
    t = OffsetTracker()
    t.add(7)
    t.done(7)
    t.advance(5)
    assert t.committable() == 8
    t.close()
    t.advance(20)
    assert t.committable() == 8
    fresh = OffsetTracker()
    fresh.advance(12)  # nothing fetched yet: the position is where the partition starts
    assert fresh.committable() == 12
