# Config validation, the grid of cells and the helpers rules use. Runs at parse time,
# before any job: a bad config stops here with a message naming the key at fault.
import dataclasses
import functools
import hashlib
import inspect
import json
import math
import os
import re
import sys
from pathlib import Path

import snakemake.common
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

ROOT = Path(workflow.basedir)
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

from adbench import reference, spec  # noqa: E402  (numpy only: no framework is imported)

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def coerce_by_schema(value, schema, defs):
    """--config values arrive as strings (Snakemake reads them with YAML's BaseLoader, so
    `--config 'every_grid={seeds: [0, 1]}'` gives ['0', '1']): read a string as YAML where
    the schema wants a number, an integer or a boolean, and leave the rest to validate."""
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


def incomplete_grids(cfg):
    """A grid given on the command line replaces the config file's grids whole."""
    return [
        f"grid{f'[{i}]' if len(cfg['grid']) > 1 else ''}: no {key} (a --config grid=... "
        "replaces every grid of the config file; to change one key of every grid, e.g. the "
        "seeds: --config 'every_grid={seeds: [0, 1, 2]}')"
        for i, grid in enumerate(cfg["grid"])
        if isinstance(grid, dict)
        for key in ("frameworks", "models", "seeds")
        if key not in grid
    ]


# A single grid may be written as a mapping; the schema (and everything after it) sees a list.
if isinstance(config.get("grid"), dict):
    config["grid"] = [config["grid"]]
_schema = yaml.safe_load(SCHEMA.read_text())
config.update(coerce_by_schema(dict(config), _schema, _schema["$defs"]))
if isinstance(config.get("grid"), list) and incomplete_grids(config):
    raise WorkflowError("\n  ".join(["invalid config:", *incomplete_grids(config)]))
validate(config, str(SCHEMA))


def default_results_tree():
    """results/ for the default config, results-<name>/ for config file <name>.yaml: two
    configs never write each other's cells (a config's `results` key names its own)."""
    files = [Path(f) for f in workflow.configfiles]
    if not files or files[-1].resolve() == (ROOT / "config" / "config.yaml").resolve():
        return "results"
    return f"results-{re.sub(r'[^A-Za-z0-9._-]', '_', files[-1].stem)}"


config.setdefault("results", default_results_tree())
RESULTS = config["results"].rstrip("/")


def tree(path):
    """A path inside this config's results tree."""
    return f"{RESULTS}/{path}"


GRIDS = spec.config_grids(config)


def config_problems(cfg):
    """What the JSON schema cannot know: the spec's framework/mode, task and model tables."""
    problems = []
    for i, grid in enumerate(GRIDS):
        where = f"grid[{i}]" if len(GRIDS) > 1 else "grid"
        problems += [
            p.replace("grid.", f"{where}.") for p in spec.invalid_pairs(grid["frameworks"])
        ]
        problems += [
            f"{where}.models: unknown model {m!r} (valid: {', '.join(spec.MODELS)})"
            for m in grid["models"]
            if m not in spec.MODELS
        ]
        problems += [
            f"{where}.tasks: unknown task {t!r} (valid: {', '.join(spec.TASKS)})"
            for t in grid["tasks"]
            if t not in spec.TASKS
        ]
    workload = cfg["workload"]
    for key, known in (("tasks", spec.TASKS), ("models", spec.MODELS)):
        problems += [
            f"workload.{key}: unknown {key[:-1]} {name!r} (valid: {', '.join(known)})"
            for name in workload[key]
            if name not in known
        ]
    problems += [
        f"gradient_check.models: unknown model {m!r} (valid: {', '.join(spec.MODELS)})"
        for m in cfg["gradient_check"]["models"]
        if m not in spec.MODELS
    ]
    return problems


def local_core_limit():
    """The CPUs a local job can use (None on a cluster, where each job asks for its own).
    A smaller --cores is caught by the job itself (measure.py --granted-threads): a dry run
    cannot see it here."""
    return os.cpu_count() if workflow.local_exec else None


