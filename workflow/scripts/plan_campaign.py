"""What a config will ask a SLURM cluster for, before anything is submitted.

    python3 workflow/scripts/plan_campaign.py --configfile config/gpu.yaml \\
        [--profile <site profile>] [--config KEY=VALUE ...] [--group-components G=N]

Prints the cells per (framework, device), the SLURM jobs they become (packed: the
workflow profile's group-components cells of one (framework, device) a job, run one after
another; and one per float64 reference), the partition, GPU and CPUs each asks for, the
walltime requested per job, and the GPU-hours and CPU-hours requested: every job's time
limit times what it asks for, an upper bound (a job ends when its cells do).

Everything comes from the pipeline's own reading of the config (adbench/config.py: the
schema, the grids, the workloads, the `cluster` section's resources) and from the rules'
resources: a timing job's runtime is adbench.config.Walltimes' (the cell's estimate, from
an earlier run of the results tree or the cost model, times the margin, between the floor
and the budget; a packed job's, the sum of its cells'), a reference job's
REFERENCE_RUNTIME_MIN: the same numbers the jobs are submitted with. How many cells a job
packs is read as Snakemake reads it: the measure rule's group (`groups`) and its size
(`group-components`) from the workflow profile (profiles/slurm), whose keys replace the site
profile's, or from this command's --group-components, as from snakemake's. The config is
read as Snakemake reads it: the config files merged in order (config/config.yaml when none
is given), then the site profile's `config:` key, or the --config values, which replace it
(Snakemake's rule for a key given both ways).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import textwrap
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from adbench import config as run_config  # noqa: E402
from adbench import spec  # noqa: E402


WORKFLOW_PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "slurm"


@dataclasses.dataclass(frozen=True)
class Job:
    """One SLURM job: what it asks for and for how long (first attempt)."""

    rule: str  # measure (a timing job) or reference
    framework: str  # the cells'; "reference" for a reference job
    device: str
    runtime_min: int
    cpus: int
    gpus: int
    partition: str | None
    gpu_model: str | None
    # a timing job's cells, by where each one's walltime came from: measured | model | budget
    walltime_from: tuple[str, ...] = ()

    @property
    def cells(self) -> int:
        return len(self.walltime_from)

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.runtime_min / 60

    @property
    def cpu_hours(self) -> float:
        return self.cpus * self.runtime_min / 60


def cell_job(run: run_config.Run, cell: spec.Cell) -> Job:
    """A cell's own timing job."""
    cluster = run.config["cluster"]
    resources = run_config.slurm_resources(cluster, cell.device, cell.threads)
    walltime = run.walltimes.of(cell)
    return Job("measure", cell.framework, cell.device, walltime.minutes,
               run_config.job_cpus(cluster, cell.device, cell.threads),
               run_config.cell_gpus(cell.device), resources.get("slurm_partition"),
               resources.get("gpu_model"), (walltime.source,))


def packed(jobs: list[Job]) -> Job:
    """Cells run one after another in one allocation, as Snakemake sizes a group job whose
    cells it stacks in series (a local timing_lock of 1): the sum of their walltimes, the
    most CPUs, GPUs of one."""
    first = jobs[0]
    return dataclasses.replace(
        first, runtime_min=sum(j.runtime_min for j in jobs), cpus=max(j.cpus for j in jobs),
        gpus=max(j.gpus for j in jobs),
        walltime_from=tuple(s for j in jobs for s in j.walltime_from))


def slurm_jobs(run: run_config.Run, pack: int = 1) -> list[Job]:
    """Every job a run submits: rule measure's, `pack` cells of one (framework, device) a
    job (Snakemake chooses which; here in the config's order), then rule reference's, one
    per (model, derivative, seed) the cells share (common.smk, reference_files)."""
    by_group: dict[tuple[str, str], list[Job]] = {}
    for cell in run.cells:
        by_group.setdefault((cell.device, cell.framework), []).append(cell_job(run, cell))
    jobs = [packed(group[i:i + pack]) for group in by_group.values()
            for i in range(0, len(group), pack)]
    cluster = run.config["cluster"]
    reference = run_config.slurm_resources(cluster, "cpu")
    references = {cell.reference_path: (cell.model, spec.TASKS[cell.task].derivative)
                  for cell in run.cells}
    jobs += [Job("reference", "reference", "cpu",
                 run.walltimes.reference(model, derivative).minutes, 1, 0,
                 reference.get("slurm_partition"), None)
             for model, derivative in references.values()]
    return jobs + peak_jobs(run)


