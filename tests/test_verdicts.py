"""The verdict generator on fabricated aggregated frames whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from adbench import claims, spec, verdicts

RNG = np.random.default_rng(0)


def condition(framework, mode, model, task, quantity, seconds, spread=0.01, threads=1):
    """A bootstrap row: the point and replicates scattered `spread` (relative) around it."""
    return {"framework": framework, "mode": mode, "model": model, "task": task,
            "device": "cpu", "threads": threads, "quantity": quantity, "point": seconds,
            "replicates": seconds * (1 + RNG.normal(0, spread, 500))}


def frame(*rows):
    return pd.DataFrame(list(rows))


def claim_row(result, key):
    claims_frame, _ = result
    return claims_frame.set_index("claim").loc[key]


def test_hypothesis_1_supported_where_measured_and_the_rest_said_missing():
    data = frame(condition("torch", "eager", "mlp512", "backward", "step_s", 2e-3),
                 condition("tensorflow", "graph", "mlp512", "backward", "step_s", 1e-3))
    row = claim_row(verdicts.evaluate(data, 0.95), "hypothesis1")
    assert row["verdict"] == "supported"
    assert row["n"] == 1 and row["n_supported"] == 1
    assert row["n_not_measured"] == len(spec.MLPS) - 1
    assert row["ratio"] == pytest.approx(2.0, rel=0.01)
    assert row["low"] < 2.0 < row["high"]


def test_a_difference_within_noise_is_inconclusive_and_a_reversal_contradicts():
    noisy = frame(condition("torch", "eager", "mlp512", "backward", "step_s", 1.02e-3, 0.2),
                  condition("tensorflow", "graph", "mlp512", "backward", "step_s", 1e-3, 0.2))
    assert claim_row(verdicts.evaluate(noisy, 0.95), "hypothesis1")["verdict"] == "inconclusive"
    reversed_ = frame(condition("torch", "eager", "mlp512", "backward", "step_s", 1e-3),
                      condition("tensorflow", "graph", "mlp512", "backward", "step_s", 3e-3),
                      condition("torch", "eager", "mlp354x2", "backward", "step_s", 3e-3),
                      condition("tensorflow", "graph", "mlp354x2", "backward", "step_s", 1e-3))
    row = claim_row(verdicts.evaluate(reversed_, 0.95), "hypothesis1")
    assert row["verdict"] == "contradicted"
    assert (row["n_supported"], row["n_contradicted"]) == (1, 1)
    assert row["ratio"] == pytest.approx(1.0, rel=0.02)  # geometric mean of 1/3 and 3


def test_hypothesis_0_equal_within_the_margin():
    same = frame(condition("torch", "eager", "dense", "backward", "step_s", 1e-3),
                 condition("torch", "eager", "dense", "loss_jacobian", "step_s", 1.03e-3))
    assert claim_row(verdicts.evaluate(same, 0.95), "hypothesis0")["verdict"] == "supported"
    double = frame(condition("torch", "eager", "dense", "backward", "step_s", 1e-3),
                   condition("torch", "eager", "dense", "loss_jacobian", "step_s", 2e-3))
    assert claim_row(verdicts.evaluate(double, 0.95), "hypothesis0")["verdict"] == "contradicted"


def test_depth_uses_the_backward_pass_of_eager_modes():
    data = frame(*(condition("torch", "eager", model, "backward", "backward_s", t)
                   for model, t in zip(spec.MLPS, (1e-3, 1.3e-3, 1.6e-3))),
                 # the step says the opposite: a claim about backward must not read it
                 *(condition("torch", "eager", model, "backward", "step_s", t)
                   for model, t in zip(spec.MLPS, (3e-3, 2e-3, 1e-3))))
    claims_frame, comparisons = verdicts.evaluate(data, 0.95)
    assert claims_frame.set_index("claim").loc["depth", "verdict"] == "supported"
    measured = comparisons[(comparisons["claim"] == "depth")
                           & (comparisons["verdict"] != verdicts.NOT_MEASURED)]
    assert set(measured["numerator_quantity"]) == {"backward_s"}
    assert len(measured) == 2


def test_a_claim_with_no_cells_in_the_run_says_so():
    data = frame(condition("torch", "eager", "mlp512", "backward", "step_s", 1e-3))
    claims_frame, comparisons = verdicts.evaluate(data, 0.95)
    row = claims_frame.set_index("claim").loc["graph_for_large"]
    assert row["verdict"] == verdicts.NOT_MEASURED and row["n"] == 0
    assert row["n_not_measured"] == len(claims.graph_for_large().comparisons)
    assert set(comparisons.loc[comparisons["claim"] == "graph_for_large", "verdict"]) == {
        verdicts.NOT_MEASURED}


def test_every_block_is_judged_on_its_own():
    data = frame(condition("torch", "eager", "mlp512", "backward", "step_s", 2e-3),
                 condition("tensorflow", "graph", "mlp512", "backward", "step_s", 1e-3),
                 condition("torch", "eager", "mlp512", "backward", "step_s", 1e-3, threads=2),
                 condition("tensorflow", "graph", "mlp512", "backward", "step_s", 2e-3,
                           threads=2))
    claims_frame, comparisons = verdicts.evaluate(data, 0.95)
    mine = comparisons[(comparisons["claim"] == "hypothesis1")
                       & (comparisons["numerator_model"] == "mlp512")]
    assert dict(zip(mine["threads"], mine["verdict"])) == {1: "supported", 2: "contradicted"}
    assert claims_frame.set_index("claim").loc["hypothesis1", "verdict"] == "contradicted"


def test_claims_name_only_what_the_spec_has():
    for claim in claims.CLAIMS:
        assert claim.kind in ("greater", "equal") and claim.comparisons
        for comparison in claim.comparisons:
            for side in (comparison.numerator, comparison.denominator):
                assert side.mode in spec.FRAMEWORKS[side.framework].modes
                assert side.model in spec.MODELS and side.task in spec.TASKS
                assert side.quantity in spec.timed_quantities(side.framework, side.mode,
                                                              side.task)
