"""What a config will ask a SLURM cluster for, before anything is submitted.

    ADBENCH_SITE=<site file> python3 workflow/scripts/plan_campaign.py \\
        --configfile config/gpu.yaml [--site <site file>] [--config KEY=VALUE ...]

Prints the cells still to run per (framework, device), the packs they go to SLURM in (one
job each, its cells run one after another), what each asks for (partition, GPU, CPUs,
memory, walltime), the number of submissions (sbatch calls), the GPU-hours and CPU-hours
requested (each job's time limit times what it asks for: an upper bound, since a job ends
when its cells do), and, for the cells whose estimate came from an example tree measured
on the site's GPU, the walltime they ask for over the time those cells took there.

Everything comes from the pipeline's own reading of the config (adbench/config.py) and
from adbench/cluster.py, whose Packs and Walltimes give the rules their groups, runtimes and
memory: the same numbers the jobs are submitted with. The config is read as Snakemake reads
it: the config files merged in order (config/config.yaml when none is given), then a
profile's `config:` key or the --config values, which replace it; the site file
(ADBENCH_SITE, or --site) under the config's own `cluster` keys.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import textwrap
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from adbench import cluster  # noqa: E402
from adbench import config as run_config  # noqa: E402
from adbench import spec, sweeps  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Job:
    """One SLURM job: what it asks for and for how long (first attempt)."""

    rule: str  # pack (timing cells), matmul_peak or matmul_peak_cuda
    framework: str  # the cells'; "(matmul peak)" for a peak
    device: str
    runtime_min: int
    cpus: int
    gpus: int
    mem_mb: int
    partition: str | None
    gpu: str | None  # the GPU type asked for, as the site names it
    # a pack's cells, by where each one's estimate came from: measured | example | model | budget
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


def pending_cells(run: run_config.Run, working_dir: Path) -> list[spec.Cell]:
    """The cells a run will time, as the workflow predicts them (a code change aside)."""
    tree = working_dir / run.results
    return [c for c in run.cells if cluster.pending_cell(tree, c, lambda f, d: False,
                                                         run.workloads.description)]


def packs(run: run_config.Run, working_dir: Path) -> run_config.Packs:
    cells = set(pending_cells(run, working_dir))
    return run_config.Packs(run.walltimes, run.cells, cells.__contains__,
                            run.config["cluster"]["pack_minutes"], cluster.tree_tag(run.results))


def job_of(run: run_config.Run, rule: str, framework: str, device: str, minutes: int,
           threads: int, mem_mb: int, sources: tuple[str, ...] = ()) -> Job:
    settings = run.config["cluster"]
    resources = run_config.slurm_resources(settings, device, threads)
    return Job(rule, framework, device, minutes,
               run_config.job_cpus(settings, device, threads), run_config.cell_gpus(device),
               mem_mb, resources.get("slurm_partition"),
               (settings.get("gpu_model") or "any") if device == "cuda" else None, sources)


def pack_job(run: run_config.Run, pack: run_config.Pack) -> Job:
    """A pack's job: its walltime, and the most CPUs, GPUs and memory of one of its cells."""
    w = run.walltimes
    threads = max(c.threads for c in pack.cells)
    return job_of(run, "pack", pack.framework, pack.device, pack.minutes, threads,
                  max(w.mem_mb(c) for c in pack.cells),
                  tuple(w.of(c).source for c in pack.cells))


def slurm_jobs(run: run_config.Run, working_dir: Path | None = None) -> list[Job]:
    """Every job a run submits: its packs, then the matmul peaks (adbench.sweeps)."""
    found = packs(run, Path.cwd() if working_dir is None else working_dir)
    return [pack_job(run, p) for p in found.packs] + peak_jobs(run)


