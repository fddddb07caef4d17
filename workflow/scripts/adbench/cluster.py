"""What a run asks a SLURM cluster for: the site's settings, each job's resources, each timing
cell's walltime and memory, and the packs of cells submitted as one job.

adbench/config.py reads the config and calls these; workflow/rules/*.smk turn them into the
resources of snakemake-executor-plugin-slurm, and plan_campaign.py prints the same numbers
from the same functions (docs/cluster.md). Resources only: nothing here re-times a cell.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Callable, Iterable

import yaml

from adbench import spec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_TREES = ROOT / "example-results"

# ------------------------------------------------------------------ the site file
# The site's settings live in a file named by this variable, not in the config: a
# command-line --config replaces a profile's whole `config:` key (Snakemake's rule for a key
# given both ways), and with it the account, the partitions and the GPU model.
SITE_VARIABLE = "ADBENCH_SITE"


def site_path(environ=os.environ) -> Path | None:
    value = environ.get(SITE_VARIABLE)
    return Path(os.path.expanduser(value)) if value else None


def site_problems(path: Path, site, allowed: Iterable[str]) -> list[str]:
    """A site file is a mapping of the schema's cluster keys; anything else is named."""
    at = f"{SITE_VARIABLE}={path}"
    if not isinstance(site, dict):
        return [f"{at}: not a mapping of cluster keys (workflow/schemas/config.schema.yaml)"]
    allowed = list(allowed)
    return [f"{at}: unknown key {key!r} (valid: {', '.join(allowed)})"
            for key in site if key not in allowed]


def read_site(path: Path | None, allowed: Iterable[str]) -> tuple[dict, list[str]]:
    """The site file's keys and its problems (a missing file, an unknown key)."""
    if path is None:
        return {}, []
    try:
        site = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        return {}, [f"{SITE_VARIABLE}={path}: cannot be read ({error})"]
    problems = site_problems(path, site, allowed)
    return (site if not problems else {}), problems


# ------------------------------------------------------------------ each job's resources
# The GPU type names snakemake-executor-plugin-slurm (2.8) accepts in gpu_model and gres;
# another name (a hyphen: nvidia_a100-sxm4-80gb) goes as --gpus-per-node, which SLURM records
# as the same per-node GPU request as --gres=gpu:<type>:1.
PLUGIN_GPU_TYPE = re.compile(r"^[A-Za-z0-9_.]+$")


def gpu_request(cluster: dict) -> dict:
    """A CUDA job's GPU, as the site asks for one (cluster.gpu_request)."""
    model, style = cluster.get("gpu_model"), cluster.get("gpu_request", "gpus")
    if model and not PLUGIN_GPU_TYPE.match(model):
        return {"gpu": 0, "slurm_extra": f"--gpus-per-node={model}:1"}
    if style == "gres":
        return {"gpu": 0, "gres": f"gpu:{model}:1" if model else "gpu:1"}
    return {"gpu": 1, "gpu_model": model}


def slurm_resources(cluster: dict, device: str, threads: int = 1) -> dict:
    """The plugin's resources for a job on `device` ('cpu' or 'cuda'): the site's partition,
    account, QoS and constraint by device, a CUDA job's GPU and `cuda_cpus` cores. A key the
    site leaves out is not a resource at all, so the plugin's default applies; `gpu` is
    always set (0 on the CPU: a GPU model there would become --gpus=<model>:0)."""
    cuda = device == "cuda"
    resources = {
        "slurm_partition": cluster.get("gpu_partition" if cuda else "cpu_partition"),
        "slurm_account": cluster.get("account"),
        "qos": cluster.get("gpu_qos", cluster.get("qos")) if cuda else cluster.get("qos"),
        "constraint": cluster.get("gpu_constraint" if cuda else "cpu_constraint"),
        "gpu": 0,
    }
    if cuda:
        resources.update(gpu_request(cluster))
        resources["cpus_per_task"] = max(int(cluster.get("cuda_cpus", 4)), int(threads))
    extra = [e for e in (cluster.get("slurm_extra"), resources.get("slurm_extra")) if e]
    resources["slurm_extra"] = " ".join(extra) or None
    return {name: value for name, value in resources.items() if value is not None}


def cell_gpus(device: str) -> int:
    """GPUs a job on `device` holds (one for a CUDA job, however it is asked for)."""
    return int(device == "cuda")


def job_cpus(cluster: dict, device: str, threads: int) -> int:
    """The CPU cores a job asks for: its threads, or cuda_cpus for a CUDA job."""
    return slurm_resources(cluster, device, threads).get("cpus_per_task", int(threads))


# ------------------------------------------------------------------ no GPU request lost
# How sbatch hears of a job's GPU: the plugin's `gpu` (--gpus), `gres` (--gres=gpu:...), or an
# option in `slurm_extra` (a hyphenated type's --gpus-per-node). A key a profile's
# set-resources (or --set-resources) gives a rule replaces the rules' own whole, so the docs'
# `set-resources: measure: slurm_extra: --exclusive` would drop a --gpus-per-node.
GPU_IN_EXTRA = re.compile(r"(?:^|\s)(--gpus(?:-per-(?:node|task|socket))?[=\s]\S+|"
                          r"--gres[=\s]\S*gpu\S*)")
GPU_RESOURCES = ("gpu", "gpu_model", "gres", "slurm_extra")
# The rules whose jobs hold a GPU (workflow/rules/measure.smk, scaling.smk).
GPU_RULES = ("measure", "matmul_peak_cuda")


