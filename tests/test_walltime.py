"""adbench.config.Walltimes: the time limit a timing job asks a cluster for (rule measure's
runtime, plan_campaign.py's walltime), on fabricated workloads and fabricated earlier runs of
a results tree (raw files and aggregate/cells.parquet), each number worked out by hand; and
the cost model against the cells an H100 measured (example-results/cuda-h100)."""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest
from snakemake.utils import validate

from adbench import config as run_config
from adbench import schema, spec

ROOT = Path(__file__).resolve().parents[1]
START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
WORKLOAD = {"warmup": 5, "iterations": 100, "budget_s": 3600, "mem_mb": 4000,
            "tasks": {"jacobian_rows": {"iterations": 20}},
            "models": {"rnn_cell": {"budget_s": 150}}}
MLP = spec.Cell("torch", "eager", "mlp512", "backward", "cuda", 1, 0)
MLP_COMPILED = dataclasses.replace(MLP, mode="compile")
LSTM_ROWS = spec.Cell("tensorflow", "eager", "lstm", "jacobian_rows", "cpu", 1, 0)


def walltimes(tree: Path, workload: dict = WORKLOAD, examples: Path | None = None,
              **cluster) -> run_config.Walltimes:
    return run_config.Walltimes(run_config.Workloads(workload), cluster, tree,
                                examples or tree / "no-examples")


