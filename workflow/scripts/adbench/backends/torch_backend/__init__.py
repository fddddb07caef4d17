"""PyTorch's backend: torch.nn models; eager, TorchScript (script, trace) and torch.compile
modes; every task of the spec (the default allocator's is every cuda cell's: spec.task_refusal).
What it runs and refuses is declared here (no import of torch); device.py, models.py and
tasks.py hold the rest (adbench.backends says what each is for).

Models are nn.Modules as PyTorch users write them (000 Fig. 1), loaded with the spec's
canonical arrays.  Every model takes `(x, aux)`: `aux` is the batch's second array (the
previous hidden state of rnn_cell; the targets otherwise, which the model ignores), so one
`WithLoss(model)` module serves every model.  A mode transforms the module a task calls
(WithLoss for loss tasks, the model for output Jacobians) once, in the task's preparation:
jit.script / jit.trace there (timed: Prepared.compile_s), torch.compile lazily at the first
timed call.  No call of the step is made before the timed loop: a transform that fails on a
module raises from inside run(), and the run-time refusals below recognise the known ones.
"""

from adbench import spec
from adbench.backends import MODEL_FAMILIES, Capabilities, Refusal

# The variable-length tasks by strategy (spec.SEQUENCE_STRATEGIES).
# A mode with no dynamic-shape option: what it does with varying lengths instead.
NO_DYNAMIC_SHAPES = {
    "eager": "eager PyTorch has no dynamic-shape option and needs none: define-by-run runs "
             "every batch at its own length, which is the true-length task (backward_varlen)",
    "script": "torch.jit.script has no dynamic-shape option: a scripted graph runs every "
              "length as it is (the true-length task, backward_varlen); TorchScript's one "
              "shape setting, torch.jit.set_fusion_strategy, concerns its fuser and already "
              "defaults to dynamic specialisations",
    "trace": "torch.jit.trace has no dynamic-shape option: it records the operations of one "
             "call on one example (the lengths a trace serves as it is: backward_varlen)",
}

# The study's protocol (spec.STUDY_PROTOCOL_TASK) is its published code: the MLP of 000 §3.1
# with torch.norm's loss, eager or with the model scripted (its `script`).
STUDY_MLPS_ONLY = ("the study's protocol is its published code for its MLPs (000 §3.1, Fig. 1: "
                   "pred_y = pmodel(x); loss = torch.norm(true_y - pred_y)): an MLP with the "
                   "l2 loss only")
STUDY_PROTOCOL = (
    Refusal(STUDY_MLPS_ONLY, tasks=(spec.STUDY_PROTOCOL_TASK,),
            families=tuple(f for f in MODEL_FAMILIES if f != "mlp")),
    Refusal(STUDY_MLPS_ONLY, tasks=(spec.STUDY_PROTOCOL_TASK,),
            losses=tuple(loss for loss in spec.LOSSES if loss != "l2")),
    Refusal("the study runs its PyTorch code eagerly or with the model scripted "
            "(torch.jit.script, 000 §3.1.3): its protocol has no trace or torch.compile mode",
            modes=("trace", "compile"), tasks=(spec.STUDY_PROTOCOL_TASK,)),
)

CAPABILITIES = Capabilities(
    framework="torch",
    refusals=(
        *STUDY_PROTOCOL,
        *(Refusal(reason, modes=(mode,), tasks=(spec.sequence_task("dynamic"),))
          for mode, reason in NO_DYNAMIC_SHAPES.items()),
        Refusal("torch.jit.trace unrolls the RNN cell's Python loop over range(T) at the "
                "first batch's length: a longer batch would silently run only that many of "
                "its steps (a wrong gradient), a shorter one fail; only the padded task "
                f"(every batch {spec.SEQUENCE_LENGTHS[1]} steps) has one length",
                modes=("trace",), families=("rnn_cell",),
                tasks=(spec.sequence_task("true"), spec.sequence_task("bucketed"))),
        # ---------------------------------------------------------------- met at run time
        Refusal("torch.compile compiles no graph of the LSTM alone: Dynamo does not trace "
                "nn.LSTM (torch._dynamo.config.allow_rnn=False, the default) and falls back "
                "to eager PyTorch without an error, which would be timed under the "
                "torch.compile label", modes=("compile",), families=("lstm",),
                tasks=("jacobian_rows", "jacobian_vectorized"),
                errors=("NoCompiledGraph",), pattern=r"compiled no graph"),
        Refusal("torch.func.functional_call (the stateless API, which swaps the parameters "
                "for the Jacobian's inputs) refuses TorchScript modules",
                modes=("script", "trace"), tasks=("loss_jacobian",), errors=("RuntimeError",),
                pattern=r"stateless API can't be used with Jitted modules"),
        # TorchScript's profiling executor optimises the graph after its profiling runs; the
        # optimised graph of the raw-op cell reads `.data`, which vmap forbids: the third call
        # fails (measured on torch 2.13: only rnn_cell).
        Refusal("torch.func.jacrev (vmap) cannot transform TorchScript's optimised graph of "
                "the RNN cell once the profiling runs are over",
                modes=("script", "trace"), families=("rnn_cell",),
                tasks=("jacobian_vectorized",), errors=("RuntimeError",),
                pattern=r"accessing `data` under vmap transform is not allowed"),
        # Seen on an H100 with torch 2.11, in compile and eager mode (PyTorch issue #110422).
        Refusal("torch.func.jacrev (vmap) cannot transform cuDNN's LSTM kernel on CUDA "
                "(PyTorch issue #110422)", families=("lstm",), devices=("cuda",),
                tasks=("jacobian_vectorized",), errors=("NotImplementedError",),
                pattern=r"Cannot access storage of TensorWrapper"),
        # Inductor differentiates the jacrev graph once more w.r.t. the attention weights
        # (they require grad); CPU flash attention's backward has no derivative.
        Refusal("torch.compile of torch.func.jacrev over nn.MultiheadAttention: AOTAutograd "
                "needs the derivative of CPU flash attention's backward, which PyTorch does "
                "not implement", modes=("compile",), families=("attention",),
                tasks=("jacobian_vectorized",), errors=("BackendCompilerFailed",),
                pattern=r"derivative for aten::_scaled_dot_product_flash_attention_for_cpu_"
                        r"backward is not implemented"),
    ),
)
