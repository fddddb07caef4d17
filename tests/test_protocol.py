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
        ("[512]", "0, 1", "2")]  # models by the labels the paper uses everywhere


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
    assert rows == [("backward", "[512], [354, 354]", "0, 1", "2", "5", "100"),
                    (rows[1][0], "FCN, CNN", "0", "1", "2", "20")]
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
            for side in c.sides:
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
    """Generated from what the run was: its processes, its failures, its machine, a GPU not
    run, the validation not run; and nothing the run does not show."""
    from adbench import paper_framing

    cells = pd.DataFrame(
        [
            {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
             "device": "cpu", "threads": 1, "seed": seed, "status": status, "warmup": 5,
             "iterations": 100}
            for seed, status in ((0, "ok"), (1, "ok"))
        ]
        + [
            {"framework": "torch", "mode": "script", "model": "resnet50",
             "task": "jacobian_rows", "device": "cpu", "threads": 1, "seed": 0,
             "status": "failed", "warmup": 5, "iterations": 10, "jacobian_rows": 10}
        ]
    )
    claims = pd.DataFrame({"claim": ["depth", "hypothesis1", "jit_outperforms"],
                           "verdict": ["contradicted", "one process", "not measured"],
                           "provisional": [True, False, False]})
    env = {"cpu_model": "Some CPU", "cpu_count": 2, "n_warmup_dropped": 3,
           "iterations_dropped": 12, "n_no_steady_state": 1}
    study = {"study_input_shape": {"resnet50": [3, 224, 224]}, "n_batches": 469}
    data = {t.name: {"ours": pd.DataFrame() if t.published else pd.DataFrame()}
            for t in report_spec.TABLES}
    said = " ".join(paper_framing.limitations(cells, env, claims, data, study, False))
    assert "1 of the 1 verdicts given rest on fewer than three processes" in said
    assert "1 claim rest on one process" in said
    assert "too short for 3 cells" in said and "12 measured iterations" in said
    assert "ResNet50's input is 3$\\times$32$\\times$32" in said  # the study's 224 x 224
    assert "10 of its 1000 rows" in said and "an epoch of 469 batches" in said
    assert "No GPU" in said and "Some CPU" in said and "1 failed" in said
    assert "not validated" in said
    quiet = " ".join(paper_framing.limitations(cells[:2], {"cpu_model": "Some CPU"},
                                               claims[:0], data, {}, True))
    assert "validated" not in quiet and "Warm-up" not in quiet and "Processes" not in quiet


def test_what_is_timed_describes_the_modes_the_run_measured():
    cells = pd.DataFrame(
        [{"framework": "torch", "mode": m, "model": "mlp512", "task": "backward",
          "device": "cpu", "threads": 1, "seed": 0, "status": "ok"} for m in ("eager", "script")]
    )
    modes = paper_context.modes_context(cells)
    assert [m["label"] for m in modes["measured"]] == [
        paper_context.pair_label("torch", "eager"), paper_context.pair_label("torch", "script")]
    assert paper_context.pair_label("tensorflow", "graph") in modes["others"]
    assert modes["labels"] == "; ".join(m["label"] for m in modes["measured"])
    rows = paper_context.tasks_context(cells)["modes"]
    assert [r["label"] for r in rows] == [m["label"] for m in modes["measured"]]
    # ... and the tasks it measured: one column, backward's, not one per task of the spec
    tasks = paper_context.tasks_context(cells)
    assert tasks["labels"] == [fmt.latex(report_spec.task_label("backward"))]
    assert all(len(r["quantities"]) == 1 for r in rows) and tasks["colspec"] == "c"
    assert rows[0]["quantities"] == ["forward, backward, step"]


def test_the_quantities_of_many_tasks_fit_a_page_abbreviated():
    """Six tasks of three quantities each do not fit a portrait page spelt out: the cells
    abbreviate (the caption says how) and the task headers turn."""
    cells = pd.DataFrame(
        [{"framework": "torch", "mode": "eager", "model": "mlp512", "task": t, "device": "cpu",
          "threads": 1, "seed": 0, "status": "ok"}
         for t in ("backward", "jacobian_rows", "jacobian_vectorized", "loss_jacobian",
                   "backward_frozen", "forward")])
    tasks = paper_context.tasks_context(cells)
    assert tasks["abbreviated"] and tasks["colspec"] == "c" * 6
    assert all(label.startswith(r"\rotatebox{90}") for label in tasks["labels"])
    assert tasks["modes"][0]["quantities"][0] == "f, b, s"
