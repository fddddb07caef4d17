"""The gradient cross-check: pairs compared per seed, mismatches named, failed cells skipped."""

import subprocess
import sys

import numpy as np
import pandas as pd

from adbench import spec

SCRIPT = spec.__file__.replace("adbench/spec.py", "check_gradients.py")


def write_cell(root, framework, mode, grads, status="ok", seed=0):
    cell = spec.Cell(framework, mode, "mlp512", "backward", "cpu", 1, seed)
    path = root / cell.gradient_path
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"g{i}": g for i, g in enumerate(grads)}
    np.savez(path, status=np.array(status), loss=np.array(1.0), **arrays)
    return str(path)


def check(tmp_path, files, tolerance=1e-5):
    csv = tmp_path / "out.csv"
    result = subprocess.run(
        [sys.executable, SCRIPT, "--tolerance", str(tolerance), "--csv", str(csv),
         "--md", str(tmp_path / "out.md"), *files],
        capture_output=True, text=True,
    )
    return result, pd.read_csv(csv, keep_default_na=False, na_values=[""])


def test_agreeing_cells_pass_and_name_their_reference(tmp_path):
    g = [np.ones((3, 2), np.float32), np.arange(2, dtype=np.float32)]
    files = [write_cell(tmp_path, "torch", "eager", g),
             write_cell(tmp_path, "tensorflow", "graph", [a * (1 + 1e-7) for a in g]),
             write_cell(tmp_path, "torch", "script", [], status="failed")]
    result, table = check(tmp_path, files)
    assert result.returncode == 0, result.stderr
    ok = table[table["status"] == "ok"]
    assert set(ok["reference"]) == {"torch/eager"} and ok["passed"].all()
    assert ok["max_rel_error"].max() < 1e-6
    failed = table[table["status"] == "failed"]
    assert not failed["passed"].any() and failed["max_rel_error"].isna().all()


def test_a_mismatch_fails_naming_the_cells(tmp_path):
    g = [np.ones((3, 2), np.float32)]
    files = [write_cell(tmp_path, "torch", "eager", g),
             write_cell(tmp_path, "tensorflow", "eager", [g[0] * 1.01]),
             write_cell(tmp_path, "torch", "eager", g, seed=1)]
    result, table = check(tmp_path, files)
    assert result.returncode == 1
    assert "tensorflow/eager vs torch/eager" in result.stderr and "seed 0" in result.stderr
    assert table.loc[table["framework"] == "tensorflow", "max_rel_error"].iloc[0] > 1e-3
