"""The threads check (paper_context.threads_check): the cores each timed loop kept busy, the
minimum beside the median and the maximum, and the cells whose loops waited (markedly fewer
cores busy than their threads), which the tables mark (waiting_conditions)."""

from __future__ import annotations

import pandas as pd

from adbench import paper_context


def cells(rows: list[tuple]) -> pd.DataFrame:
    """cells.parquet rows: (framework, mode, model, task, device, threads, seed, cores)."""
    keys = ("framework", "mode", "model", "task", "device", "threads", "seed", "cpu_utilisation")
    return pd.DataFrame([{**dict(zip(keys, r)), "status": "ok"} for r in rows])


LOOPS = cells([
    ("torch", "eager", "rnn_cell", "backward", "cpu", 1, 0, 0.58),  # waited
    ("torch", "eager", "rnn_cell", "backward", "cpu", 1, 1, 0.97),
    ("torch", "eager", "mlp512", "backward", "cpu", 1, 0, 0.80),  # within the margin
    ("torch", "eager", "mlp512", "backward", "cpu", 4, 0, 3.60),  # waited (below 3.75)
    ("torch", "eager", "mlp512", "backward", "cuda", 1, 0, 0.30),  # a GPU loop waits by design
    ("tensorflow", "eager", "mlp512", "backward", "cpu", 1, 0, 1.90),  # over its threads
])


def test_the_minimum_is_printed_beside_the_median_and_the_maximum():
    found = paper_context.threads_check(LOOPS)
    torch_1 = next(r for r in found["rows"] if "PyTorch" in r["mode"] and r["threads"] == 1)
    assert (torch_1["n"], torch_1["min"], torch_1["median"], torch_1["max"]) == (
        4, "0.30", "0.69", "0.97")
    assert torch_1["n_waiting"] == 1  # 0.58; not 0.80 (within the margin) nor the GPU loop


def test_cells_that_left_cores_idle_are_listed_and_marked_gpu_loops_are_not():
    found = paper_context.threads_check(LOOPS)
    assert found["n_under"] == 2 and found["n_cells"] == len(LOOPS)
    assert "0.58 cores" in found["under"] and "3.60 cores" in found["under"]
    assert "0.80" not in found["under"] and "0.30" not in found["under"]
    assert found["under"].index("0.58") < found["under"].index("3.60")  # fewest first
    assert "TensorFlow (eager) (1 thread: up to 1.90 cores)" in found["over"]
    assert paper_context.waiting_conditions(LOOPS) == {
        ("torch", "eager", "rnn_cell", "backward", "cpu", 1),
        ("torch", "eager", "mlp512", "backward", "cpu", 4),
    }


def test_without_the_measurement_nothing_is_checked_or_marked():
    assert paper_context.threads_check(LOOPS.drop(columns="cpu_utilisation")) is None
    assert paper_context.waiting_conditions(None) == set()
