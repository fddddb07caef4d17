"""adbench.config.Walltimes: the time limit a timing job asks a cluster for (rule measure's
runtime, plan_campaign.py's walltime), on fabricated workloads and fabricated earlier runs of
a results tree (raw files and aggregate/cells.parquet), each number worked out by hand; and
the cost model against the cells an H100 measured (example-results/cuda-h100)."""

from __future__ import annotations

import dataclasses
import datetime
import math
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


def walltimes(tree: Path, workload: dict = WORKLOAD, **cluster) -> run_config.Walltimes:
    return run_config.Walltimes(run_config.Workloads(workload), cluster, tree)


def iso(seconds: float) -> str:
    return (START + datetime.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def write_raw(tree: Path, cell: spec.Cell, status: str = "ok", wall_s: float = 100.0,
              **workload) -> None:
    """A raw file as measure.py writes it: the cell, its workload and its wall time."""
    sizes = {"warmup": 5, "iterations": 100, "n_samples": 60000, "batch_size": 128,
             "jacobian_rows": 10, **workload}
    info = {"status": status, "message": "", "cell": dataclasses.asdict(cell),
            "workload": {"model": cell.model, "seed": cell.seed, "task": cell.task, **sizes},
            "started_at": iso(0), "ended_at": iso(wall_s)}
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


def test_the_margin_the_floor_and_the_budget_bound_the_walltime(tmp_path):
    w = run_config.Workloads(WORKLOAD)
    seconds = run_config.modelled_cell_s(w, MLP)  # ~82 s
    assert walltimes(tmp_path).of(MLP) == run_config.Walltime(5, seconds, "model")  # floor
    got = walltimes(tmp_path, walltime_margin=10, walltime_floor_min=1).of(MLP)
    assert got.minutes == math.ceil(seconds * 10 / 60)
    # rnn_cell's budget of 150 s: at most ceil(150 / 60) + 1 = 4 minutes, below the floor
    rnn = dataclasses.replace(MLP, model="rnn_cell")
    assert walltimes(tmp_path).of(rnn).minutes == 4
    # a cell the model prices above its budget asks for the budget's 61 minutes
    resnet = spec.Cell("tensorflow", "eager", "resnet50", "jacobian_vectorized", "cpu", 1, 0)
    long = run_config.Workloads({**WORKLOAD, "iterations": 5000})
    assert run_config.Walltimes(long, {}, tmp_path).of(resnet).minutes == 61


# ------------------------------------------------------------------ earlier runs of the tree
def test_a_cell_measured_before_asks_for_its_wall_time_with_the_margin(tmp_path):
    write_raw(tmp_path, MLP, wall_s=100)
    got = walltimes(tmp_path).of(MLP)
    # 30 s of Snakemake's start in the job + 100 s measured, x 3 = 390 s -> 7 min
    assert got == run_config.Walltime(7, 130.0, "measured")
    assert walltimes(tmp_path, walltime_margin=1.5).of(MLP).minutes == 5  # 195 s: the floor


def test_the_aggregate_gives_the_time_of_a_cell_whose_raw_file_is_gone(tmp_path):
    write_cells(tmp_path, [cells_row(MLP, 250), cells_row(MLP_COMPILED, 1000)])
    got = walltimes(tmp_path).of(MLP)
    assert got == run_config.Walltime(14, 280.0, "measured")  # 280 x 3 = 840 s
    # the raw file, newer than the aggregate, wins
    write_raw(tmp_path, MLP, wall_s=100)
    assert walltimes(tmp_path).of(MLP).minutes == 7
    assert walltimes(tmp_path).of(MLP_COMPILED).minutes == math.ceil(1030 * 3 / 60)


def test_a_time_measured_under_another_workload_is_not_used(tmp_path):
    write_raw(tmp_path, MLP, wall_s=1000, iterations=50)
    write_cells(tmp_path, [cells_row(MLP_COMPILED, 1000, batch_size=64)])
    assert walltimes(tmp_path).of(MLP).source == "model"
    assert walltimes(tmp_path).of(MLP_COMPILED).source == "model"


@pytest.mark.parametrize("status, source", [("failed", "model"), ("unsupported", "model"),
                                            ("timeout", "budget")])
def test_only_an_ok_cell_gives_a_time_and_a_timed_out_one_its_budget(tmp_path, status, source):
    # A failed cell ended early (a cuda cell that saw no GPU: its import alone): no measure of
    # the cell. One that ran out of its budget will again.
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
    write_raw(tmp_path, MLP, wall_s=100)
    wildcards = {k: str(v) for k, v in dataclasses.asdict(MLP).items()}
    assert walltimes(tmp_path).runtime_min(wildcards) == 7
    assert walltimes(tmp_path).runtime_min(wildcards, 2) == 14


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
    assert run.config["cluster"]["walltime_margin"] == 3
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
        # and the tree's own measurement is what a re-run of the cell would ask for
        got = run_config.Walltimes(run_config.Workloads(workload), {}, tree).of(cell)
        assert got.source == "measured" and got.seconds == pytest.approx(
            run_config.JOB_START_S + measured)
        checked += 1
    assert checked == 29
