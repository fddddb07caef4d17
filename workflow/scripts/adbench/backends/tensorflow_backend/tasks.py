"""TensorFlow's tasks: one builder per task over a model, as a `forward` (what runs under the
tape) and a `derive` (the tape call); the modes (eager, one tf.function, one XLA-compiled
tf.function) and the variable-length tasks' shape policies; prepare,
and the device class backends.load builds the Backend of."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

import tensorflow as tf

from adbench import spec
from adbench.backends import Prepared, no_sync
from adbench.backends.tensorflow_backend.device import (TensorFlowDevice, apply_cuda_numerics,
                                                        check_device, device_sync, keras,
                                                        onednn_enabled)
from adbench.backends.tensorflow_backend.models import (LOSSES, Model, build_model,
                                                        device_batch, load_params,
                                                        nhwc_to_nchw)
from adbench.clock import STUDY_CLOCK, split_timer, whole_timer
from adbench.derivatives import checked


# ================================================================ tasks
@dataclasses.dataclass
class Task:
    """One task over a model: `forward(batch) -> state` runs under the tape,
    `derive(state) -> (loss or None, [derivatives])` makes the tape call."""

    forward: Callable[[dict], tuple]
    derive: Callable[[tuple], tuple]
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    # The spec params it differentiates (a loss task's derivatives, in this order).
    trained: list[int] | None = None
    # Called outside the clock before each step: drops what the last step kept.
    release: Callable[[], None] = no_sync
    # What a compiled mode's tf.function holds (MODE_CHOICES' {step}).
    step: str = "forward and tape call"
    # The study's protocol (spec.STUDY_PROTOCOL_TASK): each batch sliced from the epoch's
    # data inside the loop, the clock STUDY_CLOCK (prepare's run).
    study_protocol: bool = False


def _loss_task(model: Model, loss_fn, jacobian: bool) -> Task:
    def forward(batch):
        with tf.GradientTape() as tape:  # trainable variables are watched as they are read
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        if jacobian:
            return loss, tape.jacobian(loss, model.variables, experimental_use_pfor=True)
        return loss, tape.gradient(loss, model.variables)

    return Task(forward, derive)


# The builders of TASK_BUILDERS: (model, loss function, workload, dtype) -> Task.
def backward_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    return _loss_task(model, loss_fn, jacobian=False)


def loss_jacobian_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    return _with_pfor(_loss_task(model, loss_fn, jacobian=True))


def frozen_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    """The backward step w.r.t. the trainable variables only: the frozen part's are never
    watched (as trainable=False leaves them), so the tape records nothing through it."""
    trained = workload.spec.trained(workload.task)
    sources = [model.variables[i] for i in trained]

    def forward(batch):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(sources)
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        return loss, tape.gradient(loss, sources)

    return Task(forward, derive, {"frozen": "tf.GradientTape(watch_accessed_variables=False) "
                                            "watching the trainable variables only, "
                                            "tape.gradient w.r.t. them"}, trained)


def retained_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    """The backward step on a persistent tape, held after the step (eagerly) until the next
    step starts: its recorded intermediates stay alive as a retained graph's do."""
    kept = []

    def forward(batch):
        with tf.GradientTape(persistent=True) as tape:
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        if tf.executing_eagerly():  # inside a tf.function the tape ends with the call
            kept.append(tape)
        return loss, tape.gradient(loss, model.variables)

    return Task(forward, derive, {"retained": "tf.GradientTape(persistent=True); in eager "
                                              "mode the tape is held after the step and "
                                              "dropped outside the clock when the next step "
                                              "starts; in a tf.function it ends with the "
                                              "call"}, release=kept.clear)


def _output_rows(model: Model, batch, rows: int, persistent: bool):
    """The first `rows` entries of one example's flattened output, taped w.r.t. its input.

    Every model's output is in canonical layout (no image outputs), so the flattened order
    is the spec's.
    """
    x = batch["x"]
    with tf.GradientTape(persistent=persistent) as tape:
        tape.watch(x)
        out = tf.reshape(model.forward({**batch, "x": x}), [-1])[:rows]
    return tape, out, x


def _rows(workload: spec.Workload) -> int:
    return min(workload.jacobian_rows, workload.spec.n_outputs)


