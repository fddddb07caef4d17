#!/usr/bin/env python
"""What planning a campaign costs: the dry run of a 10,000-cell grid against a trivial
Snakefile with the same number of jobs, measured in one run.

    python3 benchmarks/dryrun_cost.py                 # 10,000+ cells, 3 repeats each
    python3 benchmarks/dryrun_cost.py --seeds 3 --repeats 1   # a quick look
    python3 benchmarks/dryrun_cost.py --profile results/benchmarks/dryrun_profile  # and why

The grid is every (framework, mode) of the study's two frameworks x every model x every study
task x `--seeds` seeds (336 cells per seed; 30 seeds give 10,080). The dry runs start in a fresh
copy of the checkout (no .snakemake/ metadata, no results) with `environments: current`, and
alternate, so the machine's state is shared. The trivial workflow has one rule that makes
each of as many files as the pipeline has jobs, and a target rule. A third, the same-shape
workflow, declares what rule `measure` declares (its wildcards, outputs, log, one input file,
conda, threads, the same resources and one params function, each a function returning a
constant where measure has a function, and the constant where the campaign's cells share
one) for the same cells, and no other rule: what Snakemake charges for those
declarations alone, whatever the functions do. A fourth, the floor, has the least a timing
job can declare and still keep the contracts (FLOOR_SNAKEFILE): a pipeline that keeps them
cannot plan its timing jobs for less. The pipeline's Snakefile ends with
workflow/rules/planning.smk (its garbage collector, set for planning); the same-shape and
floor Snakefiles end with it too, and a fifth, the trivial one with it, is the like-for-like
yardstick: the target's ratio is against the trivial Snakefile as plain Snakemake runs it, the
others against the trivial one with the same setting (what the declarations cost, whatever the
setting saves). A Snakefile with no job gives Snakemake's own start-up, part of every other
time: a machine where it is slow (SLURM's client installed with a slurm.conf naming a
controller that is down costs 9 s, docs/cluster.md) shows a ratio closer to 1 than the
planning deserves. Prints the median wall time of each,
the ratio pipeline/trivial (target: at most 1.5) and the like-for-like ratios, and writes them
as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))
sys.path.insert(0, str(REPO / "benchmarks"))

from adbench import spec  # noqa: E402
from pipeline_cost import fresh_copy  # noqa: E402

TARGET = 1.5
TRIVIAL_SNAKEFILE = """\
N = {n}

rule all:
    input: expand("out/{{i}}.txt", i=range(N))

rule make:
    output: "out/{{i}}.txt"
    shell: "touch {{output}}"
"""

EMPTY_SNAKEFILE = """\
rule all:
    input: []
"""

# The pipeline's setting of the planning process, as its Snakefile includes it (last).
PLANNING_RULES = Path("workflow", "rules", "planning.smk")


def with_planning_rules(snakefile: str, pipeline: Path) -> str:
    """`snakefile` ending as the pipeline's does, with the pipeline copy's planning.smk."""
    return snakefile + f'\ninclude: "{(pipeline / PLANNING_RULES).resolve()}"\n'


# The cells as targets, the harness and a timing rule's files (its input named by its rule,
# as measure's is): what the Snakefiles below share.
CELL_FILES = """\
CELLS = {cells!r}

rule all:
    input: CELLS

rule harness:
    output: "harness/{{device}}/{{framework}}.json"
    shell: "touch {{output}}"

rule measure:
    input: rules.harness.output[0]
    output:
        raw="{raw}",
        gradients="{gradients}",
    log: "{log}"
"""

SHAPE_SNAKEFILE = CELL_FILES + """\
    conda: lambda wc: "envs/x.yaml"
    threads: 1
    resources:
        timing_lock=1,
        budget_s="60",
        runtime=lambda wc, attempt: 2,
        mem_mb=lambda wc, attempt: 4000,
        gpu=0,
    params:
        cell=lambda wc: "--framework x",
    shell: "run_cell.py --budget-s {{resources.budget_s}} {{params.cell}} --budget-s {{resources.budget_s}} --granted-threads {{threads}} > {{log}} 2>&1"
"""

# The least a timing job can declare and still do what the contracts ask: its cell's
# wildcards, the raw and gradient files, the log, the harness as input, the environment as a
# path pattern (no function), memory and runtime as functions of the attempt (scaled on
# retries), every other resource a constant and no params (the shell line takes the cell from
# the wildcards). What Snakemake charges for such a job, whatever the pipeline does.
FLOOR_SNAKEFILE = CELL_FILES + """\
    conda: "envs/{{framework}}.yaml"
    threads: 1
    resources:
        timing_lock=1,
        budget_s="60",
        runtime=lambda wc, attempt: 2 * attempt,
        mem_mb=lambda wc, attempt: 4000 * attempt,
        gpu=0,
    shell: "run_cell.py --budget-s {{resources.budget_s}} --framework {{wildcards.framework}} --mode {{wildcards.mode}} --model {{wildcards.model}} --task {{wildcards.task}} --device {{wildcards.device}} --threads {{wildcards.threads}} --seed {{wildcards.seed}} --out {{output.raw}} --gradients {{output.gradients}} > {{log}} 2>&1"