def peak_jobs(run: run_config.Run) -> list[Job]:
    """Rule matmul_peak's job where CPU cells run (seconds of products, on the CPU partition
    with the most threads of those cells, at the walltimes' floor) and rule
    matmul_peak_cuda's where CUDA cells run, on a GPU as a CUDA cell asks for one."""

    floor, mem, jobs = run.walltimes.floor_min, run.config["workload"]["mem_mb"], []
    threads = sweeps.thread_counts(run.cells)
    if threads:
        jobs.append(job_of(run, "matmul_peak", "(matmul peak)", "cpu", floor, max(threads),
                           mem))
    if sweeps.measures_gpu_peak(run.cells):
        jobs.append(job_of(run, "matmul_peak_cuda", "(matmul peak)", "cuda", floor, 1, mem))
    return jobs


# ------------------------------------------------------------------ requested over expected
# A class of cells whose walltime asks for more than this times what they are expected to
# use is named in the plan (a site's fair share and the queue's backfill pay for it).
FLAG_RATIO = 3.0


@dataclasses.dataclass
class Priced:
    """Cells' share of their packs' walltime and the time they are expected to take."""

    cells: int = 0
    asked_s: float = 0.0  # their share of their packs' walltime
    expected_s: float = 0.0  # their estimates (Walltime.seconds), a pack's start shared

    def add(self, asked_s: float, expected_s: float) -> None:
        self.cells += 1
        self.asked_s += asked_s
        self.expected_s += expected_s

    @property
    def ratio(self) -> float:
        return self.asked_s / self.expected_s if self.expected_s else float("nan")


def priced(run: run_config.Run, found: run_config.Packs) -> dict[tuple, Priced]:
    """Each class's (cluster.class_of, but the seed) share of its packs' walltime against
    its expected use: the estimates of its cells (their class measured, carried from
    another machine or the calibrated model: Walltimes) with a job step's start, and
    Snakemake's start in the job shared among a pack's cells as its walltime is."""
    w, by_class = run.walltimes, {}
    for pack in found.packs:
        adds = [w.asked_s(c) for c in pack.cells]
        for cell, seconds in zip(pack.cells, adds):
            share = seconds / sum(adds)
            by_class.setdefault(cluster.class_of(cell), Priced()).add(
                pack.minutes * 60 * share, w.of(cell).seconds + cluster.JOB_START_S * share)
    return by_class


def total(classes: dict[tuple, Priced]) -> Priced:
    found = Priced()
    for one in classes.values():
        found.cells += one.cells
        found.asked_s += one.asked_s
        found.expected_s += one.expected_s
    return found


# ------------------------------------------------------------------ reading the config
def profile_config_entries(profile: str | None) -> list[str]:
    """A profile's `config:` key as Snakemake passes it on: KEY=VALUE strings."""
    if not profile:
        return []
    from snakemake.cli import get_profile_dir
    from snakemake.profiles import ProfileConfigFileParser

    found = get_profile_dir(str(profile))
    if found is None:
        raise SystemExit(f"--profile {profile}: no such profile (a folder with config.yaml)")
    with open(found[1]) as stream:
        return list(ProfileConfigFileParser().parse(stream).get("config", []))


def profile_overrides(profile: str | None) -> dict[str, dict]:
    """A profile's set-resources as {rule: {resource: value}}, values as Snakemake reads
    them (a quoted string unquoted)."""
    if not profile:
        return {}
    import ast

    from snakemake.cli import get_profile_dir

    found = get_profile_dir(str(profile))
    settings = yaml.safe_load(Path(found[1]).read_text()) if found else {}
    given = (settings or {}).get("set-resources") or {}
    if isinstance(given, list):  # RULE:RESOURCE=VALUE strings
        pairs = [entry.split(":", 1) for entry in given]
        given = {}
        for rule, assignment in pairs:
            name, value = assignment.split("=", 1)
            given.setdefault(rule, {})[name] = value

    def plain(value):
        try:
            return ast.literal_eval(value) if isinstance(value, str) else value
        except (ValueError, SyntaxError):
            return value

    return {rule: {k: plain(v) for k, v in (mapping or {}).items()}
            for rule, mapping in given.items()}


