"""aggregate.py's guards: machines are strata, compared and never refused; on one machine,
unlike measurements (other versions, other CPUs granted) are never averaged into one number;
and a timed-out cell's partial iterations never enter a statistic."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import aggregate
from adbench import spec, stats


def cells(changes: dict | None = None, device: str = "cpu") -> pd.DataFrame:
    """Two frameworks x two seeds, one machine; `changes` maps (row, column) to a value (the
    machine is read again from the changed record, as aggregate.cell_record does).
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
    frame["machine"] = [stats.machine_of(r) for r in frame.to_dict("records")]
    return frame


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_one_machine_and_one_set_of_versions_passes(device):
    assert aggregate.mixed_measurements(cells(device=device)) == []


@pytest.mark.parametrize("field, other, device", [
    ("cpu_model", "Xeon", "cpu"), ("gpu_driver", "570.86.10", "cuda"),
    ("device_name", "NVIDIA H200", "cuda"), ("gpu_driver", None, "cuda")])
def test_another_machine_is_a_stratum_of_its_own_never_refused(field, other, device):
    """Another CPU, GPU or driver (or one not recorded) is another machine: its cells are
    analysed as their own stratum (stats.CONDITION_FIELDS holds the machine)."""
    frame = cells({(1, field): other}, device=device)
    assert frame["machine"].nunique() == 2 and "machine" in stats.CONDITION_FIELDS
    assert aggregate.mixed_measurements(frame) == []


def test_a_machine_names_its_gpu_driver_and_cpu():
    record = {"device": "cuda", "device_name": "NVIDIA H200", "gpu_driver": "580.1",
              "cpu_model": "Xeon"}
    assert stats.machine_of(record) == "NVIDIA H200 (driver 580.1), Xeon"
    assert stats.machine_of({"device": "cpu", "cpu_model": "Xeon"}) == "Xeon"


@pytest.mark.parametrize("field, other, said", [
    ("cuda_runtime", "12.6", "torch cuda cells on NVIDIA H100 (driver 580.159.04), EPYC "
     "measured with different CUDA runtimes: cuda_runtime 13.0 (1 cell); 12.6 (1 cell)"),
    ("cpus_granted", 16, "cuda cells of 1 thread(s) on NVIDIA H100 (driver 580.159.04), EPYC "
     "given different CPUs: cpus_granted 4 (3 cells); 16 (1 cell)"),
])
def test_cuda_cells_of_one_machine_differing_in_one_field_are_refused_naming_it(field, other,
                                                                                said):
    """The CUDA runtime and the CPUs granted, each alone, tell unlike measurements on one
    machine."""
    assert aggregate.mixed_measurements(cells({(1, field): other}, device="cuda")) == [said]


def test_the_cpus_granted_not_the_nodes_count_are_compared():
    """Two nodes of different sizes that gave each job the same CPUs measure alike; the
    same node giving a job more CPUs does not."""
    assert aggregate.mixed_measurements(cells({(1, "cpu_count"): 8})) == []
    problems = aggregate.mixed_measurements(cells({(1, "cpus_granted"): 2}))
    assert problems == ["cpu cells of 1 thread(s) on EPYC given different CPUs: cpus_granted "
                        "1 (3 cells); 2 (1 cell)"]


def test_cells_of_different_threads_may_be_granted_different_cpus():
    """A cell of 2 threads asks a cluster for 2 CPUs: compared with its own thread count."""
    assert aggregate.mixed_measurements(cells({(1, "threads"): 2,
                                               (1, "cpus_granted"): 2})) == []


def test_a_cells_record_takes_the_driver_and_runtime_of_its_cuda_stack():
    info = {"cell": {"device": "cuda"}, "gpu_driver": "580.1",
            "cuda": {"driver_version": "580.159.04", "runtime_cuda_version": "13.0"},
            "gpu": {"driver_version": "580.159.04", "cuda_version": "13.0"}}
    assert aggregate.cuda_facts(info) == {"gpu_driver": "580.159.04", "cuda_runtime": "13.0"}
    older = {"cell": {"device": "cuda"}, "gpu_driver": "580.1", "gpu": {"cuda_version": 12080}}
    assert aggregate.cuda_facts(older) == {"gpu_driver": "580.1", "cuda_runtime": "12.8"}
    assert aggregate.cuda_facts({**info, "cell": {"device": "cpu"}}) == {
        "gpu_driver": None, "cuda_runtime": None}


def test_two_versions_of_a_framework_on_one_machine_are_refused_naming_it():
    newer = json.dumps({"torch": "1.1", "numpy": "2.0"})
    problems = aggregate.mixed_measurements(cells({(0, "versions"): newer}))
    assert len(problems) == 1 and problems[0].startswith("torch cells on EPYC measured with "
                                                         "different versions")
    assert '"torch": "1.1"' in problems[0] and "(1 cell)" in problems[0]
    # on two machines, two versions are two strata: compared, not refused
    assert aggregate.mixed_measurements(cells({(0, "versions"): newer,
                                               (0, "cpu_model"): "Xeon"})) == []


