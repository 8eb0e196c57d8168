"""Python's cyclic garbage collector, set for a replica that judges records on many threads.

A record's judgment allocates thousands of container objects (parse trees, the reply's tokens,
models). With Python's default threshold the youngest generation is collected every 700 of them:
on the LLM path that is about one collection a record, and it traverses the objects of every
record in flight (64 at once) while the other workers wait for the GIL. What is alive once the
replica is built (modules, rules, compiled patterns, caches) lives as long as the process and
needs no traversal at all.

So, once everything is built and before the workers start, :func:`settle_collector` moves what
is alive into the permanent generation (``gc.freeze``) and collects the youngest generation
every ``gc_gen0`` allocations instead (a setting, 10,000 by default: on the bench's LLM path at
64 in flight it cut this process's CPU a record by about 0.4 ms). Parse trees are cycles (a node
points at its parent), so they are still collected, a little later: memory stays bounded by what
``gc_gen0`` more objects hold.
"""

from __future__ import annotations

import gc


def settle_collector(gen0: int) -> tuple[int, int, int] | None:
    """Freeze what is alive now and collect the youngest generation every ``gen0`` allocations
    (the ``gc_gen0`` setting); the older generations' thresholds are kept.

    Returns:
        The thresholds before, for :func:`restore_collector`; None when ``gen0`` is 0: the
        collector was left as it is.
    """
    if gen0 <= 0:
        return None
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0, before[1], before[2])
    return before


def restore_collector(before: tuple[int, int, int] | None) -> None:
    """Undo :func:`settle_collector`: the frozen objects back in the oldest generation (so what
    dies after the run is collected), the thresholds as they were."""
    if before is None:
        return
    gc.unfreeze()
    gc.set_threshold(*before)