def load_run(configfiles: list[str], profile: str | None = None,
             config_entries: list[str] | None = None, working_dir: Path | None = None,
             site: str | None = None) -> run_config.Run:
    """The config as `snakemake --configfile ... --profile ... --config ...` reads it, with
    the site file (`site`, else ADBENCH_SITE) and every check the workflow makes at parse
    time (on a cluster: no local core limit)."""
    from snakemake.cli import parse_config
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config, validate

    files = list(configfiles) or [str(run_config.DEFAULT_CONFIG)]
    config: dict = {}
    for path in files:
        update_config(config, load_configfile(path))
    update_config(config, parse_config(config_entries or profile_config_entries(profile)))
    environ = dict(os.environ)
    if site:
        environ[run_config.SITE_VARIABLE] = site
    return run_config.checked(
        config, validate=validate, configfiles=list(configfiles), core_limit=None,
        working_dir=Path.cwd() if working_dir is None else working_dir,
        conda_enabled=config.get("environments") == "conda", python=sys.executable,
        environ=environ)


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
    """What each job of a group asks for, e.g. '1 GPU (a100), 4 CPUs, 6.3 GB'."""
    def one(values):
        values = sorted(set(values), key=str)
        return str(values[0]) if len(values) == 1 else "/".join(map(str, values))

    cpus = one(j.cpus for j in jobs)
    parts = [f"{cpus} CPU{'s' if cpus != '1' else ''}",
             f"{one(round(j.mem_mb / 1000, 1) for j in jobs)} GB"]
    if max(j.gpus for j in jobs):
        parts.insert(0, f"1 GPU ({one(j.gpu for j in jobs)})")
    return ", ".join(parts)


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {2, 3, 6, 7, 8}  # the numbers
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


def rows_of(jobs: list[Job], n_references: int) -> list[list[str]]:
    rows = [["framework", "device", "cells", "jobs", "partition", "each job asks for",
             "walltime/job", "GPU-h", "CPU-h"]]
    groups: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.framework, job.device), []).append(job)
    for (framework, device), group in sorted(groups.items()):
        rows.append([framework, device, str(sum(j.cells for j in group)) if group[0].cells
                     else "-", str(len(group)), group[0].partition or "(default)",
                     asks(group), minutes(j.runtime_min for j in group),
                     hours(sum(j.gpu_hours for j in group)),
                     hours(sum(j.cpu_hours for j in group))])
    rows.append(["total", "", str(sum(j.cells for j in jobs)), str(len(jobs)), "", "", "",
                 hours(sum(j.gpu_hours for j in jobs)), hours(sum(j.cpu_hours for j in jobs))])
    return rows


def site_line(run: run_config.Run) -> str:
    settings = run.config["cluster"]
    where = (f"site file {run.site}" if run.site else
             f"no site file ({run_config.SITE_VARIABLE} unset): the cluster's defaults")
    keys = ("account", "cpu_partition", "gpu_partition", "gpu_model", "gpu_request", "qos")
    return f"Site ({where}): " + ", ".join(f"{k} {settings.get(k, '-')}" for k in keys) + "."


