#!/usr/bin/env python
"""Run one timing job (measure.py) as a child process, under its time budget, so that a
cell is never lost: what the child cannot record itself is recorded here.

    python run_cell.py --budget-s 3600 --killed-log results/killed/....log -- \
        python measure.py --cell '{"cell": ..., "workload": ...}' --out RAW --gradients NPZ

- measure.py stops its own timed loop before the budget runs out (status timeout, the
  iterations done kept).  A child still running at the budget (a compile that never ends, a
  hang) is killed here and its cell recorded `timeout`.
- A child killed by a signal before writing its files (SIGKILL from outside, the kernel's
  out-of-memory killer, a segfault) is recorded `failed`, naming the signal, and a line is
  appended to --killed-log: common.smk passes the number of such lines (--times-killed) in
  the cell's params, so the next run re-times the cell (Snakemake's params trigger) and no
  other.
- Interrupted (SIGINT, SIGTERM: Ctrl-C, scancel), the child is stopped and nothing is
  written: Snakemake sees an incomplete job, and the next run (or --rerun-incomplete)
  re-times it.
- A cell that measure.py recorded for the next run to re-time (provenance `retime`: a cuda
  cell whose framework saw no GPU, status failed; measure.py's exit status says so, under
  the --retime-status this adds) gets a line in --killed-log too, so the
  next run re-times it, as after a kill. In a SLURM job, the job then exits DEVICE_FAILED (3),
  its record written: the node's fault shows as a failed job (SLURM's state, the plugin's
  error and kept log, Snakemake's retries), not as a cell that ended. A local run goes on
  (Snakemake would remove the files of a failed job), its tables saying the cell failed.
- A cell whose environment could not be built (--receipt says failed) is recorded failed
  with the installer's message; nothing else of the run is held up.
- Compile caches (measure.py's --cache-dir: Inductor's, PyTensor's, Theano's) go to the node,
  never the shared results tree: under ADBENCH_CACHE_DIR where set, else under the job's
  temp directory (Snakemake's `tmpdir` resource, the system's by default).
- The child gets a temp directory of its own (TMPDIR), made under the job's and removed when
  the child ends, however it ends: frameworks keep state in the temp directory across
  processes, which would make one cell's numbers depend on the cells run before it on that
  machine (Inductor's precompiled C++ headers, built by the first compiled cell, took 8 s off
  the first step of every later one here), and leave files there (PyTensor's numba sources).

Runs in the analysis environment (the records need measure.py's modules, numpy and
pyarrow, not the framework); it sleeps in waitpid while the child times, so it takes no
CPU from the measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The exit status of a job whose cell failed for its device (a GPU its framework cannot see).
DEVICE_FAILED = 3
JOB_WALL = "job wall time"  # the log line's words (benchmarks/pipeline_cost.py reads it)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        sys.exit("run_cell.py: usage: run_cell.py [options] -- python measure.py ARGS")
    split = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-s", type=float, required=True,
                   help="seconds the child may run before it is killed")
    p.add_argument("--killed-log", required=True,
                   help="file a line is appended to whenever the child is killed")
    p.add_argument("--times-killed", type=int, default=0,
                   help="lines of --killed-log so far: a value of the job's params, so that "
                   "Snakemake re-times a cell after a kill and no other")
    p.add_argument("--receipt", help="the cell's environment's receipt (build_env.py): if "
                   "that environment could not be built, the cell is recorded failed with "
                   "the installer's message and the child is not run")
    args, child = p.parse_args(argv[:split]), argv[split + 1:]
    if args.budget_s <= 0 or not child:
        p.error("a budget > 0 and a child command are required")
    return args, child


def log(message: str) -> None:
    print(f"[run_cell {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def log_job_wall() -> None:
    """The job's wall time, from this process's start to its end, in the job's log: what
    benchmarks/pipeline_cost.py splits into the cell's phases and the rest."""
    from adbench import provenance  # noqa: E402  (only now, as in write_record)
    started = provenance.process_start_epoch()
    if started is not None:
        log(f"{JOB_WALL} {time.time() - started:.3f} s")


class ChildWatch:
    """Stops the child from signal handlers that only note why and kill it.

    Nothing is raised from a handler: an exception raised inside Popen.wait just after it
    takes its internal lock leaves that lock held, and the wait that follows hangs for ever
    (seen in CI: a SIGTERM test hung).  The budget is a SIGALRM timer for the same reason, so
    the parent sleeps in one blocking waitpid and takes no CPU from the measurement.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.reason: str | None = None  # "budget", or the signal that interrupted the run
        for signum in self.SIGNALS:  # a signal ignored (SIGINT under `&` in a script) stays so
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self.stop)

    def stop(self, signum, frame) -> None:
        if self.reason is None:
            self.reason = ("budget" if signum == signal.SIGALRM
                           else signal.Signals(signum).name)
        self.kill_child()

    def kill_child(self) -> None:
        if self.process is not None and self.process.returncode is None:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # already gone

    def run(self, child: list[str], budget_s: float, env: dict[str, str] | None = None
            ) -> tuple[int, float]:
        """The child's return code and its wall time."""
        start = time.monotonic()
        self.process = subprocess.Popen(child, env=env)
        signal.setitimer(signal.ITIMER_REAL, budget_s)
        if self.reason is not None:  # interrupted while the child was being started
            self.kill_child()
        try:
            return self.process.wait(), time.monotonic() - start
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def write_record(measure_argv: list[str], status: str, message: str) -> None:
    sys.path.insert(0, HERE)
    from adbench import cell_record  # noqa: E402  (only now: the cell's modules, for its record)

    args = cell_record.parse_args(measure_argv)
    info = cell_record.starting_info(args.description, args.budget_s)
    info["phases"] = {}
    cell_record.write_cell(args.out, args.gradients, args.description, info, status, message,
                           rows=[])