def workload_problems():
    """Thread counts the machine cannot give, data sizes a model cannot fill."""
    problems = []
    limit = local_core_limit()
    for i, grid in enumerate(GRIDS):
        where = f"grid[{i}]" if len(GRIDS) > 1 else "grid"
        problems += [
            f"{where}.threads: {t} exceeds the {limit} CPU(s) of this machine: its numbers "
            "would carry a wrong label (on a cluster, each job asks for its own)"
            for t in grid["threads"]
            if limit and t > limit
        ]
    for model, task in dict.fromkeys((c.model, c.task) for c in CELLS):
        w, info = cell_workload(model, task), spec.MODELS[model]
        if w["batch_size"] > w["n_samples"]:
            problems.append(
                f"workload.models.{model}: batch_size {w['batch_size']} exceeds n_samples "
                f"{w['n_samples']}: not one full batch"
            )
        if w["jacobian_rows"] > info.n_outputs:
            problems.append(
                f"workload.models.{model}.jacobian_rows: {w['jacobian_rows']} exceeds the "
                f"model's {info.n_outputs} outputs"
            )
    return list(dict.fromkeys(problems))


def stop_on(problems):
    if problems:
        listed = "\n  ".join(problems)
        raise WorkflowError(f"invalid config:\n  {listed}")


stop_on(config_problems(config))
# The union of the grids' cells, each once, in the order the grids list them.
CELLS = spec.grid_cells(GRIDS)
WORKLOAD = config["workload"]
# Said, not silently dropped: a grid's device that a framework has no build for.
for _skipped in dict.fromkeys(s for grid in GRIDS for s in spec.devices_without_a_path(grid)):
    logger.warning(f"adbench: no cells for {_skipped} (no CUDA build of it here; spec.py)")


# Workload keys that are a job's resources, not what it measures.
RESOURCE_KEYS = ("budget_s", "mem_mb")


def without_resources(workload):
    """The workload keys that shape the numbers: a budget or a memory request does not, so
    changing one re-runs no aggregation either."""
    drop = lambda keys: {k: v for k, v in keys.items() if k not in RESOURCE_KEYS}
    return {
        **drop(workload),
        "tasks": {t: drop(v) for t, v in workload["tasks"].items() if drop(v)},
        "models": {m: drop(v) for m, v in workload["models"].items() if drop(v)},
    }


# Per (model, task), not per job: a campaign plans thousands of jobs from a few dozen of
# these, and Snakemake calls a rule's functions for every job (benchmarks/dryrun_cost.py).
@functools.cache
def cell_settings(model, task):
    """The workload keys of a (model, task): config defaults, then the task's overrides, then
    the model's."""
    settings = {k: WORKLOAD[k] for k in ("warmup", "iterations", *RESOURCE_KEYS)}
    settings.update(WORKLOAD["tasks"].get(task, {}))
    settings.update(WORKLOAD["models"].get(model, {}))
    return settings


def cell_budget_s(model, task):
    """Seconds a cell's process may run (run_cell.py kills it then; its loop stops before)."""
    return cell_settings(model, task)["budget_s"]


def cell_mem_mb(model, task):
    return cell_settings(model, task)["mem_mb"]


def cell_runtime_min(model, task):
    """The budget as Snakemake's runtime resource (minutes; a cluster's time limit), with a
    minute to spare for run_cell.py to write the record of a killed cell."""
    return math.ceil(cell_budget_s(model, task) / 60) + 1


def called_per_job(function):
    """`function` with its parameters worked out once. Snakemake calls a rule's functions once
    per job (thousands in a campaign, benchmarks/dryrun_cost.py) and each time reads their
    parameters with inspect.signature, a third of the call's cost, unless the function
    carries them (snakemake.common's FUNC_OVERWRITE_PARAMS_ATTR; without it, as before)."""
    attr = getattr(snakemake.common, "FUNC_OVERWRITE_PARAMS_ATTR", None)
    if attr:
        setattr(function, attr, inspect.signature(function).parameters)
    return function


def same_for_every_cell(value_of):
    """A timing job's property that does not scale with the attempt (threads, the GPU
    request, the budget): the value itself when every cell of this config has the same,
    else a function of the job's wildcards (Snakemake calls a function once per job and a
    constant never)."""
    values = {value_of(cell) for cell in CELLS}
    return values.pop() if len(values) == 1 else called_per_job(value_of)


@functools.cache
def cell_workload(model, task):
    """Warm-up, iterations and data sizes of a (model, task): config overrides on the spec's
    defaults (task overrides first, then the model's)."""
    settings = {k: v for k, v in cell_settings(model, task).items() if k not in RESOURCE_KEYS}
    workload = spec.Workload(model=model, seed=0, task=task, **settings)
    return {
        k: getattr(workload, k)
        for k in ("warmup", "iterations", "n_samples", "batch_size", "jacobian_rows")
    }


stop_on(workload_problems())


