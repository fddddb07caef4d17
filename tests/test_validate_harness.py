"""benchmarks/validate_harness.py's own logic: the null backend, the ratios, the JSON report.

No framework is imported and no real benchmark runs: these check the arithmetic and the
report's shape (the paper's renderer reads its keys), on fabricated numbers where the answer
is known, plus one small null-backend run through the real timing loop."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "validate_harness.py"


def _load():
    module_spec = importlib.util.spec_from_file_location("validate_harness", PATH)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules.setdefault("validate_harness", module)
    module_spec.loader.exec_module(module)
    return module


vh = _load()

TOP_KEYS = {"command", "started_at", "ended_at", "machine", "versions", "workload",
            "comparisons", "null_overhead", "interference"}
COMPARISON_KEYS = {"framework", "quantity", "independent_timer", "pipeline_median_s",
                   "independent_median_s", "ratios", "ratio_median", "target",
                   "within_target"}
NULL_KEYS = {"split_timer_median_s", "whole_timer_median_s", "loop_per_iteration_s",
             "fastest_real_cell_s", "fraction_of_fastest", "target_s", "target_fraction",
             "within_target"}
CELL_KEYS = {"cell", "cores1_median_s", "cores8_median_s", "ratio", "noise"}


def test_compare_known_ratios():
    found = vh.compare([1.10, 2.0, 3.03], [1.0, 2.0, 3.0], target=0.05)
    assert found["ratios"] == pytest.approx([1.10, 1.0, 1.01])
    assert found["ratio_median"] == pytest.approx(1.01)
    assert found["within_target"] is True
    assert found["pipeline_median_s"] == [1.10, 2.0, 3.03]
    assert found["target"] == 0.05


def test_compare_off_target_both_ways():
    assert vh.compare([1.2, 1.3, 1.06], [1.0, 1.0, 1.0])["within_target"] is False
    assert vh.compare([0.9, 0.94], [1.0, 1.0])["ratio_median"] == pytest.approx(0.92)
    assert vh.compare([0.9, 0.94], [1.0, 1.0])["within_target"] is False


def test_compare_needs_paired_repeats():
    with pytest.raises(ValueError):
        vh.compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        vh.compare([], [])


def test_fastest_real_cell_is_the_smallest_step_median():
    comparisons = [
        {"quantity": "backward_s", "pipeline_median_s": [1e-4, 1e-4, 1e-4]},
        {"quantity": "step_s", "pipeline_median_s": [3e-3, 2e-3, 9e-3]},
        {"quantity": "step_s", "pipeline_median_s": [5e-3, 4e-3, 6e-3]},
    ]
    assert vh.fastest_real_cell(comparisons) == pytest.approx(3e-3)


def test_null_samples_in_process():
    found = vh.null_samples(2000)
    for path in ("split", "whole"):
        for key in ("median_s", "loop_per_iteration_s"):
            assert math.isfinite(found[path][key]) and found[path][key] >= 0
        assert found[path]["median_s"] < 1e-3


def test_null_overhead_in_a_fresh_process():
    found = vh.null_overhead(3000, fastest_real_cell_s=1e-3)
    assert NULL_KEYS <= set(found)
    for key in ("split_timer_median_s", "whole_timer_median_s", "loop_per_iteration_s"):
        assert math.isfinite(found[key]) and found[key] > 0
        assert found[key] < 1e-3
    assert found["fraction_of_fastest"] == pytest.approx(
        max(found["split_timer_median_s"], found["whole_timer_median_s"]) / 1e-3)
    assert found["target_s"] == 2e-6 and found["target_fraction"] == 0.01
    assert isinstance(found["within_target"], bool)


def test_compare_runs_known_answer():
    cores1 = {"a": (1.0, 0.02), "b": (2.0, 0.10), "c": (4.0, 0.04)}
    cores8 = {"a": (1.02, 0.03), "b": (1.9, 0.05), "c": (4.4, 0.01)}
    found = vh.compare_runs(cores1, cores8)
    assert [c["cell"] for c in found["cells"]] == ["a", "b", "c"]
    assert all(CELL_KEYS <= set(c) for c in found["cells"])
    assert [c["ratio"] for c in found["cells"]] == pytest.approx([1.02, 0.95, 1.10])
    assert [c["noise"] for c in found["cells"]] == pytest.approx([0.03, 0.10, 0.04])
    assert found["ratio_median"] == pytest.approx(1.02)
    assert found["within_noise"] is True
    shifted = vh.compare_runs(cores1, {k: (v[0] * 1.5, v[1]) for k, v in cores8.items()})
    assert shifted["within_noise"] is False
    with pytest.raises(RuntimeError):
        vh.compare_runs(cores1, {"a": (1.0, 0.0)})


def test_interference_config_is_valid_shape():
    config = vh.interference_config("results-cores1", 3, 100)
    assert config["results"] == "results-cores1"
    assert config["workload"] == {"warmup": 3, "iterations": 100}
    models = {m for grid in config["grid"] for m in grid["models"]}
    assert {"mlp512", "fc_xent"} <= models


def fabricated_report(interference):
    comparisons = [{"framework": f, "quantity": q, "independent_timer": t,
                    **vh.compare([1.0e-3, 1.1e-3], [1.0e-3, 1.0e-3])}
                   for f, q, t in vh.COMPARISONS]
    null = {"split_timer_median_s": 1e-7, "whole_timer_median_s": 8e-8,
            "loop_per_iteration_s": 4e-7, "fastest_real_cell_s": 1e-3,
            "fraction_of_fastest": 1e-4, "target_s": 2e-6, "target_fraction": 0.01,
            "within_target": True}
    workload = {"model": "mlp512", "task": "backward", "threads": 1, "warmup": 10,
                "iterations": 200, "repeats": 2}
    return vh.build_report("python3 benchmarks/validate_harness.py", "2026-01-01T00:00:00",
                           "2026-01-01T00:10:00", {"torch": "x", "tensorflow": "y"},
                           workload, comparisons, null, interference)


@pytest.mark.parametrize("with_interference", [True, False])
def test_report_written_with_documented_keys(tmp_path, with_interference):
    interference = vh.compare_runs({"a": (1.0, 0.01)}, {"a": (1.01, 0.02)}) \
        if with_interference else None
    path = vh.write_report(tmp_path / "sub" / "harness.json", fabricated_report(interference))
    found = json.loads(path.read_text())
    assert set(found) == TOP_KEYS
    assert {"cpu_model", "cpu_count", "hostname"} <= set(found["machine"])
    assert set(found["workload"]) == {"model", "task", "threads", "warmup", "iterations",
                                      "repeats"}
    assert [set(c) for c in found["comparisons"]] == [COMPARISON_KEYS] * 3
    assert NULL_KEYS <= set(found["null_overhead"])
    if with_interference:
        assert {"ratio_median", "cells", "within_noise"} <= set(found["interference"])
        assert CELL_KEYS <= set(found["interference"]["cells"][0])
    else:
        assert found["interference"] is None
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert "\n".join(vh.summary_lines(found))  # the summary prints from the written JSON


def test_report_replaces_an_existing_file(tmp_path):
    path = tmp_path / "harness.json"
    path.write_text("old")
    vh.write_report(path, fabricated_report(None))
    assert json.loads(path.read_text())["interference"] is None


def test_arguments():
    args = vh.parse_args(["--repeats", "1", "--iterations", "3", "--skip-interference"])
    assert (args.repeats, args.iterations, args.warmup) == (1, 3, 10)
    assert args.skip_interference and args.out.endswith("results/validation/harness.json")
    with pytest.raises(SystemExit):
        vh.parse_args(["--repeats", "0"])


@pytest.mark.parametrize("umask", [0o002, 0o022])
def test_the_report_honours_the_umask(tmp_path, umask):
    """A group sharing the results tree reads the report as it reads every other output."""
    before = os.umask(umask)
    try:
        path = vh.write_report(tmp_path / "harness.json", fabricated_report(None))
    finally:
        os.umask(before)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