def rows_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    rows = _rows(workload)
    one_hot = list(tf.eye(rows, dtype=dtype))  # built once, outside the clock

    def forward(batch):
        return _output_rows(model, batch, rows, persistent=True)

    def derive(state):
        tape, out, x = state
        vjps = [tape.gradient(out, x, output_gradients=row) for row in one_hot]
        return None, [tf.concat(vjps, axis=0)]  # each (1, *input): stack the rows

    return Task(forward, derive, {"jacobian_rows": "one tape.gradient per row with one-hot "
                                  "output_gradients on a persistent tape, in a Python loop "
                                  "(unrolled at trace time under tf.function)"})


def vectorized_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    rows = _rows(workload)

    def forward(batch):
        return _output_rows(model, batch, rows, persistent=False)

    def derive(state):
        tape, out, x = state
        jacobian = tape.jacobian(out, x, experimental_use_pfor=True)  # (rows, 1, *input)
        return None, [tf.reshape(jacobian, [rows, *x.shape[1:]])]

    return _with_pfor(Task(forward, derive))


def forward_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    """The loss alone (spec.FORWARD_TASK): no tf.GradientTape, so nothing is recorded for a
    derivative; a compiled mode's tf.function holds the loss and nothing else."""
    def forward(batch):
        return loss_fn(model.forward(batch), batch)

    def derive(loss):  # no derivative: the step returns the loss as it is
        return loss, []

    return Task(forward, derive, {"forward": "the model's loss with no tf.GradientTape "
                                             "(nothing recorded)"}, step="the loss alone")


def _as_tf_variable(variable) -> tf.Variable:
    """Keras 3 wraps each tf.Variable; the tape differentiates w.r.t. either."""
    return variable if isinstance(variable, tf.Variable) else variable.value


def study_task(model: Model, loss_fn, workload: spec.Workload, dtype) -> Task:
    """The study's protocol (spec.STUDY_PROTOCOL_TASK), 000 Fig. 2 as written, on the Keras
    model: `with tf.GradientTape() as tape: pred_y = model(x); loss = tf.norm(true_y -
    pred_y)`, then `tape.gradient(loss, model.trainable_variables)`.  Eager: the clock
    around the tape block with the batch's slicing (forward_s) and around tape.gradient
    (backward_s: what the study timed); graph: the study's @tf.function holds both, and
    the clock is around its call (step_s)."""
    keras_model = model.keras_model
    variables = list(keras_model.trainable_variables)
    if len(variables) != len(model.variables) or any(
            _as_tf_variable(v) is not w for v, w in zip(variables, model.variables)):
        raise ValueError(f"{workload.model}: model.trainable_variables are not the spec's "
                         "parameters in its order")

    def forward(batch):
        x, true_y = batch["x"], batch["y"]
        with tf.GradientTape() as tape:
            pred_y = keras_model(x)
            loss = tf.norm(true_y - pred_y)
        return tape, loss

    def derive(state):
        tape, loss = state
        return loss, tape.gradient(loss, variables)

    return Task(forward, derive, STUDY_CHOICES, step="the study's lines (the tape block and "
                "tape.gradient)", study_protocol=True)


STUDY_CHOICES = {
    "protocol": "the study's (000 Fig. 2): the epoch's data as one tensor, each batch sliced "
                "from it inside the loop; with tf.GradientTape() as tape: pred_y = model(x); "
                "loss = tf.norm(true_y - pred_y); then tape.gradient(loss, "
                "model.trainable_variables)",
    "clock": "time.time() (the study's timing lines are not published), the device "
             "synchronised before each reading: eager, forward_s around the slicing and the "
             "tape block and backward_s around tape.gradient (what the study timed); graph, "
             "step_s around the tf.function's call (the slicing outside it)",
}


def epoch_slicer(batches: list[dict]) -> Callable[[int], dict]:
    """The study's loop: the epoch's data as one tensor per key, made once, outside the
    clock (under the cell's device); iteration i slices its batch from them."""
    epoch = {k: tf.concat([b[k] for b in batches], axis=0) for k in batches[0]}
    bounds = spec.epoch_bounds([int(b["x"].shape[0]) for b in batches])

    def batch(i):
        lo, hi = bounds[i % len(bounds)]
        return {k: v[lo:hi] for k, v in epoch.items()}
    return batch