wildcard_constraints:
    framework="|".join(spec.FRAMEWORKS),
    mode="|".join({m for f in spec.FRAMEWORKS.values() for m in f.modes}),
    model="|".join(spec.MODELS),
    task="|".join(spec.TASKS),
    derivative="|".join({t.derivative for t in spec.TASKS.values()}),
    device="|".join(spec.DEVICES),
    threads=r"\d+",
    seed=r"\d+",
    env=r"[A-Za-z0-9_-]+",


# ------------------------------------------------------------------ environments
def conda_enabled():
    settings = workflow.deployment_settings
    return settings is not None and DeploymentMethod.CONDA in settings.deployment_method


def environment_mode():
    """auto -> conda under --sdm conda, else venvs built by the pipeline."""
    mode = config["environments"]
    if mode == "auto":
        return "conda" if conda_enabled() else "venv"
    if (mode == "conda") != conda_enabled():
        raise WorkflowError(
            f"environments: {mode} contradicts the command line: use `--sdm conda` "
            "exactly when environments is conda (or auto)"
        )
    return mode


ENV_MODE = environment_mode()


def current_env_problems():
    """environments: current runs every cell in this Python, which must have the frameworks
    (each FRAMEWORKS key is its Python module's name)."""
    if ENV_MODE != "current":
        return []
    import importlib.util

    return [
        f"environments: current, but this Python ({sys.executable}) cannot import {f!r} "
        f"(grid.frameworks.{f}): use environments: venv, which builds envs/{f}.yaml"
        for f in dict.fromkeys(c.framework for c in CELLS)
        if importlib.util.find_spec(f) is None
    ]


stop_on(current_env_problems())


@functools.cache
def env_file(env):
    return str(ROOT / "envs" / f"{env}.yaml")


def venv_receipt(env):
    return f".venvs/{env}.json"


def receipt_args(env):
    """run_cell.py reads the receipt: a venv that could not be built fails the cell."""
    return f"--receipt {venv_receipt(env)}" if ENV_MODE == "venv" else ""


def env_inputs(env):
    """A job's environment as an input: the venv's receipt, so it is built first."""
    return [venv_receipt(env)] if ENV_MODE == "venv" else []


def env_python(env):
    return {
        "venv": f".venvs/{env}/bin/python",
        "conda": "python",
        "current": sys.executable,
    }[ENV_MODE]


def framework_env(wildcards):
    """The pin file of a cell: its framework's CPU or CUDA build, by the cell's device."""
    return spec.FRAMEWORKS[wildcards.framework].env_for(wildcards.device)


# ------------------------------------------------------------------ code as input
# A job's own code is one of its inputs: editing a backend re-measures its cells, editing
# figures.py redraws the figure (Snakemake tracks the shell line, not the files it runs).
HARNESS = [
    "spec.py",
    "timing.py",
    "schema.py",
    "provenance.py",
    "reference.py",
    "backends/__init__.py",
]


def code(script, *modules):
    return [str(SCRIPTS / script)] + [str(SCRIPTS / "adbench" / m) for m in modules]


MEASURE_SCRIPT, RUN_CELL_SCRIPT = str(SCRIPTS / "measure.py"), str(SCRIPTS / "run_cell.py")


@functools.cache
def framework_code(framework):
    """measure.py, its supervisor run_cell.py and the modules they import for a framework."""
    backend = f"backends/{spec.FRAMEWORKS[framework].backend}.py"
    return [*code("measure.py", *HARNESS, backend), RUN_CELL_SCRIPT]


# ------------------------------------------------------------------ the timing harness
# What times a framework's cells on a device (its environment and its code) is one file per
# (framework, device), the timing jobs' one input. A campaign plans thousands of timing jobs:
# a path pattern costs Snakemake nothing per job, where a list of code files and receipts
# made by functions cost most of a dry run (benchmarks/dryrun_cost.py).
HARNESS_FILE = tree("harness/{device}/{framework}.json")


def harness_env(wildcards):
    return env_inputs(framework_env(wildcards))