def peak_jobs(run: run_config.Run) -> list[Job]:
    """Rule matmul_peak's job where CPU cells run (adbench.scaling): seconds of products, on
    the CPU partition with the most threads of those cells, at the walltimes' floor; and rule
    matmul_peak_cuda's where CUDA cells run, on a GPU as a CUDA cell asks for one."""
    from adbench import scaling

    cluster, jobs = run.config["cluster"], []
    threads = scaling.thread_counts(run.cells)
    if threads:
        resources = run_config.slurm_resources(cluster, "cpu")
        jobs.append(Job("matmul_peak", "(matmul peak)", "cpu", run.walltimes.floor_min,
                        max(threads), 0, resources.get("slurm_partition"), None))
    if scaling.measures_gpu_peak(run.cells):
        resources = run_config.slurm_resources(cluster, "cuda")
        jobs.append(Job("matmul_peak_cuda", "(matmul peak)", "cuda", run.walltimes.floor_min,
                        run_config.job_cpus(cluster, "cuda", 1), run_config.cell_gpus("cuda"),
                        resources.get("slurm_partition"), resources.get("gpu_model")))
    return jobs


# ------------------------------------------------------------------ packing
MEASURE_GROUP_KEYS = ("groups", "group-components")


def profile_keys(profile: str | Path | None) -> dict:
    """A profile's config.yaml (a folder, or a name Snakemake finds), {} where none."""
    if not profile:
        return {}
    from snakemake.cli import get_profile_dir
    from snakemake.profiles import ProfileConfigFileParser

    found = get_profile_dir(str(profile))
    if found is None:
        raise SystemExit(f"--profile {profile}: no such profile (a folder with config.yaml)")
    with open(found[1]) as stream:
        return ProfileConfigFileParser().parse(stream)


def cells_per_job(workflow_profile: str | Path | None, site_profile: str | None = None,
                  group_components: list[str] | None = None) -> int:
    """How many cells of one (framework, device) a timing job packs: the measure rule's
    group (`groups`) and that group's `group-components`, from the site profile, then the
    workflow profile (Snakemake lets the later profile's key replace the earlier one's),
    then the command line; 1 where the measure rule is in no group."""
    keys: dict = {}
    for profile in (site_profile, workflow_profile):
        found = profile_keys(profile)
        keys.update({k: found[k] for k in MEASURE_GROUP_KEYS if k in found})
    if group_components:
        keys["group-components"] = group_components
    groups = dict(entry.split("=", 1) for entry in keys.get("groups", []))
    components = dict(entry.split("=", 1) for entry in keys.get("group-components", []))
    group = groups.get("measure")
    return int(components.get(group, 1)) if group else 1


# ------------------------------------------------------------------ reading the config
def profile_config_entries(profile: str | None) -> list[str]:
    """A profile's `config:` key as Snakemake passes it on: KEY=VALUE strings."""
    return list(profile_keys(profile).get("config", []))


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