"""


def campaign_config(seeds: int, models=spec.STUDY_MODELS) -> dict:
    """Every mode of the study's frameworks x every model of the study (or those given) and
    study task x `seeds` seeds."""
    return {
        "environments": "current",
        "results": "results-campaign",
        "grid": [{"frameworks": {f: list(spec.FRAMEWORKS[f].modes)
                                 for f in spec.STUDY_FRAMEWORKS},
                  "models": list(models), "tasks": list(spec.STUDY_TASKS),
                  "seeds": list(range(seeds))}],
    }


def dry_run(workdir: Path, args: list[str], profile: Path | None = None) -> tuple[float, str]:
    """`snakemake --dry-run` in `workdir`: wall time and output (under cProfile, its stats in
    `profile`, when given)."""
    profiler = ["-m", "cProfile", "-o", str(profile)] if profile else []
    cmd = [sys.executable, *profiler, "-m", "snakemake", "--dry-run", "--cores", "8", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"dryrun_cost: {' '.join(cmd)} failed in {workdir}:\n"
                         + done.stderr[-3000:])
    return elapsed, done.stdout


def job_count(dry_run_output: str) -> int:
    """The 'total' line of Snakemake's job stats."""
    found = re.search(r"^total\s+(\d+)\s*$", dry_run_output, re.MULTILINE)
    if not found:
        raise SystemExit("dryrun_cost: no job stats in the dry run's output")
    return int(found.group(1))


def timing_job_resources(dry_run_output: str) -> list[str]:
    """The resource names of the first timing job (rule measure) a dry run prints: the
    same-shape and floor Snakefiles must declare what the pipeline's timing jobs declare."""
    found = re.search(r"^rule measure:\n(?:    .*\n)*?    resources: (.*)$", dry_run_output,
                      re.MULTILINE)
    if not found:
        raise SystemExit("dryrun_cost: no timing job's resources in the dry run's output")
    return sorted(item.split("=", 1)[0] for item in found.group(1).split(", "))


# Where a dry run's time goes, by Snakemake's own functions (file, name: stable across its
# releases where line numbers are not). Under cProfile: the seconds are inflated and noisy,
# the call counts exact, which is what attributes a difference on a shared machine.
PHASES = {  # phase: (its depth in the table, file, function)
    "build the DAG": (0, "snakemake/workflow.py", "_build_dag"),
    "find the job making each input": (1, "snakemake/dag.py", "file2jobs"),
    "conda envs (expanded whatever --sdm)": (1, "snakemake/dag.py", "update_conda_envs"),
    "print the jobs": (0, "snakemake/jobs.py", "log_info"),
    "resources": (1, "snakemake/rules.py", "expand_resources"),
    "shell commands": (1, "snakemake/jobs.py", "shellcmd"),
    "the rules' functions, called": (0, "snakemake/rules.py", "apply_input_function"),
}


def profiled_dry_run(workdir: Path, args: list[str], out: Path) -> dict[str, list[float]]:
    """One dry run under cProfile: {phase: [cumulative seconds, calls]} (stats in `out`);
    its total is the run's and every call it made."""
    dry_run(workdir, args, profile=out)
    profiled = pstats.Stats(str(out))
    stats = profiled.stats
    phases = {"total": [profiled.total_tt, profiled.total_calls]}
    for phase, (_, path, name) in PHASES.items():
        rows = [(cumulative, calls) for (file, _, func), (_, calls, _, cumulative, _)
                in stats.items() if func == name and file.endswith(path)]
        phases[phase] = [max((seconds for seconds, _ in rows), default=0.0),
                         sum(calls for _, calls in rows)]
    return phases


def profile_table(profiles: dict[str, dict[str, list[float]]]) -> str:
    names = list(profiles)
    lines = [f"{'under cProfile: seconds / calls':42s}" + "".join(f"{n:>22s}" for n in names)]
    for phase in next(iter(profiles.values())):
        label = "  " * PHASES[phase][0] + phase if phase in PHASES else phase
        lines.append(f"{label:42s}" + "".join(
            f"{profiles[n][phase][0]:12.1f} /{int(profiles[n][phase][1]):8d}" for n in names))
    return "\n".join(lines)


