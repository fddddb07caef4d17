"""The scaling analysis (adbench/scaling.py, scaling.py) on fabricated cells: the
cheap-gradient ratio and its verdict, FLOPs, rates against the peak, the sweep configs' axes,
the figures and the paper's section.  No timing, no Snakemake run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import scaling as scaling_script
from adbench import (comparisons, flops, inference, report_spec, scaling, scaling_section, spec,
                     sweeps)
from adbench.tables import column_label

REPO = Path(__file__).resolve().parents[1]
PEAK = {"threads": {"1": {"gflops": 100.0, "size": 64, "blas": "test BLAS",
                          "fraction_of_bound": 0.5, "bound": {"gflops": 200.0}}}}
GPU_PEAK = {"cuda": {"gflops": 50000.0, "size": 8192, "blas": "cuBLAS test",
                     "gpu_name": "Test GPU", "fraction_of_bound": 0.75,
                     "bound": {"gflops": 66666.0}}}
REPLICATES = 200


def condition(framework, mode, model="mlp512", task="backward", threads=1):
    return {"framework": framework, "mode": mode, "model": model, "task": task,
            "device": "cpu", "threads": threads, "machine": "x86 CPU"}


def fabricated(conditions: list[tuple[dict, dict[str, float]]], seeds=(0, 1)):
    """cells.parquet and bootstrap.parquet rows: per condition and seed, each quantity's
    median with replicates scattered 2% around it."""
    cells, boot = [], []
    rng = np.random.default_rng(0)
    for cond, times in conditions:
        for seed in seeds:
            cells.append({**cond, "seed": seed, "status": "ok", "batch_size": 128,
                          "jacobian_rows": 10})
            for quantity, value in times.items():
                reps = value * (1 + 0.02 * rng.standard_normal(REPLICATES))
                boot.append({**cond, "seed": seed, "quantity": quantity,
                             "statistic": "median", "point": value,
                             "replicates": reps.astype(np.float32)})
    return pd.DataFrame(cells), pd.DataFrame(boot)


def table_of(conditions, seeds=(0, 1), peak=PEAK):
    """The scaling table of fabricated cells, through compare.py's products as the rule."""
    cells, boot = fabricated(conditions, seeds)
    made, estimates = comparisons.compare_all(boot, 0.95), comparisons.conditions(boot, 0.95)
    return scaling.scaling_table(cells, made, estimates, peak).set_index(
        ["framework", "mode", "model", "task"])


def test_ratio_flops_and_rate_of_a_split_mode():
    step = 0.003
    row = table_of([(condition("torch", "eager"), {"forward_s": 0.001, "step_s": step,
                                                   "backward_s": 0.002})]
                   ).loc[("torch", "eager", "mlp512", "backward")]
    assert row["cheap_gradient_ratio"] == pytest.approx(3.0, rel=1e-6)
    assert row["cheap_gradient_ratio_low"] < 3 < row["cheap_gradient_ratio_high"]
    assert row["cheap_gradient"] == scaling.WITHIN
    counts = flops.task_flops("mlp512", "backward", 128, 10)
    assert row["flops_step"] == counts["step_s"]
    assert row["gflops"] == pytest.approx(counts["step_s"] / step / 1e9)
    assert row["fraction_of_peak"] == pytest.approx(row["gflops"] / 100.0)
    assert row["hidden_layers"] == 1 and row["n_processes"] == 2


def test_above_the_bound_whole_step_modes_jacobians_and_one_process():
    table = table_of([
        (condition("torch", "eager"), {"forward_s": 0.001, "step_s": 0.008}),
        (condition("tensorflow", "graph"), {"step_s": 0.002}),
        (condition("torch", "eager", "fcn", "jacobian_rows"),
         {"forward_s": 0.001, "step_s": 0.02}),
    ])
    assert table.loc[("torch", "eager", "mlp512", "backward"), "cheap_gradient"] == scaling.ABOVE
    graph = table.loc[("tensorflow", "graph", "mlp512", "backward")]
    assert graph["cheap_gradient"] == scaling.NOT_MEASURED
    assert np.isnan(graph["cheap_gradient_ratio"]) and graph["gflops"] > 0
    jacobian = table.loc[("torch", "eager", "fcn", "jacobian_rows")]
    assert jacobian["cheap_gradient"] == scaling.NOT_A_GRADIENT
    assert jacobian["cheap_gradient_ratio"] == pytest.approx(20, rel=1e-6)
    one = table_of([(condition("torch", "eager"), {"forward_s": 0.001, "step_s": 0.002})],
                   seeds=(0,))
    assert one.iloc[0]["cheap_gradient"] == scaling.ONE_PROCESS


