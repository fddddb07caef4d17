"""One timing loop for every backend: warm-up, then measured iterations, raw samples only.

A backend hands over an `IterationTimer`-compatible object: `run(iteration, clock)` performs
one iteration and returns the timed quantities in seconds, reading `clock()` only after its
device is synchronised.  Nothing is averaged here; statistics are computed downstream.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

Clock = Callable[[], float]
DEFAULT_CLOCK: Clock = time.perf_counter


class Steppable(Protocol):
    def run(self, iteration: int, clock: Clock) -> dict[str, float]:
        """Run one iteration; return {'step_s': ..., optionally 'forward_s', 'backward_s'}."""


def time_iterations(
    stepper: Steppable,
    warmup: int,
    iterations: int,
    clock: Clock = DEFAULT_CLOCK,
    progress: Callable[[str], None] | None = None,
    deadline: float | None = None,
) -> list[dict]:
    """Run warm-up then measured iterations; one row per iteration, phase marked.  With a
    deadline (a `clock` reading), no iteration starts after it: fewer rows come back."""
    rows = []
    for iteration in range(warmup + iterations):
        if deadline is not None and iteration and clock() >= deadline:
            break
        if progress is not None and iteration in (0, warmup):
            progress(f"{'warm-up' if iteration < warmup else 'measured'} phase starts")
        sample = stepper.run(iteration, clock)
        rows.append(
            {
                "iteration": iteration,
                "phase": "warmup" if iteration < warmup else "measured",
                **sample,
            }
        )
    return rows


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
