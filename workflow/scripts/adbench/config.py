"""A run's configuration: `--config` values read by the schema, the checks the schema cannot
make (the spec's tables, the machine, where results may go), and each cell's workload.

workflow/rules/common.smk calls these at parse time, before any job; nothing here imports
Snakemake, so tests/test_run_config.py checks every rule without running a workflow.  The
grids and their cells are spec's (config_grids, grid_cells): they are the experiment's axes.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
import re
from pathlib import Path
from typing import Callable

import yaml

from adbench import spec

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"
# What the project ships or keeps at its top level (tests/test_run_config.py checks the list
# against git): a results tree inside one would write into the source or the study's data.
SHIPPED_FOLDERS = (".ci", ".test", "benchmarks", "config", "docs", "envs", "profiles", "report",
                   "tests", "workflow", ".git", ".snakemake", ".venvs")
# Shipped results trees, one per subfolder (example-results/cuda-h100: measured elsewhere,
# rebuilt in place from its raw files): a config may name one of them, nothing else inside.
SHIPPED_RESULTS = ("example-results",)
# Workload keys that are a job's resources, not what it measures.
RESOURCE_KEYS = ("budget_s", "mem_mb")
# Each axis a grid must give itself (the others have spec.GRID_DEFAULTS).
REQUIRED_AXES = ("frameworks", "models", "seeds")


class ConfigError(ValueError):
    """Every problem found, one per line, each naming the key at fault."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n  ".join(["invalid config:", *problems]))


def stop_on(problems: list[str]) -> None:
    if problems:
        raise ConfigError(problems)


@functools.cache
def load_schema(path: Path = SCHEMA) -> dict:
    return yaml.safe_load(Path(path).read_text())


# ------------------------------------------------------------------ reading --config
def coerce_by_schema(value, schema: dict, defs: dict):
    """--config values arrive as strings (Snakemake reads them with YAML's BaseLoader, so
    `--config 'every_grid={seeds: [0, 1]}'` gives ['0', '1']): read a string as YAML where
    the schema wants a number, an integer or a boolean, and leave the rest to validation."""
    if "$ref" in schema:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**defs[schema["$ref"].rsplit("/", 1)[1]], **rest}
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        fallback = extra if isinstance(extra, dict) else {}
        return {k: coerce_by_schema(v, props.get(k, fallback), defs) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce_by_schema(v, schema.get("items", {}), defs) for v in value]
    wanted = {"integer": int, "number": (int, float), "boolean": bool}.get(schema.get("type"))
    if isinstance(value, str) and wanted:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if isinstance(parsed, wanted) and (wanted is bool) == isinstance(parsed, bool):
            return parsed
    return value


def read_values(config: dict, schema: dict | None = None) -> dict:
    """The config as the schema reads it: a single grid written as a mapping becomes a list
    of one, and strings become the numbers the schema wants."""
    schema = schema or load_schema()
    config = dict(config)
    if isinstance(config.get("grid"), dict):
        config["grid"] = [config["grid"]]
    return coerce_by_schema(config, schema, schema["$defs"])


def incomplete_grids(config: dict) -> list[str]:
    """A grid given on the command line replaces the config file's grids whole."""
    grids = config.get("grid")
    if not isinstance(grids, list):
        return []
    return [
        f"grid{f'[{i}]' if len(grids) > 1 else ''}: no {key} (a --config grid=... replaces "
        "every grid of the config file; to change one key of every grid, e.g. the seeds: "
        "--config 'every_grid={seeds: [0, 1, 2]}')"
        for i, grid in enumerate(grids)
        if isinstance(grid, dict)
        for key in REQUIRED_AXES
        if key not in grid
    ]


# ------------------------------------------------------------------ the results tree
def default_results_tree(configfiles: list, root: Path = ROOT) -> str:
    """results/ for the default config, results-<name>/ for config file <name>.yaml: two
    configs never write each other's cells (a config's `results` key names its own)."""
    files = [Path(f) for f in configfiles]
    if not files or files[-1].resolve() == (root / "config" / "config.yaml").resolve():
        return "results"
    return f"results-{re.sub(r'[^A-Za-z0-9._-]', '_', files[-1].stem)}"


