#!/usr/bin/env python
"""Validate the timing harness: does the pipeline measure what an independent timer measures,
what does the harness itself add to every sample, and do other jobs disturb timing jobs?

    python3 benchmarks/validate_harness.py [--repeats N] [--iterations N] [--warmup N]
        [--null-iterations N] [--interference-iterations N] [--skip-interference] [--out PATH]

Workload everywhere: the study's 512-MLP (model mlp512, batch 128, loss ||y - f(x)||_2 on
one-hot labels, as spec.py defines it), task backward, CPU, 1 thread (OMP/MKL/OPENBLAS/
NUMEXPR/TF_* variables set to 1 and the frameworks' own intra/inter-op settings), seed 0.
Every measurement runs in a fresh process, with the framework's environment (.venvs/<env>/
bin/python when it exists, else this interpreter).

1. Pipeline vs independent timer (--repeats times, alternating, the order flipped each
   repeat so that drift hits both sides alike):
   - the pipeline's own cell: workflow/scripts/measure.py, run as the measure rule runs it,
     into a temporary folder; the median of its measured rows' backward_s and step_s;
   - PyTorch eager, independently: the same MLP built in plain torch (nn.Linear 784->512,
     ReLU, nn.Linear 512->10, torch.norm(y - f(x))), timed by torch.utils.benchmark.Timer
     (blocked_autorange, as long as the pipeline's iterations take); the step (grads set to
     None, forward, loss.backward()) and the forward alone; backward = step - forward;
   - TensorFlow eager, independently: the same Keras MLP (Dense 512 relu, Dense 10) under
     tf.GradientTape then tape.gradient, timed by a plain time.perf_counter loop;
   - reported per quantity (torch backward_s, torch step_s, tensorflow step_s): the ratio
     pipeline / independent of each repeat and their median. Target: within +-5%.
2. Null backend (harness overhead): adbench.timing.time_iterations, the real loop, over a
   stepper that does nothing, through split_timer (the eager path) and whole_timer (the
   compiled path), --null-iterations iterations in a fresh process. Reported: the median
   step_s it records (what the harness adds to every sample) and the loop's wall time per
   iteration. Targets: < 2 us per sample, and < 1% of the fastest real cell of part 1.
3. Interference (skip with --skip-interference): a tiny config (torch and TensorFlow eager
   on mlp512 backward, 2 seeds, plus torch eager on fc_xent, so reference and analysis jobs
   exist) run twice in a fresh copy of the checkout (reusing ./.venvs, as
   benchmarks/pipeline_cost.py does), `snakemake --cores 1`, then `--cores 8`, into two
   results trees. Reported: per cell the ratio of the median step_s (cores 8 / cores 1), its
   noise (the larger IQR / median of the two runs) and the median ratio. Target: the median
   ratio within 1 +- max(the cells' median noise, 5%).

Progress goes to stderr, a summary table to stdout, everything to --out as JSON (default
results/validation/harness.json, read by the paper's renderer). Exit 0 when it ran, even if
a target was missed (the report says so); non-zero on an error.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(REPO / "benchmarks"))

from adbench import provenance, schema, spec  # noqa: E402

MODEL, TASK, THREADS, SEED = "mlp512", "backward", 1, 0
RATIO_TARGET = 0.05  # pipeline / independent within +-5%
NULL_TARGET_S = 2e-6  # what the harness may add to a sample
NULL_TARGET_FRACTION = 0.01  # ... and at most this fraction of the fastest real cell
INTERFERENCE_FLOOR = 0.05  # cores8 / cores1 agree when within max(noise, this)
DEFAULT_OUT = "results/validation/harness.json"

# (framework, quantity, the independent timer's name)
COMPARISONS = (
    ("torch", "backward_s", "torch.utils.benchmark.Timer"),
    ("torch", "step_s", "torch.utils.benchmark.Timer"),
    ("tensorflow", "step_s", "time.perf_counter loop"),
)


def log(message: str) -> None:
    print(f"[validate {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ================================================================ processes
def framework_python(framework: str) -> str:
    """The interpreter of the framework's environment, as the pipeline's venvs give it."""
    python = REPO / ".venvs" / spec.FRAMEWORKS[framework].env / "bin" / "python"
    return str(python) if python.exists() else sys.executable


def one_thread_env() -> dict[str, str]:
    """This environment with every thread variable the pipeline pins set to THREADS."""
    return {**os.environ, **{name: str(THREADS) for name in provenance.THREAD_ENV_VARS}}


def run_process(cmd: list[str], what: str, cwd: Path = REPO) -> str:
    """Run a fresh process; its stdout, or an error with the tail of its output."""
    done = subprocess.run(cmd, cwd=cwd, env=one_thread_env(), capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def last_json_line(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


# ================================================================ part 1: the pipeline's cell
def measured_rows(raw_path: str):
    """The measured rows of a raw file (pandas), after checking the cell ran."""
    import pyarrow.parquet as pq

    info = schema.read_provenance(raw_path)
    if info.get("status") != "ok":
        raise RuntimeError(f"{raw_path}: status {info.get('status')}: {info.get('message')}")
    rows = pq.read_table(raw_path).to_pandas()
    return rows[rows["phase"] == "measured"], info


def pipeline_cell(framework: str, warmup: int, iterations: int) -> dict:
    """Run measure.py for the cell as the measure rule does; the medians of its quantities."""
    with tempfile.TemporaryDirectory(prefix="adbench-validate-") as tmp:
        out = os.path.join(tmp, "raw.parquet")
        cmd = [framework_python(framework), str(SCRIPTS / "measure.py"),
               "--cell", spec.CellDescription.of(
                   framework, "eager", MODEL, TASK, threads=THREADS, seed=SEED,
                   warmup=warmup, iterations=iterations).to_json(),
               "--granted-threads", str(THREADS), "--cache-dir", os.path.join(tmp, "cache"),
               "--out", out, "--gradients", os.path.join(tmp, "gradients.npz")]
        run_process(cmd, f"measure.py ({framework} eager {MODEL} {TASK})")
        rows, info = measured_rows(out)
    quantities = [q for q in ("forward_s", "backward_s", "step_s") if q in rows]
    medians = {q: float(rows[q].median()) for q in quantities}
    return {**medians, "version": info.get("versions", {}).get(framework)}


# ================================================================ part 1: independent timers
# Plain framework code, no adbench import: argv = warmup, iterations, batch, n_batches.
TORCH_INDEPENDENT = r'''
import json, sys, time
import torch
from torch import nn
from torch.utils import benchmark

warmup, iterations, batch, n_batches = map(int, sys.argv[1:5])
torch.set_num_threads(1)
if torch.get_num_interop_threads() != 1:
    torch.set_num_interop_threads(1)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
# As many distinct batches as the pipeline's cell touches: inputs in [0, 1), one-hot labels.
data = [(torch.rand(batch, 784),
         nn.functional.one_hot(torch.randint(0, 10, (batch,)), 10).float())
        for _ in range(n_batches)]
position = [0]

def next_batch():
    position[0] = (position[0] + 1) % n_batches
    return data[position[0]]

def step():
    net.zero_grad(set_to_none=True)
    x, y = next_batch()
    torch.norm(y - net(x)).backward()

def forward():
    x, y = next_batch()
    return torch.norm(y - net(x))

def estimate(fn):
    """Warm-up calls by hand; the median of their times sizes the Timer's run."""
    times = []
    for _ in range(warmup):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] if times else 0.0

