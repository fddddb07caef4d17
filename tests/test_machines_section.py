"""The machines section on the example trees (example-results/cuda-h100 and cuda-h200, as
config/machines-example.yaml analyses them): each ratio it prints is one machine's step over
the other's by the statistic it names, recomputed here from the raw files; no other quantity
reaches it; the two trees' different workloads are stated; a condition whose step shape
differs is left out."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

import aggregate
from adbench import comparisons, machines_section, stats
from adbench.claims import VERDICT_STATISTIC
from e2e import REPO

TREES = yaml.safe_load((REPO / "config/machines-example.yaml").read_text())["raw_trees"]
SETTINGS = {"workload": {}, "gradient_check": {"tolerance": 1e-4, "models": {}},
            "statistics": {"confidence": 0.95, "bootstrap_replicates": 200,
                           "bootstrap_seed": 0, "noise_threshold": 0.1,
                           "warmup_window": 5, "warmup_tolerance": 0.05}}
KEYS = ["framework", "mode", "model", "task", "device", "threads", "seed"]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """The two trees' raw files aggregated and compared as the workflow does (no timing)."""
    out = tmp_path_factory.mktemp("machines")
    raw = sorted(str(p) for tree in TREES for p in (REPO / tree / "raw").rglob("*.parquet"))
    assert aggregate.main([*raw, "--outdir", str(out), "--settings",
                           json.dumps(SETTINGS)]) == 0
    cells = pd.read_parquet(out / "cells.parquet")
    made = comparisons.compare_all(pd.read_parquet(out / "bootstrap.parquet"), 0.95)
    env = json.loads((out / "environment.json").read_text())
    return made, cells, env


def machine_of(cells: pd.DataFrame, name: str) -> str:
    (found,) = {m for m in cells["machine"] if name in m}
    return found


def step_from_raw(cells: pd.DataFrame, machine: str, condition: tuple, statistic: str) -> float:
    """A condition's step on a machine from its raw file: the statistic over the measured
    iterations from the configured warm-up and the steady-state rule's drop on (one process
    per condition in these trees)."""
    (cell,) = cells[(cells["machine"] == machine)
                    & (cells[KEYS[:6]].apply(tuple, axis=1) == condition)].to_dict("records")
    rows = pd.read_parquet(cell["raw_file"])
    first = int(cell["warmup"]) + int(cell["warmup_dropped"])
    steps = rows[(rows["phase"] == "measured") & (rows["iteration"] >= first)]["step_s"]
    return float(getattr(np, statistic)(steps.to_numpy()))


def printed_ratio(text: str) -> float:
    return float(re.match(r"[\d.]+", text).group())


def test_every_printed_ratio_is_the_step_ratio_recomputed_from_the_raw_files(analysed):
    made, cells, env = analysed
    section = machines_section.machines_context(made, env, cells)
    h200, h100 = machine_of(cells, "H200"), machine_of(cells, "H100")
    (pair,) = section["pairs"]
    assert (pair["numerator"], pair["denominator"]) == ("H200", "H100 80GB HBM3")
    steps = machines_section.step_rows(made)
    statistic = section["statistic"]
    assert set(steps["statistic"]) == {statistic}
    compared = steps[steps["level"] == "comparison"]
    assert len(compared) == len(pair["every"]) == 4  # the CNN's two Jacobians, eager and compiled
    for _, r in compared.iterrows():
        condition = machines_section.side_key(r)
        expected = (step_from_raw(cells, h200, condition, statistic)
                    / step_from_raw(cells, h100, condition, statistic))
        shown = [row for row in pair["every"]
                 if row["condition"] == machines_section.latex(machines_section.side_text(r))]
        (row,) = shown
        assert printed_ratio(row["ratio"]) == pytest.approx(expected, rel=6e-3), condition
    # The headline rows (one model each here) print the same ratios, no other quantity's.
    assert sorted(r["ratio"] for r in pair["rows"]) == sorted(r["ratio"] for r in pair["every"])


def test_the_first_step_over_the_steady_state_does_not_reach_the_section(analysed):
    """The product sets this quantity side by side too (1.68 for eager's vectorised Jacobian,
    where the steps give 0.69): the headline once printed it as the machines' ratio."""
    made, cells, env = analysed
    others = made[(made["kind"] == "machines")
                  & (made["numerator_quantity"] == stats.FIRST_OVER_STEADY)]
    assert len(others)
    section = machines_section.machines_context(made, env, cells)
    shown = {printed_ratio(r["ratio"]) for p in section["pairs"] for r in p["every"]}
    for value in others["ratio"]:
        assert all(abs(value / s - 1) > 6e-3 for s in shown), value


def test_the_verdicts_statistic_is_used_where_the_product_holds_it(analysed):
    """A product holding the step by the verdicts' statistic beside another: the section
    prints the verdicts' (planted here at twice the other's ratio)."""
    made, cells, env = analysed
    steps = machines_section.step_rows(made)
    planted = steps.assign(statistic=VERDICT_STATISTIC, ratio=steps["ratio"] * 2,
                           low=steps["low"] * 2, high=steps["high"] * 2)
    other = steps.assign(statistic="other")
    both = pd.concat([made[~made.index.isin(steps.index)], other, planted], ignore_index=True)
    section = machines_section.machines_context(both, env, cells)
    assert section["statistic"] == VERDICT_STATISTIC
    shown = sorted(printed_ratio(r["ratio"]) for r in section["pairs"][0]["every"])
    assert shown == pytest.approx(sorted(planted[planted["level"] == "comparison"]["ratio"]),
                                  rel=6e-3)


def test_the_two_workloads_differences_are_stated(analysed):
    made, cells, env = analysed
    (pair,) = machines_section.machines_context(made, env, cells)["pairs"]
    found = {d["what"]: (d["numerator"], d["denominator"]) for d in pair["differences"]}
    assert found["iterations"] == ("10", "50")
    assert found["samples"] == ("1,280", "60,000")
    assert pair["n_unlike_shape"] == 0


def test_a_condition_whose_step_shape_differs_is_left_out(analysed):
    made, cells, env = analysed
    h200 = machine_of(cells, "H200")
    target = (cells["machine"] == h200) & (cells["task"] == "jacobian_rows")
    changed = cells.assign(jacobian_rows=cells["jacobian_rows"].where(~target, 7))
    (pair,) = machines_section.machines_context(made, env, changed)["pairs"]
    assert pair["n_unlike_shape"] == 2  # eager and torch.compile's row-by-row Jacobians
    assert all("row by row" not in r["condition"] for r in pair["every"] + pair["rows"])


def test_a_tree_of_one_machine_has_no_section(analysed):
    made, cells, env = analysed
    assert machines_section.machines_context(made[made["kind"] != "machines"], env,
                                             cells) is None