def harness_code(wildcards):
    return framework_code(wildcards.framework)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_harness(wildcards, input, path, log):
    """The code's digests and the environments' receipts: their content, so that a touch
    re-times nothing (Snakemake compares small files' checksums) and an edit re-times the
    cells that ran the edited file."""
    code_files, receipts = input.code, [f for f in input if f not in input.code]
    env = framework_env(wildcards)
    harness = {
        "framework": wildcards.framework,
        "device": wildcards.device,
        "environments": ENV_MODE,
        "env": env,
        "python": env_python(env),
        "code": {os.path.relpath(f, ROOT): sha256(f) for f in code_files},
        "receipts": {r: json.loads(Path(r).read_text()) for r in receipts},
    }
    Path(path).write_text(json.dumps(harness, indent=2, sort_keys=True) + "\n")
    Path(log).write_text(f"{path}: {len(code_files)} code files, receipts {receipts}\n")


@called_per_job
def cell_conda_env(wildcards):
    return env_file(framework_env(wildcards))


@functools.cache
def framework_command(framework, device):
    """The cell's environment and its timing script: `[--receipt R] -- PYTHON measure.py`.
    Part of every timing job's params: a change of its text, even of whitespace (the double
    space when there is no receipt), re-times every finished cell (Snakemake's params trigger)."""
    env = spec.FRAMEWORKS[framework].env_for(device)
    return f"{receipt_args(env)} -- {env_python(env)} {MEASURE_SCRIPT}"


@called_per_job
def cell_arguments(wildcards):
    """run_cell.py's arguments for a cell but its budget and granted threads (resources:
    changing one re-times nothing). Everything here is a params value: a change re-times the
    cell, and so does a kill (--times-killed). One function for all of it: Snakemake calls
    each of a rule's functions for each of thousands of jobs."""
    w = dict(wildcards.items())
    return (
        f"--killed-log {KILLED_LOG.format(**w)} --times-killed {times_killed(w)} "
        f"{framework_command(w['framework'], w['device'])} "
        f"--framework {w['framework']} --mode {w['mode']} --model {w['model']} "
        f"--task {w['task']} --device {w['device']} --threads {w['threads']} "
        f"--seed {w['seed']} {workload_args(w['model'], w['task'])} "
        f"--cache-dir {tree('cache')} --out {tree(spec.RAW_PATTERN).format(**w)} "
        f"--gradients {tree(spec.GRADIENT_PATTERN).format(**w)}"
    )


# ------------------------------------------------------------------ cells and outputs
def raw_files():
    return [tree(cell.raw_path) for cell in CELLS]


def gradient_files():
    return [tree(cell.gradient_path) for cell in CELLS]


@functools.cache
def data_args(model, task):
    """The data sizes of a (model, task): what its reference must share with its cells."""
    w = cell_workload(model, task)
    return (
        f"--batch-size {w['batch_size']} --n-samples {w['n_samples']} "
        f"--jacobian-rows {w['jacobian_rows']}"
    )


# A line per kill of a cell's timing process (run_cell.py); outside raw/, so it
# outlives the cell's outputs.
KILLED_LOG = tree(f"killed/{spec.CELL_PATH}.log")


def times_killed(cell):
    """Kills of a cell's timing process recorded so far (run_cell.py)."""
    path = KILLED_LOG.format(**cell)
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


@functools.cache
def workload_args(model, task):
    w = cell_workload(model, task)
    return f"--warmup {w['warmup']} --iterations {w['iterations']} {data_args(model, task)}"


def reference_files():
    return sorted({tree(cell.reference_path) for cell in CELLS})


def reference_env(wildcards):
    """numpy references run in the analysis environment, the others in their framework's."""
    how = spec.MODELS[wildcards.model].reference
    return spec.ANALYSIS_ENV if how == "numpy" else spec.FRAMEWORKS[how].env


def reference_code(wildcards):
    how = spec.MODELS[wildcards.model].reference
    backend = [] if how == "numpy" else [f"backends/{spec.FRAMEWORKS[how].backend}.py"]
    return code("make_reference.py", "reference.py", "spec.py", *backend)


def tolerance_args():
    check = config["gradient_check"]
    per_model = " ".join(f"--model-tolerance {m}={t}" for m, t in check["models"].items())
    return f"--tolerance {check['tolerance']} {per_model}"


TABLE_FILES = [tree(f"tables/{t}.{ext}") for t in spec.TABLE_NAMES for ext in ("csv", "md", "tex")]
FIGURE_FILES = {
    f"{name}_{ext}": tree(f"figures/{name}.{ext}")
    for name in ("first_iterations", "jacobians", "frameworks")
    for ext in ("pdf", "png")
}


def final_outputs():
    return [
        *TABLE_FILES,
        *FIGURE_FILES.values(),
        tree("checks/gradients.csv"),
        tree("paper/paper.pdf"),
    ]
