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

from adbench import cluster as cluster_settings
from adbench import spec
# What a run asks a SLURM cluster for is adbench/cluster.py's; the names the rules and tests
# use are read from here too.
from adbench.cluster import (  # noqa: F401
    CELL_START_S, COMPILE_S, COMPILE_S_PER_PARAMETER, JOB_START_S, MEASURED_WORKLOAD_KEYS,
    REFERENCE_RUNTIME_MIN, SECONDS_PER_MAC, SITE_VARIABLE, STEP_START_S, Pack, Packs,
    Walltime, Walltimes, cell_gpus, gpu_partition_problems, iso_seconds, job_cpus,
    modelled_cell_s, modelled_iteration_s, modelled_reference_s, slurm_resources,
    task_overhead_s,
)

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


# ------------------------------------------------------------------ other trees' raw files
def raw_files_of(tree: Path) -> list[str]:
    """A results tree's raw files (raw/<cell>.parquet), sorted."""
    return sorted(str(p) for p in Path(tree).glob("raw/**/*.parquet"))


def raw_tree_problems(config: dict, workdir: Path) -> list[str]:
    """Each tree of `raw_trees` holds raw files and is not this config's own; a config with
    no cells of its own reads at least one."""
    own = (Path(workdir) / config["results"]).resolve()
    problems = []
    for name in config["raw_trees"]:
        tree = (Path(workdir) / name).resolve()
        if tree == own:
            problems.append(f"raw_trees: {name!r} is this config's own results tree (its raw "
                            "files are read anyway)")
        elif not tree.is_dir():
            problems.append(f"raw_trees: {name!r} is no folder (relative to {workdir})")
        elif not raw_files_of(tree):
            problems.append(f"raw_trees: {name!r} holds no raw files (raw/**/*.parquet)")
    if not config["grid"] and not config["raw_trees"]:
        problems.append("grid: no cells to time, and no raw_trees to read: give a grid")
    return problems


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

    def model(keys):
        kept = drop(keys)
        if "tasks" in keys:
            kept["tasks"] = {t: drop(v) for t, v in keys["tasks"].items() if drop(v)}
            if not kept["tasks"]:
                del kept["tasks"]
        return kept

    return {
        **drop(workload),
        "tasks": {t: drop(v) for t, v in workload["tasks"].items() if drop(v)},
        "models": {m: model(v) for m, v in workload["models"].items() if model(v)},
    }


class Workloads:
    """Each (model, task)'s workload keys: the config's defaults, then the task's overrides,
    then the model's, then the model's own for that task (models.<model>.tasks.<task>: the
    study's protocol block, say, a fixed count for one model's backward pass alone).
    Cached per (model, task), not per job: a campaign plans thousands of jobs from a few
    dozen of these."""

    def __init__(self, workload: dict):
        self.workload = workload

    @functools.cache
    def settings(self, model: str, task: str) -> dict:
        w = self.workload
        settings = {k: w[k] for k in ("warmup", "iterations", *spec.WORKLOAD_STOPPING,
                                      *RESOURCE_KEYS) if k in w}
        settings.update(w["tasks"].get(task, {}))
        per_model = dict(w["models"].get(model, {}))
        settings.update({k: v for k, v in per_model.items() if k != "tasks"})
        settings.update(per_model.get("tasks", {}).get(task, {}))
        return settings

    @functools.cache
    def sizes(self, model: str, task: str) -> dict:
        """Warm-up, iterations and data sizes: the overrides on the spec's defaults."""
        return {k: getattr(self.workload_of(model, task), k) for k in spec.WORKLOAD_SIZES}

    @functools.cache
    def stopping(self, model: str, task: str) -> dict:
        """When the measured phase stops and when a busy machine re-times it
        (spec.WORKLOAD_STOPPING): the config's keys, else the spec's."""
        return {k: getattr(self.workload_of(model, task), k) for k in spec.WORKLOAD_STOPPING}

    def workload_of(self, model: str, task: str, seed: int = 0) -> spec.Workload:
        settings = {k: v for k, v in self.settings(model, task).items()
                    if k not in RESOURCE_KEYS}
        return spec.Workload(model=model, seed=seed, task=task, **settings)

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
                                 **self.sizes(cell.model, cell.task),
                                 **self.stopping(cell.model, cell.task))
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
        problems += [f"{p} (model {model}, task {task})" for p in
                     spec.stopping_problems(workloads.workload_of(model, task))]
        w, info = workloads.sizes(model, task), spec.MODELS[model]
        if w["batch_size"] > w["n_samples"]:
            problems.append(f"workload.models.{model}: batch_size {w['batch_size']} exceeds "
                            f"n_samples {w['n_samples']}: not one full batch")
        if w["jacobian_rows"] > info.n_outputs:
            problems.append(f"workload.models.{model}.jacobian_rows: {w['jacobian_rows']} "
                            f"exceeds the model's {info.n_outputs} outputs")
    return list(dict.fromkeys(problems))


