"""What a config will ask a SLURM cluster for, before anything is submitted.

    python3 workflow/scripts/plan_campaign.py --configfile config/gpu.yaml \\
        [--profile <site profile>] [--config KEY=VALUE ...]

Prints the cells per (framework, device), the SLURM jobs they become (one per cell, and one
per float64 reference), the partition, GPU and CPUs each asks for, the walltime requested
per job, and the GPU-hours and CPU-hours requested: every job's time limit times what it
asks for, an upper bound (a job ends when its cell does).

Everything comes from the pipeline's own reading of the config (adbench/config.py: the
schema, the grids, the workloads, the `cluster` section's resources) and from the rules'
resources: a timing job's runtime is adbench.config.Walltimes' (the cell's estimate, from
an earlier run of the results tree or the cost model, times the margin, between the floor
and the budget), a reference job's REFERENCE_RUNTIME_MIN: the same numbers the jobs are
submitted with. The config is read as Snakemake reads it: the config files merged in
order (config/config.yaml when none is given), then the site profile's `config:` key, or
the --config values, which replace it (Snakemake's rule for a key given both ways).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from adbench import config as run_config  # noqa: E402
from adbench import spec  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Job:
    """One SLURM job: what it asks for and for how long (first attempt)."""

    rule: str  # measure (a timing job) or reference
    framework: str  # the cell's; "reference" for a reference job
    device: str
    runtime_min: int
    cpus: int
    gpus: int
    partition: str | None
    gpu_model: str | None
    walltime_from: str = "fixed"  # a timing job's: measured | model | budget

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.runtime_min / 60

    @property
    def cpu_hours(self) -> float:
        return self.cpus * self.runtime_min / 60


def slurm_jobs(run: run_config.Run) -> list[Job]:
    """Every job a run submits: rule measure's, one per cell, then rule reference's, one
    per (model, derivative, seed) the cells share (common.smk, reference_files)."""
    cluster = run.config["cluster"]
    jobs = []
    for cell in run.cells:
        resources = run_config.slurm_resources(cluster, cell.device, cell.threads)
        walltime = run.walltimes.of(cell)
        jobs.append(Job("measure", cell.framework, cell.device, walltime.minutes,
                        run_config.job_cpus(cluster, cell.device, cell.threads),
                        run_config.cell_gpus(cell.device), resources.get("slurm_partition"),
                        resources.get("gpu_model"), walltime.source))
    reference = run_config.slurm_resources(cluster, "cpu")
    jobs += [Job("reference", "reference", "cpu", run_config.REFERENCE_RUNTIME_MIN, 1, 0,
                 reference.get("slurm_partition"), None)
             for _ in dict.fromkeys(cell.reference_path for cell in run.cells)]
    return jobs


# ------------------------------------------------------------------ reading the config
def profile_config_entries(profile: str | None) -> list[str]:
    """A profile's `config:` key as Snakemake passes it on: KEY=VALUE strings."""
    if not profile:
        return []
    from snakemake.cli import get_profile_dir
    from snakemake.profiles import ProfileConfigFileParser

    found = get_profile_dir(profile)
    if found is None:
        raise SystemExit(f"--profile {profile}: no such profile (a folder with config.yaml)")
    with open(found[1]) as stream:
        return list(ProfileConfigFileParser().parse(stream).get("config", []))


def load_run(configfiles: list[str], profile: str | None = None,
             config_entries: list[str] | None = None, working_dir: Path | None = None
             ) -> run_config.Run:
    """The config as `snakemake --configfile ... --profile ... --config ...` reads it, with
    every check the workflow makes at parse time (on a cluster: no local core limit)."""
    from snakemake.cli import parse_config
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config, validate

    files = list(configfiles) or [str(run_config.DEFAULT_CONFIG)]
    config: dict = {}
    for path in files:
        update_config(config, load_configfile(path))
    update_config(config, parse_config(config_entries or profile_config_entries(profile)))
    return run_config.checked(
        config, validate=validate, configfiles=list(configfiles), core_limit=None,
        working_dir=Path.cwd() if working_dir is None else working_dir,
        conda_enabled=config.get("environments") == "conda", python=sys.executable)


# ------------------------------------------------------------------ the report
def hours(value: float) -> str:
    return f"{value:,.1f}"


def minutes(values) -> str:
    values = list(values)
    low, high = min(values), max(values)
    return f"{low} min" if low == high else f"{low}-{high} min"


