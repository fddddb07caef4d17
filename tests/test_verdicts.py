"""The verdict generator on fabricated bootstrap frames whose answers are known, through the
comparisons product (adbench.comparisons) it reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from adbench import (activation_memory, claims, comparisons, inference, report_spec, spec,
                     stats, verdicts)
from adbench.claims import Claim, Comparison, Side

REPLICATES = 400
MACHINE = "x86 CPU"


def processes(framework, mode, model, task, quantity, seconds, n=5, between=0.01,
              within=0.005, threads=1, rng=None, statistic=claims.VERDICT_STATISTIC):
    """bootstrap.parquet rows of one condition: n processes (seeds) whose levels scatter
    `between` (relative) around `seconds`, each with replicates scattering `within`."""
    rng = rng or inference.rng_for(repr((framework, mode, model, task, quantity, seconds)))
    levels = seconds * np.exp(rng.normal(0, between, n))
    return [{"framework": framework, "mode": mode, "model": model, "task": task,
             "device": "cpu", "threads": threads, "seed": seed, "machine": MACHINE,
             "quantity": quantity,
             "statistic": statistic, "point": level,
             "replicates": level * np.exp(rng.normal(0, within, REPLICATES))}
            for seed, level in enumerate(levels)]


def frame(*conditions):
    return pd.DataFrame([row for rows in conditions for row in rows])


def evaluate(data, claims=claims.CLAIMS):
    """The verdicts of a bootstrap frame, as the workflow makes them: compare.py's product,
    then make_verdicts.py."""
    return verdicts.evaluate(comparisons.compare_all(data, 0.95, claims), 0.95, claims)


def claim_row(result, key):
    return result[0].set_index("claim").loc[key]


def mlp_backward(framework, mode, model, seconds, **kw):
    return processes(framework, mode, model, "backward", "step_s", seconds, **kw)


def test_hypothesis_1_supported_where_measured_and_the_rest_said_missing():
    data = frame(mlp_backward("torch", "eager", "mlp512", 2e-3),
                 mlp_backward("tensorflow", "graph", "mlp512", 1e-3))
    row = claim_row(evaluate(data), "hypothesis1")
    assert row["verdict"] == "supported"
    assert row["n"] == 1 and row["n_supported"] == 1 and row["n_processes"] == 5
    assert row["n_not_measured"] == len(spec.MLPS) - 1
    assert row["ratio"] == pytest.approx(2.0, rel=0.03)
    assert row["low"] < row["ratio"] < row["high"]
    assert row["statistic"] == "median" and row["margin"] == claims.MARGIN


def test_a_comparison_of_one_process_is_printed_but_never_judged():
    data = frame(mlp_backward("torch", "eager", "mlp512", 3e-3, n=1),
                 mlp_backward("tensorflow", "graph", "mlp512", 1e-3, n=1))
    claims_frame, groups, comparisons = evaluate(data)
    row = claims_frame.set_index("claim").loc["hypothesis1"]
    assert row["verdict"] == inference.ONE_PROCESS and row["n"] == 0
    assert row["ratio"] == pytest.approx(3.0, rel=0.05)  # still printed
    measured = comparisons[(comparisons["claim"] == "hypothesis1")
                           & (comparisons["verdict"] != verdicts.NOT_MEASURED)]
    assert list(measured["verdict"]) == [inference.ONE_PROCESS]
    assert list(measured["n_processes"]) == [1]
    assert set(groups.loc[groups["claim"] == "hypothesis1", "verdict"]) == {
        inference.ONE_PROCESS}


def test_comparisons_pair_seeds_and_use_only_those_both_sides_ran():
    # the numerator ran seed 0 alone: the denominator's slow seed 1 must not enter the ratio
    slow_seed = processes("tensorflow", "graph", "mlp512", "backward", "step_s", 1e-3, n=2)
    slow_seed[1]["point"] *= 3
    slow_seed[1]["replicates"] = slow_seed[1]["replicates"] * 3
    data = frame(mlp_backward("torch", "eager", "mlp512", 2e-3, n=1), slow_seed)
    _, _, comparisons = evaluate(data)
    row = comparisons[(comparisons["claim"] == "hypothesis1")
                      & (comparisons["numerator_model"] == "mlp512")].iloc[0]
    assert row["n_processes"] == 1
    assert row["ratio"] == pytest.approx(2e-3 / slow_seed[0]["point"], rel=0.05)


def test_a_reversal_contradicts_and_a_small_gap_is_equivalent_not_supported():
    reversed_ = frame(mlp_backward("torch", "eager", "mlp512", 1e-3),
                      mlp_backward("tensorflow", "graph", "mlp512", 3e-3))
    assert claim_row(evaluate(reversed_), "hypothesis1")["verdict"] == "contradicted"
    close = frame(mlp_backward("torch", "eager", "mlp512", 1.04e-3),
                  mlp_backward("tensorflow", "graph", "mlp512", 1e-3))
    assert claim_row(evaluate(close), "hypothesis1")["verdict"] == inference.EQUIVALENT


def test_a_planted_effect_smaller_than_the_margin_is_never_supported():
    rng = np.random.default_rng(11)
    said = [claim_row(evaluate(frame(
        mlp_backward("torch", "eager", "mlp512", 1.07e-3, between=0.03, rng=rng),
        mlp_backward("tensorflow", "graph", "mlp512", 1e-3, between=0.03, rng=rng))),
        "hypothesis1")["verdict"] for _ in range(40)]
    assert inference.SUPPORTED not in said
    assert inference.EQUIVALENT in said or inference.INCONCLUSIVE in said


def test_one_contradicting_comparison_among_eight_supporting_does_not_flip_the_claim():
    models = list(spec.MODELS)[:9]
    claim = Claim("many", "greater", tuple(
        Comparison(Side("torch", "eager", m, "backward", "step_s"),
                   Side("tensorflow", "graph", m, "backward", "step_s")) for m in models))
    data = frame(*(mlp_backward("torch", "eager", m, (1.6e-3 if i else 0.8e-3))
                   for i, m in enumerate(models)),
                 *(mlp_backward("tensorflow", "graph", m, 1e-3) for m in models))
    claims_frame, groups, _ = evaluate(data, claims=[claim])
    row = claims_frame.iloc[0]
    assert (row["n_supported"], row["n_contradicted"]) == (8, 1)
    assert row["verdict"] == "supported"
    assert row["low"] > 1 + claims.MARGIN


def test_several_groups_are_holm_corrected_and_one_is_not():
    # each alone clears the interval's tail (p < 0.025); together Holm doubles the smaller
    evidence = [inference.Evidence(above=p, below=1.0, within=1.0) for p in (0.015, 0.02)]
    assert [inference.decide("greater", e, 0.95) for e in evidence] == ["supported"] * 2
    assert inference.decide_all("greater", evidence, 0.95) == ["inconclusive"] * 2
    assert inference.decide_all("greater", evidence[:1], 0.95) == ["supported"]


def test_group_verdicts_are_the_holm_corrected_decisions_on_their_pooled_ratios():
    data = frame(mlp_backward("tensorflow", "graph", "mlp512", 1e-3, between=0.05),
                 *(mlp_backward("torch", mode, "mlp512", t, between=0.05)
                   for mode, t in (("eager", 1.2e-3), ("script", 3e-3))))
    claim = Claim("pairs", "greater", tuple(
        Comparison(Side("torch", mode, "mlp512", "backward", "step_s"),
                   Side("tensorflow", "graph", "mlp512", "backward", "step_s"))
        for mode in ("eager", "script")))
    _, groups, _ = evaluate(data, claims=[claim])
    made = comparisons.compare_all(data, 0.95, [claim])
    pooled = made[made["level"] == "group"]
    evidence = [inference.evidence(inference.Interval(r.ratio, r.low, r.high, r.replicates),
                                   claims.MARGIN) for r in pooled.itertuples()]
    assert list(groups["verdict"]) == inference.decide_all("greater", evidence, 0.95)


def test_holm_adjusts_as_specified():
    adjusted = inference.holm([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, made monotone
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert inference.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert inference.holm([]) == []


def test_hypothesis_0_is_judged_per_framework_and_mode_in_ratio_and_microseconds():
    data = frame(
        processes("torch", "eager", "dense", "backward", "step_s", 1e-3),
        processes("torch", "eager", "dense", "loss_jacobian", "step_s", 1.3e-3),
        processes("tensorflow", "graph", "dense", "backward", "step_s", 1e-3),
        processes("tensorflow", "graph", "dense", "loss_jacobian", "step_s", 1.01e-3),
    )
    claims_frame, groups, _ = evaluate(data)
    mine = groups[groups["claim"] == "hypothesis0"].set_index(
        ["numerator_framework", "numerator_mode"])
    torch, tf = mine.loc[("torch", "eager")], mine.loc[("tensorflow", "graph")]
    assert torch["verdict"] == "contradicted" and tf["verdict"] == "supported"
    assert torch["difference_us"] == pytest.approx(300, rel=0.1)
    assert torch["n_planned"] == len(report_spec.table("table6_hypothesis0").models)
    assert torch["n_not_measured"] == torch["n_planned"] - 1
    # a group per measured (framework, mode); the claim counts the comparisons it lacks
    assert len(mine) == 2
    row = claims_frame.set_index("claim").loc["hypothesis0"]
    assert row["n_groups"] == 2 and row["verdict"] == verdicts.MIXED
    assert row["n_not_measured"] == len(claims.hypothesis_0().comparisons) - 2


def test_depth_uses_the_backward_pass_of_eager_modes():
    data = frame(*(processes("torch", "eager", model, "backward", "backward_s", t)
                   for model, t in zip(spec.MLPS, (1e-3, 1.3e-3, 1.6e-3))),
                 # the step says the opposite: a claim about backward must not read it
                 *(processes("torch", "eager", model, "backward", "step_s", t)
                   for model, t in zip(spec.MLPS, (3e-3, 2e-3, 1e-3))))
    claims_frame, _, comparisons = evaluate(data)
    assert claims_frame.set_index("claim").loc["depth", "verdict"] == "supported"
    measured = comparisons[(comparisons["claim"] == "depth")
                           & (comparisons["verdict"] != verdicts.NOT_MEASURED)]
    assert set(measured["numerator_quantity"]) == {"backward_s"}
    assert len(measured) == 2


def test_verdicts_read_the_declared_statistic_only():
    means = frame(mlp_backward("torch", "eager", "mlp512", 1e-3, statistic="mean"),
                  mlp_backward("tensorflow", "graph", "mlp512", 3e-3, statistic="mean"))
    medians = frame(mlp_backward("torch", "eager", "mlp512", 3e-3),
                    mlp_backward("tensorflow", "graph", "mlp512", 1e-3))
    row = claim_row(evaluate(pd.concat([means, medians])), "hypothesis1")
    assert row["verdict"] == "supported"


def test_only_in_compiled_modes_is_tested_on_both_sides():
    """"Slow first steps, only in compiled models": a compiled mode's first step over its
    median above the margin, and an eager mode's within it.  A slow first step in an eager
    mode (PyTorch eager's jacrev at 1,688 in one run) makes the claim mixed, never
    supported; both sides as the study says supports it."""
    first = stats.FIRST_OVER_STEADY
    as_said = frame(processes("torch", "script", "mlp512", "backward", first, 50.0),
                    processes("torch", "eager", "mlp512", "backward", first, 1.02))
    result = evaluate(as_said)
    assert claim_row(result, "first_step_only_compiled")["verdict"] == "supported"
    groups = result[1][result[1]["claim"] == "first_step_only_compiled"]
    assert dict(zip(groups["numerator_mode"], groups["kind"])) == {"script": "greater",
                                                                   "eager": "equal"}
    assert groups["difference_us"].isna().all()  # a ratio of times has no microseconds
    slow_eager = frame(processes("torch", "script", "mlp512", "backward", first, 50.0),
                       processes("torch", "eager", "mlp512", "jacobian_vectorized", first,
                                 1688.0))
    row = claim_row(evaluate(slow_eager), "first_step_only_compiled")
    assert row["verdict"] == verdicts.MIXED and row["verdict"] != inference.SUPPORTED


def test_a_claim_with_no_cells_in_the_run_says_so():
    data = frame(mlp_backward("torch", "eager", "mlp512", 1e-3))
    claims_frame, groups, comparisons = evaluate(data)
    row = claims_frame.set_index("claim").loc["graph_for_large"]
    assert row["verdict"] == verdicts.NOT_MEASURED and row["n"] == 0
    assert row["n_not_measured"] == len(claims.graph_for_large().comparisons)
    assert (comparisons["claim"] == "graph_for_large").sum() == 0  # nothing made, nothing said
    assert (groups["claim"] == "graph_for_large").sum() == 0


def test_every_block_is_judged_on_its_own():
    data = frame(mlp_backward("torch", "eager", "mlp512", 2e-3),
                 mlp_backward("tensorflow", "graph", "mlp512", 1e-3),
                 mlp_backward("torch", "eager", "mlp512", 1e-3, threads=2),
                 mlp_backward("tensorflow", "graph", "mlp512", 2e-3, threads=2))
    _, groups, comparisons = evaluate(data)
    mine = comparisons[(comparisons["claim"] == "hypothesis1")
                       & (comparisons["numerator_model"] == "mlp512")]
    assert dict(zip(mine["threads"], mine["verdict"])) == {1: "supported", 2: "contradicted"}
    held = groups[groups["claim"] == "hypothesis1"]
    assert dict(zip(held["threads"], held["verdict"])) == {1: "supported", 2: "contradicted"}


def test_claims_name_only_what_the_spec_has():
    for claim in claims.CLAIMS:
        assert claim.kind in ("greater", "equal", "at_most") and claim.comparisons
        for comparison in claim.comparisons:
            assert comparison.kind in (None, "greater", "equal", "at_most")
            for side in filter(None, (comparison.numerator, comparison.denominator)):
                assert side.mode in spec.FRAMEWORKS[side.framework].modes
                assert side.model in spec.MODELS and side.task in spec.TASKS
                assert side.quantity in (stats.FIRST_OVER_STEADY, *stats.PER_PROCESS) \
                    or side.quantity in spec.timed_quantities(side.framework, side.mode,
                                                              side.task)


def test_every_claim_has_its_words_in_one_home():
    """Every word the report prints about a claim is in claims.json: its name, source and
    statement, the test's words with the claim's own margin and bound filled in, and the
    name of every quantity its comparisons compare."""
    import json
    from pathlib import Path

    from adbench import report_stats

    words = json.loads((Path(__file__).parents[1] / "report/published/claims.json").read_text())
    for claim in claims.CLAIMS:
        entry = words["claims"][claim.key]
        assert "test" in entry and ("hypothesis" in entry
                                    or {"name", "source", "statement"} <= set(entry)), claim.key
        printed = report_stats.claim_words(claim, words)
        assert all(printed.values()) and "{" not in printed["test"], (claim.key, printed)
        for side in (s for c in claim.comparisons for s in c.sides):
            assert side.quantity in words["quantities"], (claim.key, side.quantity)
    margin, bound = (report_stats.claim_words(claims.hypothesis_0(), words)["test"],
                     report_stats.claim_words(claims.cheap_gradient(), words)["test"])
    assert f"{claims.MARGIN:.0%}".replace("%", "\\%") in margin
    assert f"at most {claims.CHEAP_GRADIENT_BOUND:g}" in bound


# ------------------------------------------------------------------ issue 26's claims
def test_the_frozen_subgraph_claim_pairs_each_frozen_step_with_its_all_trainable_one():
    """Every comparison: the same framework, mode and model, backward over backward_frozen,
    on the backward pass where the mode times it apart (the whole step otherwise); every
    model with a frozen part, none without."""
    claim = claims.frozen_subgraphs()
    assert claim.kind == "greater" and claim.key == "frozen_subgraphs"
    for c in claim.comparisons:
        n, d = c.numerator, c.denominator
        assert (n.framework, n.mode, n.model) == (d.framework, d.mode, d.model)
        assert (n.task, d.task) == ("backward", "backward_frozen")
        assert n.quantity == d.quantity == claims.quantity_of(n.framework, n.mode, n.task,
                                                              "backward_s")
    models = {c.numerator.model for c in claim.comparisons}
    assert models == {m for m in spec.STUDY_MODELS if spec.MODELS[m].frozen}
    quantity = {(c.numerator.framework, c.numerator.mode): c.numerator.quantity
                for c in claim.comparisons}
    assert quantity[("torch", "eager")] == "backward_s"
    assert quantity[("tensorflow", "graph")] == "step_s"


def test_the_frozen_subgraph_claim_is_judged_on_a_planted_saving_paired_by_seed():
    data = frame(processes("torch", "eager", "mlp294x3", "backward", "backward_s", 2e-3),
                 processes("torch", "eager", "mlp294x3", "backward_frozen", "backward_s", 1e-3),
                 processes("tensorflow", "graph", "cnn", "backward", "step_s", 1e-3),
                 processes("tensorflow", "graph", "cnn", "backward_frozen", "step_s", 1.02e-3))
    claims_frame, groups, comparisons = evaluate(data)
    row = claims_frame.set_index("claim").loc["frozen_subgraphs"]
    assert row["n"] == 2 and row["n_supported"] == 1 and row["n_equivalent"] == 1
    mine = groups[(groups["claim"] == "frozen_subgraphs")
                  & (groups["verdict"] != verdicts.NOT_MEASURED)].set_index(
        ["numerator_framework", "numerator_mode"])
    assert mine.loc[("torch", "eager"), "verdict"] == "supported"
    assert mine.loc[("torch", "eager"), "ratio"] == pytest.approx(2.0, rel=0.05)
    assert mine.loc[("torch", "eager"), "difference_us"] == pytest.approx(1000, rel=0.1)
    assert mine.loc[("tensorflow", "graph"), "verdict"] == inference.EQUIVALENT
    assert row["n_not_measured"] == len(claims.frozen_subgraphs().comparisons) - 2


def test_the_graph_freed_claim_sets_a_retained_graphs_bytes_against_its_activations():
    """Issue 38: judged on the bytes a retained step keeps over its saved activations'
    expected bytes (no denominator condition, no ratio of whole heaps), at least 1 less the
    reading's shown accuracy, per (framework, mode): a framework whose retained graph keeps
    its activations is supported, one that keeps a third of them contradicted, so the claim
    is mixed; no difference in microseconds."""
    claim = claims.graph_freed()
    assert (claim.kind, claim.bound, claim.margin) == ("greater", 0.8, 0.0)
    assert {c.numerator.model for c in claim.comparisons} == set(
        activation_memory.JUDGED_MODELS)
    assert all(c.denominator is None and c.numerator.task == "backward_retained"
               and c.numerator.quantity == stats.KEPT_OVER_SAVED for c in claim.comparisons)
    data = frame(processes("torch", "eager", "resnet50", "backward_retained",
                           stats.KEPT_OVER_SAVED, 1.02),
                 processes("mxnet", "eager", "cnn", "backward_retained",
                           stats.KEPT_OVER_SAVED, 0.33))
    claims_frame, groups, comparisons = evaluate(data)
    row = claims_frame.set_index("claim").loc["graph_freed"]
    assert row["verdict"] == verdicts.MIXED
    mine = groups[(groups["claim"] == "graph_freed")
                  & (groups["verdict"] != verdicts.NOT_MEASURED)].set_index(
        "numerator_framework")
    assert mine.loc["torch", "verdict"] == "supported"
    assert mine.loc["mxnet", "verdict"] == "contradicted"
    assert mine.loc["torch", "ratio"] == pytest.approx(1.02, rel=0.05)
    assert groups.loc[groups["claim"] == "graph_freed", "difference_us"].isna().all()


def test_the_memory_grab_claim_sets_the_default_pool_against_the_one_every_cell_sets():
    """004: TensorFlow takes the GPU's memory unless told otherwise.  Every mode and study
    model of each framework whose policy the spec sets, the default-allocator task over the
    backward task, in the GPU memory the process holds; graph_freed never takes that task.
    A planted grab (75 GB against 0.6 GB) is supported, its difference no time."""
    claim = claims.memory_grab()
    default = next(t for t, info in spec.TASKS.items() if info.default_allocator)
    assert claim.kind == "greater"
    assert {(c.numerator.framework, c.numerator.mode, c.numerator.model)
            for c in claim.comparisons} == {(f, m, model) for f, m in
                                            spec.pairs(spec.CUDA_MEMORY_POLICY)
                                            for model in spec.STUDY_MODELS}
    for c in claim.comparisons:
        n, d = c.numerator, c.denominator
        assert (n.framework, n.mode, n.model) == (d.framework, d.mode, d.model)
        assert (n.task, d.task) == (default, "backward")
        assert n.quantity == d.quantity == stats.DEVICE_PROCESS
    assert all(default not in (side.task for side in c.sides)
               for c in claims.graph_freed().comparisons)
    gb = 1e9
    data = frame(processes("tensorflow", "graph", "cnn", default, stats.DEVICE_PROCESS, 75 * gb),
                 processes("tensorflow", "graph", "cnn", "backward", stats.DEVICE_PROCESS,
                           0.6 * gb))
    claims_frame, groups, comparisons = evaluate(data)
    row = claims_frame.set_index("claim").loc["memory_grab"]
    assert row["verdict"] == "supported" and row["ratio"] == pytest.approx(125, rel=0.05)
    assert groups.loc[groups["claim"] == "memory_grab", "difference_us"].isna().all()


def test_the_memory_claims_read_fields_the_cells_record():
    from adbench import schema

    assert stats.KEPT_BY_STEP in schema.MEMORY_FIELDS
    assert stats.DEVICE_PROCESS in schema.MEMORY_FIELDS


def test_a_cells_kept_bytes_over_its_saved_activations_at_its_batch():
    """The expectation is the model's at the cell's own batch; a cell not measurable on its
    device (kept None), or a model with no stated expectation, gives NaN."""
    saved = activation_memory.saved_activation_bytes("mlp512", 64)
    cells = pd.DataFrame({"model": ["mlp512", "mlp512", "lstm"], "batch_size": [64, 64, 128],
                          "task": ["backward_retained"] * 3,
                          stats.KEPT_BY_STEP: [1.1 * saved, None, 1e6]})
    found = stats.kept_over_saved(cells)
    assert found[0] == pytest.approx(1.1) and np.isnan(found[1]) and np.isnan(found[2])


@pytest.mark.parametrize("step_over_forward, verdict", [
    (2.5, "supported"), (9.0, "contradicted"), (5.0, "inconclusive")])
def test_the_cheap_gradient_claim_is_judged_against_its_bound_with_no_margin(
        step_over_forward, verdict):
    """A claim of a bound: the step over the forward of the same processes, below 5
    supported, above it contradicted, at it inconclusive (the bound is the tolerance)."""
    forward = processes("torch", "eager", "mlp512", "backward", "forward_s", 1e-3)
    # each process's step is exactly that process's forward times the ratio (the paired
    # ratio sits on the bound, not near it by chance); only its iterations scatter anew
    rng = inference.rng_for("step")
    step = [{**row, "quantity": "step_s", "point": row["point"] * step_over_forward,
             "replicates": row["point"] * step_over_forward
             * np.exp(rng.normal(0, 0.005, REPLICATES))} for row in forward]
    data = frame(forward, step)
    row = claim_row(evaluate(data), "cheap_gradient")
    assert row["bound"] == claims.CHEAP_GRADIENT_BOUND and row["margin"] == 0
    assert row["verdict"] == verdict
    assert row["ratio"] == pytest.approx(step_over_forward, rel=0.05)


def test_the_cheap_gradient_claim_sets_each_mode_against_its_forward_by_one_rule():
    """The forward of the same iterations where the mode times it apart, else the forward
    task's step (a whole-step mode): every (framework, mode) is judged."""
    claim = next(c for c in claims.CLAIMS if c.key == "cheap_gradient")
    for comparison in claim.comparisons:
        n, d = comparison.numerator, comparison.denominator
        assert (n.task, n.quantity) == ("backward", "step_s")
        if "forward_s" in spec.timed_quantities(n.framework, n.mode, "backward"):
            assert (d.task, d.quantity) == ("backward", "forward_s")
        else:
            assert (d.task, d.quantity) == (spec.FORWARD_TASK, "step_s")
    assert {c.group[:2] for c in claim.comparisons} == set(spec.pairs())


def test_a_whole_step_mode_is_judged_by_its_forward_task():
    data = frame(processes("tensorflow", "graph", "mlp512", spec.FORWARD_TASK, "step_s", 1e-3),
                 processes("tensorflow", "graph", "mlp512", "backward", "step_s", 2.5e-3))
    row = claim_row(evaluate(data), "cheap_gradient")
    assert row["verdict"] == "supported"
    assert row["ratio"] == pytest.approx(2.5, rel=0.05)


# ------------------------------------------------------------------ issue 38: group by group
def test_groups_on_opposite_sides_make_a_mixed_claim_though_they_pool_to_one():
    """Two groups, one 1.5 times slower and one 1.5 times faster: their pooled mean is about
    1 (printed as a summary), yet no group supports "equal" and the claim is mixed, never
    supported, with the groups on each side named."""
    claim = Claim("two", "greater", tuple(
        Comparison(Side("torch", mode, "mlp512", "backward", "step_s"),
                   Side("tensorflow", "graph", "mlp512", "backward", "step_s"))
        for mode in ("eager", "script")))
    data = frame(mlp_backward("tensorflow", "graph", "mlp512", 1e-3),
                 mlp_backward("torch", "eager", "mlp512", 1.5e-3),
                 mlp_backward("torch", "script", "mlp512", 1e-3 / 1.5))
    claims_frame, groups, _ = evaluate(data, claims=[claim])
    row = claims_frame.iloc[0]
    assert row["ratio"] == pytest.approx(1.0, rel=0.05)  # the pooled summary hides it...
    assert row["verdict"] == verdicts.MIXED  # ...the rule does not
    assert sorted(groups["verdict"]) == ["contradicted", "supported"]
    assert (row["n_groups_supported"], row["n_groups_contradicted"]) == (1, 1)


def test_a_verdict_from_fewer_than_three_processes_is_provisional():
    for n, provisional in ((2, True), (3, False), (5, False)):
        data = frame(mlp_backward("torch", "eager", "mlp512", 2e-3, n=n),
                     mlp_backward("tensorflow", "graph", "mlp512", 1e-3, n=n))
        claims_frame, groups, compared = evaluate(data)
        row = claims_frame.set_index("claim").loc["hypothesis1"]
        assert row["verdict"] == "supported" and bool(row["provisional"]) == provisional, n
        assert set(groups.loc[groups["claim"] == "hypothesis1", "provisional"]) == {
            provisional}


def test_one_process_intervals_are_labelled_as_such():
    data = frame(mlp_backward("torch", "eager", "mlp512", 2e-3, n=1),
                 mlp_backward("tensorflow", "graph", "mlp512", 1e-3, n=1))
    _, _, compared = evaluate(data)
    mine = compared[compared["claim"] == "hypothesis1"]
    assert set(mine["basis"]) == {comparisons.ITERATIONS}
    assert set(mine["verdict"]) == {inference.ONE_PROCESS}