def timed(stmt, fn):
    per_call = estimate(fn)
    timer = benchmark.Timer(stmt=stmt, globals={"step": step, "forward": forward},
                            num_threads=1)
    m = timer.blocked_autorange(min_run_time=max(per_call * iterations, 1e-3))
    return m.median, m.number_per_run, len(m.times)

step_s, step_number, step_blocks = timed("step()", step)
if any(p.grad is None for p in net.parameters()):  # the step did differentiate everything
    raise SystemExit("a parameter has no gradient after the step")
forward_s, forward_number, forward_blocks = timed("forward()", forward)
print(json.dumps({"step_s": step_s, "forward_s": forward_s, "backward_s": step_s - forward_s,
                  "number_per_run": [step_number, forward_number],
                  "blocks": [step_blocks, forward_blocks], "version": torch.__version__,
                  "threads": [torch.get_num_threads(), torch.get_num_interop_threads()]}))
'''

TF_INDEPENDENT = r'''
import json, sys, time
import numpy as np
import tensorflow as tf

warmup, iterations, batch, n_batches = map(int, sys.argv[1:5])
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
keras = tf.keras
rng = np.random.default_rng(0)
with tf.device("/CPU:0"):
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(10)])
    # Keras 3 wraps each tf.Variable: the tape differentiates w.r.t. the tf.Variables.
    variables = [v if isinstance(v, tf.Variable) else v.value
                 for v in model.trainable_variables]
    data = [(tf.constant(rng.random((batch, 784), dtype=np.float32)),
             tf.constant(np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]))
            for _ in range(n_batches)]