def results_tree_problems(results: str, workdir: Path, root: Path = ROOT) -> list[str]:
    """A results tree lies outside every folder the project ships, and is not the project
    itself: a run must never write into the source or the study's published data."""
    tree = (Path(workdir) / results).resolve()
    root = root.resolve()
    if tree == root or tree in root.parents:
        return [f"results: {results!r} is the project's own folder; name a folder of its own, "
                "e.g. results-mine"]
    inside = [f for f in (*SHIPPED_FOLDERS, *SHIPPED_RESULTS)
              if tree == root / f or (root / f) in tree.parents]
    inside = [f for f in inside if not (f in SHIPPED_RESULTS and tree.parent == root / f)]
    return [f"results: {results!r} lies inside {f}/, which the project ships; name a folder "
            "of its own, e.g. results-mine" for f in inside]


# ------------------------------------------------------------------ checks against the spec
def where(i: int, grids: list) -> str:
    return f"grid[{i}]" if len(grids) > 1 else "grid"


def unknown(key: str, kind: str, names, known) -> list[str]:
    return [f"{key}: unknown {kind} {n!r} (valid: {', '.join(known)})"
            for n in names if n not in known]


def spec_problems(config: dict, grids: list[dict]) -> list[str]:
    """What the JSON schema cannot know: the spec's framework/mode, task and model tables."""
    problems = []
    for i, grid in enumerate(grids):
        at = where(i, grids)
        problems += [p.replace("grid.", f"{at}.") for p in spec.invalid_pairs(grid["frameworks"])]
        problems += unknown(f"{at}.models", "model", grid["models"], spec.MODELS)
        problems += unknown(f"{at}.tasks", "task", grid["tasks"], spec.TASKS)
    workload = config["workload"]
    problems += unknown("workload.tasks", "task", workload["tasks"], spec.TASKS)
    problems += unknown("workload.models", "model", workload["models"], spec.MODELS)
    problems += unknown("gradient_check.models", "model", config["gradient_check"]["models"],
                        spec.MODELS)
    return problems


# ------------------------------------------------------------------ workloads
def without_resources(workload: dict) -> dict:
    """The workload keys that shape the numbers: a budget or a memory request does not, so
    changing one re-runs no aggregation either."""
    def drop(keys):
        return {k: v for k, v in keys.items() if k not in RESOURCE_KEYS}

    return {
        **drop(workload),
        "tasks": {t: drop(v) for t, v in workload["tasks"].items() if drop(v)},
        "models": {m: drop(v) for m, v in workload["models"].items() if drop(v)},
    }


class Workloads:
    """Each (model, task)'s workload keys: the config's defaults, then the task's overrides,
    then the model's.  Cached per (model, task), not per job: a campaign plans thousands of
    jobs from a few dozen of these."""

    def __init__(self, workload: dict):
        self.workload = workload

    @functools.cache
    def settings(self, model: str, task: str) -> dict:
        w = self.workload
        settings = {k: w[k] for k in ("warmup", "iterations", *RESOURCE_KEYS)}
        settings.update(w["tasks"].get(task, {}))
        settings.update(w["models"].get(model, {}))
        return settings

    @functools.cache
    def sizes(self, model: str, task: str) -> dict:
        """Warm-up, iterations and data sizes: the overrides on the spec's defaults."""
        settings = {k: v for k, v in self.settings(model, task).items()
                    if k not in RESOURCE_KEYS}
        workload = spec.Workload(model=model, seed=0, task=task, **settings)
        return {k: getattr(workload, k)
                for k in ("warmup", "iterations", "n_samples", "batch_size", "jacobian_rows")}

    def budget_s(self, model: str, task: str) -> float:
        """Seconds a cell's process may run (run_cell.py kills it then)."""
        return self.settings(model, task)["budget_s"]

    def mem_mb(self, model: str, task: str) -> int:
        return self.settings(model, task)["mem_mb"]

    def runtime_min(self, model: str, task: str) -> int:
        """The budget in minutes, with a minute to spare for run_cell.py to write the record
        of a killed cell: the most a timing job ever asks a cluster for (Walltimes)."""
        return math.ceil(self.budget_s(model, task) / 60) + 1

    def description(self, cell: spec.Cell) -> spec.CellDescription:
        """A cell with its workload (this config's sizes and iterations): what its timing job
        is handed, whole."""
        workload = spec.Workload(model=cell.model, seed=cell.seed, task=cell.task,
                                 **self.sizes(cell.model, cell.task))
        return spec.CellDescription(cell, workload)