def test_a_whole_step_mode_is_set_against_its_forward_task_paired_by_seed():
    table = table_of([
        (condition("tensorflow", "graph"), {"step_s": 0.003}),
        (condition("tensorflow", "graph", task=spec.FORWARD_TASK), {"step_s": 0.001}),
        (condition("torch", "eager"), {"forward_s": 0.001, "step_s": 0.002}),
        (condition("torch", "eager", task=spec.FORWARD_TASK), {"step_s": 0.0005}),
    ])
    graph = table.loc[("tensorflow", "graph", "mlp512", "backward")]
    assert graph["forward_from"] == scaling.FORWARD_TASK_SOURCE
    assert graph["cheap_gradient_ratio"] == pytest.approx(3.0, rel=1e-6)
    assert graph["cheap_gradient"] == scaling.WITHIN and graph["forward_s"] == 0.001
    # a mode that times its forward apart keeps its own iterations' forward
    eager = table.loc[("torch", "eager", "mlp512", "backward")]
    assert eager["forward_from"] == scaling.IN_PROCESS
    assert eager["cheap_gradient_ratio"] == pytest.approx(2.0, rel=1e-6)
    forward = table.loc[("tensorflow", "graph", "mlp512", spec.FORWARD_TASK)]
    assert forward["cheap_gradient"] == scaling.NOT_A_DERIVATIVE
    assert np.isnan(forward["cheap_gradient_ratio"]) and forward["flops_ratio"] == 1
    assert forward["flops_step"] == flops.forward_flops("mlp512", 128)


def test_the_forward_task_is_a_denominator_not_a_series_of_the_figures():
    table = table_of([(condition("tensorflow", "graph", task=task, threads=t), {"step_s": s / t})
                      for t in (1, 2) for task, s in (("backward", 3e-3),
                                                      (spec.FORWARD_TASK, 1e-3))])
    drawn = scaling.along(table.reset_index(), "threads")
    assert set(drawn["task"]) == {"backward"} and len(drawn) == 2
    # one series, its label naming no task
    assert [label for label, _ in scaling_section.series(table.reset_index(), "threads")] == [
        column_label("tensorflow", "graph")]


@pytest.mark.parametrize("low, high, expected", [
    (1.5, 4.9, scaling.WITHIN), (5.1, 7.0, scaling.ABOVE), (4.0, 6.0, scaling.INCONCLUSIVE)])
def test_verdict_against_the_bound(low, high, expected):
    interval = inference.Interval(4.5, low, high, np.array([]), n_processes=3)
    assert scaling.verdict(interval) == expected


def test_failed_cells_are_left_out_and_cuda_has_no_peak():
    cells, boot = fabricated([(condition("torch", "eager"), {"forward_s": 1e-3,
                                                             "step_s": 2e-3})])
    cells.loc[0, "status"] = "failed"
    table = scaling.scaling_table(cells, comparisons.compare_all(boot, 0.95),
                                  comparisons.conditions(boot, 0.95), PEAK)
    # the bootstrap of a failed cell is never made (aggregate keeps ok cells): here it is,
    # and the table still counts the ok processes alone
    assert table["n_processes"].tolist() == [1]
    assert np.isnan(scaling.peak_of(PEAK, "cuda", 1)) and np.isnan(scaling.peak_of(PEAK, "cpu", 2))


