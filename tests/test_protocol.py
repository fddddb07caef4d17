"""The paper's protocol is the one the measured cells record (paper_context.protocol_context),
never the config's defaults: seeds, processes per cell, warm-up and measured iterations, per
task and the models that ran alike."""

from __future__ import annotations

import pandas as pd

from adbench import formatting as fmt
from adbench import paper_context, report_spec


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


# ----------------------------------------------------------------------------- quick or full
def claim_side_and_other() -> tuple[tuple, tuple]:
    """(framework, mode, model, task) of a side of a claim, and of a cell of no claim."""
    from adbench.spec import FRAMEWORKS, MODELS, TASKS

    sides = paper_context.verdict_sides()
    every = {(f, m, model, task) for f, fw in FRAMEWORKS.items() for m in fw.modes
             for model in MODELS for task in TASKS}
    return sorted(sides)[0], sorted(every - sides)[0]


def test_the_cells_entering_a_verdict_are_the_sides_of_the_claims_comparisons():
    from adbench.claims import CLAIMS

    sides = paper_context.verdict_sides()
    for claim in CLAIMS:
        for c in claim.comparisons:
            for side in (c.numerator, c.denominator):
                assert (side.framework, side.mode, side.model, side.task) in sides


def test_a_verdict_cell_with_fewer_than_the_full_processes_makes_the_quick_configuration():
    side, other = claim_side_and_other()
    full = paper_context.FULL_PROCESSES
    enough = [(*side, seed, 5, 100, "ok") for seed in range(full)]
    # A single process in a cell of no claim does not make the configuration quick.
    assert paper_context.quick_configuration(cells(enough + [(*other, 0, 5, 100, "ok")])) is None
    second, third = sorted(paper_context.verdict_sides() - {side})[:2]
    found = paper_context.quick_configuration(cells(
        enough
        + [(*second, 0, 5, 100, "ok")]  # one process
        + [(*third, 0, 5, 100, "ok"), (*third, 1, 5, 100, "failed")]))  # two started
    assert found == {"n_cells": 3, "n_single": 1, "n_fewer": 2, "full": full}


def test_the_protocol_context_carries_the_quick_statement():
    side, _ = claim_side_and_other()
    found = paper_context.protocol_context(cells([(*side, 0, 5, 100, "ok")]))
    assert found["quick"] == {"n_cells": 1, "n_single": 1, "n_fewer": 1,
                              "full": paper_context.FULL_PROCESSES}


def test_the_largest_first_step_is_given_for_eager_modes_too():
    first = pd.DataFrame(
        [
            {"framework": "torch", "mode": "script", "model": "mlp512", "task": "backward",
             "first_over_median": 40.0},
            {"framework": "torch", "mode": "eager", "model": "rnn_cell",
             "task": "jacobian_rows", "first_over_median": 1590.0},
            {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
             "first_over_median": 3.0},
        ]
    )
    found = paper_context.first_max(first)
    assert found["compiled"] == fmt.factor(40.0) and found["eager"] == fmt.factor(1590.0)
    assert "RNN cell" in found["eager_where"] and "TorchScript" in found["compiled_where"]


def test_the_limitations_come_from_the_run():
    cells = pd.DataFrame(
        [
            {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
             "device": "cpu", "threads": 1, "seed": seed, "status": status}
            for seed, status in ((0, "ok"), (1, "ok"))
        ]
        + [
            {"framework": "torch", "mode": "script", "model": "mlp512", "task": "backward",
             "device": "cpu", "threads": 1, "seed": 0, "status": "failed"}
        ]
    )
    verdicts = pd.DataFrame({"n_not_measured": [3, 4]})
    env = {"cpu_model": "Some CPU", "cpu_count": 2}
    said = " ".join(paper_context.limitations(cells, env, verdicts, validation_run=False))
    assert "1 of 2 conditions ran a single process" in said
    assert "cpu, 1 thread" in said and "no GPU" in said and "Some CPU, 2 logical CPUs" in said
    assert "1 failed" in said and "7 comparisons" in said
    assert "validate\\_harness.py" in said
    run_everywhere = " ".join(paper_context.limitations(cells, env, verdicts[:0], True))
    assert "validate" not in run_everywhere and "the claims plan" not in run_everywhere


def test_what_is_timed_describes_the_modes_the_run_measured():
    cells = pd.DataFrame(
        [{"framework": "torch", "mode": m, "model": "mlp512", "task": "backward",
          "device": "cpu", "threads": 1, "seed": 0, "status": "ok"} for m in ("eager", "script")]
    )
    modes = paper_context.modes_context(cells)
    assert [m["label"] for m in modes["measured"]] == [
        paper_context.pair_label("torch", "eager"), paper_context.pair_label("torch", "script")]
    assert paper_context.pair_label("tensorflow", "graph") in modes["others"]
    rows = paper_context.tasks_context(cells)["modes"]
    assert [r["label"] for r in rows] == [m["label"] for m in modes["measured"]]
    # ... and the tasks it measured: one column, backward's, not one per task of the spec
    tasks = paper_context.tasks_context(cells)
    assert tasks["labels"] == [fmt.latex(report_spec.task_label("backward"))]
    assert all(len(r["quantities"]) == 1 for r in rows) and tasks["colspec"] == "c"
    assert paper_context.task_columns(6).count("p{0.097") == 6  # six tasks share the width
