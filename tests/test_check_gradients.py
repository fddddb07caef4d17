"""The derivative check: every cell against the float64 reference and its peers, mismatches
named, cells that are not ok skipped, per-model tolerances."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pandas as pd

from adbench import derivatives, reference, spec

SCRIPT = spec.__file__.replace("adbench/spec.py", "check_gradients.py")
TRUTH = [np.ones((3, 2)), np.arange(2.0)]


def write_cell(root, framework, mode, arrays, status="ok", seed=0, model="mlp512",
               task="backward"):
    description = spec.CellDescription.of(framework, mode, model, task, seed=seed)
    path = str(root / description.cell.gradient_path)
    derivatives.write_derivatives(path, status, 1.0, arrays, about=description.as_dict())
    return path


def write_reference(root, arrays=TRUTH, seed=0, model="mlp512", derivative="gradients",
                    kink=float("inf")):
    path = root / spec.REFERENCE_PATTERN.format(model=model, derivative=derivative, seed=seed)
    about = {"model": model, "derivative": derivative, "seed": seed}
    derivatives.write_derivatives(str(path), "ok", 1.0, arrays, kink=kink, about=about)
    return str(path)


def check(tmp_path, cells, references, *extra, tolerance=1e-5):
    csv = tmp_path / "out.csv"
    result = subprocess.run(
        [sys.executable, SCRIPT, "--tolerance", str(tolerance), *extra, "--csv", str(csv),
         "--md", str(tmp_path / "out.md"), "--references", *references, "--cells", *cells],
        capture_output=True, text=True,
    )
    return result, pd.read_csv(csv, keep_default_na=False, na_values=[""])


def test_agreeing_cells_pass_and_name_their_peer(tmp_path):
    g = [a.astype(np.float32) for a in TRUTH]
    cells = [write_cell(tmp_path, "torch", "eager", g),
             write_cell(tmp_path, "tensorflow", "graph", [a * (1 + 1e-7) for a in g]),
             write_cell(tmp_path, "torch", "script", [], status="failed"),
             write_cell(tmp_path, "torch", "eager", g, task="loss_jacobian")]
    result, table = check(tmp_path, cells, [write_reference(tmp_path)])
    assert result.returncode == 0, result.stderr
    ok = table[table["status"] == "ok"]
    assert len(ok) == 3 and ok["passed"].all()
    assert set(ok["reference"]) == {"torch/eager/backward"}  # backward and loss_jacobian: peers
    assert ok["max_rel_error"].max() < 1e-6 and ok["ref_rel_error"].max() < 1e-6
    failed = table[table["status"] == "failed"]
    assert not failed["passed"].any() and failed["ref_rel_error"].isna().all()


def test_a_cell_off_the_reference_fails_naming_it(tmp_path):
    g = [a.astype(np.float32) for a in TRUTH]
    cells = [write_cell(tmp_path, "torch", "eager", g),
             write_cell(tmp_path, "tensorflow", "eager", [g[0] * 1.01, g[1]]),
             write_cell(tmp_path, "torch", "eager", g, seed=1)]
    refs = [write_reference(tmp_path), write_reference(tmp_path, seed=1)]
    result, table = check(tmp_path, cells, refs)
    assert result.returncode == 1
    assert "tensorflow/eager mlp512 backward" in result.stderr and "seed 0" in result.stderr
    assert table.loc[table["framework"] == "tensorflow", "ref_rel_error"].iloc[0] > 1e-3


def test_all_cells_agreeing_with_each_other_but_not_the_reference_fail(tmp_path):
    wrong = [TRUTH[0] * 2, TRUTH[1]]
    cells = [write_cell(tmp_path, "torch", "eager", wrong),
             write_cell(tmp_path, "tensorflow", "eager", wrong)]
    result, table = check(tmp_path, cells, [write_reference(tmp_path)])
    assert result.returncode == 1 and not table["passed"].any()


def test_near_a_relu_kink_the_check_allows_float32_crossing_it_and_no_more(tmp_path):
    """mlp512 seed 0 has a unit within float32 rounding of 0 (the measured case): a float32
    cell that rounds it to the other side is 2e-4 off; a wrong derivative still fails."""
    w = spec.Workload(model="mlp512", seed=0, task="backward", warmup=0, iterations=1,
                      n_samples=1280, batch_size=128)
    assert reference.kink_margin(w) < reference.KINK_MARGIN
    assert reference.kink_margin(dataclasses.replace(w, seed=2)) > reference.KINK_MARGIN
    g = [a.astype(np.float32) for a in TRUTH]
    crossed = [g[0] * (1 + 2e-4), g[1]]
    cells = [write_cell(tmp_path, "torch", "eager", g),
             write_cell(tmp_path, "autograd", "eager", crossed),
             write_cell(tmp_path, "torch", "eager", g, seed=1),
             write_cell(tmp_path, "autograd", "eager", crossed, seed=1),
             write_cell(tmp_path, "tensorflow", "eager", [g[0] * 1.01, g[1]])]
    refs = [write_reference(tmp_path, kink=7.9e-8), write_reference(tmp_path, seed=1)]
    result, table = check(tmp_path, cells, refs)
    assert result.returncode == 1
    verdict = {(r.framework, r.seed): (r.passed, r.tolerance) for r in table.itertuples()}
    assert verdict[("autograd", 0)] == (True, reference.KINK_TOLERANCE)
    assert verdict[("autograd", 1)] == (False, 1e-5)  # no kink at seed 1: held to 1e-5
    assert verdict[("tensorflow", 0)][0] is False  # 1% off: wrong, kink or not


def test_per_model_tolerance_and_its_validation(tmp_path):
    g = [TRUTH[0] * 1.001, TRUTH[1]]
    cells = [write_cell(tmp_path, "torch", "eager", g, model="resnet50")]
    refs = [write_reference(tmp_path, model="resnet50")]
    assert check(tmp_path, cells, refs)[0].returncode == 1
    result, table = check(tmp_path, cells, refs, "--model-tolerance", "resnet50=1e-2")
    assert result.returncode == 0 and table["tolerance"].iloc[0] == 1e-2
    bad, _ = subprocess.run([sys.executable, SCRIPT, "--tolerance", "1e-5",
                             "--model-tolerance", "resnet9000=1", "--csv", "x", "--md", "y",
                             "--references", refs[0], "--cells", cells[0]],
                            capture_output=True, text=True), None
    assert bad.returncode != 0 and "resnet9000" in bad.stderr


def test_a_missing_reference_fails_the_cell(tmp_path):
    cells = [write_cell(tmp_path, "torch", "eager", TRUTH)]
    other = write_reference(tmp_path, seed=7)
    result, table = check(tmp_path, cells, [other])
    assert result.returncode == 1 and table["ref_rel_error"].isna().all()


def test_frozen_cells_are_checked_against_the_trained_parameters_reference(tmp_path):
    """A frozen task's cells (trainable_gradients) form their own group, checked against
    their own reference (the whole gradient restricted to the trained parameters), beside
    the all-trainable cells of the same model and seed; one returning the whole gradient,
    or a wrong one, fails by name."""
    whole = [a.astype(np.float32) for a in TRUTH]
    trained = whole[1:]
    cells = [write_cell(tmp_path, "torch", "eager", whole),
             write_cell(tmp_path, "torch", "eager", trained, task="backward_frozen"),
             write_cell(tmp_path, "tensorflow", "eager", trained, task="backward_frozen")]
    refs = [write_reference(tmp_path),
            write_reference(tmp_path, arrays=TRUTH[1:], derivative="trainable_gradients")]
    result, table = check(tmp_path, cells, refs)
    assert result.returncode == 0, result.stderr
    assert table["passed"].all()
    frozen = table[table["task"] == "backward_frozen"]
    assert set(frozen["derivative"]) == {"trainable_gradients"}
    assert set(frozen["reference"]) == {"torch/eager/backward_frozen"}
    wrong = [write_cell(tmp_path, "torch", "script", whole, task="backward_frozen"),
             write_cell(tmp_path, "tensorflow", "graph", [trained[0] * 1.01],
                        task="backward_frozen")]
    result, table = check(tmp_path, cells + wrong, refs)
    assert result.returncode == 1
    assert "torch/script mlp512 backward_frozen" in result.stderr
    assert "tensorflow/graph mlp512 backward_frozen" in result.stderr


def test_a_cell_is_known_by_its_description_not_its_path(tmp_path):
    """Derivative files renamed out of the layout are still checked as the cells they are."""
    g = [a.astype(np.float32) for a in TRUTH]
    cells = []
    for i, (framework, mode) in enumerate((("torch", "eager"), ("tensorflow", "graph"))):
        written = write_cell(tmp_path, framework, mode, g)
        moved = tmp_path / f"cell{i}.npz"
        os.replace(written, moved)
        cells.append(str(moved))
    reference_file = tmp_path / "truth.npz"
    os.replace(write_reference(tmp_path), reference_file)
    result, out = check(tmp_path, cells, [str(reference_file)])
    assert result.returncode == 0, result.stderr
    assert set(zip(out["framework"], out["mode"])) == {("torch", "eager"),
                                                        ("tensorflow", "graph")}
    assert out["passed"].all()


def test_a_file_from_before_descriptions_is_the_cell_its_raw_file_names(tmp_path):
    """The committed example trees' derivative files carry no description: their raw file of
    the same cell (its metadata) says which cell they are; without one the error says what
    to do."""
    from adbench import schema

    g = [a.astype(np.float32) for a in TRUTH]
    cell = spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, 0)
    old = str(tmp_path / cell.gradient_path)
    derivatives.write_derivatives(old, "ok", 1.0, g)  # no `about`: an old file
    result = subprocess.run(
        [sys.executable, SCRIPT, "--tolerance", "1e-5", "--csv", str(tmp_path / "out.csv"),
         "--md", str(tmp_path / "out.md"), "--references", write_reference(tmp_path),
         "--cells", old], capture_output=True, text=True)
    assert result.returncode != 0 and "no raw file of the cell beside it" in result.stderr
    schema.write_raw(str(tmp_path / cell.raw_path), {}, [],
                     {"cell": dataclasses.asdict(cell), "status": "ok"})
    result, out = check(tmp_path, [old], [write_reference(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert out[["framework", "mode", "task"]].values.tolist() == [["torch", "eager", "backward"]]
    assert out["passed"].all()
