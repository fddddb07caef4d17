"""The variant tasks of issue 26 in the in-process backends (PyTorch, TensorFlow): the
backward step with the model's frozen part not trainable (its derivatives equal the float64
reference restricted to the trained parameters, and nothing is differentiated through the
frozen part), and with its graph retained after the step (the same gradients; the graph
still there once the step returned, gone when the next one starts; TensorFlow's compiled
modes, whose tape ends with the call, refuse it as declared).  And issue 27's forward alone
(spec.FORWARD_TASK): the loss, with nothing recorded for a derivative.

One small model (tests/variant_cells.py's) in the modes that compile cheaply: torch.compile
and XLA (tens of seconds a graph here) were run by hand on mlp294x3 for both tasks (torch
2.13 / TF 2.21: errors 1.7e-7 and 2.8e-7 against the reference).  The other frameworks run
the same cells in their own environments (tests/test_backend_<framework>.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import torch
from torch import nn

from adbench import backends, reference, spec
from adbench.backends.tensorflow_backend import models as tf_models, tasks as tf_tasks
from adbench.backends.torch_backend import models as torch_models, tasks as torch_tasks
from variant_cells import VARIANT_MODEL, VARIANT_TASKS

from test_backends import TOLERANCES, tiny

pytestmark = pytest.mark.backend  # imports a framework

MODES = {"torch": ("eager", "script", "trace"), "tensorflow": ("eager", "graph")}
CELLS = [(f, m, t) for f, modes in MODES.items() for m in modes for t in VARIANT_TASKS
         if backends.capabilities(f).refusal(m, VARIANT_MODEL, t, "cpu") is None]


@pytest.fixture(scope="module")
def loaded():
    modules = {f: backends.load(f) for f in MODES}
    for module in modules.values():
        try:  # inter-op threads can be set once per process, before any parallel work
            module.configure_threads(1)
        except RuntimeError:
            pass
    return modules


@pytest.mark.parametrize("framework, mode, task", CELLS)
def test_variant_derivatives_match_the_float64_reference(loaded, framework, mode, task):
    workload = tiny(VARIANT_MODEL, task)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    prepared = loaded[framework].prepare(workload, mode, "cpu")
    samples = [prepared.run(i, time.perf_counter) for i in range(3)]
    loss, arrays = prepared.derivatives(0)
    params = workload.spec.params
    assert [a.shape for a in arrays] == [params[i].shape for i in
                                         workload.spec.trained(task)]
    assert all(a.dtype == np.float32 for a in arrays)
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[VARIANT_MODEL]
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for sample in samples:
        assert set(sample) == set(spec.timed_quantities(framework, mode, task))
    assert any(task.split("_")[1] in key for key in prepared.choices), prepared.choices


@pytest.mark.parametrize("framework, mode", [(f, m) for f, modes in MODES.items() for m in modes])
def test_the_forward_alone_computes_the_loss_and_records_no_derivative(loaded, framework, mode):
    """spec.FORWARD_TASK: its loss equals the float64 reference's, one timed call a step."""
    workload = tiny(VARIANT_MODEL, spec.FORWARD_TASK)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    prepared = loaded[framework].prepare(workload, mode, "cpu")
    samples = [prepared.run(i, time.perf_counter) for i in range(3)]
    loss, arrays = prepared.derivatives(0)
    assert [a.dtype for a in arrays] == [np.float32] and arrays[0].shape == (1,)
    assert loss == pytest.approx(ref_loss, rel=1e-5) == arrays[0][0]
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[VARIANT_MODEL]
    assert all(set(sample) == {"step_s"} for sample in samples)
    assert "forward" in prepared.choices


def test_torch_forward_alone_records_no_graph(loaded):
    net, binds, batches, workload = torch_net(loaded, spec.FORWARD_TASK)
    recorded = []
    with pytest.MonkeyPatch.context() as patch:  # the loss the timed call computes
        patch.setattr(torch_models.WithLoss, "__call__", lambda self, *a: recorded.append(
            nn.Module.__call__(self, *a)) or recorded[-1])
        prepared = torch_tasks.forward_task(net, binds, batches, workload, backends.no_sync,
                                            "eager")
        prepared.run(0, time.perf_counter)
    assert recorded and not recorded[-1].requires_grad and recorded[-1].grad_fn is None