def budget_resource(budget_s: float) -> int | str:
    """A budget as rule measure's budget_s resource (the shell line's --budget-s): an integer
    where it is whole, since the cells packed into one cluster job may differ in it and
    Snakemake merges integers but refuses strings that differ; else its shortest text."""
    return int(budget_s) if float(budget_s).is_integer() else f"{budget_s:g}"


def workload_problems(grids: list[dict], cells: list, workloads: Workloads,
                      core_limit: int | None) -> list[str]:
    """Thread counts the machine cannot give (core_limit None: a cluster, where each job
    asks for its own), data sizes a model cannot fill."""
    problems = [
        f"{where(i, grids)}.threads: {t} exceeds the {core_limit} CPU(s) of this machine: its "
        "numbers would carry a wrong label (on a cluster, each job asks for its own)"
        for i, grid in enumerate(grids)
        for t in grid["threads"]
        if core_limit and t > core_limit
    ]
    for model, task in dict.fromkeys((c.model, c.task) for c in cells):
        w, info = workloads.sizes(model, task), spec.MODELS[model]
        if w["batch_size"] > w["n_samples"]:
            problems.append(f"workload.models.{model}: batch_size {w['batch_size']} exceeds "
                            f"n_samples {w['n_samples']}: not one full batch")
        if w["jacobian_rows"] > info.n_outputs:
            problems.append(f"workload.models.{model}.jacobian_rows: {w['jacobian_rows']} "
                            f"exceeds the model's {info.n_outputs} outputs")
    return list(dict.fromkeys(problems))


# ------------------------------------------------------------------ the cluster
# The most minutes a reference job asks for (rule reference's runtime; what every one asked
# for before its walltime was estimated, Walltimes.reference).
REFERENCE_RUNTIME_MIN = 60


def slurm_resources(cluster: dict, device: str, threads: int = 1) -> dict:
    """The resources of snakemake-executor-plugin-slurm that the config's `cluster` section
    gives a job on `device`: 'cpu' for a CPU cell or a reference job, 'cuda' for a CUDA cell
    (its one GPU, `gpu`, is rule measure's own). Only what the section sets: a key it
    leaves out is not a resource of the rule, so the plugin's default or a site profile's
    `default-resources` applies. A CPU job never gets a GPU model (with gpu=0 it would
    become --gpus=<model>:0); a CUDA cell asks for `cuda_cpus` cores, at least its threads."""
    cuda = device == "cuda"
    resources = {
        "slurm_partition": cluster.get("gpu_partition" if cuda else "cpu_partition"),
        "slurm_account": cluster.get("account"),
        "qos": cluster.get("gpu_qos", cluster.get("qos")) if cuda else cluster.get("qos"),
        "constraint": cluster.get("gpu_constraint" if cuda else "cpu_constraint"),
    }
    if cuda:
        resources["gpu_model"] = cluster.get("gpu_model")
        resources["cpus_per_task"] = max(int(cluster["cuda_cpus"]), int(threads))
    return {name: value for name, value in resources.items() if value is not None}


def cell_gpus(device: str) -> int:
    """GPUs a timing job asks for (rule measure's gpu: SLURM's --gpus): one for a CUDA cell."""
    return int(device == "cuda")


def job_cpus(cluster: dict, device: str, threads: int) -> int:
    """The CPU cores a timing job asks for: its threads, or cuda_cpus for a CUDA cell."""
    return slurm_resources(cluster, device, threads).get("cpus_per_task", int(threads))


