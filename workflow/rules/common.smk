# Config validation, the grid of cells and the helpers rules use. Runs at parse time,
# before any job: a bad config stops here with a message naming the key at fault.
import functools
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

ROOT = Path(workflow.basedir)
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

# numpy and yaml only: no framework is imported while planning.
from adbench import backends, code_inputs, reference, report_spec, spec  # noqa: E402
from adbench import config as run_config  # noqa: E402


def conda_enabled():
    settings = workflow.deployment_settings
    return settings is not None and DeploymentMethod.CONDA in settings.deployment_method


# Every check of the config, before any job: a bad key or value stops here, named.
try:
    RUN = run_config.checked(
        config,
        validate=validate,
        configfiles=workflow.configfiles,
        working_dir=Path.cwd(),
        # A smaller --cores is caught by the job itself (measure.py --granted-threads).
        core_limit=run_config.local_core_limit(workflow.local_exec),
        conda_enabled=conda_enabled(),
        python=sys.executable,
    )
except run_config.ConfigError as error:
    raise WorkflowError(str(error)) from None
RESULTS, GRIDS, CELLS, ENV_MODE = RUN.results, RUN.grids, RUN.cells, RUN.env_mode
WORKLOAD, WORKLOADS = config["workload"], RUN.workloads
# Said, not silently dropped: a grid's device that a framework has no build for.
for _skipped in dict.fromkeys(s for grid in GRIDS for s in spec.devices_without_a_path(grid)):
    logger.warning(f"adbench: no cells for {_skipped} (no CUDA build of it here; spec.py)")


def tree(path):
    """A path inside this config's results tree."""
    return f"{RESULTS}/{path}"


def same_for_every_cell(value_of):
    """A timing job's property that does not scale with the attempt (threads, the GPU
    request, the budget): the value itself when every cell of this config has the same,
    else a function of the job's wildcards (Snakemake calls a function once per job and a
    constant never)."""
    values = {value_of(cell) for cell in CELLS}
    return values.pop() if len(values) == 1 else value_of


# ------------------------------------------------------------------ the cluster
# The config's `cluster` section, the site file's keys under it (ADBENCH_SITE: a --config
# cannot drop them), as the SLURM plugin's resources (adbench/cluster.py; docs/cluster.md):
# a CPU job gets the CPU partition's, a CUDA cell the GPU partition's, its GPU as the site
# asks for one and cuda_cpus cores. A key the site leaves out is no resource of the rules, so
# the plugin's default applies.
CLUSTER = config["cluster"]
if RUN.site:
    logger.info(f"adbench: cluster settings from {RUN.site} ({run_config.SITE_VARIABLE})")


@functools.cache
def slurm_resources(device, threads=1):
    return run_config.slurm_resources(CLUSTER, device, int(threads))


def cell_slurm_resources():
    """rule measure's SLURM resources, each the same for every cell where it can be (see
    same_for_every_cell); a function that gives None drops the resource for that job (a
    CPU cell's GPU model)."""
    names = dict.fromkeys(n for c in CELLS for n in slurm_resources(c.device, c.threads))
    return {
        name: same_for_every_cell(
            lambda cell, name=name: slurm_resources(cell.device, cell.threads).get(name)
        )
        for name in names
    }


def submitting():
    """Whether this Snakemake submits jobs to a cluster (--jobs with a remote executor:
    profiles/slurm), dry runs included: the cells are then packed (rule pack). Not the
    Snakemake a job runs (--mode remote), which runs its pack's jobs one at a time."""
    return workflow.resource_settings.nodes is not None and not workflow.remote_exec


def pending(cell):
    """Whether this run will time a cell (what the packs hold; adbench/cluster.py)."""
    return run_config.cluster_settings.pending_cell(
        Path(RESULTS), cell, harness_changed, WORKLOADS.description
    )


@functools.cache
def harness_changed(framework, device):
    """Whether the harness of (framework, device) will change (the harness rule): its code's
    digests differ from those it recorded, so every cell of it is re-timed."""
    path = Path(HARNESS_FILE.format(device=device, framework=framework))
    try:
        recorded = json.loads(path.read_text())["code"]
    except (OSError, ValueError, KeyError):
        return True
    current = {
        os.path.relpath(f, ROOT): code_inputs.code_digest(f) for f in framework_code(framework)
    }
    return recorded != current