def gpu_options(resources: dict) -> list[str]:
    """The GPU options the plugin puts on a job's sbatch line for these resources."""
    found = []
    try:
        if int(resources.get("gpu") or 0) > 0:
            model = resources.get("gpu_model")
            found.append(f"--gpus={model}:{resources['gpu']}" if model else
                         f"--gpus={resources['gpu']}")
    except (TypeError, ValueError):
        found.append(f"gpu={resources.get('gpu')!r}")  # the plugin refuses it, loudly
    if "gpu" in str(resources.get("gres") or ""):
        found.append(f"--gres={resources['gres']}")
    found += GPU_IN_EXTRA.findall(str(resources.get("slurm_extra") or ""))
    return [f.strip() for f in found]


def plugin_refusals(extra: str) -> list[str]:
    """The options of `extra` snakemake-executor-plugin-slurm refuses in slurm_extra (it
    would fail each job at its submission); none where the plugin is not installed."""
    try:
        from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options
    except ImportError:
        return []
    return [name for pattern, name in get_forbidden_slurm_options().items()
            if re.search(pattern, extra)]


def gpu_request_problems(cluster: dict, overrides: dict, cuda: bool) -> list[str]:
    """Before submitting: a site's slurm_extra the plugin refuses or that asks every job for
    a GPU, and set-resources that leave a CUDA job with no GPU option (run with `cuda`
    where the run submits CUDA cells). `overrides`: {rule: {resource: value}}."""
    problems = []
    extra = str(cluster.get("slurm_extra") or "")
    for name in plugin_refusals(extra):
        problems.append(f"cluster.slurm_extra: {extra!r} sets the {name}, which "
                        "snakemake-executor-plugin-slurm sets itself and refuses there "
                        "(the site file's own keys say it: docs/cluster.md, \"Your site\")")
    if GPU_IN_EXTRA.search(extra):
        problems.append(f"cluster.slurm_extra: {extra!r} asks every job for a GPU, the CPU "
                        "jobs too: name the GPU type in gpu_model (and gpu_request)")
    if not cuda:
        return problems
    own = slurm_resources(cluster, "cuda")
    for rule in GPU_RULES:
        changed = {k: v for k, v in (overrides.get(rule) or {}).items() if k in GPU_RESOURCES}
        if changed and not gpu_options({**own, **changed}):
            keys = ", ".join(f"{rule}:{k}={v}" for k, v in changed.items())
            problems.append(
                f"set-resources {keys} (a profile or --set-resources) replaces the CUDA "
                f"jobs' GPU request ({' '.join(gpu_options(own))}): they would reach sbatch "
                "with no GPU option. Put sbatch options in the site file's slurm_extra "
                f"({SITE_VARIABLE}), which every job keeps beside its GPU request")
    return problems


def gpu_partition_problems(cluster: dict, cells: Iterable[spec.Cell]) -> list[str]:
    """A run that submits CUDA cells needs the site's GPU partition: the cluster's default
    partition is usually a CPU one, which refuses (or never schedules) a GPU request."""
    if cluster.get("gpu_partition") or not any(c.device == "cuda" for c in cells):
        return []
    return [f"cluster.gpu_partition: not set, and the run would submit CUDA cells to SLURM "
            f"(the cluster's default partition, usually a CPU one). Set it in your site file "
            f"({SITE_VARIABLE}; profiles/slurm/site-example/site.yaml)"]


# ------------------------------------------------------------------ the cost model
# A cell's time where no run measured it: a job's start-up, a compiled mode's compilation,
# and each iteration's derivative calls and multiply-adds, priced for one slow CPU core (a
# GPU is faster on the large models and about as fast on the small ones, whose steps are
# bound by the framework's overhead). Chosen to lie above the cells measured so far, the CPU
# cells of config/config.yaml and config/paper.yaml on one core and the H100's in
# example-results/cuda-h100 (tests/test_walltime.py checks the latter), not to be precise:
# measured times replace it.
JOB_START_S = 30.0  # Snakemake's own start in the job (it parses the workflow), run_cell.py
CELL_START_S = 30.0  # the timing process: interpreter, framework, CUDA, data and model
# A compiled mode's compilation (TorchScript, torch.compile, XLA, jax.jit): a base and a
# part per parameter; ResNet50 (25.6 M parameters): 60 + 153 s (torch.compile took 1-2.5
# min on an H100).
COMPILE_S, COMPILE_S_PER_PARAMETER = 60.0, 6e-6
# Per task: seconds of overhead per iteration and per Jacobian row (the row-by-row
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


# A task not listed above (a variant the spec adds) is priced by its derivative kind: as
# `backward` for a loss or its gradients, as the costliest, `jacobian_vectorized`, for a
# Jacobian. A kind missing here is refused: pricing it as a backward pass would be a guess.
DERIVATIVE_OVERHEAD_TASK = {
    "loss": "backward",
    "gradients": "backward",
    "trainable_gradients": "backward",
    "sequence_gradients": "backward",
    "jacobian": "jacobian_vectorized",
}


def task_overhead_s(task: str) -> tuple[float, float]:
    """A task's TASK_OVERHEAD_S, else its derivative kind's (DERIVATIVE_OVERHEAD_TASK)."""
    if task in TASK_OVERHEAD_S:
        return TASK_OVERHEAD_S[task]
    kind = spec.TASKS[task].derivative
    if kind not in DERIVATIVE_OVERHEAD_TASK:
        raise ValueError(f"task {task!r}: derivative kind {kind!r} has no price in "
                         "adbench/cluster.py (DERIVATIVE_OVERHEAD_TASK): add one")
    return TASK_OVERHEAD_S[DERIVATIVE_OVERHEAD_TASK[kind]]