def report(run: run_config.Run, jobs: list[Job], source: str,
           classes: dict[tuple, Priced]) -> str:
    packed = [j for j in jobs if j.rule == "pack"]
    n_cells = sum(j.cells for j in packed)
    n_refs = len({c.reference_path for c in run.cells})
    lines = [
        *wrap(f"Plan of {source} (results in {run.results}/): {cells(n_cells)} to time in "
              f"{len(packed)} packs, and {len(jobs) - len(packed)} matmul peak job(s): "
              f"{len(jobs)} submissions (sbatch calls). The {n_refs} float64 reference jobs "
              "run on the submit host."),
        *wrap(site_line(run)),
        "",
        *table(rows_of(jobs, n_refs)),
    ]
    w = run.walltimes
    sources = Counter(s for j in packed for s in j.walltime_from)
    by_walltime = Counter(j.runtime_min for j in jobs)
    spread = (", ".join(f"{runtime} x {count}" for runtime, count in sorted(by_walltime.items()))
              if len(by_walltime) <= 12 else f"{min(by_walltime)} to {max(by_walltime)}, "
              f"median {statistics.median(j.runtime_min for j in jobs):g}")
    notes = [
        f"Walltime requested per job (minutes x jobs): {spread}.",
        f"A pack asks for Snakemake's start ({cluster.JOB_START_S:g} s), its cells' estimates "
        f"x {w.margin:g} (cluster.walltime_margin), each at most its budget_s in minutes plus "
        f"one, and at least {w.floor_min} min (cluster.walltime_floor_min), once; up to "
        f"{run.config['cluster']['pack_minutes']} min (cluster.pack_minutes). A cell's "
        f"estimate: its class's largest time (any seed) measured in {run.results}/: "
        f"{cells(sources['measured'])}; in an example tree measured on the site's GPU: "
        f"{sources['example']}; on another machine, carried by the ratio of the machines' "
        f"measured peaks where both are known: {sources['carried']}; the cost model fitted "
        f"on the cells measured on the device: {sources['calibrated']}; the cost model "
        f"unfitted (nothing measured on the device): {sources['model']}; its budget (timed "
        f"out or left unfinished before): {sources['budget']}. Each adds a job step's start "
        f"({cluster.STEP_START_S:g} s).",
        *expected_lines(classes),
        "GPU-hours and CPU-hours requested are each job's walltime x its GPUs and CPUs: an "
        "upper bound, since a job ends when its cells do. The cells counted are those the "
        "results tree lacks or must re-time (cells re-timed for a changed harness aside: "
        "snakemake -n lists them).",
    ]
    for note in notes:
        lines += ["", *wrap(note)]
    return "\n".join(lines) + "\n"


def expected_lines(classes: dict[tuple, Priced]) -> list[str]:
    """Requested over expected use, in all and for each class above FLAG_RATIO."""
    whole = total(classes)
    if not whole.cells:
        return []
    lines = [f"Requested over expected use: the packs' cells ask for "
             f"{whole.asked_s / 3600:,.2f} h of walltime where their estimates come to "
             f"{whole.expected_s / 3600:,.2f} h: {whole.ratio:.2f}x."]
    above = sorted(((k, p) for k, p in classes.items() if p.ratio > FLAG_RATIO),
                   key=lambda item: -item[1].ratio)
    if not above:
        lines.append(f"No class of cells asks for more than {FLAG_RATIO:g}x its expected use.")
    for key, one in above:
        lines.append(f"Above {FLAG_RATIO:g}x: {' '.join(map(str, key))}: "
                     f"{cells(one.cells)} ask {one.asked_s:,.0f} s for {one.expected_s:,.0f} s "
                     f"expected ({one.ratio:.1f}x).")
    return lines


def wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 92, break_on_hyphens=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", default=[],
                        help="config file(s), as given to snakemake (default: config/config.yaml)")
    parser.add_argument("--site", help=f"the site file (default: ${run_config.SITE_VARIABLE})")
    parser.add_argument("--profile", help="a profile whose config: key to read, as snakemake")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                        help="as snakemake's --config (replaces the profile's config: key)")
    args = parser.parse_args(argv)
    from snakemake.exceptions import WorkflowError

    try:
        run = load_run(args.configfile, args.profile, args.config, site=args.site)
        pending = pending_cells(run, Path.cwd())
        settings = run.config["cluster"]
        run_config.stop_on(run_config.gpu_partition_problems(settings, pending))
        run_config.stop_on(cluster.gpu_request_problems(
            settings, profile_overrides(args.profile), any(c.device == "cuda" for c in pending)))
        run_config.stop_on(cluster.limit_problems(run.walltimes, pending,
                                                  settings["pack_minutes"]))
    except (run_config.ConfigError, WorkflowError) as error:  # WorkflowError: the schema's
        print(error, file=sys.stderr)
        return 2
    source = " ".join(args.configfile) or "config/config.yaml"
    found = packs(run, Path.cwd())
    jobs = [pack_job(run, p) for p in found.packs] + peak_jobs(run)
    print(report(run, jobs, source, priced(run, found)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