def test_cells_that_did_not_run_do_not_count():
    frame = cells({(1, "cpus_granted"): 2, (1, "status"): "failed"})
    assert aggregate.mixed_measurements(frame) == []


def test_a_timed_out_cells_rows_never_enter_a_statistic():
    frame = cells({(0, "status"): "timeout"})
    rows = pd.DataFrame([{**r, "iteration": i, "phase": "measured", "step_s": 1.0}
                         for r in frame.to_dict("records") for i in range(3)])
    kept = stats.rows_of_ok_cells(rows.drop(columns=["status"]), frame)
    assert len(kept) == 9
    assert not ((kept["framework"] == "torch") & (kept["seed"] == 0)).any()


def test_a_cells_log_is_found_in_its_own_results_tree():
    cell = spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, 3)
    raw = "results-x/raw/cpu/torch/eager/mlp512/backward/t1/seed3.parquet"
    log = "results-x/logs/measure/cpu/torch/eager/mlp512/backward/t1/seed3.log"
    assert aggregate.log_of(raw, cell) == log
    # the cell is the file's own description: a file moved out of its tree has no log
    assert aggregate.log_of("elsewhere/cell.parquet", cell) == ""


def test_one_cell_measured_twice_on_one_machine_is_refused_naming_both_files():
    """Two results trees holding one cell of one machine (config raw_trees)."""
    frame = cells().assign(raw_file=[f"tree{i}/raw/cell.parquet" for i in range(4)])
    twice = pd.concat([frame, frame.iloc[[0]].assign(raw_file="other/raw/cell.parquet")],
                      ignore_index=True)
    (problem,) = aggregate.mixed_measurements(twice)
    assert "measured more than once (tree0/raw/cell.parquet, other/raw/cell.parquet)" in problem
    assert problem.startswith("framework torch, mode eager, model mlp512")


def test_a_gpu_cell_refused_before_any_gpu_work_joins_its_trees_one_gpu_machine():
    frame = cells(device="cuda").assign(results_tree="site-a/")
    frame.loc[3, "device_name"] = None  # refused before its framework set the device up
    frame["machine"] = [stats.machine_of(r) for r in frame.to_dict("records")]
    placed = aggregate.with_unnamed_gpus_placed(frame)
    assert placed["machine"].nunique() == 1
    other_tree = frame.assign(results_tree=["site-a/"] * 3 + ["site-b/"])
    assert aggregate.with_unnamed_gpus_placed(other_tree)["machine"].nunique() == 2
    two_gpus = frame.copy()
    two_gpus.loc[0, "device_name"] = "NVIDIA H200"
    two_gpus["machine"] = [stats.machine_of(r) for r in two_gpus.to_dict("records")]
    unknown = aggregate.with_unnamed_gpus_placed(two_gpus).loc[3, "machine"]
    assert unknown.startswith("unknown GPU")  # two candidates: no guess


def test_a_cells_record_carries_why_it_stopped_and_how_busy_the_machine_was(tmp_path):
    from adbench import cell_record, timing

    description = spec.CellDescription.of("torch", "eager", "mlp512", stop="precision",
                                          min_iterations=10, precision=0.02, measure_s=5.0)
    timed = timing.Timed([], "budget", 0.031, [
        {"iterations": 40, "busy": True, "other_cores": 0.9, "kept": False},
        {"iterations": 40, "busy": True, "other_cores": 0.7, "steal_cores": 0.0,
         "loadavg_1m": 2.5, "cpu_mhz": None, "window_s": 1.2, "kept": True}])
    info = {**cell_record.starting_info(description, None), **timing.stop_record(timed)}
    raw = tmp_path / description.cell.raw_path
    cell_record.write_cell(str(raw), str(tmp_path / "g.npz"), description, info, "ok", "", [])
    record = aggregate.cell_record(str(raw))
    assert (record["stop"], record["stop_reason"], record["precision_reached"]) == (
        "precision", "budget", 0.031)
    assert (record["busy"], record["busy_retimed"], record["load_other_cores"],
            record["load_loadavg_1m"]) == (True, 1, 0.7, 2.5)
    frame = pd.DataFrame([record, {**record, "seed": 1, "busy": False, "busy_retimed": 0,
                                   "precision_reached": 0.01, "stop_reason": "precision"}])
    assert aggregate.measuring_facts(frame) == {
        "stop_reasons": {"budget": 1, "precision": 1}, "precision_reached": [0.01, 0.031],
        "n_busy": 1, "busy_other_cores": [0.7, 0.7], "n_busy_retimed": 1}