def test_a_cuda_cell_is_set_against_the_gpus_peak_merged_beside_the_cpus(tmp_path):
    import json

    paths = [tmp_path / "peak.json", tmp_path / "peak_cuda.json", tmp_path / "none.json"]
    paths[0].write_text(json.dumps({**PEAK, "cpu_model": "x"}))
    paths[1].write_text(json.dumps(GPU_PEAK))
    merged = scaling.read_peaks(paths[:2])
    assert merged == {**PEAK, **GPU_PEAK}
    assert scaling.peak_of(merged, "cuda", 1) == 50000.0 == scaling.peak_of(merged, "cuda", 4)
    assert scaling.peak_of(merged, "cpu", 1) == 100.0
    # A GPU PyTorch did not see: the file says why, and the cells get no peak and no row.
    paths[2].write_text(json.dumps({"cuda": {"gflops": None, "reason": "no GPU"}}))
    unseen = scaling.read_peaks([paths[0], paths[2]])
    assert np.isnan(scaling.peak_of(unseen, "cuda", 1))
    assert len(scaling_section.peak_rows(unseen)) == 1
    assert len(scaling_section.peak_rows(merged)) == 2
    cells, boot = fabricated([({**condition("torch", "eager"), "device": "cuda"},
                               {"forward_s": 1e-3, "step_s": 2e-3})])
    row = scaling.scaling_table(cells, comparisons.compare_all(boot, 0.95),
                                comparisons.conditions(boot, 0.95), merged).iloc[0]
    assert row["peak_gflops"] == 50000.0
    assert row["fraction_of_peak"] == pytest.approx(row["gflops"] / 50000.0)


def sweep_cells(name: str):
    config = yaml.safe_load((REPO / "config" / f"sweep-{name}.yaml").read_text())
    return config, spec.config_cells(config)


@pytest.mark.parametrize("name, axes", [("depth", ["hidden_layers"]), ("threads", ["threads"]),
                                        ("batch", []), ("width", ["hidden_width"])])
def test_each_sweep_config_varies_its_axis_on_the_issues_grid(name, axes):
    config, cells = sweep_cells(name)
    assert sweeps.sweep_axes(cells) == axes
    assert config["results"].startswith(f"results-sweep-{name}")
    assert {(c.framework, c.mode) for c in cells} == {
        ("torch", "eager"), ("torch", "script"), ("tensorflow", "eager"), ("tensorflow", "graph")}
    assert {c.task for c in cells} == {"backward", spec.FORWARD_TASK}
    assert len({c.seed for c in cells}) >= inference.MIN_PROCESSES  # a verdict needs two
    # every backward condition gets a forward: its own iterations', else the forward task's
    forward = {(c.framework, c.mode, c.model, c.threads, c.seed) for c in cells
               if c.task == spec.FORWARD_TASK}
    for c in cells:
        if "forward_s" not in spec.timed_quantities(c.framework, c.mode, c.task):
            assert (c.framework, c.mode, c.model, c.threads, c.seed) in forward, c


def test_depth_sweeps_the_studys_constant_parameter_mlps():
    _, cells = sweep_cells("depth")
    assert {c.model for c in cells} == set(spec.MLPS)
    assert sorted(sweeps.hidden_layers(m) for m in spec.MLPS) == [1, 2, 3]


def test_width_sweeps_one_hidden_layer_a_factor_of_four_apart_through_the_studys_mlp():
    _, cells = sweep_cells("width")
    assert {c.model for c in cells} == set(spec.MLP_WIDTHS)
    widths = [sweeps.hidden_width(m) for m in spec.MLP_WIDTHS]
    assert widths == [32, 128, 512, 2048, 8192] and "mlp512" in spec.MLP_WIDTHS
    assert all(sweeps.hidden_layers(m) == 1 for m in spec.MLP_WIDTHS)
    assert np.isnan(sweeps.hidden_width("mlp354x2")) and np.isnan(sweeps.hidden_width("cnn"))
    # The sweep's own sizes are no model of the study: no table or claim ranges over them.
    assert set(spec.MLP_WIDTHS) - set(spec.STUDY_MODELS) == set(spec.MLP_WIDTHS) - {"mlp512"}
    assert not {m for t in report_spec.TABLES for m in t.models} - set(spec.STUDY_MODELS)


def test_a_width_figure_draws_the_width_models_only(tmp_path):
    table = table_of([(condition("torch", "eager", model), {"forward_s": 1e-3, "step_s": 3e-3})
                      for model in ("mlp32", "mlp512", "fcn", "mlp354x2")]).reset_index()
    drawn = scaling.along(table, "hidden_width")
    assert sorted(drawn["model"]) == ["mlp32", "mlp512"]  # fcn: one hidden layer, not a sweep's
    scaling_script.draw_axis(table, "hidden_width", [str(tmp_path / "w.png")])
    assert (tmp_path / "w.png").stat().st_size > 0


