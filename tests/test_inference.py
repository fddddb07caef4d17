"""adbench.inference and the statistics built on it, on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from adbench import inference, stats

CONFIDENCE = 0.95


def synthetic_condition(rng, mean, n_seeds=5, n_iterations=50, seed_sd=0.1, iteration_sd=0.1,
                        statistic="median", replicates=400):
    """{seed: (statistic, replicates)} of n_seeds processes: each process shifts the level
    log-normally by seed_sd, its iterations scatter by iteration_sd around it."""
    levels = mean * np.exp(rng.normal(0, seed_sd, n_seeds))
    return {seed: inference.process_replicates(
        level * np.exp(rng.normal(0, iteration_sd, n_iterations)), statistic, replicates, rng)
        for seed, level in enumerate(levels)}


def interval_of(rng, numerator, denominator, key="k"):
    return inference.paired_ratio(numerator, denominator, CONFIDENCE, key)


def coverage(rng, true_ratio, draws=300, **kw):
    return sum(
        (i := interval_of(rng, synthetic_condition(rng, true_ratio, **kw),
                          synthetic_condition(rng, 1.0, **kw), key=str(d))).low
        <= true_ratio <= i.high for d in range(draws)) / draws


def test_between_process_spread_is_covered_at_the_nominal_rate():
    # processes differ far more than iterations scatter inside one: an interval from
    # resampled iterations alone would hold the true ratio in about a third of draws
    rng = np.random.default_rng(1)
    assert 0.92 <= coverage(rng, 1.2, n_seeds=5) <= 0.99
    assert coverage(rng, 1.2, n_seeds=1) < 0.5  # one process: iterations only


def test_the_small_sample_expansion_follows_students_t():
    # scipy.stats' t, the reference implementation: the tables' values
    assert inference.expansion(2, 0.95) == pytest.approx(12.706 / 1.960 * 2 ** 0.5, rel=1e-4)
    assert inference.expansion(1, 0.95) == 1.0
    assert inference.expansion(5, 0.95) == pytest.approx(2.776 / 1.960 * (5 / 4) ** 0.5,
                                                         rel=1e-3)
    assert inference.expansion(1000, 0.95) == pytest.approx(1.0, abs=0.01)


def test_a_planted_20_percent_difference_is_detected_and_identical_ones_are_not():
    rng = np.random.default_rng(2)
    detected = [interval_of(rng, synthetic_condition(rng, 1.2, seed_sd=0.03),
                            synthetic_condition(rng, 1.0, seed_sd=0.03)) for _ in range(30)]
    assert all(i.low > 1.0 for i in detected)
    identical = [interval_of(rng, synthetic_condition(rng, 1.0), synthetic_condition(rng, 1.0),
                             key=str(d)) for d in range(200)]
    assert sum(i.excludes_one for i in identical) / len(identical) <= 0.10  # nominal 5%


def test_seed_level_noise_widens_the_interval():
    rng = np.random.default_rng(3)
    calm = interval_of(rng, synthetic_condition(rng, 1.0, seed_sd=0.0),
                       synthetic_condition(rng, 1.0, seed_sd=0.0))
    shaky = interval_of(rng, synthetic_condition(rng, 1.0, seed_sd=0.2),
                        synthetic_condition(rng, 1.0, seed_sd=0.2))
    assert shaky.high - shaky.low > 2 * (calm.high - calm.low)


def test_one_process_still_resamples_its_iterations():
    rng = np.random.default_rng(4)
    point, means = inference.process_replicates(np.array([1.0, 2.0, 3.0, 4.0]), "mean", 2000,
                                                rng)
    assert point == 2.5 and means.min() >= 1.0 and means.max() <= 4.0
    assert means.std() == pytest.approx(np.std([1, 2, 3, 4]) / 2, rel=0.1)  # sd / sqrt(n)
    _, medians = inference.process_replicates(np.array([1.0, 1.0, 1.0, 100.0]), "median", 500,
                                              rng)
    assert np.median(medians) == 1.0  # one slow iteration hardly moves a median


def test_a_process_drawn_twice_brings_two_resamples_of_its_iterations():
    processes = [(1.0, np.arange(10.0)), (2.0, np.arange(10.0) + 100)]
    picks = np.zeros((10, 2), dtype=int)  # every replicate draws the first process twice
    point, reps = inference.over_processes(processes, picks)
    assert point == 1.5
    assert list(reps) == [(r + (r + 1) % 10) / 2 for r in range(10)]


def test_pooled_ratio_carries_the_spread_between_ratios():
    rng = np.random.default_rng(5)
    tight = [interval_of(rng, synthetic_condition(rng, r, seed_sd=0.01),
                         synthetic_condition(rng, 1.0, seed_sd=0.01), key=str(r))
             for r in (2.0, 0.5, 1.0)]
    summary = inference.pooled(tight, CONFIDENCE, "pool")
    assert summary.point == pytest.approx(np.exp(np.mean(np.log([r.point for r in tight]))))
    assert summary.low < 0.8 and summary.high > 1.25  # the ratios disagree: a wide interval
    alike = inference.pooled(tight[2:] * 3, CONFIDENCE, "pool")
    assert alike.high - alike.low < (summary.high - summary.low) / 3


@pytest.mark.parametrize("low, high, greater, equal", [
    (1.12, 1.3, "supported", "contradicted"),
    (1.05, 1.3, "inconclusive", "inconclusive"),
    (0.7, 0.85, "contradicted", "contradicted"),
    (0.95, 1.04, "equivalent", "supported"),
    (0.85, 1.04, "inconclusive", "inconclusive"),
])
def test_one_rule_for_both_kinds_of_claim(low, high, greater, equal):
    replicates = np.linspace(low, high, 1001)  # the interval is the central 95% of these
    interval = inference.Interval((low + high) / 2, low, high, replicates, 5)
    found = inference.evidence(interval, margin=0.10)
    assert inference.decide("greater", found, 0.99) == greater
    assert inference.decide("equal", found, 0.99) == equal


# ----------------------------------------------------------------------------- warm-up
@pytest.mark.parametrize("length", [0, 3, 12, 40])
def test_warmup_detector_finds_a_planted_warmup(length):
    rng = np.random.default_rng(length)
    steady = 1e-3 * (1 + rng.uniform(-0.02, 0.02, 200))
    slow = 1e-3 * np.geomspace(20, 1.3, length)  # decays toward, never reaching, the level
    found = stats.steady_state_start(np.concatenate([slow, steady]), window=5, tolerance=0.05)
    assert found == length


def test_warmup_detector_on_noise_alone_finds_none_to_speak_of():
    rng = np.random.default_rng(7)
    found = stats.steady_state_start(1e-3 * np.exp(rng.normal(0, 0.3, 300)), 5, 0.05)
    assert found is not None and found <= 5


def test_a_warmup_longer_than_configured_is_dropped_by_rule_and_counted():
    """A cell whose data settle 6 iterations after its configured warm-up: the statistics
    start where the steady state starts, the 6 dropped iterations are counted, a slow one
    among them moves no statistic; a cell that never settles keeps every measured iteration
    and says so; noise is read from the counted iterations."""
    rng = np.random.default_rng(8)
    cell = {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
            "device": "cpu", "threads": 1, "machine": "x86 CPU"}
    times = {0: np.concatenate([np.full(8, 5e-3), 1e-3 * (1 + rng.uniform(-.01, .01, 60))]),
             1: 1e-3 * np.exp(rng.normal(0, 0.5, 68))}
    iterations = pd.DataFrame([
        {**cell, "seed": seed, "iteration": i, "phase": "warmup" if i < 2 else "measured",
         "step_s": t, "forward_s": np.nan, "backward_s": np.nan}
        for seed, series in times.items() for i, t in enumerate(series)])
    cells = pd.DataFrame([{**cell, "seed": seed, "status": "ok", "warmup": 2} for seed in times])
    cells = stats.with_warmup(cells, stats.warmup_of_cells(iterations, 5, 0.05))
    steady = stats.steady_rows(iterations, cells)
    flagged = stats.with_noise(cells, stats.trial_stats(steady), 0.10)
    first, second = flagged.sort_values("seed").to_dict("records")
    assert first["warmup_detected"] == 8 and first["warmup_dropped"] == 6
    assert not first["no_steady_state"] and not first["noisy"]
    kept = steady[steady["seed"] == 0]
    assert kept["iteration"].min() == 8 and len(kept) == 60
    assert kept["step_s"].max() < 2e-3  # no warm-up iteration in any statistic
    assert second["noisy"] and second["noise"] > 0.5
    if second["no_steady_state"]:  # never settled: every measured iteration kept
        assert second["warmup_dropped"] == 0
        assert len(steady[steady["seed"] == 1]) == 66


@pytest.mark.parametrize("model, task", [("lstm", "backward_padded"),
                                         ("mlp512", "backward_study")])
def test_a_variable_length_or_study_protocol_cell_drops_nothing(model, task):
    """Variable-length batches vary by design; the study's protocol keeps its first batches
    in its mean, as the study's did."""
    cell = {"framework": "torch", "mode": "eager", "model": model, "task": task,
            "device": "cpu", "threads": 1, "machine": "x86 CPU"}
    iterations = pd.DataFrame([
        {**cell, "seed": 0, "iteration": i, "phase": "warmup" if i < 2 else "measured",
         "step_s": 5e-3 if i < 10 else 1e-3, "forward_s": np.nan, "backward_s": np.nan}
        for i in range(40)])
    cells = pd.DataFrame([{**cell, "seed": 0, "status": "ok", "warmup": 2}])
    cells = stats.with_warmup(cells, stats.warmup_of_cells(iterations, 5, 0.05))
    assert cells["warmup_dropped"].iloc[0] == 0 and not cells["no_steady_state"].iloc[0]
    assert len(stats.steady_rows(iterations, cells)) == 38


