"""The paper's protocol is the one the measured cells record (paper_context.protocol_context),
never the config's defaults: seeds, processes per cell, warm-up and measured iterations, per
task and the models that ran alike."""

from __future__ import annotations

import pandas as pd

from adbench import paper_context


def cells(rows: list[tuple]) -> pd.DataFrame:
    """cells.parquet rows: (framework, mode, model, task, seed, warmup, iterations, status)."""
    keys = ("framework", "mode", "model", "task", "seed", "warmup", "iterations", "status")
    return pd.DataFrame([{**dict(zip(keys, r)), "device": "cpu", "threads": 1} for r in rows])


def test_cells_that_ran_alike_are_one_statement():
    found = paper_context.protocol_context(cells([
        (f, "eager", "mlp512", "backward", seed, 5, 100, "ok")
        for f in ("torch", "tensorflow") for seed in (0, 1)]))
    assert found["uniform"]
    assert (found["seeds"], found["processes"], found["warmup"], found["iterations"]) == (
        "0, 1", "2", "5", "100")
    assert [(r["models"], r["seeds"], r["processes"]) for r in found["rows"]] == [
        ("mlp512", "0, 1", "2")]


def test_what_differs_by_task_and_model_is_a_row_each_and_failures_do_not_count():
    found = paper_context.protocol_context(cells([
        ("torch", "eager", "mlp512", "backward", 0, 5, 100, "ok"),
        ("torch", "eager", "mlp512", "backward", 1, 5, 100, "ok"),
        ("torch", "eager", "mlp354x2", "backward", 0, 5, 100, "ok"),
        ("torch", "eager", "mlp354x2", "backward", 1, 5, 100, "ok"),
        ("torch", "eager", "cnn", "jacobian_rows", 0, 2, 20, "ok"),
        ("torch", "eager", "cnn", "jacobian_rows", 1, 2, 20, "failed"),  # not measured
        ("torch", "eager", "fcn", "jacobian_rows", 0, 2, 20, "ok"),
    ]))
    assert not found["uniform"]
    rows = [(r["task"], r["models"], r["seeds"], r["processes"], r["warmup"], r["iterations"])
            for r in found["rows"]]
    assert rows == [("backward", "mlp512, mlp354x2", "0, 1", "2", "5", "100"),
                    (rows[1][0], "fcn, cnn", "0", "1", "2", "20")]
    assert (found["processes"], found["warmup"], found["iterations"]) == (
        "1--2", "2--5", "20--100")  # LaTeX en dashes


def test_no_measured_cell_says_not_available():
    found = paper_context.protocol_context(cells([
        ("torch", "eager", "mlp512", "backward", 0, 5, 100, "failed")]))
    assert found["rows"] == [] and found["processes"] == "n/a"