@functools.cache
def packs():
    tag = run_config.cluster_settings.tree_tag(RESULTS)
    return run_config.Packs(RUN.walltimes, CELLS, pending, CLUSTER["pack_minutes"], tag)


def cell_pack(wildcards):
    """The timing rule's group, on a cluster the cell's pack (None: a job of its own)."""
    return packs().group(run_config.cluster_settings.cell_of(wildcards)) if submitting() else None


def cell_runtime(wildcards, attempt):
    """The timing rule's runtime in minutes, on a cluster the cell's share of its pack's walltime
    (Snakemake adds a group job's), else a job of its own; times the attempt on retries."""
    cell = run_config.cluster_settings.cell_of(wildcards)
    minutes = packs().runtime_min(cell) if submitting() else RUN.walltimes.of(cell).minutes
    return minutes * attempt


def cell_mem_mb(wildcards, attempt):
    """The timing rule's memory, the config's, raised to a CUDA cell's measured peak with its
    margin (adbench/cluster.py, Walltimes.mem_mb), times the attempt on retries."""
    return RUN.walltimes.mem_mb(run_config.cluster_settings.cell_of(wildcards)) * attempt


def pack_files():
    """Each pack's record (the pack rule), on a cluster, what joins its cells into one job."""
    return [tree(f"packs/{p.name}.json") for p in packs().packs] if submitting() else []


def write_pack(name, cells, path, log):
    """The pack rule's record, its cells, and the SLURM job and node that ran them."""
    record = {
        "pack": name,
        "cells": list(cells),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "node": os.environ.get("SLURMD_NODENAME"),
    }
    Path(path).write_text(json.dumps(record, indent=2) + "\n")
    Path(log).write_text(f"{path}: {len(record['cells'])} cells, job {record['slurm_job_id']}\n")


def pack_cells(wildcards):
    """The pack rule's inputs, the cells its name spans (adbench/cluster.py, pack_span)."""
    cells = run_config.cluster_settings.pack_span(wildcards.pack, CELLS)
    return [tree(cell.raw_path) for cell in cells]


def slurm_preflight():
    """Before a run submits anything to SLURM: a GPU partition for its CUDA cells, and no job
    of this working directory still queued or running (a controller restarted while its
    jobs run would submit their cells again)."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    problems = run_config.gpu_partition_problems(CLUSTER, packs().pending)
    problems += run_config.cluster_settings.running_jobs_problems(
        os.getcwd(), run_config.cluster_settings.tree_tag(RESULTS)
    )
    if problems:
        raise WorkflowError("\n  ".join(["adbench: not submitting:", *problems]))
    # SIGTERM (scancel of a controller's job, its time limit, kill) as Ctrl-C: Snakemake's
    # own handler only stops submitting and waits for the running jobs; KeyboardInterrupt
    # makes it cancel every job it submitted (scancel). Set here, after its scheduler set its
    # handler and before it submits (docs/cluster.md, "The controller").
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def resource_overrides():
    """Each rule's --set-resources (a profile's set-resources), as plain values: a value
    Snakemake evaluates per job (an expression) as written."""
    found = {}
    for rule, mapping in workflow.resource_settings.overwrite_resources.items():
        found[rule] = {
            name: (
                (value.raw if value.is_evaluable() else value.value)
                if hasattr(value, "is_evaluable")
                else value
            )
            for name, value in mapping.items()
        }
    return found


# Before anything is submitted, dry runs included, naming the key at fault: a CUDA job's GPU
# reaches sbatch, no Snakemake retry re-times a pack's finished cells, and no job asks for
# more than the site's pack_minutes (adbench/cluster.py).
if submitting():
    _problems = run_config.cluster_settings.gpu_request_problems(
        CLUSTER, resource_overrides(), any(c.device == "cuda" for c in CELLS)
    )
    # (a dry run has no execution settings: a real run's retries are checked)
    _problems += run_config.cluster_settings.retry_problems(
        getattr(workflow.execution_settings, "retries", 0)
    )
    _problems += run_config.cluster_settings.limit_problems(
        RUN.walltimes, CELLS, CLUSTER["pack_minutes"]
    )
    if _problems:
        raise WorkflowError("\n  ".join(["adbench: not submitting:", *_problems]))


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
    """The pin file of a cell: its framework's CPU build, or the CUDA build the config's
    cuda_builds chose, by the cell's device."""
    return RUN.env_for(wildcards.framework, wildcards.device)


