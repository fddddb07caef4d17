"""What the rest of the machine did while a cell measured: the CPU time other processes
took, the time a virtual machine's host took (steal), the load average, the CPU frequency.

Read from Linux's kernel counters around a measured window (a `Window`): /proc/stat's
per-CPU ticks over the CPUs the cell may run on (its affinity: on an unpinned cell, the
whole machine), less the cell's own process CPU time; /proc/loadavg; and cpufreq's
scaling_cur_freq under /sys where the system exposes it.  A `BusyRule` judges a window
busy.  Elsewhere (not Linux) every reading is None and nothing is judged busy.

The experiment-spec layer: no project import, no framework.
"""

from __future__ import annotations

import dataclasses
import os
import time

PROC_STAT = "/proc/stat"
LOADAVG = "/proc/loadavg"
CPUFREQ = "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_cur_freq"  # kHz
# /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq
# steal guest guest_nice.  Busy is what ran there (guest time is counted in user already);
# steal is what the hypervisor gave another virtual machine while this one wanted to run.
BUSY_COLUMNS = (0, 1, 2, 5, 6)
STEAL_COLUMN = 7
# The fields a window records (the raw file's metadata, per measured attempt).
READING_FIELDS = ("window_s", "cpus", "own_cpu_s", "other_cpu_s", "other_cores",
                  "steal_cores", "resolution_cores", "loadavg_1m", "cpu_mhz")


def tick_s() -> float:
    return 1.0 / os.sysconf("SC_CLK_TCK")


def cell_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity; all of them where unknown)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


def cpu_ticks(cpus, path: str = PROC_STAT) -> tuple[int, int] | None:
    """Busy and steal ticks summed over `cpus` (/proc/stat's cpuN lines), None without
    /proc/stat or where a CPU has no line."""
    wanted = {f"cpu{n}" for n in cpus}
    busy = steal = found = 0
    try:
        with open(path) as f:
            for line in f:
                name, *values = line.split()
                if name in wanted:
                    counts = [int(v) for v in values]
                    busy += sum(counts[i] for i in BUSY_COLUMNS if i < len(counts))
                    steal += counts[STEAL_COLUMN] if len(counts) > STEAL_COLUMN else 0
                    found += 1
    except (OSError, ValueError):
        return None
    return (busy, steal) if found == len(wanted) else None


def load_average(path: str = LOADAVG) -> float | None:
    """The one-minute load average (runnable and uninterruptible tasks, the cell's own
    included), None where not exposed."""
    try:
        with open(path) as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_mhz(cpus, pattern: str = CPUFREQ) -> float | None:
    """The mean current frequency of `cpus` in MHz (cpufreq's scaling_cur_freq), None
    where the system exposes none (most virtual machines)."""
    found = []
    for n in cpus:
        try:
            with open(pattern.format(n)) as f:
                found.append(int(f.read().strip()) / 1000)
        except (OSError, ValueError):
            continue
    return sum(found) / len(found) if found else None


@dataclasses.dataclass
class Window:
    """Counters read at the start of a measured window; `stop` gives the reading."""

    cpus: tuple[int, ...]
    stat: str = PROC_STAT
    loadavg: str = LOADAVG
    cpufreq: str = CPUFREQ
    started: float = 0.0
    own_started: float = 0.0
    ticks: tuple[int, int] | None = None

    @classmethod
    def start(cls, cpus=None, **paths) -> Window:
        window = cls(tuple(cell_cpus() if cpus is None else cpus), **paths)
        window.ticks = cpu_ticks(window.cpus, window.stat)
        window.started, window.own_started = time.monotonic(), time.process_time()
        return window

    def stop(self) -> dict:
        """What the window saw: its length (s) and CPUs; this process's CPU time; the CPU
        time other processes took on those CPUs (their busy ticks less this process's own
        time, never below 0) in seconds and in cores (over the window); steal in cores;
        the resolution of a reading in cores (a tick per CPU, over the window); the load
        average and the mean CPU frequency at its end.  None where not readable."""
        window_s = time.monotonic() - self.started
        own = time.process_time() - self.own_started
        ticks = cpu_ticks(self.cpus, self.stat)
        reading = dict.fromkeys(READING_FIELDS)
        reading.update(window_s=window_s, cpus=len(self.cpus), own_cpu_s=own,
                       loadavg_1m=load_average(self.loadavg),
                       cpu_mhz=cpu_mhz(self.cpus, self.cpufreq))
        if ticks is not None and self.ticks is not None and window_s > 0:
            busy_s = (ticks[0] - self.ticks[0]) * tick_s()
            other = max(0.0, busy_s - own)
            reading.update(other_cpu_s=other, other_cores=other / window_s,
                           steal_cores=(ticks[1] - self.ticks[1]) * tick_s() / window_s,
                           resolution_cores=(len(self.cpus) + 1) * tick_s() / window_s)
        return reading


@dataclasses.dataclass(frozen=True)
class BusyRule:
    """A measured window is busy when other processes took more than `max_other_cores` of
    a core on the cell's CPUs, or the host took as much (steal), by more than a reading's
    resolution (a tick per CPU: a short window cannot tell 0.1 core from none); a busy
    window is measured again, at most `retimes` times (adbench.timing.time_cell).
    max_other_cores None: every window is read, none judged."""

    max_other_cores: float | None
    retimes: int
    cpus: tuple[int, ...] | None = None  # None: the process's affinity at each window
    paths: dict = dataclasses.field(default_factory=dict)
    # The cores the cell's own threads use: of the CPUs it may run on, the others are spare,
    # and what other processes take there does not compete with it (a reference job on the
    # second core of two beside a one-thread cell).  Judged is what they take beyond them.
    cell_cores: int | None = None

    def window(self) -> Window:
        return Window.start(self.cpus, **self.paths)

    def busy(self, reading: dict) -> bool | None:
        """None where nothing is judged, or the counters could not be read."""
        if self.max_other_cores is None or reading.get("other_cores") is None:
            return None
        taken = max(self.contended(reading), reading["steal_cores"] or 0.0)
        return taken > max(self.max_other_cores, reading["resolution_cores"])

    def contended(self, reading: dict) -> float:
        """The cores other processes took beyond the CPUs the cell leaves spare."""
        spare = 0 if self.cell_cores is None else max(0, reading["cpus"] - self.cell_cores)
        return max(0.0, reading["other_cores"] - spare)

    def describe(self, reading: dict) -> str:
        spare = ("" if self.cell_cores is None else
                 f", the cell's {self.cell_cores} thread(s) leaving the rest spare")
        return (f"other processes took {reading['other_cores']:.2f} core(s) and steal "
                f"{reading['steal_cores']:.2f} of {reading['cpus']} CPU(s) over "
                f"{reading['window_s']:.2f} s{spare} (more than {self.max_other_cores} "
                f"of a core beyond the spare ones is busy)")