def iso(seconds: float) -> str:
    return (START + datetime.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def write_raw(tree: Path, cell: spec.Cell, status: str = "ok", wall_s: float = 100.0,
              loop_s: float | None = None, peak: int | None = None, **workload) -> None:
    """A raw file as measure.py writes it: the cell, its workload and its wall time."""
    sizes = {"warmup": 5, "iterations": 100, "n_samples": 60000, "batch_size": 128,
             "jacobian_rows": 10, **workload}
    info = {"status": status, "message": "", "cell": dataclasses.asdict(cell),
            "workload": {"model": cell.model, "seed": cell.seed, "task": cell.task, **sizes},
            "started_at": iso(0), "ended_at": iso(wall_s),
            "phases": {"timed_loop_s": loop_s} if loop_s else {}, "rss_peak_bytes": peak}
    schema.write_raw(str(tree / cell.raw_path), dataclasses.asdict(cell), [], info)


def write_cells(tree: Path, rows: list[dict]) -> None:
    """aggregate/cells.parquet with the columns aggregate.py writes that Walltimes reads."""
    (tree / "aggregate").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(tree / "aggregate" / "cells.parquet", index=False)


def cells_row(cell: spec.Cell, wall_s: float, status: str = "ok", **workload) -> dict:
    sizes = {"warmup": 5, "iterations": 100, "batch_size": 128, "jacobian_rows": 10, **workload}
    return {**dataclasses.asdict(cell), "status": status, "started_at": iso(0),
            "ended_at": iso(wall_s), **sizes, "message": ""}


# ------------------------------------------------------------------ the model
def test_the_model_prices_start_up_compilation_and_each_iteration():
    w = run_config.Workloads(WORKLOAD)
    # mlp512 backward: 407,050 parameters, used once per example, 128 examples an iteration
    # at 4e-9 s a multiply-add, plus 0.01 s of overhead; 105 iterations; 30 + 30 s start-up.
    per_iteration = 0.01 + 407_050 * 128 * 4e-9
    assert run_config.modelled_cell_s(w, MLP) == pytest.approx(60 + 105 * per_iteration)
    # a compiled mode adds 60 s and 6e-6 s a parameter
    assert (run_config.modelled_cell_s(w, MLP_COMPILED) - run_config.modelled_cell_s(w, MLP)
            == pytest.approx(60 + 407_050 * 6e-6))
    # the LSTM's row-by-row Jacobian: 10 rows of one example, each weight used at each of its
    # 28 steps, the overhead of 0.01 s a row paid at each step; 25 iterations.
    per_iteration = 0.01 * 10 * 28 + 24_458 * 28 * 10 * 4e-9
    assert run_config.modelled_cell_s(w, LSTM_ROWS) == pytest.approx(60 + 25 * per_iteration)


def test_the_model_follows_the_workload():
    w = run_config.Workloads({**WORKLOAD, "iterations": 1000})
    more = run_config.modelled_cell_s(w, MLP)
    assert more > run_config.modelled_cell_s(run_config.Workloads(WORKLOAD), MLP)
    bigger = run_config.Workloads({**WORKLOAD, "models": {"mlp512": {"batch_size": 256}}})
    assert run_config.modelled_cell_s(bigger, MLP) > run_config.modelled_cell_s(
        run_config.Workloads(WORKLOAD), MLP)


def job_minutes(asked_s: float, floor: int = 5) -> int:
    """A job of one cell: Snakemake's start in it and the cell's seconds, at least the floor."""
    return max(floor, math.ceil((run_config.JOB_START_S + asked_s) / 60))


def test_the_margin_the_floor_and_the_budget_bound_the_walltime(tmp_path):
    w = run_config.Workloads(WORKLOAD)
    seconds = run_config.modelled_cell_s(w, MLP)  # ~82 s
    assert walltimes(tmp_path).of(MLP) == run_config.Walltime(5, seconds, "model")  # floor
    got = walltimes(tmp_path, walltime_margin=10, walltime_floor_min=1).of(MLP)
    assert got.minutes == job_minutes(seconds * 10, floor=1)
    # rnn_cell's budget of 150 s: at most ceil(150 / 60) + 1 = 4 minutes, below the floor
    rnn = dataclasses.replace(MLP, model="rnn_cell")
    assert walltimes(tmp_path).of(rnn).minutes == 4
    # a cell the model prices above its budget asks for the budget's 61 minutes
    resnet = spec.Cell("tensorflow", "eager", "resnet50", "jacobian_vectorized", "cpu", 1, 0)
    long = run_config.Workloads({**WORKLOAD, "iterations": 5000})
    assert run_config.Walltimes(long, {}, tmp_path).of(resnet).minutes == 61


# ------------------------------------------------------------------ earlier runs of the tree
def test_a_cell_measured_before_asks_for_its_wall_time_with_the_margin(tmp_path):
    write_raw(tmp_path, MLP, wall_s=300)
    got = walltimes(tmp_path).of(MLP)
    # a job step's start (5 s) + 300 s measured, x 2, and Snakemake's start in the job
    assert got == run_config.Walltime(job_minutes(610), 305.0, "measured", 300.0)
    assert got.minutes == 11
    assert walltimes(tmp_path, walltime_margin=1).of(MLP).minutes == 6


def test_a_cell_of_another_seed_gives_its_time_the_largest_first(tmp_path):
    """A pilot on seed 0 prices seeds 1-4: the cells of one framework, mode, model, task,
    device and thread count, whatever their seed, the largest time of them."""
    write_raw(tmp_path, dataclasses.replace(MLP, seed=3), wall_s=200)
    write_raw(tmp_path, dataclasses.replace(MLP, seed=4), wall_s=300)
    got = walltimes(tmp_path).of(MLP)
    assert (got.source, got.measured_s) == ("measured", 300.0)
    # another mode, model, task, thread count or device is another class
    for other in (MLP_COMPILED, dataclasses.replace(MLP, threads=2),
                  dataclasses.replace(MLP, device="cpu")):
        assert walltimes(tmp_path).of(other).source == "model", other


def test_a_time_measured_over_fewer_iterations_is_scaled_up(tmp_path):
    """Same data sizes, fewer iterations: the timed loop scales with the iterations, the rest
    (imports, preparation) does not; never scaled down (the first iteration compiles)."""
    write_raw(tmp_path, MLP, wall_s=40, iterations=50, loop_s=11.0)
    got = walltimes(tmp_path).of(MLP)
    assert got.measured_s == pytest.approx(40 + 11.0 * (105 / 55 - 1))
    more = walltimes(tmp_path, {**WORKLOAD, "iterations": 20}).of(MLP)
    assert more.measured_s == pytest.approx(40)


def test_the_aggregate_gives_the_time_of_a_cell_whose_raw_file_is_gone(tmp_path):
    write_cells(tmp_path, [cells_row(MLP, 250), cells_row(MLP_COMPILED, 1000)])
    got = walltimes(tmp_path).of(MLP)
    assert (got.source, got.seconds) == ("measured", 255.0)
    # the raw file, newer than the aggregate, wins
    write_raw(tmp_path, MLP, wall_s=100)
    assert walltimes(tmp_path).of(MLP).measured_s == 100
    assert walltimes(tmp_path).of(MLP_COMPILED).measured_s == 1000


def test_a_time_measured_under_other_data_sizes_is_not_used(tmp_path):
    write_raw(tmp_path, MLP, wall_s=1000, batch_size=64)
    write_cells(tmp_path, [cells_row(MLP_COMPILED, 1000, batch_size=64)])
    assert walltimes(tmp_path).of(MLP).source == "model"
    assert walltimes(tmp_path).of(MLP_COMPILED).source == "model"


@pytest.mark.parametrize("status, source", [("failed", "model"), ("unsupported", "measured"),
                                            ("timeout", "budget")])
def test_ok_and_unsupported_cells_give_a_time_a_timed_out_one_its_budget(tmp_path, status,
                                                                         source):
    # A failed cell ended early (a cuda cell that saw no GPU: its import alone): no measure of
    # the cell. An unsupported one refuses again, as fast. One that ran out of its budget will
    # again.
    write_raw(tmp_path, MLP, status=status, wall_s=3)
    got = walltimes(tmp_path).of(MLP)
    assert got.source == source
    assert got.minutes == (61 if source == "budget" else 5)


def test_a_cell_left_unfinished_asks_for_its_budget(tmp_path):
    # Its log written and no raw file: its job was ended (a time limit too short, scancel, a
    # lost node), so the next one asks for the budget's walltime, not the estimate again.
    log = tmp_path / MLP.log_path
    log.parent.mkdir(parents=True)
    log.write_text("[run_cell] interrupted (SIGTERM): the cell is left to the next run\n")
    write_cells(tmp_path, [cells_row(MLP, 100)])
    assert walltimes(tmp_path).of(MLP) == run_config.Walltime(61, 3600, "budget")


def test_an_empty_log_is_a_cell_that_never_started(tmp_path):
    # Snakemake leaves an empty log for each cell of a packed job ended before their turn:
    # they ask for their estimate again.
    log = tmp_path / MLP.log_path
    log.parent.mkdir(parents=True)
    log.touch()
    assert walltimes(tmp_path).of(MLP).source == "model"


def test_an_unreadable_raw_file_falls_back_to_the_aggregate_then_the_model(tmp_path):
    raw = tmp_path / MLP.raw_path
    raw.parent.mkdir(parents=True)
    raw.write_text("not parquet")
    assert walltimes(tmp_path).of(MLP).source == "model"
    write_cells(tmp_path, [cells_row(MLP, 250)])
    assert walltimes(tmp_path).of(MLP).source == "measured"


def test_the_rules_runtime_is_the_walltime_times_the_attempt(tmp_path):
    write_raw(tmp_path, MLP, wall_s=300)
    wildcards = {k: str(v) for k, v in dataclasses.asdict(MLP).items()}
    assert walltimes(tmp_path).runtime_min(wildcards) == 11
    assert walltimes(tmp_path).runtime_min(wildcards, 2) == 22


def test_the_configs_cluster_keys_reach_the_run(tmp_path):
    config = {"grid": {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0]},
              "results": "tree", "cluster": {"walltime_margin": "2", "walltime_floor_min": 1}}
    run = run_config.checked(config, validate=validate, configfiles=[], working_dir=tmp_path,
                             core_limit=None, conda_enabled=False, python="python")
    assert (run.walltimes.margin, run.walltimes.floor_min) == (2.0, 1)
    assert run.walltimes.tree == tmp_path / "tree"
    defaults = {"grid": config["grid"], "results": "tree"}
    run = run_config.checked(defaults, validate=validate, configfiles=[], working_dir=tmp_path,
                             core_limit=None, conda_enabled=False, python="python")
    assert run.config["cluster"]["walltime_margin"] == 2
    assert run.config["cluster"]["walltime_floor_min"] == 5