@pytest.mark.parametrize("framework", list(MODES))
def test_a_model_without_a_frozen_part_is_unsupported_with_the_reason(framework):
    reason = backends.capabilities(framework).refusal("eager", "dense", "backward_frozen", "cpu")
    assert reason.startswith("dense has no frozen part")


def test_tensorflow_s_compiled_modes_refuse_the_retained_graph():
    """A tf.function's tape ends with its call: nothing to retain (as JAX declares)."""
    capabilities = backends.capabilities("tensorflow")
    for mode in ("graph", "xla"):
        assert capabilities.refusal(mode, VARIANT_MODEL, "backward_retained", "cpu")
    assert capabilities.refusal("eager", VARIANT_MODEL, "backward_retained", "cpu") is None


def torch_net(loaded, task):
    workload = tiny(VARIANT_MODEL, task)
    net, binds = torch_models.build(workload.spec, spec.make_params(workload),
                                    torch.device("cpu"), torch.float32)
    batch = spec.make_batches(workload)[0]
    batches = [(torch.from_numpy(batch["x"]), torch.from_numpy(batch["y"]))]
    return net, binds, batches, workload


def test_torch_computes_no_gradient_through_the_frozen_part(loaded):
    net, binds, batches, workload = torch_net(loaded, "backward_frozen")
    prepared = torch_tasks.backward_task(net, binds, batches, workload, backends.no_sync, "eager")
    prepared.run(0, time.perf_counter)
    frozen = [p for (p, _, _), spec_param in zip(binds, workload.spec.params)
              if spec_param.name in workload.spec.frozen]
    assert len(frozen) == 4  # fc0 and fc1: weights and biases
    assert all(not p.requires_grad and p.grad is None for p in frozen)
    # the first trainable layer's input needs no gradient: autograd stopped at it
    first = net.model.layers[2](torch.relu(net.model.layers[1](torch.relu(
        net.model.layers[0](batches[0][0])))))
    assert first.grad_fn is not None and first.grad_fn.next_functions[1][0] is None


def test_torch_retains_the_graph_past_the_step_and_frees_it_at_the_next(loaded):
    net, binds, batches, workload = torch_net(loaded, "backward_retained")
    retained = []
    original = torch_tasks.RetainedGraph.backward

    def spy(self, loss):
        original(self, loss)
        retained.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch_tasks.RetainedGraph, "backward", spy)
        prepared = torch_tasks.backward_task(net, binds, batches, workload,
                                             backends.no_sync, "eager")
        prepared.run(0, time.perf_counter)
        held = retained[-1].loss
        assert held is not None
        held.backward()  # the graph survived the step: it can be differentiated again
        prepared.run(1, time.perf_counter)
        assert retained[-1].loss is not held  # the first step's graph was dropped
    # the plain backward step frees its graph: a second backward fails
    plain = torch_models.WithLoss(net.model, workload.spec.loss)(*batches[0])
    plain.backward()
    with pytest.raises(RuntimeError, match="second time"):
        plain.backward()


def tensorflow_task(task_name: str):
    """The TensorFlow backend's model and task of the variant model, and its first batch."""
    workload = tiny(VARIANT_MODEL, task_name)
    model = tf_models.build_model(workload.spec)
    tf_models.load_params(model, spec.make_params(workload))
    task = tf_tasks.make_task(workload, model, "float32")
    batch = tf_models.device_batch(spec.make_batches(workload)[0], workload.spec, model, "float32")
    return workload, model, task, batch


def test_tensorflow_watches_only_the_trainable_variables(loaded):
    workload, model, task, batch = tensorflow_task("backward_frozen")
    tape, _ = task.forward(batch)
    watched = {id(v) for v in tape.watched_variables()}
    trained = workload.spec.trained("backward_frozen")
    assert watched == {id(model.variables[i]) for i in trained}
    assert task.trained == trained


def test_tensorflow_keeps_the_persistent_tape_past_the_step_in_eager_mode(loaded):
    workload, model, task, batch = tensorflow_task("backward_retained")
    state = task.forward(batch)
    task.derive(state)
    kept = task.release.__self__  # the list the task keeps its last tape in
    assert kept == [state[0]]
    assert state[0].gradient(state[1], model.variables[0]) is not None  # still usable
    task.release()
    assert kept == []