# ------------------------------------------------------------------ a timing job's walltime
# What a timing job asks a cluster for (rule measure's `runtime`; plan_campaign.py prints the
# same numbers, from the same function): an estimate of its cell times the config's
# cluster.walltime_margin, at least cluster.walltime_floor_min, at most the budget's minutes
# plus one (Workloads.runtime_min), since run_cell.py kills the cell at its budget anyway.
# The estimate is the cell's own wall time where an earlier run of this results tree measured
# it, else a model of the cell's cost (below). Resources only: changing any of this
# re-times nothing.
#
# The model, in one place: a job's start-up, a compiled mode's compilation, and each
# iteration's derivative calls and multiply-adds, priced for one slow CPU core (a GPU is
# faster on the large models and about as fast on the small ones, whose steps are bound by
# the framework's overhead). Chosen to lie above the cells measured so far, the CPU cells of
# config/config.yaml and config/paper.yaml on one core and the H100's in
# example-results/cuda-h100 (tests/test_walltime.py checks the latter), not to be precise:
# after one run, the cells' measured times replace it.
JOB_START_S = 30.0  # Snakemake's own start in the job (it parses the workflow), run_cell.py
CELL_START_S = 30.0  # the timing process: interpreter, framework, CUDA, data and model
# A compiled mode's compilation (TorchScript, torch.compile, XLA, jax.jit): a base and a
# part per parameter; ResNet50 (25.6 M parameters): 60 + 153 s (torch.compile took 1-2.5
# min on an H100).
COMPILE_S, COMPILE_S_PER_PARAMETER = 60.0, 6e-6
# Per task: seconds of overhead per iteration and per row of a Jacobian (the row-by-row
# Jacobian is one derivative call per row, in a Python loop; TensorFlow's vectorised one
# takes 0.1-0.2 s a call on the small models). A recurrent model pays it at each of its time
# steps (TensorFlow's eager vectorised Jacobian of the LSTM: 5.5 s an iteration on one core).
TASK_OVERHEAD_S = {
    "backward": (0.01, 0.0),
    "loss_jacobian": (0.02, 0.0),
    "jacobian_rows": (0.0, 0.01),
    "jacobian_vectorized": (0.2, 0.002),
}
# Seconds per multiply-add of one example's forward pass, the derivative's included (~3
# multiply-adds per forward one): 4e-9 is 0.75 GFLOP/s, a core's slowest seen here (ResNet50's
# Jacobians at batch 1).
SECONDS_PER_MAC = 4e-9
# Multiply-adds per parameter in one example's forward pass: each weight used once per
# position it slides over or time step it repeats at. cnn: (8*9*784 + 16*8*9*196 + 3136*10)
# / 32618 = 9.6; resnet50 at 32x32: ~84 M / 25.6 M = 3.3. Recurrent and sequence models: their
# steps (spec's arch); dense layers: 1.
WEIGHT_USES = {"cnn": 10, "resnet": 4}


RECURRENT = ("lstm",)


def weight_uses(model: str) -> float:
    info = spec.MODELS[model]
    return info.arch.get("steps") or info.arch.get("length") or WEIGHT_USES.get(info.family, 1)


def overhead_steps(model: str) -> int:
    """How many times a derivative call pays its overhead: a recurrent model's time steps."""
    info = spec.MODELS[model]
    return int(info.arch["steps"]) if info.family in RECURRENT else 1


def task_overhead_s(task: str) -> tuple[float, float]:
    """A task's TASK_OVERHEAD_S; a task not listed there (a variant the spec adds, such as a
    backward pass through frozen layers) is priced as `backward`, or as the costliest,
    `jacobian_vectorized`, where it computes a Jacobian."""
    if task in TASK_OVERHEAD_S:
        return TASK_OVERHEAD_S[task]
    jacobian = spec.TASKS[task].derivative == "jacobian"
    return TASK_OVERHEAD_S["jacobian_vectorized" if jacobian else "backward"]