def modelled_iteration_s(sizes: dict, model: str, task: str,
                         mac_s: float = SECONDS_PER_MAC) -> float:
    """The model's seconds for one iteration of a task at the data sizes `sizes`."""
    info = spec.MODELS[model]
    jacobian = spec.TASKS[task].derivative == "jacobian"
    rows = sizes["jacobian_rows"] if jacobian else 0
    examples = 1 if jacobian else sizes["batch_size"]
    per_iteration, per_row = task_overhead_s(task)
    macs = info.n_parameters * weight_uses(model) * examples * max(rows, 1)
    return (per_iteration + per_row * rows) * overhead_steps(model) + macs * mac_s


def modelled_cell_s(workloads, cell: spec.Cell) -> float:
    """The model's seconds for a cell's job, start-up to its last iteration."""
    sizes, info = workloads.sizes(cell.model, cell.task), spec.MODELS[cell.model]
    compile_s = (COMPILE_S + COMPILE_S_PER_PARAMETER * info.n_parameters
                 if spec.FRAMEWORKS[cell.framework].modes[cell.mode].compiled else 0.0)
    return (JOB_START_S + CELL_START_S + compile_s
            + (sizes["warmup"] + sizes["iterations"])
            * modelled_iteration_s(sizes, cell.model, cell.task))


# A reference job computes one derivative in float64 at its cells' first batch (numpy or
# PyTorch's eager mode): one iteration of its cells' task at twice float32's price per
# multiply-add, after the same start-up. References run on the submit host (measure.smk).
FLOAT64_MAC_FACTOR = 2.0
REFERENCE_RUNTIME_MIN = 60


def modelled_reference_s(workloads, model: str, task: str) -> float:
    return JOB_START_S + CELL_START_S + modelled_iteration_s(
        workloads.sizes(model, task), model, task, SECONDS_PER_MAC * FLOAT64_MAC_FACTOR)


# ------------------------------------------------------------------ measured cells
# A measured cell's own wall time covers its timing process from the script's start; in a
# packed job each cell also pays its job step: srun, Snakemake's start in it (a dry run of
# config/gpu.yaml's 1608 cells took 5 s on a loaded 2-core machine) and the interpreter's.
STEP_START_S = 5.0
# Statuses whose wall time is what the cell takes again: ok, and unsupported (it refuses
# again, as fast). A failed cell may have stopped early; a timed-out one took its budget.
TIMED_STATUSES = ("ok", "unsupported")
# Data sizes a measured time must share with the cell it estimates; the iterations may
# differ (Record.scaled_s).
MEASURED_SIZE_KEYS = ("batch_size", "jacobian_rows")
MEASURED_WORKLOAD_KEYS = ("warmup", "iterations", *MEASURED_SIZE_KEYS)
MEMORY_FIELDS = ("rss_peak_bytes", "rss_baseline_bytes", "rss_after_step_bytes")


def iso_seconds(start: str, end: str) -> float:
    return (datetime.datetime.fromisoformat(end)
            - datetime.datetime.fromisoformat(start)).total_seconds()


@dataclasses.dataclass(frozen=True)
class Record:
    """What an earlier run recorded of a cell: enough to estimate a cell like it."""

    cell: spec.Cell
    status: str
    wall_s: float | None  # the timing script's start to its end
    loop_s: float | None  # the timed loop (warm-up included)
    workload: dict
    peak_bytes: int | None  # the process's largest resident memory recorded
    gpu: str | None
    first_s: float | None = None  # the first iteration (compilation, first launches)
    machine_gflops: float | None = None  # its tree's measured matmul peak (scaling/)

    @classmethod
    def of(cls, info: dict) -> "Record":
        try:
            wall = iso_seconds(info["started_at"], info["ended_at"])
        except (KeyError, TypeError, ValueError):
            wall = None
        peaks = [info.get(f) for f in MEMORY_FIELDS if info.get(f)]
        return cls(spec.Cell(**info["cell"]), info.get("status", ""), wall,
                   (info.get("phases") or {}).get("timed_loop_s"), info.get("workload") or {},
                   max(peaks) if peaks else None, (info.get("gpu") or {}).get("name"))

    def split(self) -> tuple[float, float] | None:
        """(fixed, step): the wall time outside the timed loop plus its first iteration
        (imports, preparation, compilation), and each further iteration's mean (without
        the first iteration's time, the loop's mean for each): n iterations take fixed +
        (n - 1) step. None: nothing to go by."""
        if self.status not in TIMED_STATUSES or self.wall_s is None:
            return None
        try:
            count = int(self.workload["warmup"]) + int(self.workload["iterations"])
        except (KeyError, TypeError, ValueError):
            count = 0
        if not self.loop_s or count < 2:
            return self.wall_s, 0.0
        if self.first_s is None:
            return self.wall_s - self.loop_s * (count - 1) / count, self.loop_s / count
        return (self.wall_s - self.loop_s + self.first_s,
                max(0.0, (self.loop_s - self.first_s) / (count - 1)))

    def scaled_s(self, sizes: dict) -> float | None:
        """This record's wall time for a cell of the data sizes and iterations `sizes`: the
        timed loop scaled up to more iterations (never down: the first iteration's
        compilation stays), the rest as measured. None where the sizes differ."""
        if self.status not in TIMED_STATUSES or self.wall_s is None:
            return None
        try:
            if any(int(self.workload[k]) != sizes[k] for k in MEASURED_SIZE_KEYS):
                return None
            then = int(self.workload["warmup"]) + int(self.workload["iterations"])
        except (KeyError, TypeError, ValueError):
            return None
        now = sizes["warmup"] + sizes["iterations"]
        if now <= then:
            return self.wall_s
        if not self.loop_s:
            return None
        return self.wall_s + self.loop_s * (now / then - 1)