def output_paths(measure_argv: list[str]) -> list[str]:
    return [measure_argv[i + 1] for i, a in enumerate(measure_argv[:-1])
            if a in ("--out", "--gradients")]


def outputs_written(measure_argv: list[str]) -> bool:
    paths = output_paths(measure_argv)
    return len(paths) == 2 and all(os.path.exists(p) for p in paths)


def note_killed(killed_log: str, why: str) -> None:
    """A line in the cell's killed log: its count is a value of the job's params
    (--times-killed), so the next run re-times this cell and no other."""
    os.makedirs(os.path.dirname(killed_log) or ".", exist_ok=True)
    with open(killed_log, "a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {why}\n")


def retime_asked(measure_argv: list[str], rc: int) -> str | None:
    """Why measure.py's record asks the next run to re-time the cell (`retime`: a cuda cell
    whose framework saw no GPU), if its exit status says it does (cell_record.RETIME_STATUS,
    the only case in which the record is read here: no pyarrow for the others)."""
    if rc == 0 or not outputs_written(measure_argv):
        return None
    sys.path.insert(0, HERE)
    from adbench import cell_record, schema  # noqa: E402  (only now, as in write_record)

    if rc != cell_record.RETIME_STATUS:
        return None
    raw = measure_argv[measure_argv.index("--out") + 1]
    try:
        return schema.read_provenance(raw).get("retime") or "measure.py asked, giving no reason"
    except (OSError, ValueError):  # not a raw file of ours
        return "measure.py asked, and its raw file could not be read"


def where() -> str:
    """The SLURM job and node running this cell, or nothing outside SLURM."""
    job, node = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURMD_NODENAME")
    return f"SLURM job {job} on node {node}" if job else ""


def sacct_hint() -> str:
    job = os.environ.get("SLURM_JOB_ID") or "<job id>"
    return f"sacct -j {job} -o State,MaxRSS,ExitCode"


def device_failed() -> int:
    """The exit status of a job whose cell failed for its device: DEVICE_FAILED in a SLURM
    job, so that a node whose GPU cannot be used shows as failed jobs."""
    if not where():
        return 0
    log(f"failed for its device ({where()}): exiting {DEVICE_FAILED}, its record written, so "
        "that the job shows as failed (docs/cluster.md, \"A bad node\")")
    return DEVICE_FAILED


def node_cache(measure_argv: list[str]) -> list[str]:
    """measure.py's arguments with its --cache-dir on this node: ADBENCH_CACHE_DIR, else a
    folder of this user's under the job's temp directory, one per results tree (named by a
    digest of the folder it replaces), as a tree's cells shared theirs before."""
    if "--cache-dir" not in measure_argv[:-1]:
        return measure_argv
    i = measure_argv.index("--cache-dir") + 1
    tree = hashlib.sha256(os.path.abspath(measure_argv[i]).encode()).hexdigest()[:12]
    root = os.environ.get("ADBENCH_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), f"adbench-cache-{os.getuid()}", tree)
    return [*measure_argv[:i], root, *measure_argv[i + 1:]]


def build_failure(receipt: str | None) -> str | None:
    """Why the cell's environment could not be built, if it could not."""
    if receipt is None:
        return None
    with open(receipt) as f:
        built = json.load(f)
    if built.get("status", "ok") == "ok":
        return None
    return (f"its environment could not be built from {built['env_file']} (fix the pins, "
            f"or delete {receipt} to try again): {built['message']}")


def main(argv: list[str] | None = None) -> int:
    args, child = parse_args(sys.argv[1:] if argv is None else argv)
    child = [*child[:2], *node_cache(child[2:]), "--retime-status"]
    measure_argv = child[2:]  # after "python measure.py"
    log(f"started{' in ' + where() if where() else ''}")
    why = build_failure(args.receipt)
    if why is not None:
        log(f"failed: {why}")
        write_record(measure_argv, "failed", why)
        return 0
    watch = ChildWatch()  # before anything is removed: an interrupt from here on is noted
    for stale in output_paths(measure_argv):  # files found later are the child's own
        if os.path.exists(stale):
            os.remove(stale)
    with tempfile.TemporaryDirectory(prefix="adbench-cell-", ignore_cleanup_errors=True) as tmp:
        rc, wall = watch.run(child, args.budget_s, env={**os.environ, "TMPDIR": tmp})
    if watch.reason not in (None, "budget"):
        log(f"interrupted ({watch.reason}): the cell is left to the next run")
        return 130
    timed_out = watch.reason == "budget"
    if rc >= 0 and not timed_out:
        why = retime_asked(measure_argv, rc)
        if why:
            log(f"the next run re-times this cell: {why}")
            note_killed(args.killed_log, f"failed, to re-time: {why}")
            return device_failed()
        return rc  # recorded by measure.py, or an error of the job itself (bad arguments)
    if outputs_written(measure_argv):
        return 0  # killed after writing both files: the cell is complete
    if timed_out:
        status, message = "timeout", (
            f"killed at its time budget of {args.budget_s:g} s (workload.budget_s) before "
            "measure.py finished (a compile or an iteration that did not end): no "
            "iterations recorded")
    else:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        status, message = "failed", (
            f"the timing process was killed by {name} after {wall:.0f} s, before writing its "
            "results (killed from outside, or by the out-of-memory killer: "
            f"`{sacct_hint()}` shows the job's state, its largest resident memory and exit "
            "code); the next run re-times this cell")
        note_killed(args.killed_log, f"{name} after {wall:.0f} s")
    log(f"{status}: {message}")
    write_record(measure_argv, status, message)
    return 0


if __name__ == "__main__":
    status = main()
    log_job_wall()
    sys.exit(status)
