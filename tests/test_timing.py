"""adbench.timing: the one timing loop and the two ways of timing an iteration, on fake clocks."""

from __future__ import annotations

import pytest

from adbench import clock as clocking
from adbench import timing


class FakeClock:
    """Returns 0, 1, 3, 6, 10, ...: each reading advances by one more than the last."""

    def __init__(self, log=None):
        self.now, self.step, self.log = 0.0, 0.0, log if log is not None else []

    def __call__(self):
        self.now += self.step
        self.step += 1.0
        self.log.append(("clock", self.now))
        return self.now


class FakeStepper:
    def __init__(self):
        self.calls = []

    def run(self, iteration, clock):
        self.calls.append(iteration)
        t0 = clock()
        return {"step_s": clock() - t0, "marker": 100 + iteration}


def test_time_iterations_rows_phases_and_values():
    stepper, clock, messages = FakeStepper(), FakeClock(), []
    rows = timing.time_iterations(stepper, warmup=2, iterations=3, clock=clock,
                                  progress=messages.append)
    assert stepper.calls == [0, 1, 2, 3, 4]
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["phase"] for r in rows] == ["warmup"] * 2 + ["measured"] * 3
    assert [r["marker"] for r in rows] == [100, 101, 102, 103, 104]  # passed through as is
    # The stepper read the clock twice per iteration: differences 1, 3, 5, 7, 9.
    assert [r["step_s"] for r in rows] == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert len(messages) == 2 and "warm-up" in messages[0] and "measured" in messages[1]


def test_time_iterations_without_warmup():
    rows = timing.time_iterations(FakeStepper(), warmup=0, iterations=2, clock=FakeClock())
    assert [(r["iteration"], r["phase"]) for r in rows] == [(0, "measured"), (1, "measured")]


def _recorder():
    log = []
    return log, FakeClock(log), lambda: log.append(("sync",))


def _assert_sync_before_every_clock_read(log):
    reads = [i for i, event in enumerate(log) if event[0] == "clock"]
    assert reads, "the clock was never read"
    for i in reads:
        assert i > 0 and log[i - 1] == ("sync",), log


def test_split_timer_syncs_before_every_clock_read_and_takes_differences():
    log, clock, sync = _recorder()

    def forward():
        log.append(("forward",))
        return "loss"

    def backward(loss):
        assert loss == "loss"
        log.append(("backward",))

    sample = clocking.split_timer(forward, backward, sync, clock)
    _assert_sync_before_every_clock_read(log)
    assert [e[0] for e in log] == ["sync", "clock", "forward", "sync", "clock",
                                   "backward", "sync", "clock"]
    # Clock readings 0, 1, 3.
    assert sample == {"forward_s": 1.0, "backward_s": 2.0, "step_s": 3.0}
    assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])


def test_whole_timer_syncs_before_every_clock_read_and_takes_the_difference():
    log, clock, sync = _recorder()
    sample = clocking.whole_timer(lambda: log.append(("step",)), sync, clock)
    _assert_sync_before_every_clock_read(log)
    assert [e[0] for e in log] == ["sync", "clock", "step", "sync", "clock"]
    assert sample == {"step_s": 1.0}


def test_at_measured_runs_once_between_warmup_and_the_first_measured_iteration():
    stepper, events = FakeStepper(), []
    original = stepper.run
    stepper.run = lambda i, clock: (events.append(("run", i)), original(i, clock))[1]
    timing.time_iterations(stepper, warmup=2, iterations=3, clock=FakeClock(),
                           at_measured=lambda: events.append(("at_measured",)))
    assert events == [("run", 0), ("run", 1), ("at_measured",), ("run", 2), ("run", 3),
                      ("run", 4)]


def test_at_measured_runs_first_without_warmup_and_never_when_the_deadline_comes_first():
    calls = []
    timing.time_iterations(FakeStepper(), warmup=0, iterations=2, clock=FakeClock(),
                           at_measured=lambda: calls.append("no warm-up"))
    assert calls == ["no warm-up"]
    # The deadline check before iteration 1 reads the clock past 0.5: one warm-up row only.
    rows = timing.time_iterations(FakeStepper(), warmup=3, iterations=2, clock=FakeClock(),
                                  deadline=0.5, at_measured=lambda: calls.append("late"))
    assert len(rows) == 1 and calls == ["no warm-up"]