def modelled_iteration_s(sizes: dict, model: str, task: str,
                         mac_s: float = SECONDS_PER_MAC) -> float:
    """The model's seconds for one iteration of a task on a model at the data sizes
    `sizes` (Workloads.sizes): its overhead and its multiply-adds at `mac_s` each."""
    info = spec.MODELS[model]
    jacobian = spec.TASKS[task].derivative == "jacobian"
    rows = sizes["jacobian_rows"] if jacobian else 0
    examples = 1 if jacobian else sizes["batch_size"]
    per_iteration, per_row = task_overhead_s(task)
    macs = info.n_parameters * weight_uses(model) * examples * max(rows, 1)
    return (per_iteration + per_row * rows) * overhead_steps(model) + macs * mac_s


def modelled_cell_s(workloads: Workloads, cell: spec.Cell) -> float:
    """The model's seconds for a cell's job, start-up to its last iteration."""
    sizes, info = workloads.sizes(cell.model, cell.task), spec.MODELS[cell.model]
    compile_s = (COMPILE_S + COMPILE_S_PER_PARAMETER * info.n_parameters
                 if spec.FRAMEWORKS[cell.framework].modes[cell.mode].compiled else 0.0)
    return (JOB_START_S + CELL_START_S + compile_s
            + (sizes["warmup"] + sizes["iterations"])
            * modelled_iteration_s(sizes, cell.model, cell.task))


# A reference job (rule reference) computes one derivative, in float64, at the first batch of
# its cells' data sizes, with numpy or PyTorch's eager mode (adbench/reference.py): the model
# prices it as one iteration of the task its cells share, its multiply-adds at twice float32's
# price, after the same start-up; times the same margin, at least the same floor, and at
# most REFERENCE_RUNTIME_MIN (it has no budget). The references measured so far took 2-6 s
# (ResNet50's Jacobian 3 s on one core): they ask for the floor.
FLOAT64_MAC_FACTOR = 2.0


def modelled_reference_s(workloads: Workloads, model: str, task: str) -> float:
    """The model's seconds for the reference job of a (model, task) of the cells."""
    return (JOB_START_S + CELL_START_S + modelled_iteration_s(
        workloads.sizes(model, task), model, task, SECONDS_PER_MAC * FLOAT64_MAC_FACTOR))


# Workload keys a measured time must share with the cell now planned to be used for it.
MEASURED_WORKLOAD_KEYS = ("warmup", "iterations", "batch_size", "jacobian_rows")


def iso_seconds(start: str, end: str) -> float:
    import datetime

    return (datetime.datetime.fromisoformat(end)
            - datetime.datetime.fromisoformat(start)).total_seconds()


@dataclasses.dataclass(frozen=True)
class Walltime:
    """A timing job's time limit and where it came from."""

    minutes: int  # asked for (Snakemake's runtime resource; SLURM's --time), first attempt
    seconds: float  # the estimate before the margin
    source: str  # measured | model | budget (timed out, or interrupted, before)