def step(i):
    x, y = data[i % n_batches]
    with tf.GradientTape() as tape:
        loss = tf.norm(y - model(x, training=False))
    return tape.gradient(loss, variables)

times = []
with tf.device("/CPU:0"):
    for i in range(warmup + iterations):
        t = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t)
if any(g is None for g in step(0)):  # outside the clock: the tape saw every variable
    raise SystemExit("tape.gradient returned None for a variable")
measured = sorted(times[warmup:])
print(json.dumps({"step_s": measured[len(measured) // 2], "version": tf.__version__,
                  "threads": [tf.config.threading.get_intra_op_parallelism_threads(),
                              tf.config.threading.get_inter_op_parallelism_threads()]}))
'''

INDEPENDENT = {"torch": TORCH_INDEPENDENT, "tensorflow": TF_INDEPENDENT}


def distinct_batches(warmup: int, iterations: int) -> int:
    """How many distinct batches the pipeline's cell cycles through (spec.Workload)."""
    return min(warmup + iterations, spec.Workload(MODEL, SEED, TASK).n_batches)


def independent_cell(framework: str, warmup: int, iterations: int) -> dict:
    batch = spec.MODELS[MODEL].batch_size
    cmd = [framework_python(framework), "-c", INDEPENDENT[framework], str(warmup),
           str(iterations), str(batch), str(distinct_batches(warmup, iterations))]
    result = last_json_line(run_process(cmd, f"independent {framework} timer"))
    if any(t != THREADS for t in result["threads"]):
        raise RuntimeError(f"independent {framework} timer ran with threads {result['threads']}")
    return result


# ================================================================ part 1: ratios
def compare(pipeline_medians: list[float], independent_medians: list[float],
            target: float = RATIO_TARGET) -> dict:
    """Per-repeat ratios pipeline / independent, their median, and whether it is on target."""
    if len(pipeline_medians) != len(independent_medians) or not pipeline_medians:
        raise ValueError("need one pipeline and one independent median per repeat")
    ratios = [p / i for p, i in zip(pipeline_medians, independent_medians)]
    ratio_median = statistics.median(ratios)
    return {"pipeline_median_s": list(pipeline_medians),
            "independent_median_s": list(independent_medians),
            "ratios": ratios, "ratio_median": ratio_median, "target": target,
            "within_target": abs(ratio_median - 1.0) <= target}


def run_repeat(repeat: int, warmup: int, iterations: int) -> dict:
    """One repeat: each framework's pipeline cell and independent timer, back to back; the
    order flips every repeat."""
    found = {}
    for framework in dict.fromkeys(f for f, _, _ in COMPARISONS):
        sides = [("pipeline", pipeline_cell), ("independent", independent_cell)]
        for side, measure in sides if repeat % 2 == 0 else sides[::-1]:
            start = time.perf_counter()
            found[framework, side] = measure(framework, warmup, iterations)
            log(f"repeat {repeat + 1}: {framework} {side}: step "
                f"{found[framework, side]['step_s'] * 1e3:.3f} ms "
                f"({time.perf_counter() - start:.1f} s)")
    return found


def pipeline_vs_independent(repeats: int, warmup: int, iterations: int) -> tuple[list, dict]:
    """Part 1: the comparisons (documented shape) and the frameworks' versions."""
    runs = [run_repeat(r, warmup, iterations) for r in range(repeats)]
    comparisons = []
    for framework, quantity, timer in COMPARISONS:
        result = compare([run[framework, "pipeline"][quantity] for run in runs],
                         [run[framework, "independent"][quantity] for run in runs])
        comparisons.append({"framework": framework, "quantity": quantity,
                            "independent_timer": timer, **result})
    versions = {f: runs[0][f, "pipeline"]["version"] for f, _, _ in COMPARISONS}
    return comparisons, versions


def fastest_real_cell(comparisons: list[dict]) -> float:
    """The fastest cell of part 1: the smallest median (over repeats) of a pipeline step_s."""
    return min(statistics.median(c["pipeline_median_s"]) for c in comparisons
               if c["quantity"] == "step_s")


# ================================================================ part 2: null backend
class NullStepper:
    """A backend that does nothing: what is left is the harness's own cost."""

    def __init__(self, path: str):
        from adbench import clock

        self.clocking, self.path = clock, path

    def run(self, iteration, clock):
        if self.path == "split":
            return self.clocking.split_timer(lambda: None, lambda _: None, sync=lambda: None,
                                             clock=clock)
        return self.clocking.whole_timer(lambda: None, sync=lambda: None, clock=clock)


def null_samples(iterations: int) -> dict:
    """In this process: the real loop over the null stepper, both paths."""
    from adbench import timing

    found = {}
    for path in ("split", "whole"):
        warmup = min(iterations, 1000)
        start = time.perf_counter()
        rows = timing.time_iterations(NullStepper(path), warmup, iterations)
        wall = time.perf_counter() - start
        steps = [r["step_s"] for r in rows if r["phase"] == "measured"]
        found[path] = {"median_s": statistics.median(steps),
                       "loop_per_iteration_s": wall / len(rows)}
    return found


def null_overhead(iterations: int, fastest_real_cell_s: float) -> dict:
    """Part 2, in a fresh process: what the harness adds per sample, against the targets."""
    # The interpreter the eager cells of part 1 ran in (the harness is plain Python).
    python = framework_python("torch")
    cmd = [python, str(Path(__file__).resolve()), "--null-child", str(iterations)]
    found = last_json_line(run_process(cmd, "null backend"))
    worst = max(found["split"]["median_s"], found["whole"]["median_s"])
    fraction = worst / fastest_real_cell_s if fastest_real_cell_s > 0 else math.nan
    return {"split_timer_median_s": found["split"]["median_s"],
            "whole_timer_median_s": found["whole"]["median_s"],
            "loop_per_iteration_s": found["split"]["loop_per_iteration_s"],
            "whole_loop_per_iteration_s": found["whole"]["loop_per_iteration_s"],
            "iterations": iterations, "python": python,
            "fastest_real_cell_s": fastest_real_cell_s, "fraction_of_fastest": fraction,
            "target_s": NULL_TARGET_S, "target_fraction": NULL_TARGET_FRACTION,
            "within_target": bool(worst < NULL_TARGET_S and fraction < NULL_TARGET_FRACTION)}


# ================================================================ part 3: interference
def interference_config(results: str, warmup: int, iterations: int) -> dict:
    return {
        "environments": "auto",
        "results": results,
        "grid": [
            {"frameworks": {"torch": ["eager"], "tensorflow": ["eager"]},
             "models": [MODEL], "tasks": [TASK], "seeds": [0, 1]},
            # A second model: its reference and its cells make more jobs to schedule.
            {"frameworks": {"torch": ["eager"]}, "models": ["fc_xent"], "tasks": [TASK],
             "seeds": [0]},
        ],
        "workload": {"warmup": warmup, "iterations": iterations},
    }


def run_snakemake(workdir: Path, cores: int, warmup: int, iterations: int) -> Path:
    """One run of the tiny config with `--cores`; its results tree."""
    import yaml

    results = f"results-cores{cores}"
    config = workdir / f"validate-cores{cores}.yaml"
    config.write_text(yaml.safe_dump(interference_config(results, warmup, iterations)))
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile",
           str(config), "--keep-going"]
    log(f"$ {shlex.join(cmd)}  (in {workdir})")
    start = time.perf_counter()
    with open(workdir / f"snakemake-cores{cores}.log", "w") as out:
        rc = subprocess.run(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                            check=False).returncode
    log(f"--cores {cores}: exit {rc} in {time.perf_counter() - start:.0f} s")
    if rc != 0:  # the comparison only needs the timing cells; say what else failed
        tail = (workdir / f"snakemake-cores{cores}.log").read_text().splitlines()[-20:]
        log("snakemake reported a failure (timing cells are checked next):\n" + "\n".join(tail))
    return workdir / results


def cell_medians(tree: Path) -> dict[str, tuple[float, float]]:
    """Per cell (its path under raw/): the median measured step_s and its IQR / median."""
    found = {}
    for raw in sorted(glob.glob(str(tree / "raw" / "**" / "*.parquet"), recursive=True)):
        rows, _ = measured_rows(raw)
        q1, median, q3 = rows["step_s"].quantile([0.25, 0.5, 0.75])
        found[str(Path(raw).relative_to(tree / "raw").with_suffix(""))] = (
            float(median), float((q3 - q1) / median))
    if not found:
        raise RuntimeError(f"{tree}: no raw cells (see the snakemake log above)")
    return found


def compare_runs(cores1: dict, cores8: dict) -> dict:
    """Part 3's verdict from the two runs' per-cell (median, noise)."""
    if set(cores1) != set(cores8):
        raise RuntimeError(f"the runs have different cells: {sorted(set(cores1) ^ set(cores8))}")
    cells = [{"cell": cell, "cores1_median_s": cores1[cell][0],
              "cores8_median_s": cores8[cell][0], "ratio": cores8[cell][0] / cores1[cell][0],
              "noise": max(cores1[cell][1], cores8[cell][1])} for cell in sorted(cores1)]
    ratio_median = statistics.median(c["ratio"] for c in cells)
    allowed = max(statistics.median(c["noise"] for c in cells), INTERFERENCE_FLOOR)
    return {"ratio_median": ratio_median, "cells": cells, "allowed": allowed,
            "within_noise": abs(ratio_median - 1.0) <= allowed}


def interference(warmup: int, iterations: int) -> dict:
    """Part 3: the tiny config at --cores 1 and --cores 8 in a fresh copy of the checkout."""
    import pipeline_cost

    workdir = Path(tempfile.mkdtemp(prefix="adbench-validate-"))
    try:
        pipeline_cost.fresh_copy(workdir, cold=False)
        trees = {cores: run_snakemake(workdir, cores, warmup, iterations) for cores in (1, 8)}
        return compare_runs(cell_medians(trees[1]), cell_medians(trees[8]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ================================================================ the report
def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def build_report(command: str, started_at: str, ended_at: str, versions: dict,
                 workload: dict, comparisons: list, null: dict,
                 interference_found: dict | None) -> dict:
    machine = provenance.machine()
    return {"command": command, "started_at": started_at, "ended_at": ended_at,
            "machine": {k: machine[k] for k in ("cpu_model", "cpu_count", "hostname")},
            "versions": versions, "workload": workload, "comparisons": comparisons,
            "null_overhead": null, "interference": interference_found}


def write_report(path: str | Path, report: dict) -> Path:
    """Atomically: a temporary file beside the target, then os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    # mkstemp's file is 0600 whatever the umask: the report is as readable as any output
    os.chmod(tmp, 0o666 & ~schema.process_umask())
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def summary_lines(report: dict) -> list[str]:
    w = report["workload"]
    title = (f"Harness validation ({w['model']} {w['task']}, {w['threads']} thread, "
             f"{w['repeats']} repeats x {w['iterations']} iterations)")
    header = (f"{'quantity':<20} {'pipeline ms':>11} {'independent ms':>14} "
              f"{'ratio':>6} {'target':>6} {'':4}  ratio per repeat")
    lines = ["", title, "", header]
    for c in report["comparisons"]:
        ratios = " ".join(f"{r:.3f}" for r in c["ratios"])
        lines.append(f"{c['framework'] + ' ' + c['quantity']:<20} "
                     f"{statistics.median(c['pipeline_median_s']) * 1e3:>11.3f} "
                     f"{statistics.median(c['independent_median_s']) * 1e3:>14.3f} "
                     f"{c['ratio_median']:>6.3f} {'+-' + format(c['target'], '.0%'):>6} "
                     f"{verdict(c['within_target']):4}  {ratios}")
    lines.append("(ms: medians over the repeats of each measurement's median; ratio: "
                 "pipeline / independent, median over the repeats)")
    n = report["null_overhead"]
    lines += ["", (f"null backend: split_timer {n['split_timer_median_s'] * 1e9:.0f} ns, "
                   f"whole_timer {n['whole_timer_median_s'] * 1e9:.0f} ns per sample "
                   f"(median); loop {n['loop_per_iteration_s'] * 1e9:.0f} ns per iteration; "
                   f"{n['fraction_of_fastest']:.4%} of the fastest cell "
                   f"({n['fastest_real_cell_s'] * 1e3:.3f} ms); target < "
                   f"{n['target_s'] * 1e6:g} us and < {n['target_fraction']:.0%}: "
                   f"{verdict(n['within_target'])}")]
    found = report["interference"]
    if found is None:
        lines.append("interference: skipped")
    else:
        lines.append("interference (cores 8 / cores 1, median step_s per cell):")
        for c in found["cells"]:
            lines.append(f"  {c['cell']:<52} {c['ratio']:.3f}  (noise {c['noise']:.1%})")
        lines.append(f"  median ratio {found['ratio_median']:.3f}, allowed +-"
                     f"{found['allowed']:.1%}: {verdict(found['within_noise'])}")
    return lines


# ================================================================ main
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="alternations of pipeline and "
                   "independent timer (default %(default)s)")
    p.add_argument("--warmup", type=int, default=10, help="default %(default)s")
    p.add_argument("--iterations", type=int, default=200, help="measured iterations per "
                   "measurement (default %(default)s)")
    p.add_argument("--null-iterations", type=int, default=100_000, help="default %(default)s")
    p.add_argument("--interference-iterations", type=int, default=100,
                   help="measured iterations of the interference runs' cells (default "
                   "%(default)s)")
    p.add_argument("--skip-interference", action="store_true")
    p.add_argument("--out", default=str(REPO / DEFAULT_OUT), help="JSON report (default "
                   f"{DEFAULT_OUT})")
    p.add_argument("--null-child", type=int, help=argparse.SUPPRESS)  # part 2's own process
    args = p.parse_args(argv)
    if min(args.repeats, args.iterations, args.null_iterations,
           args.interference_iterations) < 1 or args.warmup < 0:
        p.error("repeats and iteration counts must be >= 1, warm-up >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.null_child is not None:
        print(json.dumps(null_samples(args.null_child)))
        return 0
    started = now_iso()
    command = shlex.join(["python3", *(sys.argv if argv is None else ["validate_harness.py",
                                                                       *argv])])
    log(f"part 1: pipeline vs independent timer, {args.repeats} repeats")
    comparisons, versions = pipeline_vs_independent(args.repeats, args.warmup, args.iterations)
    log(f"part 2: null backend, {args.null_iterations} iterations")
    null = null_overhead(args.null_iterations, fastest_real_cell(comparisons))
    found = None
    if not args.skip_interference:
        log("part 3: interference, snakemake --cores 1 vs --cores 8")
        found = interference(args.warmup, args.interference_iterations)
    workload = {"model": MODEL, "task": TASK, "threads": THREADS, "warmup": args.warmup,
                "iterations": args.iterations, "repeats": args.repeats}
    report = build_report(command, started, now_iso(), versions, workload, comparisons, null,
                          found)
    path = write_report(args.out, report)
    print("\n".join(summary_lines(report)))
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