def threads_table():
    return table_of([
        (condition("torch", "eager", threads=t), {"forward_s": 1e-3 / t, "step_s": 2e-3 / t})
        for t in (1, 2)] + [
        (condition("tensorflow", "graph", threads=t), {"step_s": 1.5e-3 / t}) for t in (1, 2)],
    ).reset_index()


def test_series_along_an_axis_carry_the_specs_labels():
    found = scaling_section.series(threads_table(), "threads")
    assert [label for label, _ in found] == ["PyTorch (eager)", "TensorFlow (tf.function)"]
    assert all(rows["threads"].tolist() == [1, 2] for _, rows in found)


def test_figures_of_one_tree_and_across_trees(tmp_path):
    table = threads_table()
    scaling_script.draw_axis(table, "threads", [str(tmp_path / "t.png")])
    assert (tmp_path / "t.png").stat().st_size > 0
    # the batch axis across two trees' tables
    paths = []
    for batch in (16, 128):
        path = tmp_path / f"b{batch}.csv"
        table.assign(batch_size=batch, threads=1).drop_duplicates(
            ["framework", "mode"]).to_csv(path, index=False)
        paths.append(str(path))
    out = tmp_path / "batch.pdf"
    assert scaling_script.main(["--tables", *paths, "--figure", f"batch_size={out}"]) == 0
    assert out.stat().st_size > 0


def test_the_section_renders_from_the_table(tmp_path):
    from render_paper import make_environment

    table = tmp_path / "scaling.csv"
    threads_table().to_csv(table, index=False)
    peak = tmp_path / "peak.json"
    peak.write_text(__import__("json").dumps(PEAK))
    gpu = tmp_path / "peak_cuda.json"
    gpu.write_text(__import__("json").dumps(GPU_PEAK))
    context = scaling_section.scaling_context(table, [peak, gpu],
                                              {"threads": "figures/scaling_threads.pdf"})
    text = make_environment(REPO / "report").get_template("sections/scaling.tex.j2").render(
        scaling=context, statistics={"confidence": "95\\%"})
    assert "\\label{sec:scaling}" in text and "\\label{fig:scaling-threads}" in text
    assert "scaling_threads.pdf" in text and "100~GFLOP/s on 1 thread" in text
    assert "50000~GFLOP/s on the GPU (Test GPU) (cuBLAS test" in text
    assert text.count("PyTorch (eager)") >= 2  # a row per thread count
    assert "2 conditions within the bound" in text


def test_a_run_without_an_ok_cell_has_no_scaling_section(tmp_path):
    cells, boot = fabricated([(condition("torch", "eager"), {"forward_s": 1e-3,
                                                             "step_s": 2e-3})])
    cells["status"] = "failed"
    path = tmp_path / "scaling.csv"
    scaling.scaling_table(cells, comparisons.compare_all(boot, 0.95),
                          comparisons.conditions(boot, 0.95), PEAK).to_csv(path, index=False)
    assert scaling_section.scaling_context(path, [], {}) is None


def test_a_variable_length_conditions_flops_are_at_the_steps_its_batches_ran():
    """Issue 38: a padded task's batches all run the longest steps, a true-length task's
    each its own: the FLOPs per step are the mean over the measured batches
    (flops.steps_as_run), not the model's fixed length."""
    conditions = [(condition("torch", "eager", "lstm", task), {"step_s": 0.01})
                  for task in ("backward_padded", "backward_varlen")]
    cells, boot = fabricated(conditions)
    cells = cells.assign(warmup=2, iterations=30)
    made, estimates = comparisons.compare_all(boot, 0.95), comparisons.conditions(boot, 0.95)
    table = scaling.scaling_table(cells, made, estimates, PEAK).set_index("task")
    padded = flops.task_flops("lstm", "backward_padded", 128, 10,
                              steps=spec.SEQUENCE_LENGTHS[1])
    assert table.loc["backward_padded", "flops_step"] == padded["step_s"]
    true = np.mean([flops.steps_as_run(spec.Workload("lstm", seed, task="backward_varlen",
                                                     batch_size=128, warmup=2,
                                                     iterations=30)) for seed in (0, 1)])
    assert table.loc["backward_varlen", "flops_step"] == pytest.approx(
        flops.task_flops("lstm", "backward_varlen", 128, 10, steps=true)["step_s"])
    assert table.loc["backward_varlen", "flops_step"] < padded["step_s"]