class Walltimes:
    """Each timing job's walltime: rule measure's runtime and plan_campaign.py's, one function.

    The estimate, in this order: the budget's walltime for a cell an earlier run left
    unfinished (a line in its log, no raw file: its job was ended by the cluster's time
    limit, scancel or a lost node; or it is running now) or recorded `timeout`; the cell's measured
    wall time (its raw file's started_at to ended_at, else its row in aggregate/cells.parquet)
    where that run was `ok` with the same warm-up, iterations and data sizes; else the model
    (modelled_cell_s). Snakemake's own start in the job is added to a measured time.
    """

    def __init__(self, workloads: Workloads, cluster: dict, tree: Path):
        self.workloads = workloads
        self.margin = float(cluster.get("walltime_margin", 3))
        self.floor_min = int(cluster.get("walltime_floor_min", 5))
        self.tree = Path(tree)

    # -------------------------------------------------------------- earlier runs of the tree
    @functools.cached_property
    def aggregated(self) -> dict[tuple, dict]:
        """aggregate/cells.parquet's rows by cell, {} where there is none (or no pyarrow)."""
        path = self.tree / "aggregate" / "cells.parquet"
        if not path.exists():
            return {}
        try:
            import pyarrow.parquet as pq

            columns = [*spec.CELL_FIELDS, "status", "started_at", "ended_at",
                       *MEASURED_WORKLOAD_KEYS]
            rows = pq.read_table(path, columns=columns).to_pylist()
        except Exception:  # noqa: BLE001  no pyarrow, an older layout: the model decides
            return {}
        return {tuple(str(row[f]) for f in spec.CELL_FIELDS): row for row in rows}

    def started(self, cell: spec.Cell) -> bool:
        """Whether a cell's job got as far as its timing process: its log has a line (a job
        that never started has none; Snakemake may leave it empty)."""
        try:
            return (self.tree / cell.log_path).stat().st_size > 0
        except OSError:
            return False

    def recorded(self, cell: spec.Cell) -> dict | None:
        """The earlier run's record of a cell: status, started_at, ended_at, workload."""
        raw = self.tree / cell.raw_path
        if raw.exists():
            try:
                from adbench import schema

                info = schema.read_provenance(str(raw))
                return {"status": info["status"], "started_at": info.get("started_at"),
                        "ended_at": info.get("ended_at"), **info.get("workload", {})}
            except Exception:  # noqa: BLE001  unreadable (or no pyarrow): try the aggregate
                pass
        elif self.started(cell):
            return {"status": "unfinished"}
        return self.aggregated.get(tuple(str(v) for v in dataclasses.astuple(cell)))

    def measured_s(self, cell: spec.Cell) -> float | str | None:
        """Seconds an earlier run took for the cell; "budget" where it ran out of time or did
        not finish; None where no earlier run measured it under this workload."""
        record = self.recorded(cell)
        if record is None:
            return None
        if record["status"] in ("timeout", "unfinished"):
            return "budget"
        sizes = self.workloads.sizes(cell.model, cell.task)
        try:
            if record["status"] == "ok" and all(
                    int(record[k]) == sizes[k] for k in MEASURED_WORKLOAD_KEYS):
                return iso_seconds(record["started_at"], record["ended_at"])
        except (KeyError, TypeError, ValueError):  # a field missing or empty
            pass
        return None

    # -------------------------------------------------------------- the walltime
    def of(self, cell: spec.Cell) -> Walltime:
        cap = self.workloads.runtime_min(cell.model, cell.task)
        measured = self.measured_s(cell)
        if measured == "budget":
            return Walltime(cap, self.workloads.budget_s(cell.model, cell.task), "budget")
        if measured is not None:
            seconds, source = JOB_START_S + measured, "measured"
        else:
            seconds, source = modelled_cell_s(self.workloads, cell), "model"
        return Walltime(min(self.with_margin(seconds), cap), seconds, source)

    def with_margin(self, seconds: float) -> int:
        """Minutes asked for an estimate: times the margin, at least the floor."""
        return max(self.floor_min, math.ceil(seconds * self.margin / 60))

    def reference(self, model: str, derivative: str) -> Walltime:
        """A reference job's walltime: the model's estimate with the margin, at most
        REFERENCE_RUNTIME_MIN. Its data sizes are its cells' (spec.REFERENCE_TASK)."""
        seconds = modelled_reference_s(self.workloads, model, spec.REFERENCE_TASK[derivative])
        return Walltime(min(self.with_margin(seconds), REFERENCE_RUNTIME_MIN), seconds, "model")

    def reference_runtime_min(self, wildcards, attempt: int = 1) -> int:
        """rule reference's runtime: its walltime in minutes, times the attempt on retries."""
        return self.reference(wildcards.model, wildcards.derivative).minutes * attempt

    def runtime_min(self, wildcards, attempt: int = 1) -> int:
        """rule measure's runtime: a job's walltime in minutes, times the attempt on retries."""
        w = dict(wildcards.items()) if hasattr(wildcards, "items") else dict(wildcards)
        cell = spec.Cell(w["framework"], w["mode"], w["model"], w["task"], w["device"],
                         int(w["threads"]), int(w["seed"]))
        return self.of(cell).minutes * attempt