def report(run: run_config.Run, jobs: list[Job], source: str, pack: int = 1) -> str:
    timing = [j for j in jobs if j.rule == "measure"]
    references = [j for j in jobs if j.rule == "reference"]
    peaks = [j for j in jobs if j.rule.startswith("matmul_peak")]
    groups: dict[tuple[str, str], list[Job]] = {}
    for job in timing:
        groups.setdefault((job.framework, job.device), []).append(job)
    n_cells = sum(j.cells for j in timing)
    cluster = run.config["cluster"]
    how = ("one per cell" if pack == 1 else
           f"up to {pack} cells of one framework and device each, run one after another")
    lines = [
        *wrap(f"Plan of {source} (results in {run.results}/): {len(jobs)} SLURM jobs, "
              f"{len(timing)} timing jobs for {cells(n_cells)} (rule measure, {how}) and "
              f"{len(references)} reference jobs (rule reference)"
              + (f" and {len(peaks)} matmul peak job{'s' if len(peaks) > 1 else ''} (rule "
                 f"{', '.join(dict.fromkeys(j.rule for j in peaks))})." if peaks else ".")),
        *wrap("Site (the config's cluster section; unset: the cluster's default): "
              + ", ".join(f"{key} {cluster.get(key, '-')}" for key in
                          ("account", "cpu_partition", "gpu_partition", "gpu_model", "qos"))
              + "."),
        "",
    ]
    rows = [["framework", "device", "cells", "jobs", "partition", "each job asks for",
             "walltime/job", "GPU-h", "CPU-h"]]
    for (framework, device), group in sorted(groups.items()):
        rows.append([framework, device, str(sum(j.cells for j in group)), str(len(group)),
                     group[0].partition or "(default)", asks(group),
                     minutes(j.runtime_min for j in group),
                     hours(sum(j.gpu_hours for j in group)),
                     hours(sum(j.cpu_hours for j in group))])
    if references:
        rows.append(["(reference)", "cpu", "-", str(len(references)),
                     references[0].partition or "(default)", asks(references),
                     minutes(j.runtime_min for j in references), hours(0),
                     hours(sum(j.cpu_hours for j in references))])
    for job in peaks:
        rows.append([job.framework, job.device, "-", "1", job.partition or "(default)",
                     asks([job]), minutes([job.runtime_min]), hours(job.gpu_hours),
                     hours(job.cpu_hours)])
    rows.append(["total", "", str(n_cells), str(len(jobs)), "", "", "",
                 hours(sum(j.gpu_hours for j in jobs)), hours(sum(j.cpu_hours for j in jobs))])
    lines += table(rows)
    by_walltime = Counter(j.runtime_min for j in jobs)
    sources = Counter(s for j in timing for s in j.walltime_from)
    walltimes = run.walltimes
    spread = (", ".join(f"{runtime} x {count}" for runtime, count in sorted(by_walltime.items()))
              if len(by_walltime) <= 12 else f"{min(by_walltime)} to {max(by_walltime)}, "
              f"median {statistics.median(j.runtime_min for j in jobs):g}")
    notes = [
        f"Walltime requested per job (minutes x jobs): {spread}.",
        f"A cell's walltime is its estimated time x {walltimes.margin:g} "
        f"(cluster.walltime_margin), at least {walltimes.floor_min} min "
        "(cluster.walltime_floor_min), at most its budget_s rounded up to minutes plus one "
        f"(the limit run_cell.py kills the cell at); a packed job's, the sum of its cells'. "
        f"Estimated from the cell's measured time in {run.results}/: "
        f"{cells(sources['measured'])}; from the cost model (workload x cost per iteration, "
        f"start-up, compilation): {sources['model']}; the budget (timed out or left "
        f"unfinished before): {sources['budget']}.",
        "GPU-hours and CPU-hours requested are each job's walltime x its GPUs and CPUs: an "
        "upper bound, since a job ends when its cells do. Every cell of the config is "
        "counted, as a first run submits them; a later run submits only the cells its "
        "results tree lacks or must re-time (snakemake -n lists them)"
        + (", and Snakemake chooses which cells share a job (here: in the config's order)."
           if pack > 1 else "."),
    ]
    for note in notes:
        lines += ["", *wrap(note)]
    return "\n".join(lines) + "\n"


def wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 92, break_on_hyphens=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", default=[],
                        help="config file(s), as given to snakemake (default: config/config.yaml)")
    parser.add_argument("--profile", help="your site profile (its config: cluster section)")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                        help="as snakemake's --config (replaces the profile's config: key)")
    parser.add_argument("--workflow-profile", default=str(WORKFLOW_PROFILE),
                        help="as snakemake's (default: profiles/slurm; 'none': no packing)")
    parser.add_argument("--group-components", nargs="+", metavar="GROUP=N",
                        help="as snakemake's, e.g. 'cells_{device}_{framework}=20'")
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
    workflow_profile = None if args.workflow_profile == "none" else args.workflow_profile
    pack = cells_per_job(workflow_profile, args.profile, args.group_components)
    print(report(run, slurm_jobs(run, pack), source, pack), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
