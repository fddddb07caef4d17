"""The committed GPU results (example-results/cuda-h100, measured on a lent H100): their
config names exactly the files there, each file records the GPU it ran on, and the paper
builds from them by the command their README gives, measuring nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from adbench import schema, spec
from e2e import REPO, fresh_checkout

pytestmark = pytest.mark.e2e  # runs Snakemake

EXAMPLE = "example-results/cuda-h100"
EXAMPLE_DIR = REPO / EXAMPLE


def example_cells() -> list[spec.Cell]:
    return spec.config_cells(yaml.safe_load((EXAMPLE_DIR / "config.yaml").read_text()))


def test_the_example_config_names_exactly_the_committed_cells():
    tree = EXAMPLE_DIR
    assert yaml.safe_load((tree / "config.yaml").read_text())["results"] == EXAMPLE
    committed = {str(p.relative_to(tree)) for p in (tree / "raw").rglob("*.parquet")}
    assert committed == {c.raw_path for c in example_cells()}
    for cell in example_cells():
        assert (tree / cell.gradient_path).is_file() and (tree / cell.log_path).is_file()


def test_every_example_cell_records_the_gpu_it_ran_on():
    for cell in example_cells():
        info = schema.read_provenance(EXAMPLE_DIR / cell.raw_path)
        assert info["cell"]["device"] == "cuda" and info["device_name"].startswith("NVIDIA H100")
        gpu = info["gpu"]
        assert gpu["name"] == info["device_name"] and gpu["driver_version"]
        assert gpu["cuda_version"] and gpu["cudnn_version"] and gpu["total_memory_bytes"] > 0
        if info["status"] == "ok":
            assert info["peak_device_memory_bytes"] > 0


def rebuild_command() -> list[str]:
    """The README's rebuild command, in this Python (the test suite's has torch) rather than
    the venvs it names: building them would add minutes and test nothing new here."""
    text = (EXAMPLE_DIR / "README.md").read_text()
    (line,) = [ln.strip() for ln in text.splitlines()
               if ln.strip().startswith("snakemake --cores 8 --configfile")]
    assert "environments=venv" in line
    return [sys.executable, "-m", *line.replace("environments=venv", "environments=current")
            .split()]


@pytest.mark.extended  # a whole analysis and paper of a fresh checkout: the extended tier
def test_the_paper_builds_from_the_example_without_measuring(tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing: ./setup.sh --test installs it")
    workdir = fresh_checkout(tmp_path / "checkout")
    tree = workdir / EXAMPLE
    committed = {p: p.read_bytes() for p in (tree / "raw").rglob("*.parquet")}
    done = subprocess.run(rebuild_command(), cwd=workdir, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "rule measure" not in done.stdout + done.stderr
    assert {p: p.read_bytes() for p in (tree / "raw").rglob("*.parquet")} == committed

    checks = pd.read_csv(tree / "checks/gradients.csv")
    ok = checks[checks["status"] == "ok"]
    assert len(ok) == 29 and ok["passed"].all()
    failed = checks[checks["status"] != "ok"]
    assert set(failed["model"]) == {"lstm"}  # cuDNN's refusals, kept as they failed
    table1 = pd.read_csv(tree / "tables/table1_eager.csv")
    assert (table1["device"] == "cuda").all() and table1["mean"].gt(0).all()

    pdf = tree / "paper/paper.pdf"
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r"cuda\s*\(NVIDIA\s+H100", text)


# ------------------------------------------------------------- the H200's cells (no gradients)
H200 = REPO / "example-results/cuda-h200"


def test_the_h200_config_names_exactly_its_committed_cells_and_each_was_checked():
    config = yaml.safe_load((H200 / "config.yaml").read_text())
    assert config["results"] == "example-results/cuda-h200"
    cells = spec.config_cells(config)
    committed = {str(p.relative_to(H200)) for p in (H200 / "raw").rglob("*.parquet")}
    assert committed == {c.raw_path for c in cells}
    checks = pd.read_csv(H200 / "checks/gradients.csv")
    for cell in cells:
        info = schema.read_provenance(H200 / cell.raw_path)
        assert info["cell"]["device"] == "cuda" and (H200 / cell.log_path).is_file()
        mine = checks[(checks["framework"] == cell.framework) & (checks["mode"] == cell.mode)
                      & (checks["model"] == cell.model) & (checks["task"] == cell.task)
                      & (checks["seed"] == cell.seed)]
        assert len(mine) == 1 and mine["status"].iloc[0] == info["status"]
        if info["status"] == "ok":
            assert mine["passed"].iloc[0]
            assert info["device_name"] == info["gpu"]["name"] == "NVIDIA H200"
            assert info["peak_device_memory_bytes"] >= info["device_after_step_bytes"] > 0


def test_the_h200_retained_graph_holds_more_device_memory_than_the_freed_one():
    """The measurement behind graph_freed on a GPU: device memory, not the host's."""
    memory = pd.read_csv(H200 / "tables/memory.csv")
    torch_fcn = memory[(memory["framework"] == "torch") & (memory["model"] == "fcn")]
    held = torch_fcn.set_index(["mode", "task"])["device_held_after_step_bytes"]
    for mode in ("eager", "script", "trace"):
        assert held[(mode, "backward_retained")] > held[(mode, "backward")]