# ------------------------------------------------------------------ environments
def environment_mode(setting: str, conda_enabled: bool) -> str:
    """auto -> conda under --sdm conda, else venvs built by the pipeline."""
    if setting == "auto":
        return "conda" if conda_enabled else "venv"
    if (setting == "conda") != conda_enabled:
        raise ConfigError([f"environments: {setting} contradicts the command line: use "
                           "`--sdm conda` exactly when environments is conda (or auto)"])
    return setting


def default_cuda_build(framework: str) -> str | None:
    """The CUDA build a framework's CUDA cells run in unless the config's cuda_builds names
    another: the schema's default, the pins tested (envs/<framework>-cuda.yaml)."""
    builds = load_schema()["properties"]["cuda_builds"]["properties"]
    return builds.get(framework, {}).get("default")


def cell_env(cuda_builds: dict, framework: str, device: str) -> str:
    """The environment (envs/<name>.yaml) a cell runs in: its framework's CPU build, or on
    cuda the CUDA build cuda_builds names (the schema's list): the spec's cuda_env for the
    default, envs/<framework env>-<build>.yaml for another."""
    info = spec.FRAMEWORKS[framework]
    build = cuda_builds.get(framework)
    if device != "cuda" or not info.cuda_env or build in (None, default_cuda_build(framework)):
        return info.env_for(device)
    return f"{info.env}-{build}"


def current_env_problems(env_mode: str, cells: list, python: str) -> list[str]:
    """environments: current runs every cell in this Python, which must have the frameworks
    (each FRAMEWORKS key is its Python module's name)."""
    if env_mode != "current":
        return []
    return [
        f"environments: current, but this Python ({python}) cannot import {f!r} "
        f"(grid.frameworks.{f}): use environments: venv, which builds envs/{f}.yaml"
        for f in dict.fromkeys(c.framework for c in cells)
        if importlib.util.find_spec(f) is None
    ]


def local_core_limit(local: bool) -> int | None:
    """The CPUs a local job can use (None on a cluster, where each job asks for its own)."""
    return os.cpu_count() if local else None


# ------------------------------------------------------------------ all of it, in order
@dataclasses.dataclass(frozen=True)
class Run:
    """A checked config and what the rules read from it."""

    config: dict
    results: str  # the results tree, without a trailing slash
    grids: list[dict]
    cells: list
    workloads: Workloads
    env_mode: str
    walltimes: Walltimes  # each timing job's runtime (minutes)

    def env_for(self, framework: str, device: str) -> str:
        """The environment a framework's cells on `device` run in (cell_env)."""
        return cell_env(self.config.get("cuda_builds", {}), framework, device)

    def description(self, wildcards: dict) -> spec.CellDescription:
        """The description of the cell a timing job's wildcards name (Workloads.description)."""
        w = wildcards
        cell = spec.Cell(w["framework"], w["mode"], w["model"], w["task"], w["device"],
                         int(w["threads"]), int(w["seed"]))
        return self.workloads.description(cell)


def checked(config: dict, *, validate: Callable[[dict, str], None], configfiles: list,
            working_dir: Path, core_limit: int | None, conda_enabled: bool, python: str) -> Run:
    """Every check, in the order each needs the one before, on `config` in place.
    `validate` fills the schema's defaults and raises on the first schema violation
    (snakemake.utils.validate in the workflow); the rest raise ConfigError with every
    problem of their step."""
    config.update(read_values(config))
    stop_on(incomplete_grids(config))
    validate(config, str(SCHEMA))
    config.setdefault("results", default_results_tree(configfiles))
    stop_on(results_tree_problems(config["results"], working_dir))
    grids = spec.config_grids(config)
    stop_on(spec_problems(config, grids))
    cells = spec.grid_cells(grids)
    workloads = Workloads(config["workload"])
    stop_on(workload_problems(grids, cells, workloads, core_limit))
    env_mode = environment_mode(config["environments"], conda_enabled)
    stop_on(current_env_problems(env_mode, cells, python))
    results = config["results"].rstrip("/")
    walltimes = Walltimes(workloads, config["cluster"], Path(working_dir) / results)
    return Run(config, results, grids, cells, workloads, env_mode, walltimes)