# ------------------------------------------------------------------ reference jobs
def test_a_reference_job_is_priced_as_one_float64_iteration_of_its_cells_task(tmp_path):
    w = run_config.Workloads(WORKLOAD)
    # mlp512's gradients: one batch of 128 at twice float32's 4e-9 s a multiply-add, plus
    # backward's 0.01 s, after the 30 + 30 s start-up: ~60.4 s, 3 x that is the floor's 5 min.
    seconds = 60 + 0.01 + 407_050 * 128 * 8e-9
    assert run_config.modelled_reference_s(w, "mlp512", "backward") == pytest.approx(seconds)
    assert walltimes(tmp_path).reference("mlp512", "gradients") == run_config.Walltime(
        5, pytest.approx(seconds), "model")
    # the LSTM's Jacobian: its cells' 10 rows (jacobian_rows' data sizes), 28 steps each
    lstm = 60 + 0.01 * 10 * 28 + 24_458 * 28 * 10 * 8e-9
    assert walltimes(tmp_path).reference("lstm", "jacobian").seconds == pytest.approx(lstm)


def test_a_reference_walltime_takes_the_margin_and_floor_and_has_a_ceiling(tmp_path):
    seconds = walltimes(tmp_path).reference("mlp512", "gradients").seconds
    got = walltimes(tmp_path, walltime_margin=10, walltime_floor_min=1).reference(
        "mlp512", "gradients")
    assert got.minutes == math.ceil(seconds * 10 / 60) == 11
    huge = walltimes(tmp_path, walltime_margin=1000).reference("mlp512", "gradients")
    assert huge.minutes == run_config.REFERENCE_RUNTIME_MIN == 60


