"""How one iteration is clocked: the device synchronised before every clock read.

The lowest layer of timing, shared by every backend (which clocks its own iterations with
these) and by the timing loop (adbench.timing, which reads the clock they are given).  No
project imports.
"""

from __future__ import annotations

import time
from typing import Callable

Clock = Callable[[], float]
DEFAULT_CLOCK: Clock = time.perf_counter
# The clock of the study's protocol (spec.STUDY_PROTOCOL_TASK), in every backend that runs
# it: the study's timing lines are not published ("the codes for measuring the execution
# time have been removed", 000 Figs. 1-2); time.time() is the clock a Python user reads
# around a line.  A backend imports the name and looks it up at each call (tests replace it).
STUDY_CLOCK: Clock = time.time


def split_timer(forward: Callable[[], object], backward: Callable[[object], object],
                sync: Callable[[], None], clock: Clock) -> dict[str, float]:
    """Time an eager iteration as forward, then backward, syncing before each clock read."""
    sync()
    t0 = clock()
    loss = forward()
    sync()
    t1 = clock()
    backward(loss)
    sync()
    t2 = clock()
    return {"forward_s": t1 - t0, "backward_s": t2 - t1, "step_s": t2 - t0}


def whole_timer(step: Callable[[], object], sync: Callable[[], None],
                clock: Clock) -> dict[str, float]:
    """Time a compiled iteration as one step (forward and backward cannot be separated)."""
    sync()
    t0 = clock()
    step()
    sync()
    return {"step_s": clock() - t0}
