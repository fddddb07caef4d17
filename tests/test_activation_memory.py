"""The expected saved bytes a kept figure is set against (adbench.activation_memory): the
examples of the cell's task (one for an output Jacobian, whatever batch the cell records), no
expectation under the method's floor, and a kept figure far above its expectation flagged with
what such a step keeps (the memory appendix's notes)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import activation_memory as am
from adbench import paper_tables, spec


@pytest.mark.parametrize("task", spec.JACOBIANS)
def test_a_jacobian_task_is_set_against_one_example(task):
    batch = spec.MODELS["resnet50"].batch_size
    assert batch > 1
    assert am.examples_of(task, batch) == 1
    assert am.expected_saved_bytes("resnet50", task, batch) == am.saved_activation_bytes(
        "resnet50", 1)
    # The batch's figure is nearly batch times larger (every saved tensor scales with the
    # batch but the batch norms' per-channel statistics, a tenth of one example's).
    ratio = am.saved_activation_bytes("resnet50", batch) / am.saved_activation_bytes(
        "resnet50", 1)
    assert 0.85 * batch < ratio < batch


@pytest.mark.parametrize("task", ["backward", "backward_retained", "loss_jacobian"])
def test_a_loss_derivative_is_set_against_its_batch(task):
    batch = spec.MODELS["mlp512"].batch_size
    assert am.examples_of(task, batch) == batch
    assert am.expected_saved_bytes("mlp512", task, batch) == am.saved_activation_bytes(
        "mlp512", batch)


def test_every_jacobian_task_of_the_spec_is_one_example():
    for task, info in spec.TASKS.items():
        workload = spec.Workload("mlp512", 0, task=task)
        assert am.examples_of(task, workload.batch_size) == workload.rows_per_batch, task


@pytest.mark.parametrize("model", ["fc_xent", "dense"])
def test_no_expectation_below_the_floor(model):
    batch = spec.MODELS[model].batch_size
    saved = am.saved_activation_bytes(model, batch)
    assert saved is not None and saved < am.MIN_SAVED_BYTES
    assert am.expected_saved_bytes(model, "backward", batch) is None


def test_the_mlp_jacobians_fall_below_the_floor_at_one_example():
    for model in spec.MLPS:
        assert am.expected_saved_bytes(model, "jacobian_rows", 128) is None
        assert am.expected_saved_bytes(model, "backward", 128) >= am.MIN_SAVED_BYTES


def test_no_expectation_for_a_family_of_its_own_layout():
    assert am.expected_saved_bytes("lstm", "backward", 128) is None


def test_far_above_flags_only_what_exceeds_the_bound():
    assert am.far_above(am.FAR_ABOVE * 1.5)
    assert not am.far_above(1.02)  # a retained graph's measured ratio
    assert not am.far_above(am.FAR_ABOVE)
    for missing in (None, math.nan, "n/a"):
        assert not am.far_above(missing)


def memory_rows(**ratios) -> pd.DataFrame:
    return pd.DataFrame([{"framework": "torch", "mode": "script", "model": "resnet50",
                          "task": task, "kept_over_saved": ratio}
                         for task, ratio in ratios.items()])


def test_the_appendix_notes_flag_a_kept_figure_far_above_and_say_why():
    notes = paper_tables.memory_notes(memory_rows(jacobian_vectorized=13.1,
                                                  backward_retained=1.02,
                                                  backward=math.nan))
    (flagged,) = notes["flagged"]
    assert flagged["ratio"] == "13.1"
    assert "one example" in flagged["why"]
    assert notes["floor_kib"] == 128
    table = memory_rows(jacobian_vectorized=13.1, backward_retained=1.02)
    assert [paper_tables.far_above(r) for r in table.itertuples()] == [True, False]


def test_the_appendix_notes_of_a_table_within_bounds_flag_nothing():
    assert paper_tables.memory_notes(memory_rows(backward_retained=1.33))["flagged"] == []