def test_the_reference_rules_runtime_is_its_walltime_times_the_attempt(tmp_path):
    wildcards = type("Wildcards", (), {"model": "resnet50", "derivative": "jacobian"})()
    assert walltimes(tmp_path).reference_runtime_min(wildcards) == 5
    assert walltimes(tmp_path).reference_runtime_min(wildcards, 3) == 15


@pytest.mark.parametrize("task", sorted(spec.TASKS))
def test_every_task_of_the_spec_is_priced(task):
    per_iteration, per_row = run_config.task_overhead_s(task)
    assert per_iteration + per_row >= 0.01


# ------------------------------------------------------------------ the model against cells run
def test_the_model_is_above_every_cell_the_h100_measured():
    """Every ok cell of example-results/cuda-h100: the model's seconds (before the margin)
    at least its measured wall time, Snakemake's start in the job added to both."""
    tree = ROOT / "example-results" / "cuda-h100"
    checked = 0
    for raw in sorted((tree / "raw").rglob("*.parquet")):
        info = schema.read_provenance(str(raw))
        if info["status"] != "ok":
            continue
        cell, sizes = spec.Cell(**info["cell"]), info["workload"]
        workload = {"warmup": sizes["warmup"], "iterations": sizes["iterations"],
                    "budget_s": 3600, "mem_mb": 4000, "tasks": {}, "models": {cell.model: {
                        k: sizes[k] for k in ("n_samples", "batch_size", "jacobian_rows")}}}
        measured = run_config.iso_seconds(info["started_at"], info["ended_at"])
        modelled = run_config.modelled_cell_s(run_config.Workloads(workload), cell)
        assert modelled >= run_config.JOB_START_S + measured, (cell, measured, modelled)
        # and a re-run of the tree asks for the largest time of the cell's seeds
        got = run_config.Walltimes(run_config.Workloads(workload), {}, tree).of(cell)
        assert got.source == "measured" and got.measured_s >= measured
        checked += 1
    assert checked == 29