# ------------------------------------------------------------- two machines, one analysis
MACHINES_CONFIG = "config/machines-example.yaml"
H100_NAME, H200_NAME = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


@pytest.mark.extended  # a whole analysis and paper of a fresh checkout: the extended tier
def test_two_trees_of_two_machines_are_analysed_side_by_side(tmp_path):
    """config/machines-example.yaml reads both example trees (raw_trees) and measures
    nothing: each machine a stratum of its own in the cells and the tables, their common
    conditions set against each other in the comparisons and the paper's machines section."""
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing: ./setup.sh --test installs it")
    workdir = fresh_checkout(tmp_path / "checkout")
    examples = {p: p.read_bytes() for p in (workdir / "example-results").rglob("*")
                if p.is_file()}
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2",
                           "--configfile", MACHINES_CONFIG], cwd=workdir, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "rule measure" not in done.stdout + done.stderr
    assert {p: p.read_bytes() for p in (workdir / "example-results").rglob("*")
            if p.is_file()} == examples  # read, never written
    tree = workdir / "results-machines-example"

    cells = pd.read_parquet(tree / "aggregate/cells.parquet")
    committed = [p for name in ("cuda-h100", "cuda-h200")
                 for p in (workdir / "example-results" / name / "raw").rglob("*.parquet")]
    assert len(cells) == len(committed)
    machines = sorted(cells["machine"].unique())
    assert len(machines) == 2 and [H100_NAME in machines[0], H200_NAME in machines[1]] == [
        True, True]  # every cell on a named GPU, the ones refused before any GPU work too

    table3 = pd.read_csv(tree / "tables/table3_jacobian.csv")
    both = table3[(table3["framework"] == "torch") & (table3["mode"] == "eager")
                  & (table3["model"] == "cnn") & table3["mean"].notna()]
    assert set(both["machine"]) == set(machines)  # one row per machine, never averaged

    comparisons = pd.read_parquet(tree / "aggregate/comparisons.parquet")
    across = comparisons[comparisons["kind"] == "machines"]
    assert len(across) and across["ratio"].gt(0).all()
    assert set(across["machine"]) | set(across["denominator_machine"]) == set(machines)
    assert set(across["numerator_model"]) == {"cnn"}  # the one model both GPUs ran

    text = subprocess.run(["pdftotext", str(tree / "paper/paper.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    section = text[text.index("Machines compared"):][:1500]
    assert "H100" in section and "H200" in section