# ------------------------------------------------------------------ code as input
# A job's own code is one of its inputs: its script and every project module that script
# imports (adbench/code_inputs.py reads the import statements), so editing any of them
# re-runs exactly the jobs that run it. Snakemake tracks the shell line, not these files.
def in_tree(path):
    """A file of the checkout as a rule's input names it: relative to Snakemake's working
    directory. Snakemake records the set of input paths of each job, so absolute ones would
    re-run every job of a checkout that was moved or copied (another mount on a cluster, the
    end-to-end tests' copies of one finished run)."""
    return os.path.relpath(path)


def code(script, *loaded):
    """A rule's code inputs; `loaded`: what its script loads by name (a backend)."""
    return [in_tree(p) for p in code_inputs.rule_code(script, *loaded)]


MEASURE_SCRIPT, RUN_CELL_SCRIPT = in_tree(SCRIPTS / "measure.py"), in_tree(SCRIPTS / "run_cell.py")


def backend_module(framework):
    """The backend module that loads the rest of a framework's backend (backends.load)."""
    return backends.backend_module(framework)


@functools.cache
def framework_code(framework):
    """measure.py, its supervisor run_cell.py and the framework's backend (loaded by name),
    with every project module they import."""
    return code("measure.py", "run_cell.py", backend_module(framework))


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


def write_harness(wildcards, input, path, log):
    """The code's digests and the environments' receipts: their content, so that a touch or a
    comment re-times nothing (Snakemake compares small files' checksums) and an edit re-times
    the cells that ran the edited file."""
    code_files, receipts = input.code, [f for f in input if f not in input.code]
    env = framework_env(wildcards)
    harness = {
        "framework": wildcards.framework,
        "device": wildcards.device,
        "environments": ENV_MODE,
        "env": env,
        "python": env_python(env),
        # What the code runs (comments, docstrings and formatting dropped: code_inputs).
        "code": {os.path.relpath(f, ROOT): code_inputs.code_digest(f) for f in code_files},
        "receipts": {r: json.loads(Path(r).read_text()) for r in receipts},
    }
    Path(path).write_text(json.dumps(harness, indent=2, sort_keys=True) + "\n")
    Path(log).write_text(f"{path}: {len(code_files)} code files, receipts {receipts}\n")


def cell_conda_env(wildcards):
    return env_file(framework_env(wildcards))


@functools.cache
def framework_command(framework, device):
    """The cell's environment and its timing script: `[--receipt R] -- PYTHON measure.py`.
    Part of every timing job's params: a change of its text, even of whitespace (the double
    space when there is no receipt), re-times every finished cell (Snakemake's params trigger)."""
    env = RUN.env_for(framework, device)
    return f"{receipt_args(env)} -- {env_python(env)} {MEASURE_SCRIPT}"


def cell_arguments(wildcards):
    """run_cell.py's arguments for a cell but its budget and granted threads (resources:
    changing one re-times nothing): the cell's description whole (spec.CellDescription, its
    workload from the config) and where its files go. Everything here is a params value: a
    change re-times the cell, and so does a kill (--times-killed). One function for all of
    it: Snakemake calls each of a rule's functions for each of thousands of jobs."""
    w = dict(wildcards.items())
    description = RUN.description(w)
    return (
        f"--killed-log {KILLED_LOG.format(**w)} --times-killed {times_killed(w)} "
        f"{framework_command(w['framework'], w['device'])} "
        f"--cell {shlex.quote(description.to_json())} "
        f"--cache-dir {tree('cache')} --out {tree(spec.RAW_PATTERN).format(**w)} "
        f"--gradients {tree(spec.GRADIENT_PATTERN).format(**w)}"
    )


# ------------------------------------------------------------------ cells and outputs
def raw_files():
    """The raw files the analysis reads: this tree's cells', then raw_trees' (config)."""
    return RUN.raw_files(Path.cwd())


def gradient_files():
    return [tree(cell.gradient_path) for cell in CELLS]