# ------------------------------------------------------------------ the example trees
H100_CELL = spec.Cell("torch", "eager", "mlp512", "backward", "cuda", 1, 4)
GPU_WORKLOAD = {"warmup": 10, "iterations": 469, "budget_s": 3600, "mem_mb": 4000,
                "tasks": {}, "models": {}}


@pytest.mark.parametrize("gpu_model, source", [
    ("h100", "example"), ("nvidia_h100_80gb_hbm3", "example"), ("H100", "example"),
    ("nvidia_h100-80gb-hbm3", "example"),
    ("a100", "carried"), ("nvidia_a100-sxm4-80gb", "carried"), (None, "carried")])
def test_an_example_tree_prices_its_cells_on_its_gpu_or_carried_to_another(tmp_path,
                                                                          gpu_model, source):
    """A cell none of the tree's runs measured asks for the largest time of its class in
    the example trees (seeds 0 and 1: 6.7 and 6.5 s): on the site's GPU as measured, on
    another as measured too, no peak of either machine being known (never faster)."""
    cluster = {"gpu_model": gpu_model} if gpu_model else {}
    got = run_config.Walltimes(run_config.Workloads(GPU_WORKLOAD), cluster, tmp_path).of(
        H100_CELL)
    assert got.source == source
    assert 6 < got.measured_s < 7
    assert got.seconds == run_config.STEP_START_S + got.measured_s


def test_an_example_cell_asks_for_its_time_and_a_job_steps_start_with_the_margin(tmp_path):
    w = run_config.Walltimes(run_config.Workloads(GPU_WORKLOAD), {"gpu_model": "h100"},
                             tmp_path)
    asked = w.asked_s(H100_CELL)
    assert asked == pytest.approx(2 * (run_config.STEP_START_S + w.of(H100_CELL).measured_s))


# ------------------------------------------------------------------ memory
def test_a_cells_memory_comes_from_its_measured_peak_with_a_margin(tmp_path):
    cell = dataclasses.replace(MLP, framework="jax", mode="jit")
    nothing = walltimes(tmp_path / "t0")
    assert nothing.mem_mb(cell) == 4000  # nothing measured: the config's
    write_raw(tmp_path, dataclasses.replace(cell, seed=2), peak=int(4.18 * 2**30))
    assert walltimes(tmp_path).mem_mb(cell) == math.ceil(int(4.18 * 2**30) * 1.5 / 2**20)
    # a peak below the config's lowers the request, down to the floor; on a CPU as well
    write_raw(tmp_path, dataclasses.replace(MLP, seed=1), peak=2**30)
    assert walltimes(tmp_path).mem_mb(MLP) == 1536
    cpu = dataclasses.replace(cell, device="cpu", framework="autograd", mode="eager")
    write_raw(tmp_path, cpu, peak=100 * 2**20)
    assert walltimes(tmp_path).mem_mb(cpu) == run_config.cluster_settings.MEMORY_FLOOR_MB


def test_a_memory_the_config_gives_a_model_or_task_is_the_least_asked(tmp_path):
    write_raw(tmp_path, dataclasses.replace(MLP, seed=1), peak=2**30)
    given = {**WORKLOAD, "models": {"mlp512": {"mem_mb": 6000}}}
    assert walltimes(tmp_path, given).mem_mb(MLP) == 6000
    given = {**WORKLOAD, "tasks": {"backward": {"mem_mb": 1200}}}
    assert walltimes(tmp_path, given).mem_mb(MLP) == 1536