def class_of(cell: spec.Cell) -> tuple:
    """Cells whose times stand for each other: all but the seed."""
    return (cell.device, cell.framework, cell.mode, cell.model, cell.task, cell.threads)


def read_record(path: Path, tree: Path | None = None) -> Record | None:
    """A raw file's record, with its first iteration's time and, where `tree` measured one,
    the matmul peak of the machine the cell ran on."""
    try:
        from adbench import schema

        record = Record.of(schema.read_provenance(str(path)))
    except Exception:  # noqa: BLE001  unreadable, or no pyarrow: no record
        return None
    peak = tree_gflops(tree, record.cell) if tree is not None else None
    return dataclasses.replace(record, first_s=first_step_s(path), machine_gflops=peak)


def first_step_s(path: Path) -> float | None:
    """The first iteration's step time in a raw file (its rows: iteration 0 first)."""
    try:
        import pyarrow.parquet as pq

        steps = pq.read_table(path, columns=["iteration", "step_s"]).to_pydict()
        first = steps["step_s"][steps["iteration"].index(0)]
        return float(first) if first is not None else None
    except Exception:  # noqa: BLE001  no rows (unsupported, failed), another layout
        return None


@functools.cache
def peak_file(tree: Path, device: str) -> dict:
    path = Path(tree) / "scaling" / ("peak_cuda.json" if device == "cuda" else "peak.json")
    try:
        import json

        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def tree_gflops(tree: Path | None, cell: spec.Cell) -> float | None:
    """The float32 matmul peak a tree measured where its cells ran (rule matmul_peak and
    matmul_peak_cuda: scaling/peak*.json), for a cell's device and threads; None unmeasured."""
    if tree is None:
        return None
    found = peak_file(Path(tree), cell.device)
    rate = (found.get("cuda") if cell.device == "cuda"
            else (found.get("threads") or {}).get(str(cell.threads))) or {}
    return rate.get("gflops") or None


def machine_tree(results: str, cluster: dict, cuda: bool) -> str:
    """The results tree of a run on a site that names its GPU type: the config's own with
    the type's model after it (results-gpu-h100), so two GPU types never price or
    overwrite each other's cells; as given for a run without CUDA cells or GPU type."""
    key = gpu_key(cluster.get("gpu_model"))
    results = results.rstrip("/")
    if not (cuda and key) or results.endswith(f"-{key}"):
        return results
    return f"{results}-{key}"


def gpu_key(name: str | None) -> str | None:
    """A GPU's model as sites and nvidia-smi both write it: 'h100' from 'NVIDIA H100 80GB
    HBM3', 'nvidia_h100_80gb_hbm3' or 'H100'; 'a100' from 'nvidia_a100-sxm4-80gb'."""
    for token in re.split(r"[^a-z0-9]+", (name or "").lower()):
        if re.fullmatch(r"[a-z]+\d+[a-z]?", token) and token not in ("nvidia", "hbm3"):
            return token
    return None


@functools.cache
def example_records(trees: Path = EXAMPLE_TREES) -> tuple[Record, ...]:
    """Every record of the committed example trees (example-results/*/raw)."""
    found = (read_record(p, p.parents[len(p.relative_to(trees).parts) - 2])
             for p in sorted(Path(trees).glob("*/raw/**/*.parquet")))
    return tuple(r for r in found if r is not None)


# ------------------------------------------------------------------ the calibrated model
# Where no run measured a cell's class, the cost model's shape with its numbers fitted on
# the cells measured on the same kind of device, in any tree: a cell's fixed part (start-up,
# preparation, its first iteration's compilation) and its each further iteration, the cost
# model's (modelled_iteration_s) times the ratio of measured to modelled, each the median of
# the most alike measured cells': those of its framework and mode (and model, for the fixed
# part; task, for the iterations), else of its framework and kind of mode (compiled or not),
# then of its kind of mode (and whether a step is one call), then of any cell measured on
# the device. The margin (cluster.walltime_margin) covers the spread around a median:
# tests/test_walltime.py prices the H200's cells from the H100's alone.
GROUPS = {
    "fixed": (("framework", "mode", "model"), ("framework", "mode"), ("framework", "compiled"),
              ("compiled", "whole_step"), ("compiled",), ()),
    "step": (("framework", "mode", "task"), ("framework", "mode"), ("framework", "compiled"),
             ("compiled", "whole_step"), ("compiled",), ()),
}


def median_of_modes(values: list[tuple[tuple, float]]) -> float:
    """The median over (framework, mode) of each one's median: a mode measured on more
    cells weighs no more than another."""
    by_mode: dict[tuple, list[float]] = {}
    for mode, value in values:
        by_mode.setdefault(mode, []).append(value)
    return statistics.median(statistics.median(v) for v in by_mode.values())


def group_key(cell: spec.Cell, fields: tuple[str, ...]) -> tuple:
    mode = spec.FRAMEWORKS[cell.framework].modes[cell.mode]
    values = {**vars(cell), "compiled": mode.compiled, "whole_step": mode.whole_step}
    return (cell.device, fields, *(values[f] for f in fields))


