#!/usr/bin/env python
"""What the pipeline itself costs: wall time, measured step time, per-job overhead.

Runs `snakemake --cores 8` (default config unless --configfile) in a fresh copy of this
checkout, so your own results/ are never touched, then reports:
  - total wall time of the run, and how much of it was not timing jobs (environments,
    references, analysis, paper);
  - the sum of measured step time (what the study is about) and of all timed iterations;
  - the timing jobs' wall time (run_cell.py's log line) summed by phase;
  - per timing job: process start-up (interpreter, before the script's first line), imports
    (framework + harness), prepare (data, weights, compile), timed loop, gradients, and the
    rest of the job (writing files, Snakemake's shell, environment activation).

    python benchmarks/pipeline_cost.py            # environments reused from ./.venvs (warm)
    python benchmarks/pipeline_cost.py --cold     # environments built from scratch too
    python benchmarks/pipeline_cost.py --analyse DIR   # report on an existing run only

The report is printed and written as JSON to results/benchmarks/pipeline_cost.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))

from adbench import schema  # noqa: E402
import run_cell  # noqa: E402  (the job wall time's log line)

PHASES = ("startup_s", "import_s", "prepare_s", "timed_loop_s", "gradients_s", "rest_s")


def fresh_copy(dest: Path, cold: bool) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    if not cold and (REPO / ".venvs").is_dir():
        # Linked, not copied (they are large); their receipts keep them up to date.
        (dest / ".venvs").symlink_to(REPO / ".venvs")


def run_pipeline(workdir: Path, snakemake_args: list[str]) -> float:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "8", *snakemake_args]
    print("$ " + " ".join(cmd), file=sys.stderr)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=workdir, check=True)
    return time.perf_counter() - start


def results_tree(workdir: Path) -> Path:
    """The run's results tree: results/, or the folder its config's `results` key names."""
    trees = [d for d in sorted(workdir.glob("results*")) if (d / "raw").is_dir()]
    if len(trees) != 1:
        raise SystemExit(f"{workdir}: expected one results tree with raw/, found {trees}")
    return trees[0]


def job_wall_s(log: Path) -> float:
    """A timing job's wall time, as run_cell.py wrote it at the end of the job's log; NaN
    where there is none (a job still running, or one of a harness older than that line)."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    found = re.findall(rf"{run_cell.JOB_WALL} ([0-9.]+) s", text)
    return float(found[-1]) if found else float("nan")


def job_costs(workdir: Path) -> pd.DataFrame:
    """One row per timing job: its wall time split into phases."""
    rows = []
    tree = results_tree(workdir)
    for raw in sorted(glob.glob(str(tree / "raw/**/*.parquet"), recursive=True)):
        info = schema.read_provenance(raw)
        relative = Path(raw).relative_to(tree / "raw").with_suffix(".log")
        job_s = job_wall_s(tree / "logs/measure" / relative)
        phases = info.get("phases", {})
        started = info.get("process_started_at_epoch")
        startup = info["script_started_at_epoch"] - started if started else float("nan")
        row = {**info["cell"], "status": info["status"], "job_s": job_s, "startup_s": startup,
               **{k: phases.get(k, float("nan")) for k in PHASES[1:5]}}
        steps = pq.read_table(raw).to_pandas()
        row["measured_step_s"] = steps.loc[steps["phase"] == "measured", "step_s"].sum()
        row["all_iterations_s"] = steps["step_s"].sum()
        row["rest_s"] = job_s - sum(row[k] for k in PHASES[:5] if pd.notna(row[k]))
        rows.append(row)
    jobs = pd.DataFrame(rows)
    unknown = int(jobs["job_s"].isna().sum())
    if unknown:
        print(f"{unknown} of {len(jobs)} timing jobs have no '{run_cell.JOB_WALL}' line in "
              "their log (still running, or timed by an older harness): left out",
              file=sys.stderr)
    return jobs.dropna(subset=["job_s"]).reset_index(drop=True)


def report(workdir: Path, wall_s: float | None) -> dict:
    jobs = job_costs(workdir)
    per_framework = jobs.groupby("framework")[list(PHASES) + ["job_s"]].mean().round(3)
    timing_s = float(jobs["job_s"].sum())
    phase_totals = jobs[list(PHASES)].sum()
    summary = {
        "workdir": str(workdir),
        "total_wall_s": wall_s,
        "timing_jobs": int(len(jobs)),
        "timing_jobs_by_status": jobs["status"].value_counts().to_dict(),
        "sum_timing_job_wall_s": timing_s,
        # Environments, references, analysis and paper (timing jobs run one at a time).
        "rest_of_run_s": None if wall_s is None else wall_s - timing_s,
        "sum_phase_s": phase_totals.round(1).to_dict(),
        "sum_measured_step_s": float(jobs["measured_step_s"].sum()),
        "sum_all_timed_iterations_s": float(jobs["all_iterations_s"].sum()),
        "mean_overhead_per_job_s": float((jobs["job_s"] - jobs["all_iterations_s"]).mean()),
        "mean_phase_per_job_s": {k: float(jobs[k].mean()) for k in PHASES},
        "per_framework_mean_s": per_framework.to_dict(orient="index"),
    }
    print(f"\nPipeline cost ({len(jobs)} timing jobs, {workdir})")
    if wall_s is not None:
        print(f"  total wall time              {wall_s:8.1f} s")
        print(f"  of which not timing jobs     {summary['rest_of_run_s']:8.1f} s")
    print(f"  sum of timing-job wall time  {timing_s:8.1f} s")
    print(f"  sum of measured step time    {summary['sum_measured_step_s']:8.2f} s")
    print(f"  sum of all timed iterations  {summary['sum_all_timed_iterations_s']:8.2f} s")
    print(f"  overhead per timing job      {summary['mean_overhead_per_job_s']:8.2f} s (mean)")
    print("\nTiming jobs' wall time by phase, summed over jobs:")
    for phase, seconds in phase_totals.items():
        print(f"  {phase:<14} {seconds:10.1f} s  {100 * seconds / timing_s:5.1f} %")
    print("\nPer-job phases, mean seconds, by framework:")
    print(per_framework.to_string())
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cold", action="store_true", help="build the environments too")
    p.add_argument("--analyse", metavar="DIR", help="only report on an existing run in DIR")
    p.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    args, snakemake_args = p.parse_known_args(argv)
    if args.analyse:
        summary = report(Path(args.analyse).resolve(), None)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="adbench-cost-"))
        try:
            fresh_copy(workdir, args.cold)
            wall = run_pipeline(workdir, snakemake_args)
            summary = report(workdir, wall)
            summary["cold"] = args.cold
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
    out = REPO / "results/benchmarks/pipeline_cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, default=str))
    print(f"\nwritten: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