def test_a_framework_never_measured_in_a_class_asks_for_its_peak_elsewhere(tmp_path):
    """TensorFlow's CUDA cells: a peak of another of its classes in the tree prices them."""
    measured = spec.Cell("tensorflow", "eager", "cnn", "backward", "cuda", 1, 0)
    write_raw(tmp_path, measured, peak=3 * 2**30)
    other = spec.Cell("tensorflow", "xla", "lstm", "jacobian_rows", "cuda", 1, 0)
    assert walltimes(tmp_path).mem_mb(other) == math.ceil(3 * 1.5 * 1024)


def test_a_killed_cell_asks_for_twice_its_memory_within_the_sites_limit(tmp_path):
    write_raw(tmp_path, dataclasses.replace(MLP, seed=1), peak=2**30)
    killed = tmp_path / "killed" / f"{spec.CELL_PATH.format_map(vars(MLP))}.log"
    killed.parent.mkdir(parents=True)
    killed.write_text("killed by SIGKILL\n")
    assert walltimes(tmp_path).mem_mb(MLP) == 2 * 1536
    assert walltimes(tmp_path, max_mem_mb=2000).mem_mb(MLP) == 2000
    # a raw file written after the kill: the cell ran, no more memory
    write_raw(tmp_path, MLP, peak=2**30)
    assert walltimes(tmp_path).mem_mb(MLP) == 1536


def test_jax_cuda_cells_ask_for_more_than_their_peak_from_the_examples(tmp_path):
    """JAX's CUDA cells held 4.04-4.18 GiB resident on the H200, above the 4000 MB default:
    every JAX CUDA cell, measured or not, asks for its framework's peak with the margin."""
    w = run_config.Walltimes(run_config.Workloads(GPU_WORKLOAD), {}, tmp_path)
    cell = spec.Cell("jax", "eager", "resnet50", "backward", "cuda", 1, 0)
    assert w.mem_mb(cell) >= 1.5 * 4.17 * 2**30 / 2**20 > 4000


# ------------------------------------------------------------------ packs
def pack_walltimes(tmp_path, **cluster):
    return run_config.Walltimes(run_config.Workloads(GPU_WORKLOAD),
                                {"gpu_model": "h100", **cluster}, tmp_path)


def h100_cells(seeds=range(5)):
    return [spec.Cell("torch", mode, model, "backward", "cuda", 1, seed)
            for mode in ("eager", "script") for model in ("mlp512", "mlp354x2")
            for seed in seeds]


def test_a_pack_asks_for_one_start_its_cells_and_one_floor(tmp_path):
    w = pack_walltimes(tmp_path)
    cells = h100_cells()
    packs = run_config.Packs(w, cells, lambda c: True, 120, "t")
    (pack,) = packs.packs
    asked = sum(w.asked_s(c) for c in cells)
    assert pack.cells == tuple(cells)  # the config's order
    assert pack.minutes == max(5, math.ceil((run_config.JOB_START_S + asked) / 60))
    # each cell's share of it: Snakemake adds them up to the pack's walltime exactly
    assert sum(packs.runtime_min(c) for c in cells) == pack.minutes
    assert all(packs.group(c) == pack.name for c in cells)
    # far below a floor per cell (20 cells of 6-8 s)
    assert pack.minutes < 20 * 5


def test_packs_hold_at_most_pack_minutes_and_only_the_cells_to_run(tmp_path):
    w = pack_walltimes(tmp_path, walltime_floor_min=1)
    cells = h100_cells(range(40))
    done = set(cells[:10])
    packs = run_config.Packs(w, cells, lambda c: c not in done, 3, "t")
    assert all(p.minutes <= 3 for p in packs.packs) and len(packs.packs) > 1
    packed = [c for p in packs.packs for c in p.cells]
    assert packed == cells[10:]
    assert packs.group(cells[0]) is None  # a cell outside the packs: a job of its own
    assert packs.runtime_min(cells[0]) == w.of(cells[0]).minutes
    for pack in packs.packs:
        assert sum(packs.runtime_min(c) for c in pack.cells) == pack.minutes
        assert packs.runtime_min(pack.cells[0]) >= 1


