"""The comparisons product (adbench.comparisons) on fabricated bootstrap frames whose answers
are known: each kind of comparison, its pairing, operands and basis, the pooled rows, the
machines compared; and that its readers recompute nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from adbench import comparisons, inference, spec, stats

REPLICATES = 300
SCRIPTS = Path(comparisons.__file__).resolve().parents[1]


def processes(framework, mode, model, task, quantity, seconds, seeds=(0, 1, 2),
              machine="x86 CPU", statistic="mean", device="cpu"):
    """bootstrap.parquet rows: one process per seed, seed s at seconds * (1 + s / 10), its
    replicates 1% around it."""
    rng = inference.rng_for(repr((framework, mode, model, task, quantity)))
    return [{"framework": framework, "mode": mode, "model": model, "task": task,
             "device": device, "threads": 1, "seed": s, "machine": machine,
             "quantity": quantity, "statistic": statistic,
             "point": seconds * (1 + s / 10),
             "replicates": seconds * (1 + s / 10) * np.exp(rng.normal(0, 0.01, REPLICATES))}
            for s in seeds]


def product(*conditions) -> pd.DataFrame:
    return comparisons.compare_all(pd.DataFrame([r for rows in conditions for r in rows]),
                                   0.95, claims=())


def only(made: pd.DataFrame, **where) -> pd.Series:
    mine = made[(made[list(where)] == pd.Series(where)).all(axis=1)]
    assert len(mine) == 1, mine
    return mine.iloc[0]


def test_an_improvement_pairs_the_seeds_both_sides_ran_and_keeps_their_operands():
    """Eager ran seeds 0-2, the compiled mode seed 0 alone: the ratio is of seed 0's times,
    and its operands are those means, never the eager mode's three-seed mean."""
    made = product(processes("torch", "eager", "mlp512", "backward", "step_s", 2e-3),
                   processes("torch", "script", "mlp512", "backward", "step_s", 1e-3,
                             seeds=(0,)))
    r = only(made, kind="improvement", name="improvement", level="comparison")
    assert (r["numerator_mode"], r["denominator_mode"]) == ("eager", "script")
    assert r["seeds"] == "0" and r["n_processes"] == 1
    assert r["numerator_point"] == pytest.approx(2e-3) and r["denominator_point"] == 1e-3
    assert r["ratio"] == pytest.approx(2.0) and r["low"] < 2 < r["high"]
    assert r["basis"] == comparisons.ITERATIONS  # one process per side: its iterations only


def test_three_processes_per_side_resample_processes():
    made = product(processes("torch", "eager", "mlp512", "backward", "step_s", 2e-3),
                   processes("torch", "script", "mlp512", "backward", "step_s", 1e-3))
    r = only(made, kind="improvement", name="improvement", level="comparison")
    assert r["basis"] == comparisons.PROCESSES and r["n_processes"] == 3
    assert r["seeds"] == "0,1,2"


def test_task_ratios_and_pooling_over_a_set_of_models():
    conditions = []
    for model in spec.MLPS:
        conditions += [processes("torch", "eager", model, "backward", "step_s", 1e-3),
                       processes("torch", "eager", model, "loss_jacobian", "step_s", 1.5e-3)]
    made = product(*conditions)
    ratios = made[(made["kind"] == "task_ratio") & (made["level"] == "comparison")]
    assert len(ratios) == 3 and np.allclose(ratios["ratio"], 1.5)
    pooled = only(made, kind="task_ratio", level="models")
    assert pooled["models"] == ",".join(spec.MLPS) and pooled["n_pooled"] == 3
    assert pooled["ratio"] == pytest.approx(1.5) and pooled["basis"] == comparisons.COMPARISONS


