"""Exit codes of every ``stef`` command, defined once (documented in the README).

0  success
1  failure: a sink or output failed (nothing committed past what was written), an input file is
   missing, records were left unfinished, or ``stef judge`` got invalid input
2  usage: bad flags, settings or rules, or a Kafka broker that cannot be reached at start
3  the judge cannot work: ``stef judge``: the judge could not decide (outcome ``judge_error``);
   ``replay``, ``run``, ``backfill``, ``calibrate``, ``check``: the LLM endpoint failed its
   preflight check (unreachable, key refused), before any record was read; ``replay``: every
   judged record is a judge error, or more than ``--max-judge-error-rate`` of them
4  ``stef replay --fail-on``: an outcome named there occurred (a CI gate)
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Process exit statuses."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    JUDGE_ERROR = 3
    GATE = 4
