"""aggregate.py's guards: unlike measurements are never averaged into one number, and a
timed-out cell's partial iterations never enter a statistic."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import aggregate
from adbench import stats


def cells(changes: dict | None = None, device: str = "cpu") -> pd.DataFrame:
    """Two frameworks x two seeds, one machine; `changes` maps (row, column) to a value.
    On cuda, one GPU, driver and CUDA runtime, and the 4 CPUs a CUDA cell's job asks for."""
    cuda = device == "cuda"
    rows = [{"framework": f, "mode": "eager", "model": "mlp512", "task": "backward",
             "device": device, "threads": 1, "seed": seed, "status": "ok",
             "versions": json.dumps({f: "1.0", "numpy": "2.0"}), "cpu_model": "EPYC",
             "cpu_count": 64, "cpus_granted": 4 if cuda else 1,
             "device_name": "NVIDIA H100" if cuda else "cpu",
             "gpu_driver": "580.159.04" if cuda else None,
             "cuda_runtime": "13.0" if cuda else None}
            for f in ("torch", "tensorflow") for seed in (0, 1)]
    frame = pd.DataFrame(rows)
    for (row, column), value in (changes or {}).items():
        frame.loc[row, column] = value
    return frame


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_one_machine_and_one_set_of_versions_passes(device):
    assert aggregate.mixed_measurements(cells(device=device)) == []


def test_two_machines_are_refused_naming_both():
    problems = aggregate.mixed_measurements(cells({(1, "cpu_model"): "Xeon"}))
    assert problems == ["cpu cells measured on different machines: cpu_model EPYC (3 cells); "
                        "Xeon (1 cell)"]


@pytest.mark.parametrize("field, other, said", [
    ("gpu_driver", "570.86.10", "cuda cells measured on different machines: gpu_driver "
     "580.159.04 (3 cells); 570.86.10 (1 cell)"),
    ("cuda_runtime", "12.6", "torch cuda cells measured with different CUDA runtimes: "
     "cuda_runtime 13.0 (1 cell); 12.6 (1 cell)"),
    ("cpus_granted", 16, "cuda cells of 1 thread(s) given different CPUs: cpus_granted 4 "
     "(3 cells); 16 (1 cell)"),
])
def test_cuda_cells_differing_in_one_field_are_refused_naming_it_and_its_values(field, other,
                                                                                said):
    """Driver, CUDA runtime and the CPUs granted, each alone, tell unlike measurements."""
    assert aggregate.mixed_measurements(cells({(1, field): other}, device="cuda")) == [said]


def test_the_cpus_granted_not_the_nodes_count_are_compared():
    """Two nodes of different sizes that gave each job the same CPUs measure alike; the
    same node giving a job more CPUs does not."""
    assert aggregate.mixed_measurements(cells({(1, "cpu_count"): 8})) == []
    problems = aggregate.mixed_measurements(cells({(1, "cpus_granted"): 2}))
    assert problems == ["cpu cells of 1 thread(s) given different CPUs: cpus_granted 1 "
                        "(3 cells); 2 (1 cell)"]


def test_cells_of_different_threads_may_be_granted_different_cpus():
    """A cell of 2 threads asks a cluster for 2 CPUs: compared with its own thread count."""
    assert aggregate.mixed_measurements(cells({(1, "threads"): 2,
                                               (1, "cpus_granted"): 2})) == []


def test_a_cell_recorded_without_a_field_is_not_taken_as_alike():
    problems = aggregate.mixed_measurements(cells({(1, "gpu_driver"): None}, device="cuda"))
    assert problems == ["cuda cells measured on different machines: gpu_driver 580.159.04 "
                        "(3 cells); unknown (1 cell)"]


def test_a_cells_record_takes_the_driver_and_runtime_of_its_cuda_stack():
    info = {"cell": {"device": "cuda"}, "gpu_driver": "580.1",
            "cuda": {"driver_version": "580.159.04", "runtime_cuda_version": "13.0"},
            "gpu": {"driver_version": "580.159.04", "cuda_version": "13.0"}}
    assert aggregate.cuda_facts(info) == {"gpu_driver": "580.159.04", "cuda_runtime": "13.0"}
    older = {"cell": {"device": "cuda"}, "gpu_driver": "580.1", "gpu": {"cuda_version": 12080}}
    assert aggregate.cuda_facts(older) == {"gpu_driver": "580.1", "cuda_runtime": "12.8"}
    assert aggregate.cuda_facts({**info, "cell": {"device": "cpu"}}) == {
        "gpu_driver": None, "cuda_runtime": None}


def test_two_versions_of_a_framework_are_refused_naming_it():
    newer = json.dumps({"torch": "1.1", "numpy": "2.0"})
    problems = aggregate.mixed_measurements(cells({(0, "versions"): newer}))
    assert problems == [p for p in problems if p.startswith("torch cells measured with "
                                                            "different versions")]
    assert len(problems) == 1 and '"torch": "1.1"' in problems[0] and "(1 cell)" in problems[0]


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