def test_bootstrap_replicates_per_process_quantity_and_statistic():
    rng = np.random.default_rng(9)
    cell = {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
            "device": "cpu", "threads": 1, "machine": "x86 CPU"}
    iterations = pd.DataFrame([
        {**cell, "seed": seed, "iteration": i, "phase": "measured", "step_s": value,
         "backward_s": value / 2, "forward_s": np.nan}
        for seed in (0, 1) for i, value in enumerate(rng.uniform(1, 2, 30))])
    cells = pd.DataFrame([{**cell, "seed": seed, "status": "ok", "time_to_first_step_s": 10.0,
                           stats.KEPT_BY_STEP: 1e6 * (seed + 1)}
                          for seed in (0, 1)])
    table = stats.bootstrap_replicates(iterations, 100, seed=0, cells=cells)
    assert sorted(set(table["quantity"])) == sorted(
        ["backward_s", "step_s", stats.FIRST_OVER_STEADY, stats.KEPT_BY_STEP])
    assert len(table) == 2 * 4 * len(inference.STATISTICS)  # seeds x quantities x statistics
    # A memory reading is one per process: its replicates are that reading, and a
    # condition's spread comes from resampling its processes.
    held = table[(table["quantity"] == stats.KEPT_BY_STEP) & (table["statistic"] == "mean")]
    assert list(held["point"]) == [1e6, 2e6]
    assert set(held.iloc[1]["replicates"]) == {2e6}
    step = table[(table["quantity"] == "step_s") & (table["statistic"] == "median")]
    assert list(step["point"]) == pytest.approx(
        list(iterations.groupby("seed")["step_s"].median()))
    first = table[(table["quantity"] == stats.FIRST_OVER_STEADY)
                  & (table["statistic"] == "median")]
    assert list(first["point"]) == pytest.approx([10.0 / p for p in step["point"]])
    assert len(step.iloc[0]["replicates"]) == 100
    # A process's quantities resample the same iterations: here step = 2 x backward in every
    # iteration, so in every replicate too (a ratio of the two pairs each iteration).
    backward = table[(table["quantity"] == "backward_s") & (table["statistic"] == "median")]
    assert np.allclose(step.iloc[0]["replicates"], 2 * backward.iloc[0]["replicates"])
    again = stats.bootstrap_replicates(iterations, 100, seed=0)  # reproducible
    same = again[(again["quantity"] == "step_s") & (again["statistic"] == "median")]
    assert np.array_equal(step.iloc[0]["replicates"], same.iloc[0]["replicates"])
    found = stats.replicates_by_condition(table, "mean")  # a condition over its processes
    key = (*cell.values(), "step_s")
    assert found[key][0] == pytest.approx(iterations.groupby("seed")["step_s"].mean().mean())
    assert sorted(found.processes[key]) == [0, 1]
