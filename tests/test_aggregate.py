"""aggregate.py's guards: unlike measurements are never averaged into one number, and a
timed-out cell's partial iterations never enter a statistic."""

from __future__ import annotations

import json

import pandas as pd

import aggregate
from adbench import stats


def cells(changes: dict | None = None) -> pd.DataFrame:
    """Two frameworks x two seeds, one machine; `changes` maps (row, column) to a value."""
    rows = [{"framework": f, "mode": "eager", "model": "mlp512", "task": "backward",
             "device": "cpu", "threads": 1, "seed": seed, "status": "ok",
             "versions": json.dumps({f: "1.0", "numpy": "2.0"}), "cpu_model": "EPYC",
             "cpu_count": 2, "device_name": "cpu"}
            for f in ("torch", "tensorflow") for seed in (0, 1)]
    frame = pd.DataFrame(rows)
    for (row, column), value in (changes or {}).items():
        frame.loc[row, column] = value
    return frame


def test_one_machine_and_one_set_of_versions_passes():
    assert aggregate.mixed_measurements(cells()) == []


def test_two_machines_are_refused_naming_both():
    problems = aggregate.mixed_measurements(cells({(1, "cpu_model"): "Xeon"}))
    assert len(problems) == 1
    assert "different machines" in problems[0]
    assert "EPYC / 2 / cpu (3 cells)" in problems[0] and "Xeon / 2 / cpu (1 cells)" in problems[0]


def test_two_versions_of_a_framework_are_refused_naming_it():
    newer = json.dumps({"torch": "1.1", "numpy": "2.0"})
    problems = aggregate.mixed_measurements(cells({(0, "versions"): newer}))
    assert problems == [p for p in problems if p.startswith("torch cells measured with "
                                                            "different versions")]
    assert len(problems) == 1 and '"torch": "1.1"' in problems[0]


def test_cells_that_did_not_run_do_not_count():
    frame = cells({(1, "cpu_model"): "Xeon", (1, "status"): "failed"})
    assert aggregate.mixed_measurements(frame) == []


def test_a_timed_out_cells_rows_never_enter_a_statistic():
    frame = cells({(0, "status"): "timeout"})
    rows = pd.DataFrame([{**r, "iteration": i, "phase": "measured", "step_s": 1.0}
                         for r in frame.to_dict("records") for i in range(3)])
    kept = stats.rows_of_ok_cells(rows.drop(columns=["status"]), frame)
    assert len(kept) == 9
    assert not ((kept["framework"] == "torch") & (kept["seed"] == 0)).any()


def test_a_cells_log_is_found_in_its_own_results_tree():
    raw = "results-x/raw/cpu/torch/eager/mlp512/backward/t1/seed3.parquet"
    assert aggregate.log_of(raw) == "results-x/logs/measure/cpu/torch/eager/mlp512/backward/t1/seed3.log"