PFOR_CHOICE = ("tape.jacobian(experimental_use_pfor=True); in eager mode pfor traces its "
               "loop body into a fresh tf.function at every call (TensorFlow's own design)")


def _with_pfor(task: Task) -> Task:
    task.choices["pfor"] = PFOR_CHOICE
    return task


TASK_BUILDERS: dict[str, Callable[..., Task]] = {
    "backward": backward_task,
    "backward_frozen": frozen_task,
    "backward_retained": retained_task,
    "loss_jacobian": loss_jacobian_task,
    spec.FORWARD_TASK: forward_task,
    spec.STUDY_PROTOCOL_TASK: study_task,
    "jacobian_rows": rows_task,
    "jacobian_vectorized": vectorized_task,
    # The backward step with TensorFlow's own GPU memory policy.
    "backward_default_memory": backward_task,
    # The backward step on the model's sequence form, every strategy alike (only the
    # batches' shapes and the mode's shape policy differ).
    **{task: backward_task for task in spec.SEQUENCE_TASKS},
}


def make_task(workload: spec.Workload, model: Model, dtype) -> Task:
    """The task's forward and derive over the model (its TASK_BUILDERS entry)."""
    return TASK_BUILDERS[workload.task](model, LOSSES[workload.spec.loss], workload, dtype)


# ================================================================ prepare
# {step}: what the task's tf.function holds (Task.step).
MODE_CHOICES = {
    "eager": {},
    "graph": {"tf_function": "one tf.function of {step}, no input_signature: "
                             "the shorter last batch of an epoch retraces once",
              "jit_compile": "False"},
    "xla": {"tf_function": "one tf.function(jit_compile=True) of {step}, no "
                           "input_signature: traced and XLA-compiled at the first timed call "
                           "(compile_s 0); the shorter last batch of an epoch retraces and "
                           "recompiles once",
            "jit_compile": "True: the whole step is one XLA cluster run by TensorFlow's XLA "
                           "launch op on the CPU device; an op XLA cannot compile is an error, "
                           "not a fallback",
            "xla_threads": "XLA's CPU executable runs on TensorFlow's intra-op pool (the launch "
                           "op hands it the device's Eigen pool): tf.config.threading bounds "
                           "it, no XLA_FLAGS set (--xla_cpu_multi_thread_eigen=false measured "
                           "no different). XLA's compiler has its own process-wide LLVM "
                           "codegen pool sized by the schedulable cores, which no flag bounds: "
                           "the compiling first iteration may use more cores than threads"},
}


# How each mode meets a variable-length task's batch shapes (its strategy), and what its
# `traces` counts.
XLA_PER_SHAPE = ("XLA compiles per concrete input shape even where tf.function does not "
                 "retrace (its compile cache is keyed by the shapes: a step at a new length "
                 "compiles anew); traces counts XLA's compilations as the distinct input "
                 "shapes the step has been called with (read outside the clock; TensorFlow "
                 "has no readable compile counter), at least tf.function's "
                 "experimental_get_tracing_count()")


def shape_policy(mode: str, strategy: str) -> dict[str, str]:
    """The choices a variable-length cell records: its strategy and its mode's shape policy."""
    choices = {"sequence": strategy}
    if mode == "eager":
        choices["shape_policy"] = ("define-by-run: each batch runs at its own steps (as the "
                                   "strategy pads it), nothing traced; traces 0")
        return choices
    jit = f"jit_compile={mode == 'xla'}"
    if strategy == "dynamic":
        choices["tf_function"] = (
            f"tf.function(reduce_retracing=True, {jit}), no input_signature: the first "
            "length traces, the second retraces once with the time axis generalised to None, "
            "and every later length reuses that trace")
    else:
        choices["tf_function"] = (
            f"tf.function({jit}) as by default (reduce_retracing=False, no input_signature): "
            "a trace per new input shape: per new length (true), once (padded), once per "
            "bucket (bucketed); the shorter last batch of an epoch, if any, once more")
    choices["shape_policy"] = (XLA_PER_SHAPE if mode == "xla" else
                               "traces = the tf.function's experimental_get_tracing_count()")
    return choices