# ------------------------------------------------------------------ the cluster
def with_site(config: dict, environ) -> tuple[Path | None, list[str]]:
    """The site file's cluster keys (ADBENCH_SITE) under the config's own `cluster` keys,
    which replace them one by one: a --config cannot drop the site's account or partitions."""
    path = cluster_settings.site_path(environ)
    allowed = load_schema()["properties"]["cluster"]["properties"]
    site, problems = cluster_settings.read_site(path, allowed)
    if site:
        site = coerce_by_schema(site, load_schema()["properties"]["cluster"],
                                load_schema()["$defs"])
        config["cluster"] = {**site, **(config.get("cluster") or {})}
    return path, problems


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
    site: Path | None = None  # the site file the cluster keys came from (ADBENCH_SITE)
    raw_trees: tuple[str, ...] = ()  # other trees whose raw files this tree's analysis reads

    def raw_files(self, working_dir: Path) -> list[str]:
        """Every raw file this tree's analysis reads: its own cells', then other trees'."""
        return [f"{self.results}/{cell.raw_path}" for cell in self.cells] + [
            os.path.relpath(f, working_dir) for tree in self.raw_trees
            for f in raw_files_of(Path(working_dir) / tree)]

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
            working_dir: Path, core_limit: int | None, conda_enabled: bool, python: str,
            environ=None) -> Run:
    """Every check, in the order each needs the one before, on `config` in place.
    `validate` fills the schema's defaults and raises on the first schema violation
    (snakemake.utils.validate in the workflow); the rest raise ConfigError with every
    problem of their step."""
    config.update(read_values(config))
    stop_on(incomplete_grids(config))
    site, problems = with_site(config, os.environ if environ is None else environ)
    stop_on(problems)
    validate(config, str(SCHEMA))
    config.setdefault("results", default_results_tree(configfiles))
    grids = spec.config_grids(config)
    stop_on(spec_problems(config, grids))
    cells = spec.grid_cells(grids)
    # A site that names its GPU type gets a tree of that type's own (results-h100), so two
    # GPU types never price or overwrite each other's cells.
    config["results"] = cluster_settings.machine_tree(
        config["results"], config["cluster"], any(c.device == "cuda" for c in cells))
    stop_on(results_tree_problems(config["results"], working_dir))
    stop_on(raw_tree_problems(config, working_dir))
    workloads = Workloads(config["workload"])
    stop_on(workload_problems(grids, cells, workloads, core_limit))
    env_mode = environment_mode(config["environments"], conda_enabled)
    stop_on(current_env_problems(env_mode, cells, python))
    results = config["results"].rstrip("/")
    walltimes = Walltimes(workloads, config["cluster"], Path(working_dir) / results)
    return Run(config, results, grids, cells, workloads, env_mode, walltimes, site,
               tuple(t.rstrip("/") for t in config["raw_trees"]))