class Calibration:
    """The cost model fitted on measured records (Record.split)."""

    def __init__(self, records: Iterable[Record]):
        # each group's values (GROUPS), each with its (framework, mode)
        self.values: dict[tuple, list[tuple[tuple, float]]] = {}
        for record in records:
            split = record.split()
            if split is None or not record.loop_s:
                continue
            modelled = modelled_iteration_s(record.workload, record.cell.model,
                                            record.cell.task)
            mode = (record.cell.framework, record.cell.mode)
            for part, value in (("fixed", split[0]), ("step", split[1] / modelled)):
                for fields in GROUPS[part]:
                    self.values.setdefault((part, *group_key(record.cell, fields)),
                                           []).append((mode, value))

    def fitted(self, part: str, cell: spec.Cell) -> float | None:
        for fields in GROUPS[part]:
            found = self.values.get((part, *group_key(cell, fields)))
            if found:
                return median_of_modes(found)
        return None

    def cell_s(self, workloads, cell: spec.Cell) -> float | None:
        """A cell's seconds from the fitted numbers; None where its device has none."""
        fixed, ratio = self.fitted("fixed", cell), self.fitted("step", cell)
        if fixed is None or ratio is None:
            return None
        sizes = workloads.sizes(cell.model, cell.task)
        steps = sizes["warmup"] + sizes["iterations"] - 1
        return fixed + steps * ratio * modelled_iteration_s(sizes, cell.model, cell.task)


def carried_s(record: Record, sizes: dict, target_gflops: float | None) -> float | None:
    """A record's time for a cell of its class at the data sizes and iterations `sizes`, on
    another machine: its iterations after the first scaled by the ratio of the two
    machines' measured peaks where both are known, never faster than measured."""
    split = record.split()
    if split is None or any(int(record.workload.get(k, -1)) != sizes[k]
                            for k in MEASURED_SIZE_KEYS):
        return None
    speed = 1.0
    if record.machine_gflops and target_gflops:
        speed = max(1.0, record.machine_gflops / target_gflops)
    fixed, step = split
    return fixed + step * speed * (sizes["warmup"] + sizes["iterations"] - 1)


# ------------------------------------------------------------------ a cell's walltime
@dataclasses.dataclass(frozen=True)
class Walltime:
    """A timing cell's estimate and the minutes a job of its own would ask for."""

    minutes: int  # a job of this cell alone (runtime resource; SLURM's --time), attempt 1
    seconds: float  # the estimate before the margin (the budget, for source budget)
    source: str  # measured | example | model | budget
    measured_s: float | None = None  # what the cell's class took (measured or example)


