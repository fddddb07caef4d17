#!/usr/bin/env python
"""What the README's test command costs from a fresh clone, on this machine or on a share of
it that stands in for a slower host.

    python3 benchmarks/testing_cost.py                   # the whole machine
    python3 benchmarks/testing_cost.py --cpu-share 0.67  # two thirds of its CPU time
    python3 benchmarks/testing_cost.py --cpu-share 0.5 -- -m unit   # pytest's arguments

Clones the checkout (its HEAD, with the work not committed yet laid over it; no
environments, no results), then runs `./setup.sh --test && python3 -m pytest` there, as
the README gives it, under a CPU quota of `--cpu-share` times this machine's cores (a Linux
control group: cgroup v2's cpu.max or v1's CFS quota; as root). It prints the wall time of
each step and in all against the test command's budget (15 minutes), the CPU seconds they
took, pytest's summary line, the tests that took longest, and this machine's single-thread
matrix-product peak (workflow/scripts/measure_peak.py, measured before the run), and writes
them as JSON to results/benchmarks/testing_cost.json.

A quota takes CPU time away as a slower host would (throughput), not clock speed: a single
thread still runs at full speed while the share allows more than one core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BUDGET_S = 15 * 60  # the README's test command, on a fresh clone (the developers' guide)
PERIOD_US = 100_000  # the control group's accounting period
CGROUP_ROOT = Path("/sys/fs/cgroup")
# pytest's last line, with or without -q's '=' rules: "2400 passed, 1 skipped in 724.29s"
SUMMARY = re.compile(r"^[= ]*(\d+ (?:passed|failed|errors?|skipped|deselected)\b.*?) in "
                     r"[0-9.]+s\b", re.MULTILINE)


# ------------------------------------------------------------------ the CPU quota
def quota_us(share: float, cores: int) -> int:
    """Microseconds of CPU time per PERIOD_US that `share` of `cores` cores allows."""
    if not 0 < share <= 1:
        raise ValueError(f"--cpu-share: a fraction of this machine in (0, 1], got {share}")
    return max(1000, round(share * cores * PERIOD_US))


def make_cgroup(share: float, cores: int, root: Path = CGROUP_ROOT) -> Path:
    """A control group whose processes share `share` of the machine's CPU time; the file a
    process's id is written to, to join it. Names what is missing where it cannot, and
    leaves no half-made group behind."""
    quota, name = quota_us(share, cores), f"adbench-test-cost-{os.getpid()}"
    v2 = (root / "cgroup.controllers").exists()  # v2: one tree, cpu.max "quota period"
    if not v2 and not (root / "cpu" / "cpu.cfs_quota_us").exists():  # v1: cpu's own tree
        raise SystemExit(f"--cpu-share {share}: no cgroup cpu controller under {root} "
                         "(Linux); run without --cpu-share for the whole machine")
    group = root / name if v2 else root / "cpu" / name
    try:
        if v2 and "cpu" not in (root / "cgroup.subtree_control").read_text().split():
            (root / "cgroup.subtree_control").write_text("+cpu")
        group.mkdir()
        settings = ({"cpu.max": f"{quota} {PERIOD_US}"} if v2 else
                    {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)})
        for setting, value in settings.items():
            (group / setting).write_text(value)
    except OSError as exc:  # not root, or a container's read-only cgroup tree
        if group.is_dir():
            remove_cgroup(group / "tasks")
        raise SystemExit(f"--cpu-share {share}: cannot make a control group under {root}: "
                         f"{exc}; run without --cpu-share for the whole machine")
    return group / ("cgroup.procs" if v2 else "tasks")


def remove_cgroup(procs: Path) -> None:
    try:
        procs.parent.rmdir()  # empty once its processes ended
    except OSError as exc:
        print(f"[testing_cost] left {procs.parent}: {exc}", file=sys.stderr)


# ------------------------------------------------------------------ the clone
def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def fresh_clone(dest: Path, repo: Path = REPO) -> dict:
    """`git clone` of the checkout's HEAD into the empty folder `dest` (the tests read the
    clone's own git), with the work not committed yet laid over it: the files changed or
    added (not ignored) copied, those deleted removed. Returns the commit and that work."""
    git("clone", "--quiet", str(repo), str(dest), cwd=repo)
    changed = [n for n in git("ls-files", "-z", "--modified", "--others", "--exclude-standard",
                              cwd=repo).split("\0") if n]
    for name in changed:
        if (repo / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, dest / name)
        else:  # deleted (git lists it as modified too)
            (dest / name).unlink(missing_ok=True)
    return {"commit": git("rev-parse", "HEAD", cwd=dest).strip(),
            "uncommitted": sorted(set(changed))}


# ------------------------------------------------------------------ the run
def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_step(cmd: list[str], workdir: Path, log: Path, procs: Path | None) -> dict:
    """One step of the command in `workdir`, in the control group when there is one: its
    exit status, wall time and CPU seconds (its processes and theirs)."""
    def join():
        if procs is not None:
            procs.write_text(str(os.getpid()))

    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    cpu, start = children_cpu_s(), time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=join).returncode
    return {"command": " ".join(cmd), "rc": rc, "wall_s": time.perf_counter() - start,
            "cpu_s": children_cpu_s() - cpu, "log": str(log)}


def single_thread_peak(workdir: Path, out: Path) -> float | None:
    """This machine's single-thread float32 matrix-product peak, GFLOP/s, as the pipeline
    measures it (its scaling rule), or None where it could not."""
    done = subprocess.run([sys.executable, "workflow/scripts/measure_peak.py", "--threads",
                           "1", "--out", str(out)], cwd=workdir, capture_output=True,
                          text=True)
    if done.returncode != 0:
        return None
    return json.loads(out.read_text())["threads"]["1"]["gflops"]


def slowest_tests(junit: Path, count: int) -> list[tuple[float, str]]:
    if not junit.exists():
        return []
    cases = ET.parse(junit).getroot().iter("testcase")
    times = [(float(c.get("time", 0)), f"{c.get('classname')}::{c.get('name')}")
             for c in cases]
    return sorted(times, reverse=True)[:count]


def report(result: dict) -> str:
    work = len(result["uncommitted"])
    lines = [f"Test command from a fresh clone of {result['commit'][:12]}"
             + (f" with {work} uncommitted file(s)" if work else "")
             + f" ({result['workdir']}), {result['cpu_share']:g} of {result['cores']} cores"
             + (" (a CPU quota)" if result["cpu_share"] < 1 else ""),
             "  single-thread matmul peak: "
             + (f"{result['peak_gflops']:.1f} GFLOP/s" if result["peak_gflops"] else "n/a")]
    for step in result["steps"]:
        lines.append(f"  {step['wall_s']:7.1f} s wall {step['cpu_s']:8.1f} s CPU  rc "
                     f"{step['rc']}  {step['command']}")
    total = sum(s["wall_s"] for s in result["steps"])
    verdict = "within" if total <= BUDGET_S else "over"
    failed = "" if all(s["rc"] == 0 for s in result["steps"]) else " (a step failed)"
    lines.append(f"  {total:7.1f} s in all: {verdict} the {BUDGET_S // 60} minutes{failed}")
    lines.append(f"  pytest: {result['summary'] or 'no summary line (see its log)'}")
    if result["slowest"]:
        lines.append("  slowest tests (s, wall; the first of a shared fixture pays for it):")
        lines += [f"    {t:7.1f}  {name}" for t, name in result["slowest"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-share", type=float, default=1.0,
                   help="the share of this machine's CPU time the run gets (default 1)")
    p.add_argument("--slowest", type=int, default=15, help="tests listed (default 15)")
    p.add_argument("--keep", action="store_true", help="keep the copy (kept anyway when a "
                   "step fails: its logs are there)")
    p.add_argument("--out", default="results/benchmarks/testing_cost.json",
                   help="the JSON report (default %(default)s)")
    args = p.parse_args(ours)
    cores = len(os.sched_getaffinity(0))
    try:
        quota_us(args.cpu_share, cores)
    except ValueError as exc:
        p.error(str(exc))
    workdir = Path(tempfile.mkdtemp(prefix="adbench-test-cost-"))
    procs = make_cgroup(args.cpu_share, cores) if args.cpu_share < 1 else None
    try:
        clone = fresh_clone(workdir)
        peak = single_thread_peak(workdir, workdir / "peak.json")
        junit = workdir / "junit.xml"
        steps = [timed_step(["./setup.sh", "--test"], workdir, workdir / "setup.log", procs)]
        if steps[0]["rc"] == 0:
            steps.append(timed_step([sys.executable, "-m", "pytest", "-q",
                                     f"--junitxml={junit}", *pytest_args], workdir,
                                    workdir / "pytest.log", procs))
        found = SUMMARY.findall(Path(steps[-1]["log"]).read_text(errors="replace"))
        result = {"workdir": str(workdir), **clone, "cpu_share": args.cpu_share,
                  "cores": cores, "peak_gflops": peak, "budget_s": BUDGET_S, "steps": steps,
                  "summary": found[-1] if found else None,
                  "slowest": slowest_tests(junit, args.slowest)}
    finally:
        if procs is not None:
            remove_cgroup(procs)
    print(report(result))
    out = REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"written: {os.path.relpath(out, REPO)}")
    passed = all(s["rc"] == 0 for s in steps)
    if passed and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
