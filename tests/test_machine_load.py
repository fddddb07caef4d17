"""adbench.machine_load: what the rest of the machine did during a measured window, from
planted kernel counters; and a busy process planted on the cell's core, which the timing
loop sees (re-times, then marks), and without which it does not."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from adbench import machine_load, timing

TICK = machine_load.tick_s()


def stat_text(busy: dict[int, int], steal: dict[int, int]) -> str:
    """A /proc/stat with the given busy ticks (all user) and steal per CPU."""
    lines = [f"cpu {sum(busy.values())} 0 0 1000 0 0 0 {sum(steal.values())} 0 0"]
    lines += [f"cpu{n} {busy[n]} 0 0 1000 0 0 0 {steal[n]} 0 0" for n in sorted(busy)]
    return "\n".join(lines + ["intr 1 2 3", "btime 1"]) + "\n"


def test_a_window_reads_other_processes_steal_load_and_frequency(tmp_path, monkeypatch):
    stat, loadavg = tmp_path / "stat", tmp_path / "loadavg"
    (tmp_path / "cpu1").mkdir()
    (tmp_path / "cpu1" / "freq").write_text("2400000\n")  # kHz
    loadavg.write_text("1.50 1.00 0.50 2/300 12345\n")
    stat.write_text(stat_text({0: 100, 1: 100}, {0: 0, 1: 0}))
    clock = iter([10.0, 12.0])  # a 2 s window
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(clock))
    own = iter([5.0, 5.5])  # the cell's own process took 0.5 s of CPU
    monkeypatch.setattr(machine_load.time, "process_time", lambda: next(own))
    window = machine_load.Window.start((0, 1), stat=str(stat), loadavg=str(loadavg),
                                       cpufreq=str(tmp_path / "cpu{}" / "freq"))
    # Over the window CPU 0 ran 150 ticks, CPU 1 50; the host stole 20 ticks of CPU 1.
    stat.write_text(stat_text({0: 250, 1: 150}, {0: 0, 1: 20}))
    reading = window.stop()
    busy_s = 200 * TICK
    assert reading["window_s"] == 2.0 and reading["cpus"] == 2
    assert reading["own_cpu_s"] == 0.5
    assert reading["other_cpu_s"] == pytest.approx(max(0.0, busy_s - 0.5))
    assert reading["other_cores"] == pytest.approx(max(0.0, busy_s - 0.5) / 2.0)
    assert reading["steal_cores"] == pytest.approx(20 * TICK / 2.0)
    assert reading["resolution_cores"] == pytest.approx(3 * TICK / 2.0)
    assert reading["loadavg_1m"] == 1.5
    assert reading["cpu_mhz"] == 2400.0  # CPU 0 exposes no frequency: CPU 1's alone


def test_without_counters_nothing_is_read_and_nothing_judged(tmp_path):
    window = machine_load.Window.start((0,), stat=str(tmp_path / "none"),
                                       loadavg=str(tmp_path / "none"),
                                       cpufreq=str(tmp_path / "none{}"))
    reading = window.stop()
    assert reading["other_cores"] is None and reading["loadavg_1m"] is None
    assert reading["cpu_mhz"] is None
    assert machine_load.BusyRule(0.25, 1).busy(reading) is None


def test_busy_is_more_than_the_share_and_more_than_a_readings_resolution():
    rule = machine_load.BusyRule(0.25, 1)
    quiet = {"other_cores": 0.1, "steal_cores": 0.0, "resolution_cores": 0.01}
    assert rule.busy(quiet) is False
    assert rule.busy({**quiet, "other_cores": 0.5}) is True
    assert rule.busy({**quiet, "steal_cores": 0.5}) is True  # the host took it
    # A 30 ms window cannot tell 0.5 core from none: a tick each of two CPUs is 0.67.
    assert rule.busy({**quiet, "other_cores": 0.5, "resolution_cores": 0.67}) is False
    assert machine_load.BusyRule(None, 0).busy({**quiet, "other_cores": 5.0}) is None


def test_other_processes_on_the_cores_a_cell_leaves_spare_do_not_make_it_busy():
    """A one-thread cell free to run on two CPUs: a job taking the other core whole leaves
    its own alone; more than that, by the share, contends with it."""
    rule = machine_load.BusyRule(0.25, 1, cell_cores=1)
    beside = {"other_cores": 1.0, "steal_cores": 0.0, "resolution_cores": 0.01, "cpus": 2}
    assert rule.busy(beside) is False
    assert rule.busy({**beside, "other_cores": 1.5}) is True
    # Two threads on two CPUs leave none spare: the same job contends.
    assert machine_load.BusyRule(0.25, 1, cell_cores=2).busy(beside) is True


# ------------------------------------------------------------------ a real busy process
def spin(core: int, seconds: float) -> None:
    os.sched_setaffinity(0, {core})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class PythonStep:
    """A trivial pure-Python step, about a millisecond: no framework."""

    def run(self, iteration, clock):
        t0 = clock()
        total = 0
        for i in range(20_000):
            total += i * i
        return {"step_s": clock() - t0}


def measure_on(core: int, retimes: int = 1) -> timing.Timed:
    rule = timing.StopRule("precision", 100_000, 10, 0.0001, 1.0)  # 1 s of measured time
    return timing.time_cell(PythonStep(), 5, rule,
                            load=machine_load.BusyRule(0.25, retimes, cpus=(core,)))


needs_linux = pytest.mark.skipif(not hasattr(os, "sched_setaffinity")
                                 or not os.path.exists("/proc/stat"),
                                 reason="needs Linux's /proc/stat and CPU affinity")


@needs_linux
def test_a_busy_process_planted_on_the_cells_core_is_seen_and_without_it_not():
    core = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        quiet = measure_on(core)
        planted = multiprocessing.get_context("fork").Process(target=spin, args=(core, 8.0))
        planted.start()
        try:
            time.sleep(0.2)
            busy = measure_on(core)
        finally:
            planted.terminate()
            planted.join()
    finally:
        os.sched_setaffinity(0, before)
    # With the planted loop every attempt sees about half the core taken (the scheduler
    # shares it between the two): re-timed once, still busy, kept and marked.
    assert len(busy.attempts) == 2 and busy.busy is True
    assert all(a["other_cores"] > 0.3 for a in busy.attempts), busy.attempts
    # Without it: not re-timed, unless something else really held the core (a test
    # machine shared with other jobs), which the reading then names.
    first = quiet.attempts[0]
    if first["other_cores"] > 0.25:
        pytest.skip(f"the core was already busy without the plant: {first}")
    assert quiet.busy is False and len(quiet.attempts) == 1