class Walltimes:
    """Each timing cell's estimate, walltime and memory, and rule measure's resources.

    The estimate, in this order: the budget for a cell an earlier run left unfinished (a line
    in its log, no raw file: its job was ended, or it is running now) or recorded `timeout`;
    else the largest wall time of its class (its framework, mode, model, task, device and
    threads, any seed) in the results tree, then in aggregate/cells.parquet, then in an
    example tree measured on the site's GPU model, ok or unsupported with its data sizes
    (Record.scaled_s), plus a job step's start; else the cost model (modelled_cell_s).
    """

    def __init__(self, workloads, cluster: dict, tree: Path, examples: Path = EXAMPLE_TREES):
        self.workloads = workloads
        self.margin = float(cluster.get("walltime_margin", 2))
        self.floor_min = int(cluster.get("walltime_floor_min", 5))
        self.gpu = gpu_key(cluster.get("gpu_model"))
        # the most memory a job may ask for: the site's partitions' (MaxMemPerNode)
        self.max_mem_mb = int(cluster.get("max_mem_mb") or 0) or None
        self.tree = Path(tree)
        self.examples = Path(examples)

    # -------------------------------------------------------------- earlier runs
    @functools.cache
    def tree_records(self, key: tuple) -> tuple[Record, ...]:
        device, framework, mode, model, task, threads = key
        folder = self.tree / "raw" / device / framework / mode / model / task / f"t{threads}"
        found = (read_record(p) for p in sorted(folder.glob("seed*.parquet")))
        return tuple(r for r in found if r is not None)

    @functools.cached_property
    def aggregated(self) -> dict[tuple, list[Record]]:
        """aggregate/cells.parquet's rows by class (where raw files are gone)."""
        path = self.tree / "aggregate" / "cells.parquet"
        if not path.exists():
            return {}
        try:
            import pyarrow.parquet as pq

            columns = [*spec.CELL_FIELDS, "status", "started_at", "ended_at",
                       *MEASURED_WORKLOAD_KEYS]
            rows = pq.read_table(path, columns=columns).to_pylist()
        except Exception:  # noqa: BLE001  no pyarrow, an older layout: no records
            return {}
        by_class: dict[tuple, list[Record]] = {}
        for row in rows:
            info = {"cell": {f: row[f] for f in spec.CELL_FIELDS}, **row,
                    "workload": {k: row[k] for k in MEASURED_WORKLOAD_KEYS}}
            record = Record.of(info)
            by_class.setdefault(class_of(record.cell), []).append(record)
        return by_class

    @functools.cached_property
    def example_index(self) -> dict[tuple, list[Record]]:
        """The example trees' records measured on the site's GPU model, by class."""
        by_class: dict[tuple, list[Record]] = {}
        for record in example_records(self.examples):
            if self.gpu and gpu_key(record.gpu) == self.gpu:
                by_class.setdefault(class_of(record.cell), []).append(record)
        return by_class

    def started(self, cell: spec.Cell) -> bool:
        """Whether a cell's job got as far as its timing process: its log has a line (one
        that never started has none; Snakemake may leave it empty)."""
        try:
            return (self.tree / cell.log_path).stat().st_size > 0
        except OSError:
            return False

    def own_status(self, cell: spec.Cell) -> str | None:
        """'budget' for a cell left unfinished or timed out before, else None."""
        raw = self.tree / cell.raw_path
        if raw.exists():
            record = read_record(raw)
            return "budget" if record is not None and record.status == "timeout" else None
        return "budget" if self.started(cell) else None

    def largest(self, records: Iterable[Record], sizes: dict) -> float | None:
        times = [s for s in (r.scaled_s(sizes) for r in records) if s is not None]
        return max(times) if times else None

    @functools.cached_property
    def other_index(self) -> dict[tuple, list[Record]]:
        """The example trees' records measured on other machines, by class."""
        by_class: dict[tuple, list[Record]] = {}
        for record in example_records(self.examples):
            if not (self.gpu and gpu_key(record.gpu) == self.gpu):
                by_class.setdefault(class_of(record.cell), []).append(record)
        return by_class

    @functools.cache
    def calibration(self, device: str) -> Calibration:
        """The cost model fitted on every cell measured on `device`: this tree's raw files
        and the example trees'."""
        own = (read_record(p, self.tree)
               for p in sorted((self.tree / "raw" / device).glob("**/*.parquet")))
        return Calibration([r for r in (*own, *example_records(self.examples))
                            if r is not None and r.cell.device == device])

    def carried(self, records: Iterable[Record], sizes: dict, cell: spec.Cell) -> float | None:
        target = tree_gflops(self.tree, cell)
        times = [t for t in (carried_s(r, sizes, target) for r in records) if t is not None]
        return max(times) if times else None

    def measured(self, cell: spec.Cell) -> tuple[float, str] | None:
        """The largest wall time of the cell's class, and where it came from: this tree
        (measured), an example tree of the site's GPU (example) or of another machine
        (carried, Record.split and carried_s)."""
        sizes, key = self.workloads.sizes(cell.model, cell.task), class_of(cell)
        for records in (self.tree_records(key), self.aggregated.get(key, ())):
            seconds = self.largest(records, sizes)
            if seconds is not None:
                return seconds, "measured"
        for source, records in (("example", self.example_index.get(key, ())),
                                ("carried", self.other_index.get(key, ()))):
            seconds = self.carried(records, sizes, cell)
            if seconds is not None:
                return seconds, source
        return None

    # -------------------------------------------------------------- the walltime
    @functools.cache
    def of(self, cell: spec.Cell) -> Walltime:
        cap = self.workloads.runtime_min(cell.model, cell.task)
        if self.own_status(cell) == "budget":
            return Walltime(cap, self.workloads.budget_s(cell.model, cell.task), "budget")
        found = self.measured(cell)
        calibrated = None if found else self.calibration(cell.device).cell_s(self.workloads,
                                                                             cell)
        if found is not None:
            seconds, source = STEP_START_S + found[0], found[1]
        elif calibrated is not None:
            seconds, source = STEP_START_S + calibrated, "calibrated"
        else:
            seconds, source = modelled_cell_s(self.workloads, cell), "model"
        alone = self.job_minutes([self.asked_s_of(seconds, source, cap)])
        return Walltime(min(alone, cap), seconds, source, found[0] if found else None)

    def asked_s_of(self, seconds: float, source: str, cap: int) -> float:
        if source == "budget":
            return cap * 60.0
        return min(seconds * self.margin, cap * 60.0)

    def asked_s(self, cell: spec.Cell) -> float:
        """Seconds a cell adds to its job: its estimate times the margin, at most the budget's
        minutes (run_cell.py kills the cell at its budget anyway)."""
        w = self.of(cell)
        return self.asked_s_of(w.seconds, w.source,
                               self.workloads.runtime_min(cell.model, cell.task))

    def job_minutes(self, asked: Iterable[float]) -> int:
        """A job's walltime: Snakemake's start in it and its cells' seconds, in minutes, at
        least the floor (once per job)."""
        return max(self.floor_min, math.ceil((JOB_START_S + sum(asked)) / 60))

    def runtime_min(self, wildcards, attempt: int = 1) -> int:
        """A cell's runtime submitted alone (a local run, or outside every pack), times the
        attempt on retries."""
        return self.of(cell_of(wildcards)).minutes * attempt

    # -------------------------------------------------------------- memory
    def peak_bytes(self, cell: spec.Cell) -> int | None:
        """The largest resident memory recorded for the cell's class (the tree's, else any
        example tree's), else for its framework on its device: host memory hardly depends
        on the GPU's model."""
        key = class_of(cell)
        own = [*self.tree_records(key), *(r for r in example_records(self.examples)
                                          if class_of(r.cell) == key)]
        peaks = [r.peak_bytes for r in own if r.peak_bytes]
        if not peaks:
            peaks = [r.peak_bytes for r in (*self.framework_records(cell.framework,
                                                                   cell.device),
                                            *example_records(self.examples))
                     if r.peak_bytes
                     and (r.cell.framework, r.cell.device) == (cell.framework, cell.device)]
        return max(peaks) if peaks else None

    @functools.cache
    def framework_records(self, framework: str, device: str) -> tuple[Record, ...]:
        """Every record of the tree's raw files of a framework on a device."""
        found = (read_record(p) for p in
                 sorted((self.tree / "raw" / device / framework).glob("**/*.parquet")))
        return tuple(r for r in found if r is not None)

    def given_mem_mb(self, cell: spec.Cell) -> list[int]:
        """The mem_mb the config gives the cell's task or model (workload.tasks, .models)."""
        workload = self.workloads.workload
        return [int(found) for part, key in (("tasks", cell.task), ("models", cell.model))
                if (found := ((workload.get(part) or {}).get(key) or {}).get("mem_mb"))]

    def killed(self, cell: spec.Cell) -> bool:
        """Whether the cell's last run was killed before writing its files (its killed log,
        newer than any raw file: the out-of-memory killer, most often)."""
        log = self.tree / "killed" / f"{spec.CELL_PATH.format_map(vars(cell))}.log"
        raw = self.tree / cell.raw_path
        if not log.exists():
            return False
        return not raw.exists() or log.stat().st_mtime >= raw.stat().st_mtime

    def mem_mb(self, cell: spec.Cell) -> int:
        """A cell's memory request: MEMORY_MARGIN times the largest resident memory measured
        for its class, else its framework on its device (peak_bytes), at least
        MEMORY_FLOOR_MB and a mem_mb the config gives its task or model; the config's
        (workload.mem_mb) where nothing was measured. A cell killed before writing its
        files asks for MEMORY_RETRY_FACTOR times that. Never above the site's
        cluster.max_mem_mb where it states one."""
        peak = self.peak_bytes(cell)
        if peak:
            asked = max(MEMORY_FLOOR_MB, math.ceil(peak * MEMORY_MARGIN / 2**20),
                        *self.given_mem_mb(cell))
        else:
            asked = self.workloads.mem_mb(cell.model, cell.task)
        if self.killed(cell):
            asked = math.ceil(asked * MEMORY_RETRY_FACTOR)
        return min(asked, self.max_mem_mb) if self.max_mem_mb else asked

    # -------------------------------------------------------------- references
    def reference(self, model: str, derivative: str) -> Walltime:
        """A reference job's walltime: the model's estimate with the margin, at most
        REFERENCE_RUNTIME_MIN (it runs on the submit host: Snakemake only prints it)."""
        seconds = modelled_reference_s(self.workloads, model, spec.REFERENCE_TASK[derivative])
        minutes = max(self.floor_min, math.ceil(seconds * self.margin / 60))
        return Walltime(min(minutes, REFERENCE_RUNTIME_MIN), seconds, "model")

    def reference_runtime_min(self, wildcards, attempt: int = 1) -> int:
        return self.reference(wildcards.model, wildcards.derivative).minutes * attempt