def test_packs_of_two_devices_or_frameworks_are_apart(tmp_path):
    w = pack_walltimes(tmp_path)
    cells = [spec.Cell("torch", "eager", "mlp512", "backward", "cuda", 1, 0),
             spec.Cell("jax", "jit", "mlp512", "backward", "cuda", 1, 0),
             spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, 0)]
    packs = run_config.Packs(w, cells, lambda c: True, 120, "tree")
    assert sorted(p.name for p in packs.packs) == [
        "pack_tree_cpu_torch_2_2", "pack_tree_cuda_jax_1_1", "pack_tree_cuda_torch_0_0"]
    # a pack's name spans its cells in the config's order, for a job's own Snakemake
    for pack in packs.packs:
        assert tuple(run_config.cluster_settings.pack_span(pack.name, cells)) == pack.cells


def test_a_packs_span_holds_the_measured_cells_between_its_own(tmp_path):
    w = pack_walltimes(tmp_path, walltime_floor_min=1)
    cells = h100_cells(range(6))
    done = {cells[2]}
    packs = run_config.Packs(w, cells, lambda c: c not in done, 120, "t")
    (pack,) = packs.packs
    assert cells[2] not in pack.cells
    assert run_config.cluster_settings.pack_span(pack.name, cells) == cells


# ------------------------------------------------------------------ the calibrated model
def example_workload(record) -> dict:
    """A config's workload that gives the cells of `record`'s class its data sizes."""
    sizes = record.workload
    return {"warmup": int(sizes["warmup"]), "iterations": int(sizes["iterations"]),
            "budget_s": 3600, "mem_mb": 4000, "tasks": {}, "models": {record.cell.model: {
                k: int(sizes[k]) for k in ("n_samples", "batch_size", "jacobian_rows")}}}


def test_the_h200s_cells_priced_from_the_h100s_alone_ask_at_most_three_times_their_use(
        tmp_path):
    """One machine held out: every cell the H200 measured (ok), priced from the H100's tree
    alone (its classes carried, the others the model fitted on the H100's cells), asks for
    at least its measured use (a job step's start and its wall time) and, in all, at most 3x
    it."""
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "cuda-h100").symlink_to(ROOT / "example-results" / "cuda-h100")
    held_out = [r for r in run_config.cluster_settings.example_records()
                if r.status == "ok" and "H200" in (r.gpu or "")]
    asked = used = 0.0
    sources = set()
    for record in held_out:
        w = run_config.Walltimes(run_config.Workloads(example_workload(record)),
                                 {"gpu_model": "h200"}, tmp_path / "tree", examples)
        use = run_config.STEP_START_S + record.wall_s
        sources.add(w.of(record.cell).source)
        assert w.asked_s(record.cell) >= use, record.cell
        asked, used = asked + w.asked_s(record.cell), used + use
    assert len(held_out) == 44 and sources == {"carried", "calibrated"}
    assert asked / used <= 3, asked / used


def test_a_time_is_carried_by_the_ratio_of_the_machines_peaks_never_faster(tmp_path):
    """A class measured on another machine: its iterations after the first take the ratio
    of the two machines' measured peaks (scaling/peak_cuda.json) where it is slower, as
    measured where it is faster; the fixed part as measured."""
    examples = tmp_path / "examples"
    other = examples / "cuda-other"
    cell = dataclasses.replace(MLP, seed=3)
    write_raw(other, cell, wall_s=13.4, loop_s=11.4)
    (other / "scaling").mkdir()
    (other / "scaling" / "peak_cuda.json").write_text('{"cuda": {"gflops": 1000}}')
    tree = tmp_path / "tree"

    def carried(target_gflops):
        (tree / "scaling").mkdir(parents=True, exist_ok=True)
        (tree / "scaling" / "peak_cuda.json").write_text(
            f'{{"cuda": {{"gflops": {target_gflops}}}}}')
        run_config.cluster_settings.peak_file.cache_clear()
        run_config.cluster_settings.example_records.cache_clear()
        got = walltimes(tree, examples=examples).of(MLP)
        assert got.source == "carried"
        return got.measured_s

    # without the first iteration's time, the loop's mean for each (11.4 s / 105)
    assert carried(1000) == pytest.approx(13.4)
    assert carried(2000) == pytest.approx(13.4)  # a faster machine: never below
    # half the peak: the 104 iterations after the first take twice as long
    assert carried(500) == pytest.approx(13.4 + 11.4 * 104 / 105)