def cells(count: int) -> str:
    return f"{count} cell{'s' if count != 1 else ''}"


def asks(jobs: list[Job]) -> str:
    """What each job of a group asks for, e.g. '1 GPU a100, 4 CPUs'."""
    def one(values, what):
        values = sorted(set(values), key=str)
        return what(values[0]) if len(values) == 1 else "/".join(map(str, values))

    gpus = max(j.gpus for j in jobs)
    cpus = one([j.cpus for j in jobs], str)
    parts = [f"{cpus} CPU{'s' if cpus != '1' else ''}"]
    if gpus:
        model = one([j.gpu_model or "any" for j in jobs], str)
        parts.insert(0, f"{gpus} GPU ({model})")
    return ", ".join(parts)


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {2, 3, 6, 7, 8}  # the numbers
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


def report(run: run_config.Run, jobs: list[Job], source: str) -> str:
    timing = [j for j in jobs if j.rule == "measure"]
    references = [j for j in jobs if j.rule == "reference"]
    groups: dict[tuple[str, str], list[Job]] = {}
    for job in timing:
        groups.setdefault((job.framework, job.device), []).append(job)
    cluster = run.config["cluster"]
    lines = [
        f"Plan of {source} (results in {run.results}/): {len(jobs)} SLURM jobs,",
        f"{len(timing)} timing jobs (rule measure, one per cell) and {len(references)} "
        "reference jobs (rule reference).",
        "Site (the config's cluster section; unset: the cluster's default): "
        + ", ".join(f"{key} {cluster.get(key, '-')}" for key in
                    ("account", "cpu_partition", "gpu_partition", "gpu_model", "qos")),
        "",
    ]
    rows = [["framework", "device", "cells", "jobs", "partition", "each job asks for",
             "walltime/job", "GPU-h", "CPU-h"]]
    for (framework, device), group in sorted(groups.items()):
        rows.append([framework, device, str(len(group)), str(len(group)),
                     group[0].partition or "(default)", asks(group),
                     minutes(j.runtime_min for j in group),
                     hours(sum(j.gpu_hours for j in group)),
                     hours(sum(j.cpu_hours for j in group))])
    if references:
        rows.append(["(reference)", "cpu", "-", str(len(references)),
                     references[0].partition or "(default)", asks(references),
                     minutes(j.runtime_min for j in references), hours(0),
                     hours(sum(j.cpu_hours for j in references))])
    rows.append(["total", "", str(len(timing)), str(len(jobs)), "", "", "",
                 hours(sum(j.gpu_hours for j in jobs)), hours(sum(j.cpu_hours for j in jobs))])
    lines += table(rows)
    by_walltime = Counter(j.runtime_min for j in jobs)
    sources = Counter(j.walltime_from for j in timing)
    walltimes = run.walltimes
    notes = [
        "Walltime requested per job (minutes x jobs): " + ", ".join(
            f"{runtime} x {count}" for runtime, count in sorted(by_walltime.items())) + ".",
        f"A timing job's walltime is its cell's estimated time x {walltimes.margin:g} "
        f"(cluster.walltime_margin), at least {walltimes.floor_min} min "
        "(cluster.walltime_floor_min), at most its budget_s rounded up to minutes plus one "
        f"(the limit run_cell.py kills the cell at). Estimated from the cell's measured time "
        f"in {run.results}/: {cells(sources['measured'])}; from the cost model (workload x "
        f"cost per iteration, start-up, compilation): {sources['model']}; the budget (timed "
        f"out or left unfinished before): {sources['budget']}.",
        "GPU-hours and CPU-hours requested are each job's walltime x its GPUs and CPUs: an "
        "upper bound, since a job ends when its cell does.",
    ]
    for note in notes:
        lines += ["", *textwrap.wrap(note, 92, break_on_hyphens=False)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", default=[],
                        help="config file(s), as given to snakemake (default: config/config.yaml)")
    parser.add_argument("--profile", help="your site profile (its config: cluster section)")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                        help="as snakemake's --config (replaces the profile's config: key)")
    args = parser.parse_args(argv)
    from snakemake.exceptions import WorkflowError

    try:
        run = load_run(args.configfile, args.profile, args.config)
    except (run_config.ConfigError, WorkflowError) as error:  # WorkflowError: the schema's
        print(error, file=sys.stderr)
        return 2
    source = " ".join(args.configfile) or "config/config.yaml"
    if args.profile:
        source += f" with profile {args.profile}"
    print(report(run, slurm_jobs(run), source), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