def test_the_cheap_gradient_ratio_uses_the_same_iterations_or_the_forward_task():
    made = product(
        processes("torch", "eager", "mlp512", "backward", "step_s", 3e-3, statistic="median"),
        processes("torch", "eager", "mlp512", "backward", "forward_s", 1e-3,
                  statistic="median"),
        processes("tensorflow", "graph", "mlp512", "backward", "step_s", 4e-3,
                  statistic="median"),
        processes("tensorflow", "graph", "mlp512", spec.FORWARD_TASK, "step_s", 1e-3,
                  statistic="median"))
    eager = only(made, kind="cheap_gradient", numerator_framework="torch", level="comparison")
    graph = only(made, kind="cheap_gradient", numerator_framework="tensorflow",
                 level="comparison")
    assert eager["name"] == comparisons.IN_PROCESS and eager["ratio"] == pytest.approx(3)
    assert graph["name"] == comparisons.FORWARD_TASK_SOURCE and graph["ratio"] == \
        pytest.approx(4)
    assert graph["denominator_task"] == spec.FORWARD_TASK


def test_machines_are_compared_never_pooled_together():
    """The same condition on two machines: each is its own condition estimate, and a
    "machines" comparison sets the second against the first, by the verdicts' statistic
    (the median step; a mean of other numbers beside it is not what the ratio divides)."""
    bootstrap = pd.DataFrame(
        processes("torch", "eager", "mlp512", "backward", "step_s", 2e-3, machine="GPU A",
                  device="cuda")
        + processes("torch", "eager", "mlp512", "backward", "step_s", 1e-3, machine="GPU B",
                    device="cuda")
        + processes("torch", "eager", "mlp512", "backward", "step_s", 2e-3, machine="GPU A",
                    device="cuda", statistic="median")
        + processes("torch", "eager", "mlp512", "backward", "step_s", 1.5e-3, machine="GPU B",
                    device="cuda", statistic="median"))
    estimates = comparisons.conditions(bootstrap, 0.95)
    mean = estimates[estimates["statistic"] == "mean"]
    assert sorted(mean["machine"]) == ["GPU A", "GPU B"]
    made = comparisons.compare_all(bootstrap, 0.95, claims=())
    r = only(made, kind="machines", level="comparison")
    assert (r["machine"], r["denominator_machine"]) == ("GPU B", "GPU A")
    assert r["statistic"] == "median"
    assert r["ratio"] == pytest.approx(0.75)


def test_condition_estimates_say_their_basis():
    bootstrap = pd.DataFrame(
        processes("torch", "eager", "mlp512", "backward", "step_s", 2e-3, seeds=(0,))
        + processes("torch", "eager", "fcn", "backward", "step_s", 2e-3))
    estimates = comparisons.conditions(bootstrap, 0.95).set_index(["model", "statistic"])
    assert estimates.loc[("mlp512", "mean"), "basis"] == comparisons.ITERATIONS
    assert estimates.loc[("fcn", "mean"), "basis"] == comparisons.PROCESSES
    assert estimates.loc[("fcn", "mean"), "seeds"] == "0,1,2"


# The readers of the product: they format what it made and compute no interval of their own.
READERS = ("adbench/tables.py", "adbench/scaling.py", "adbench/verdicts.py",
           "adbench/findings.py", "adbench/report_stats.py", "adbench/hypotheses.py",
           "figures.py", "render_paper.py", "make_tables.py", "make_verdicts.py")
COMPUTING = {"replicates_by_condition", "paired", "paired_ratio", "ratio_interval",
             "percentile_interval", "pooled", "pooled_mean", "over_processes",
             "condition_replicates", "difference_interval", "bootstrap_replicates"}


@pytest.mark.parametrize("reader", READERS)
def test_readers_of_the_product_recompute_nothing(reader):
    tree = ast.parse((SCRIPTS / reader).read_text())
    called = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    called |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not called & COMPUTING, sorted(called & COMPUTING)


def test_the_process_is_a_cell_on_one_machine():
    assert stats.PROCESS_FIELDS == (*spec.CELL_FIELDS, "machine")
    assert "machine" in stats.CONDITION_FIELDS and "seed" not in stats.CONDITION_FIELDS
