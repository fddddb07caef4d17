"""adbench.stats on a hand-made iterations table whose statistics are known by heart."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import stats

NAN = math.nan
CONDITION = {"model": "mlp512", "task": "backward", "device": "cpu", "threads": 1,
             "machine": "x86 CPU"}


def rows(mode, seed, samples):
    """samples: (phase, forward, backward, step) per iteration."""
    return [{"framework": "torch", "mode": mode, **CONDITION, "seed": seed, "iteration": i,
             "phase": phase, "forward_s": f, "backward_s": b, "step_s": s}
            for i, (phase, f, b, s) in enumerate(samples)]


ITERATIONS = pd.DataFrame(
    # Warm-up rows are huge: any leak into the statistics shows.
    rows("eager", 0, [("warmup", 50, 50, 100), ("measured", 1, 2, 3), ("measured", 2, 3, 5)])
    + rows("eager", 1, [("warmup", 90, 110, 200), ("measured", 2, 3, 5), ("measured", 2, 5, 7)])
    + rows("script", 0, [("warmup", NAN, NAN, 50), ("measured", NAN, NAN, 1),
                         ("measured", NAN, NAN, 3)])
    + rows("script", 1, [("warmup", NAN, NAN, 60), ("measured", NAN, NAN, 3),
                         ("measured", NAN, NAN, 3)])
)


def pick(df, **where):
    mask = pd.Series(True, index=df.index)
    for key, value in where.items():
        mask &= df[key] == value
    (row,) = df[mask].to_dict("records")
    return row


def test_trial_stats_exclude_warmup_and_skip_missing_quantities():
    trials = stats.trial_stats(ITERATIONS)
    assert set(trials["n"]) == {2}  # the warm-up row never counts
    step = pick(trials, mode="eager", seed=0, quantity="step_s")
    assert (step["mean"], step["median"], step["min"]) == (4.0, 4.0, 3.0)
    assert step["std"] == pytest.approx(math.sqrt(2))
    assert pick(trials, mode="eager", seed=1, quantity="backward_s")["mean"] == 4.0
    # Compiled modes only time the whole step: no forward/backward rows at all.
    assert set(trials[trials["mode"] == "script"]["quantity"]) == {"step_s"}
    assert len(trials) == 2 * 3 + 2 * 1


def test_across_seeds_mean_of_trial_means_and_sd_across_seeds():
    summary = stats.across_seeds(stats.trial_stats(ITERATIONS))
    assert len(summary) == 3 + 1  # per condition and quantity; seeds folded in
    assert "seed" not in summary.columns
    step = pick(summary, mode="eager", quantity="step_s")
    assert (step["n_seeds"], step["n_iterations"]) == (2, 2)
    assert step["mean_s"] == 5.0  # trial means 4 and 6
    assert step["mean_sd_s"] == pytest.approx(math.sqrt(2))
    # Trial sds: sqrt(2) both times -> mean sqrt(2), sd 0.
    assert step["std_s"] == pytest.approx(math.sqrt(2))
    assert step["std_sd_s"] == pytest.approx(0.0)
    backward = pick(summary, mode="eager", quantity="backward_s")
    assert backward["mean_s"] == 3.25  # trial means 2.5 and 4
    assert backward["mean_sd_s"] == pytest.approx(1.5 / math.sqrt(2))
    assert pick(summary, mode="script", quantity="step_s")["mean_s"] == 2.5  # 2 and 3


def test_first_iteration_stats():
    shuffled = ITERATIONS.sample(frac=1, random_state=0)  # unsorted
    first = stats.first_iteration_stats(shuffled, shuffled[shuffled["phase"] == "measured"])
    eager0 = pick(first, mode="eager", seed=0)
    assert (eager0["first_step_s"], eager0["median_step_s"]) == (100, 4.0)
    assert eager0["first_over_median"] == 25.0
    assert pick(first, mode="script", seed=1)["first_over_median"] == 20.0
    assert len(first) == 4