# A request is the measured peak times this (JAX's CUDA cells hold 4.0-4.2 GiB resident,
# PyTorch's 0.9-1.1 GiB), at least the floor (an interpreter and a framework's import).
MEMORY_MARGIN = 1.5
MEMORY_FLOOR_MB = 1000
MEMORY_RETRY_FACTOR = 2.0


def cell_of(wildcards) -> spec.Cell:
    w = dict(wildcards.items()) if hasattr(wildcards, "items") else dict(wildcards)
    return spec.Cell(w["framework"], w["mode"], w["model"], w["task"], w["device"],
                     int(w["threads"]), int(w["seed"]))


# ------------------------------------------------------------------ packs
# On a cluster, the timing cells still to run of one (device, framework) go to SLURM in packs:
# one job each, its cells run one after another (rule measure's timing_lock), asking for one
# Snakemake start, its cells' seconds and one floor, in minutes. Which cells share a pack is
# decided here, in the config's order, up to cluster.pack_minutes: Snakemake's own
# --group-components chunks a set in no fixed order, and each of its cells would round up to
# a whole minute, where the cells measured on a GPU take 3-30 s.
@dataclasses.dataclass(frozen=True)
class Pack:
    # The Snakemake group of its cells and of rule pack's job, which names the config's cells
    # it spans (pack_cells): a job's own Snakemake, parsing later, finds the same ones.
    name: str
    device: str
    framework: str
    cells: tuple[spec.Cell, ...]
    minutes: int  # the job's walltime, attempt 1


class Packs:
    """The packs of the cells `pending` says a run will time, and each cell's share of its
    pack's minutes (rule measure's runtime: Snakemake adds a group job's cells' runtimes)."""

    def __init__(self, walltimes: Walltimes, cells: Iterable[spec.Cell],
                 pending: Callable[[spec.Cell], bool], pack_minutes: int, tag: str):
        self.walltimes, self.limit, self.tag = walltimes, int(pack_minutes), tag
        self.index = {cell: i for i, cell in enumerate(cells)}
        self.pending = [c for c in self.index if pending(c)]

    @functools.cached_property
    def packs(self) -> list[Pack]:
        by_group: dict[tuple[str, str], list[spec.Cell]] = {}
        for cell in self.pending:
            by_group.setdefault((cell.device, cell.framework), []).append(cell)
        packs = []
        for (device, framework), cells in by_group.items():
            for chunk in self.chunks(cells):
                first, last = self.index[chunk[0]], self.index[chunk[-1]]
                name = f"pack_{self.tag}_{device}_{framework}_{first}_{last}"
                minutes = self.walltimes.job_minutes(map(self.walltimes.asked_s, chunk))
                packs.append(Pack(name, device, framework, tuple(chunk), minutes))
        return packs

    def chunks(self, cells: list[spec.Cell]) -> Iterable[list[spec.Cell]]:
        chunk: list[spec.Cell] = []
        for cell in cells:
            if chunk and self.walltimes.job_minutes(
                    map(self.walltimes.asked_s, [*chunk, cell])) > self.limit:
                yield chunk
                chunk = []
            chunk.append(cell)
        if chunk:
            yield chunk

    @functools.cached_property
    def by_cell(self) -> dict[spec.Cell, tuple[Pack, int]]:
        """Each pending cell's pack and its share of the pack's minutes: the shares add up to
        the pack's walltime exactly (its first cell's share at least 1 minute)."""
        found = {}
        for pack in self.packs:
            asked = [self.walltimes.asked_s(c) for c in pack.cells]
            total, done, given = sum(asked) or 1.0, 0.0, 0
            for cell, seconds in zip(pack.cells, asked):
                done += seconds
                upto = math.ceil(round(pack.minutes * done / total, 9))
                found[cell] = (pack, upto - given)
                given = upto
        return found

    def group(self, cell: spec.Cell) -> str | None:
        found = self.by_cell.get(cell)
        return found[0].name if found else None

    def runtime_min(self, cell: spec.Cell) -> int:
        """A cell's runtime: its share of its pack's, or a job's of its own outside a pack."""
        found = self.by_cell.get(cell)
        return found[1] if found else self.walltimes.of(cell).minutes