def log(message: str) -> None:
    print(f"[dryrun_cost {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=30, help="seeds of the grid (336 cells each)")
    p.add_argument("--models", nargs="+", choices=spec.STUDY_MODELS, default=spec.STUDY_MODELS,
                   help="the grid's models (default: every model of the study; fewer: a "
                   "smaller grid, 28 cells per model and seed)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=str(REPO / "results" / "benchmarks" / "dryrun_cost.json"))
    p.add_argument("--profile", metavar="DIR",
                   help="after the timed runs, one dry run of each Snakefile under cProfile: "
                   "its stats in DIR/<name>.prof and a table of where the time goes")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="adbench-dryrun-") as tmp:
        pipeline, trivial, tuned, shape, floor, empty = (
            Path(tmp, name)
            for name in ("pipeline", "trivial", "tuned", "shape", "floor", "empty"))
        for folder in (pipeline, trivial, tuned, shape, floor, empty):
            folder.mkdir()
        (empty / "Snakefile").write_text(EMPTY_SNAKEFILE)
        fresh_copy(pipeline, cold=True)
        config = campaign_config(args.seeds, args.models)
        (pipeline / "campaign.yaml").write_text(yaml.safe_dump(config))
        cells = spec.config_cells(config)
        n_cells = len(cells)
        for folder, snakefile in ((shape, SHAPE_SNAKEFILE), (floor, FLOOR_SNAKEFILE)):
            (folder / "Snakefile").write_text(with_planning_rules(snakefile.format(
                cells=[c.raw_path for c in cells], raw=spec.RAW_PATTERN,
                gradients=spec.GRADIENT_PATTERN, log=spec.LOG_PATTERN), pipeline))
        (floor / "envs").mkdir()
        for framework in spec.STUDY_FRAMEWORKS:
            (floor / "envs" / f"{framework}.yaml").write_text("dependencies: []\n")
        log(f"pipeline: {n_cells} cells; first dry run (counts the jobs)")
        _, output = dry_run(pipeline, ["--configfile", "campaign.yaml"])
        n_jobs = job_count(output)
        (trivial / "Snakefile").write_text(TRIVIAL_SNAKEFILE.format(n=n_jobs - 1))
        (tuned / "Snakefile").write_text(
            with_planning_rules(TRIVIAL_SNAKEFILE.format(n=n_jobs - 1), pipeline))
        runs = {"pipeline": (pipeline, ["--configfile", "campaign.yaml"]),
                "trivial": (trivial, []), "trivial_tuned": (tuned, []),
                "same_shape": (shape, []), "floor": (floor, []), "start_up": (empty, [])}
        times: dict[str, list[float]] = {name: [] for name in runs}
        planned: dict[str, int] = {}
        resources: dict[str, list[str]] = {}
        for repeat in range(args.repeats):
            for name, (folder, extra) in runs.items():
                elapsed, output = dry_run(folder, extra)
                times[name].append(elapsed)
                if name != "start_up":  # plans no job: no job stats to read
                    planned[name] = job_count(output)
                if name in ("pipeline", "same_shape", "floor"):
                    resources[name] = timing_job_resources(output)
            log(f"repeat {repeat + 1}/{args.repeats}: " + ", ".join(
                f"{name} {values[-1]:.1f} s" for name, values in times.items()))
        profiles = {}
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            for name, (folder, extra) in runs.items():
                if name != "start_up":
                    log(f"profiling {name}")
                    profiles[name] = profiled_dry_run(
                        folder, extra, Path(args.profile, f"{name}.prof").resolve())
    medians = {k: statistics.median(v) for k, v in times.items()}
    report = {"cells": n_cells, "jobs": n_jobs, "jobs_planned": planned,
              "timing_job_resources": resources, "profile": profiles,
              "repeats": args.repeats, "times_s": times,
              "median_s": medians, "ratio": medians["pipeline"] / medians["trivial"],
              "like_for_like_ratio": medians["pipeline"] / medians["trivial_tuned"],
              "same_shape_ratio": medians["same_shape"] / medians["trivial_tuned"],
              "floor_ratio": medians["floor"] / medians["trivial_tuned"],
              "target": TARGET}
    report["within_target"] = report["ratio"] <= TARGET
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"{n_cells} cells, {n_jobs} jobs: dry run {medians['pipeline']:.1f} s, trivial "
          f"Snakefile with {n_jobs} jobs {medians['trivial']:.1f} s: ratio "
          f"{report['ratio']:.2f} (target <= {TARGET}: "
          f"{'met' if report['within_target'] else 'NOT met'}).\n"
          f"Like for like, each with the pipeline's {PLANNING_RULES}: the trivial Snakefile "
          f"{medians['trivial_tuned']:.1f} s, the pipeline's ratio to it "
          f"{report['like_for_like_ratio']:.2f}; a Snakefile of the same shape (measure's "
          f"declarations, its functions returning constants) {medians['same_shape']:.1f} s: "
          f"ratio {report['same_shape_ratio']:.2f}; the least a timing job can declare "
          f"(FLOOR_SNAKEFILE) {medians['floor']:.1f} s: ratio {report['floor_ratio']:.2f}.\n"
          f"Snakemake's start-up (no job) {medians['start_up']:.1f} s, in each of these.")
    if profiles:
        print(profile_table(profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