@functools.cache
def data_args(model, task):
    """The data sizes of a (model, task): what its reference must share with its cells."""
    w = WORKLOADS.sizes(model, task)
    return (
        f"--batch-size {w['batch_size']} --n-samples {w['n_samples']} "
        f"--jacobian-rows {w['jacobian_rows']}"
    )


# A line per kill of a cell's timing process, or per cuda cell that saw no GPU (run_cell.py);
# outside raw/, so it outlives the cell's outputs.
KILLED_LOG = tree(f"killed/{spec.CELL_PATH}.log")


def times_killed(cell):
    """Kills of a cell's timing process recorded so far (run_cell.py)."""
    path = KILLED_LOG.format(**cell)
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def reference_files():
    return sorted({tree(cell.reference_path) for cell in CELLS})


def reference_env(wildcards):
    """numpy references run in the analysis environment, the others in their framework's."""
    how = spec.MODELS[wildcards.model].reference
    return spec.ANALYSIS_ENV if how == "numpy" else spec.FRAMEWORKS[how].env


def reference_code(wildcards):
    how = spec.MODELS[wildcards.model].reference
    return code("make_reference.py", *([] if how == "numpy" else [backend_module(how)]))


def tolerance_args():
    check = config["gradient_check"]
    per_model = " ".join(f"--model-tolerance {m}={t}" for m, t in check["models"].items())
    return f"--tolerance {check['tolerance']} {per_model}"


TABLE_FILES = [
    tree(f"tables/{t}.{ext}") for t in report_spec.TABLE_NAMES for ext in ("csv", "md", "tex")
]
MEMORY_FILE = tree("tables/memory.csv")  # make_tables.MEMORY_FILE
VARLEN_FILE = tree("tables/varlen.csv")  # make_tables.VARLEN_FILE
# Every declared figure (adbench/sections/figures.py): its PDF (the paper's), its PNG (the
# report's).
from adbench.sections import figures as declared_figures  # noqa: E402

FIGURE_FILES = {
    f"{figure.name}_{ext}": tree(f"figures/{figure.name}.{ext}")
    for figure in declared_figures.FIGURES
    for ext in ("pdf", "png")
}


def final_outputs():
    return [
        *TABLE_FILES,
        *FIGURE_FILES.values(),
        tree("checks/gradients.csv"),
        tree("paper/paper.pdf"),
        *pack_files(),
    ]


# ----------------------------------------------------------------------------- report
def reported(path, caption, category, **labels):
    """An output registered for Snakemake's report (snakemake --report), captioned from
    report/captions/."""
    return report(
        path,
        caption=f"../../report/captions/{caption}.rst",
        category=category,
        labels=labels or None,
    )


def reported_tables():
    """TABLE_FILES, each table's CSV and Markdown in the report, under the study's table it
    reproduces."""
    by_name = {t.name: t for t in report_spec.TABLES}

    def item(path):
        name, ext = os.path.splitext(os.path.basename(path))
        table = by_name[name]
        if ext not in (".csv", ".md"):
            return path
        return report(
            path,
            caption="../../report/captions/table.rst",
            category="Tables",
            subcategory=f"{report_spec.cited(table.study_table)}: {table.title}",
            labels={"table": table.name, "format": "CSV" if ext == ".csv" else "Markdown"},
        )

    return [item(p) for p in TABLE_FILES]


def reported_figures():
    """FIGURE_FILES, the PNGs in Snakemake's report (it shows images inline) under each
    figure's declared caption; the PDFs are the paper's."""
    return {
        f"{f.name}_{ext}": (
            reported(FIGURE_FILES[f"{f.name}_{ext}"], f.report_caption, "Figures")
            if ext == "png"
            else FIGURE_FILES[f"{f.name}_{ext}"]
        )
        for f in declared_figures.FIGURES
        for ext in ("pdf", "png")
    }


def paper_configfile():
    """The config this run was made with, as the paper's last appendix names it in the
    commands that make the paper again: the last one given, relative to where Snakemake
    runs (the default config when none was)."""
    files = [Path(f) for f in workflow.configfiles] or [Path("config/config.yaml")]
    found = files[-1].resolve()
    try:
        return str(found.relative_to(Path.cwd()))
    except ValueError:
        return str(found)