# ------------------------------------------------------------------ retries
# Snakemake resubmits a failed job whole, and a remote job re-runs every job it targets
# (Snakemake passes it --force): a pack retried by `retries` would re-time the cells it had
# finished, at `attempt` times the walltime and memory. A run of the same command again is
# the retry: it packs only the cells without a complete raw file (pending_cell), the one cut
# off at its budget (Walltimes.of), one killed at more memory (Walltimes.mem_mb), each job
# within the site's limits (limit_problems).
def retry_problems(retries: int) -> list[str]:
    if not retries:
        return []
    return [f"retries: {retries} (your profile or --retries): SLURM would run a failed pack "
            "again whole, re-timing the cells it finished, at twice its walltime and memory. "
            "Leave it 0 and run the same command again, which submits only the cells "
            "without a complete raw file (docs/cluster.md, \"A retry\")"]


def limit_problems(walltimes: "Walltimes", cells: Iterable[spec.Cell],
                   pack_minutes: int) -> list[str]:
    """Cells whose budget would make a job ask for more than cluster.pack_minutes, the
    site's stated limit (below its partitions' MaxTime): such a cell, cut off by SLURM
    rather than by its budget, would be submitted again at its budget, forever."""
    found = {}
    for cell in cells:
        asked = walltimes.job_minutes([walltimes.workloads.runtime_min(cell.model, cell.task)
                                       * 60.0])
        if asked > pack_minutes:
            found.setdefault((cell.model, cell.task), asked)
    return [f"workload.budget_s of {model} {task}: a cell cut off at its budget asks for "
            f"{asked} min, above cluster.pack_minutes ({pack_minutes}: your partitions' "
            "limit). Lower the budget or raise pack_minutes"
            for (model, task), asked in found.items()]


def pack_span(name: str, cells: list[spec.Cell]) -> list[spec.Cell]:
    """The cells a pack's name spans: its device's and framework's, from its first to its
    last in the config's order (those of them already measured are inputs that exist)."""
    _, _, device, framework, first, last = name.split("_")
    return [c for c in cells[int(first):int(last) + 1]
            if (c.device, c.framework) == (device, framework)]


def pending_cell(tree: Path, cell: spec.Cell, changed: Callable[[str, str], bool],
                 described: Callable[[spec.Cell], spec.CellDescription]) -> bool:
    """Whether a run will time a cell: no raw file yet, a line in its killed log written after
    it (a kill, or a CUDA cell that saw no GPU: run_cell.py), its harness changed, or its raw
    file holds another description than this run's (`described`: the config's sizes,
    iterations or stopping rule changed, the timing job's params). Not seen: a change of the
    cell's entries in the spec (its model's or its task's), which its raw file does not
    record; Snakemake re-times those cells all the same, each a job of its own."""
    raw = tree / cell.raw_path
    if not raw.exists():
        return True
    killed = tree / "killed" / f"{spec.CELL_PATH.format_map(vars(cell))}.log"
    if killed.exists() and killed.stat().st_mtime >= raw.stat().st_mtime:
        return True
    return changed(cell.framework, cell.device) or timed_with_another(raw, described(cell))


def timed_with_another(raw: Path, description: spec.CellDescription) -> bool:
    """Whether a raw file records another description than `description`, both as JSON reads
    them. A part it does not record (written before raw files held it) is taken as unchanged; a
    file it cannot read, as changed."""
    from adbench import schema  # pyarrow: only where a plan reads finished cells

    try:
        recorded = schema.read_provenance(str(raw))
    except (OSError, ValueError):
        return True
    current = json.loads(description.to_json())
    return any(part in recorded and recorded[part] != value for part, value in current.items())


def tree_tag(results: str) -> str:
    """The results tree in a pack's name: packs of two trees never share a name."""
    return re.sub(r"[^A-Za-z0-9]+", "", Path(results).name) or "results"


# ------------------------------------------------------------------ a restarted controller
def plugin_jobs(workdir: str, run=None) -> list[tuple[str, str, str]]:
    """(job id, state, comment) of this user's SLURM jobs queued or running in `workdir`
    that snakemake-executor-plugin-slurm submitted (its comment names the rule or group)."""
    import subprocess

    run = run or subprocess.run
    try:
        out = run(["squeue", "--me", "-h", "-o", "%i|%T|%Z|%k"], capture_output=True,
                  text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    here, found = os.path.realpath(workdir), []
    for line in out.splitlines():
        parts = line.split("|", 3)
        if len(parts) == 4 and parts[3].startswith("rule_") and \
                os.path.realpath(parts[2]) == here:
            found.append((parts[0], parts[1], parts[3]))
    return found


def running_jobs_problems(workdir: str, tag: str, run=None) -> list[str]:
    """This results tree's timing jobs still queued or running (not this job itself): a
    controller started again now would submit their cells a second time."""
    own = os.environ.get("SLURM_JOB_ID")
    mine = [(i, state) for i, state, comment in plugin_jobs(workdir, run)
            if i != own and (f"pack_{tag}_" in comment or comment.startswith("rule_measure"))]
    if not mine:
        return []
    ids = ",".join(i for i, _ in mine)
    return [f"{len(mine)} timing job(s) of this results tree are still queued or running "
            f"({', '.join(f'{i} {s}' for i, s in mine)}): their cells would be submitted "
            f"twice. Wait for them (squeue -j {ids}) or cancel them (scancel {ids}), then "
            "run again (docs/cluster.md, \"The controller\")"]