def _choices(model: Model, task: Task, mode: str, device: str, dtype: str,
             numerics: dict[str, str]) -> dict[str, str]:
    """What the cell records as its implementation choices (Prepared.choices)."""
    choices = {"layers": f"Keras {keras.__version__} layers, called with training=False"
                         if model.keras_model else "raw TensorFlow ops (tf.matmul, tf.tanh)",
               "bias": "Keras layers add biases via keras.ops.add, which dispatches to "
                       "tf.nn.bias_add (fusable with MatMul/Conv2D)" if model.keras_model
                       else "none",
               "layout": "NHWC images, HWIO kernels (converted once, at preparation)"
                         if model.images else "canonical",
               "onednn": "on" if device == "cpu" and onednn_enabled() else "off",
               **numerics,
               "dtype": dtype, **model.choices, **task.choices,
               **{k: v.format(step=task.step) for k, v in MODE_CHOICES[mode].items()}}
    if mode == "xla":
        choices["xla_flags"] = os.environ.get("XLA_FLAGS") or "unset"
    return choices


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    check_device(device)
    numerics = (apply_cuda_numerics(spec.cuda_numerics(workload.task))
                if device == "cuda" else {})
    tf_device = "/GPU:0" if device == "cuda" else "/CPU:0"
    sync = device_sync(device)
    model_spec = workload.spec
    with tf.device(tf_device):
        model = build_model(model_spec, dtype, sequence=workload.sequence is not None)
        load_params(model, spec.make_params(workload))
        # All batches placed on the device up front: data transfer is not part of the timing.
        batches = [device_batch(b, model_spec, model, dtype)
                   for b in spec.make_batches(workload)]
        task = make_task(workload, model, dtype)
        batch = lambda i: batches[i % len(batches)]  # noqa: E731
        if task.study_protocol:
            batch = epoch_slicer(batches)

    def step(b):
        return task.derive(task.forward(b))

    compiled = None
    if mode in ("graph", "xla"):
        # The dynamic-shape option of a variable-length task: one generalised trace.
        dynamic = {"reduce_retracing": True} if workload.sequence == "dynamic" else {}
        step = compiled = tf.function(step, jit_compile=mode == "xla", **dynamic)
    split = "forward_s" in spec.timed_quantities("tensorflow", mode, workload.task)
    # A variable-length task's XLA step: the input shapes it has been called with, one XLA
    # compilation each (recorded outside the clock; other cells record nothing).
    shapes = set()
    counted = workload.sequence is not None and mode == "xla"

    def called(b):
        if counted:
            shapes.add(tuple((k, tuple(v.shape)) for k, v in sorted(b.items())))

    def run(i, clock):
        task.release()
        clock = STUDY_CLOCK if task.study_protocol else clock
        with tf.device(tf_device):
            if split:  # the batch taken inside the clock (the study's slicing: forward_s)
                return split_timer(lambda: task.forward(batch(i)), task.derive, sync, clock)
            b = batch(i)  # outside the clock, which is around the compiled call
            called(b)
            return whole_timer(lambda: step(b), sync, clock)

    layouts = model.layouts if task.trained is None else [model.layouts[i]
                                                          for i in task.trained]

    def canonical(wrt: str, arrays) -> list:
        """The step's derivatives in the spec's layouts: the input's (NCHW images) or the
        parameters' (derivatives.Kind.wrt)."""
        if wrt == "input":
            return [nhwc_to_nchw(a.numpy()) if model.images else a.numpy() for a in arrays]
        return [layout.to_canonical(a.numpy()) for layout, a in zip(layouts, arrays,
                                                                    strict=True)]

    def derivatives(i):
        called(batch(i))
        with tf.device(tf_device):
            loss, arrays = step(batch(i))
        return checked(spec.TASKS[workload.task].derivative, loss, arrays, dtype, canonical)

    choices = _choices(model, task, mode, device, dtype, numerics)

    def traces():
        """The step's traces so far (XLA's: its compilations, one per shape)."""
        if compiled is None:
            return 0
        traced = compiled.experimental_get_tracing_count()
        return max(traced, len(shapes)) if counted else traced

    if workload.sequence is not None:  # a fixed-shape task's rows carry no traces
        choices.update(shape_policy(mode, workload.sequence))
    return Prepared(run=run, derivatives=derivatives, choices=choices,
                    traces=traces if workload.sequence is not None else None,
                    release=task.release)


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = TensorFlowDevice
