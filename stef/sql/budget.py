"""A record's CPU budget as a deadline in thread CPU time, checked inside reference mode's loops.

The pipeline checks ``limits.max_record_cpu_s`` after the analysis and after the judge; the
reference stage comes after both, and its Python work (each query parsed in every guessed
dialect, the structural comparison, schema inference, data generation, row comparison) had no
bound but SQLite's own steps: a gold SQL of a 1,900-term OR chain cost 3.5 s of CPU, a query of
9,000 rows of 20 columns 3.2 s. :class:`CpuDeadline` carries what is left of the record's budget
to the points where that work can stop.

Thread CPU time (:func:`time.thread_time`) is the pipeline's own measure: a deadline is read in
the thread that made it (one record's path runs in one thread), and time waiting on other
threads or on I/O does not count.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from stef.errors import CpuBudgetSpent


@dataclass(frozen=True)
class CpuDeadline:
    """The thread CPU time (:func:`time.thread_time`) past which a record's work stops.

    Attributes:
        at: the deadline, in the calling thread's CPU seconds; ``math.inf``: none.
    """

    at: float = math.inf

    @classmethod
    def after(cls, seconds: float) -> CpuDeadline:
        """The deadline ``seconds`` of this thread's CPU from now."""
        return cls(time.thread_time() + seconds)

    def passed(self) -> bool:
        """Whether this thread has spent its CPU up to the deadline."""
        return self.at != math.inf and time.thread_time() > self.at

    def left(self) -> float:
        """This thread's CPU seconds left before the deadline (``math.inf``: none; 0 or less
        once it has passed)."""
        return self.at - time.thread_time()

    def check(self) -> None:
        """Go on, or stop the work.

        Raises:
            CpuBudgetSpent: the deadline has passed.
        """
        if self.passed():
            raise CpuBudgetSpent("the record's CPU budget ran out")


# Why a step did not finish when the record's CPU budget ran out in it: the execution's detail
# (reference mode's generated databases), and what the fallback metric tells apart as ``budget``.
BUDGET_SPENT = "the record's CPU budget ran out (limits.max_record_cpu_s)"

# No deadline: the callers outside the record path (calibration, scripts) run to the end.
NO_DEADLINE = CpuDeadline()