def test_the_first_iteration_is_apart_when_a_time_is_scaled():
    """A compiled cell's first iteration compiles: scaled to other iterations, it stays."""
    record = run_config.cluster_settings.Record(
        MLP_COMPILED, "ok", 20.0, 6.0, {"warmup": 1, "iterations": 9, "batch_size": 128,
                                         "jacobian_rows": 10}, None, "h100", first_s=4.0)
    fixed, step = record.split()
    assert (fixed, step) == (pytest.approx(18.0), pytest.approx(2.0 / 9))
    sizes = {"warmup": 10, "iterations": 90, "batch_size": 128, "jacobian_rows": 10}
    assert run_config.cluster_settings.carried_s(record, sizes, None) == pytest.approx(
        18 + 99 * 2 / 9)


def test_the_model_is_fitted_on_the_devices_measured_cells(tmp_path):
    """A class measured nowhere: the model's shape with the medians of the closest measured
    cells (here the framework and mode's, from another task's cells)."""
    for seed, (wall, loop) in enumerate([(10.0, 2.0), (12.0, 3.0)]):
        write_raw(tmp_path, dataclasses.replace(MLP, model="mlp354x2", seed=seed),
                  wall_s=wall, loop_s=loop)
    cell = dataclasses.replace(MLP, task="loss_jacobian")
    got = walltimes(tmp_path).of(cell)
    assert got.source == "calibrated"
    sizes = run_config.Workloads(WORKLOAD).sizes("mlp354x2", "backward")
    modelled = run_config.modelled_iteration_s(sizes, "mlp354x2", "backward")
    ratio = statistics.median([2.0 / 105 / modelled, 3.0 / 105 / modelled])
    fixed = statistics.median([10.0 - 2.0 * 104 / 105, 12.0 - 3.0 * 104 / 105])
    expected = fixed + 104 * ratio * run_config.modelled_iteration_s(
        run_config.Workloads(WORKLOAD).sizes("mlp512", "loss_jacobian"), "mlp512",
        "loss_jacobian")
    assert got.seconds == pytest.approx(run_config.STEP_START_S + expected)
    # another device has nothing measured: the unfitted model
    assert walltimes(tmp_path).of(dataclasses.replace(cell, device="cpu")).source == "model"


def test_an_unknown_derivative_kind_is_refused_by_name(monkeypatch):
    task = dataclasses.replace(spec.TASKS["backward"], derivative="hessian_vector")
    monkeypatch.setitem(spec.TASKS, "hvp", task)
    with pytest.raises(ValueError, match="'hessian_vector'"):
        run_config.task_overhead_s("hvp")


# ------------------------------------------------------------------ within the site's limits
def test_a_budget_above_the_sites_pack_minutes_is_refused(tmp_path):
    w = walltimes(tmp_path)
    (problem,) = run_config.cluster_settings.limit_problems(w, [MLP], 30)
    assert "workload.budget_s of mlp512 backward" in problem and "pack_minutes (30" in problem
    assert run_config.cluster_settings.limit_problems(w, [MLP], 120) == []


def test_snakemakes_retries_are_refused_by_name():
    (problem,) = run_config.cluster_settings.retry_problems(1)
    assert problem.startswith("retries: 1")
    assert run_config.cluster_settings.retry_problems(0) == []
