"""PyTorch backend: torch.nn models; eager, TorchScript (script, trace) and torch.compile
modes; every task of the spec.

Models are nn.Modules as PyTorch users write them (000 Fig. 1), loaded with the spec's
canonical arrays.  Every model takes `(x, aux)`: `aux` is the batch's second array (the
previous hidden state of rnn_cell; the targets otherwise, which the model ignores), so one
`WithLoss(model)` module serves every model.  A mode transforms the module a task calls
(WithLoss for loss tasks, the model for output Jacobians) once, in the task's preparation:
jit.script / jit.trace there (timed: Prepared.compile_s), torch.compile lazily at the first
timed call.  No call of the step is made before the timed loop; a transform that fails on a
module with a known error is refused from inside run() (KNOWN_FAILURES).
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import re
import shutil
import tempfile
import time
import warnings
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adbench import spec
from adbench.derivatives import loss_as_array
from adbench.backends import (Prepared, UnsupportedCell, check_sequence_model,
                              device_not_visible, no_sync, trained_params)
from adbench.clock import split_timer, whole_timer


def configure_threads(threads: int) -> dict:
    torch.set_num_threads(threads)
    if torch.get_num_interop_threads() != threads:  # settable once, before parallel work
        torch.set_num_interop_threads(threads)
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def versions() -> dict[str, str]:
    info = {"torch": torch.__version__, "numpy": np.__version__}
    if torch.version.cuda:
        info["cuda"] = torch.version.cuda
    return info


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return "cpu"


# ================================================================ device: sync, numerics, memory
def device_sync(device: str) -> Callable[[], None]:
    """What the timer calls before every clock read: CUDA kernels run asynchronously."""
    return torch.cuda.synchronize if device == "cuda" else no_sync


def apply_cuda_numerics(numerics: dict) -> dict[str, str]:
    """spec.CUDA_NUMERICS in PyTorch's switches, set before anything is built; returns what
    is now in force (read back) for the cell's choices."""
    tf32 = bool(numerics["tf32"])
    torch.backends.cuda.matmul.allow_tf32 = tf32  # cuBLAS float32 matmuls
    torch.backends.cudnn.allow_tf32 = tf32  # cuDNN convolutions and RNNs
    # benchmark=True picks each convolution's kernel by timing candidates at its first call.
    torch.backends.cudnn.benchmark = bool(numerics["cudnn_autotune"])
    return {
        "cuda_tf32": f"torch.backends.cuda.matmul.allow_tf32="
                     f"{torch.backends.cuda.matmul.allow_tf32}, torch.backends.cudnn."
                     f"allow_tf32={torch.backends.cudnn.allow_tf32}",
        "cuda_autotune": f"torch.backends.cudnn.benchmark={torch.backends.cudnn.benchmark}",
        "cuda_memory": "the caching allocator, growing on demand (PyTorch's default)",
    }


def gpu_info(device: str) -> dict | None:
    """The GPU a cuda cell runs on, as PyTorch sees it (driver: provenance.gpu, nvidia-smi)."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    cudnn = torch.backends.cudnn.version()  # None where PyTorch has no cuDNN
    return {"name": props.name, "total_memory_bytes": int(props.total_memory),
            "compute_capability": f"{props.major}.{props.minor}",
            "cuda_version": torch.version.cuda,
            "cudnn_version": str(cudnn) if cudnn else None,
            "peak_memory_scope": "torch.cuda.max_memory_allocated (tensors), reset at the "
                           "first measured iteration (warm-up excluded)"}


def cuda_runtime() -> tuple[str | None, str]:
    """The CUDA runtime this PyTorch build ships and runs (None: a CPU build)."""
    return torch.version.cuda, "torch.version.cuda"


def reset_peak_memory(device: str) -> None:
    """Outside the clock, before the timed loop: the peak is then the loop's own."""
    if device == "cuda" and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_memory(device: str) -> int | None:
    if device != "cuda" or not torch.cuda.is_available():
        return None
    return int(torch.cuda.max_memory_allocated())


def peak_reserved_memory(device: str) -> int | None:
    """The caching allocator's peak reserved memory (reset with the allocated peak)."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    return int(torch.cuda.max_memory_reserved())


def device_memory_in_use(device: str) -> int | None:
    """The tensors' memory still allocated now (a retained graph's buffers included)."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    return int(torch.cuda.memory_allocated())


# ================================================================ models
class MLP(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        sizes = model.arch["sizes"]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


class CNN(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        a = model.arch
        c0, c1 = a["channels"]
        self.conv0 = nn.Conv2d(1, c0, a["kernel"], a["strides"][0], a["padding"])
        self.conv1 = nn.Conv2d(c0, c1, a["kernel"], a["strides"][1], a["padding"])
        self.fc = nn.Linear(model.params[-2].shape[0], model.n_outputs)

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        x = torch.relu(self.conv1(torch.relu(self.conv0(x))))
        return self.fc(torch.flatten(x, 1))


class LSTMNet(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        hidden = model.arch["hidden"]
        self.lstm = nn.LSTM(model.input_shape[1], hidden, batch_first=True)
        self.fc = nn.Linear(hidden, model.n_outputs)

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])

    def sequence(self, x: Tensor, aux: Tensor, lengths: Tensor) -> Tensor:
        """A variable-length batch (B, T, features): the LSTM over all T steps, each
        example's output gathered at its last true step (lengths - 1; a true-length batch's
        last step), then the dense layer."""
        out, _ = self.lstm(x)
        last = (lengths - 1).view(-1, 1, 1).expand(-1, 1, out.shape[2])
        return self.fc(out.gather(1, last).squeeze(1))


class Bottleneck(nn.Module):
    def __init__(self, block: dict):
        super().__init__()
        self.conv1 = nn.Conv2d(block["in"], block["mid"], 1, bias=False)
        self.bn1 = nn.BatchNorm2d(block["mid"])
        self.conv2 = nn.Conv2d(block["mid"], block["mid"], 3, block["stride"], 1, bias=False)
        self.bn2 = nn.BatchNorm2d(block["mid"])
        self.conv3 = nn.Conv2d(block["mid"], block["out"], 1, bias=False)
        self.bn3 = nn.BatchNorm2d(block["out"])
        self.downsample = nn.Sequential()
        if block["project"]:
            self.downsample = nn.Sequential(
                nn.Conv2d(block["in"], block["out"], 1, block["stride"], bias=False),
                nn.BatchNorm2d(block["out"]))

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return torch.relu(out + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.blocks = nn.Sequential(*(Bottleneck(b) for b in spec.resnet_blocks()))
        self.fc = nn.Linear(2048, model.n_outputs)

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SelfAttention(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        self.attn = nn.MultiheadAttention(model.arch["embed"], 1, batch_first=True)

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


class CTCNet(nn.Module):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        self.fc = nn.Linear(model.arch["features"], model.arch["classes"])

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        return F.log_softmax(self.fc(x), dim=-1)


class RNNCell(nn.Module):
    """The slides' example, written as they write it: torch.mm with explicit weights."""

    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        self.W_h = nn.Parameter(torch.empty(model.params[0].shape))
        self.W_x = nn.Parameter(torch.empty(model.params[1].shape))

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        return torch.tanh(torch.mm(aux, self.W_h.t()) + torch.mm(x, self.W_x.t()))

    def sequence(self, x: Tensor, aux: Tensor, lengths: Tensor) -> Tensor:
        """A variable-length batch (B, T, inputs): the cell unrolled over the T steps from
        h0 = aux (a Python loop, as the slides' users write it), each example's state kept
        past its true length by a mask (the same code for every strategy)."""
        h = aux
        for t in range(x.shape[1]):
            h_new = torch.tanh(torch.mm(h, self.W_h.t()) + torch.mm(x[:, t], self.W_x.t()))
            h = torch.where((lengths > t).unsqueeze(1), h_new, h)
        return h


FAMILIES = {"mlp": MLP, "cnn": CNN, "lstm": LSTMNet, "resnet": ResNet,
            "attention": SelfAttention, "ctc": CTCNet, "rnn_cell": RNNCell}


class WithLoss(nn.Module):
    """The model and its loss (000 Fig. 1: loss = torch.norm(true_y - pred_y))."""

    def __init__(self, model: nn.Module, loss: str):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, x: Tensor, aux: Tensor) -> Tensor:
        pred = self.model(x, aux)
        if self.loss == "l2":
            return torch.norm(aux - pred)
        if self.loss == "xent":
            return F.cross_entropy(pred, aux)
        if self.loss == "ctc":  # every sequence and label has full length
            steps = torch.full((pred.shape[0],), pred.shape[1], dtype=torch.long)
            lengths = torch.full((pred.shape[0],), aux.shape[1], dtype=torch.long)
            return F.ctc_loss(pred.transpose(0, 1), aux, steps, lengths, blank=0,
                              reduction="sum")
        return pred.sum()


class SequenceLoss(WithLoss):
    """WithLoss on a variable-length batch: `(x, aux, lengths)`, the model's `sequence`
    (the LSTM's output at lengths - 1; the RNN cell's masked state), then the same loss
    (the LSTM's l2, the RNN cell's sum).  Shares the model (and its parameters) with the
    WithLoss that `build` made."""

    def forward(self, x: Tensor, aux: Tensor, lengths: Tensor) -> Tensor:
        pred = self.model.sequence(x, aux, lengths)
        if self.loss == "l2":
            return torch.norm(aux - pred)
        return pred.sum()


# ================================================================ canonical <-> torch layouts
def bindings(net: nn.Module, model: spec.ModelSpec) -> list[tuple[Tensor, Callable, Callable]]:
    """(torch parameter, canonical arrays -> its value, its grad -> {canonical index: array})
    in spec order; one torch parameter may hold several canonical ones (attention's in_proj)."""
    t = lambda a: a.T  # noqa: E731  (x @ W vs nn.Linear's W x)
    same = lambda a: a  # noqa: E731
    if model.family == "attention":  # canonical: W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o
        attn = net.attn
        e = model.arch["embed"]
        thirds = lambda g: (g[:e], g[e:2 * e], g[2 * e:])  # noqa: E731
        return [
            (attn.in_proj_weight, lambda c: np.concatenate([c[0].T, c[2].T, c[4].T]),
             lambda g: {2 * i: part.T for i, part in enumerate(thirds(g))}),
            (attn.in_proj_bias, lambda c: np.concatenate([c[1], c[3], c[5]]),
             lambda g: {2 * i + 1: part for i, part in enumerate(thirds(g))}),
            (attn.out_proj.weight, lambda c: c[6].T, lambda g: {6: g.T}),
            (attn.out_proj.bias, lambda c: c[7], lambda g: {7: g}),
        ]
    if model.family == "lstm":
        # nn.LSTM adds two biases; Keras has one. The second is frozen at zero so both
        # frameworks train the same 4H biases (equal parameter counts).
        lstm = net.lstm
        with torch.no_grad():
            lstm.bias_hh_l0.zero_()
        lstm.bias_hh_l0.requires_grad_(False)
        torch_params = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0,
                        net.fc.weight, net.fc.bias]
        layouts = [t, t, same, t, same]
    else:
        torch_params = [p for p in net.parameters()]
        layouts = [t if (p.ndim == 2 and model.family != "rnn_cell") else same
                   for p in torch_params]
    return [(p, (lambda c, i=i, f=f: f(c[i])), (lambda g, i=i, f=f: {i: f(g)}))
            for i, (p, f) in enumerate(zip(torch_params, layouts))]


def load_params(binds, arrays: list[np.ndarray], dtype: torch.dtype) -> None:
    with torch.no_grad():
        for param, to_torch, _ in binds:
            value = torch.from_numpy(np.ascontiguousarray(to_torch(arrays)))
            if value.shape != param.shape:
                raise ValueError(f"canonical -> torch: shape {tuple(value.shape)} "
                                 f"for a parameter of shape {tuple(param.shape)}")
            param.copy_(value.to(dtype))


def to_canonical(binds, grads: list[Tensor]) -> list[np.ndarray]:
    """Gradients of the torch parameters as the spec's canonical arrays, in spec order."""
    canonical: dict[int, np.ndarray] = {}
    for (_, _, back), g in zip(binds, grads):
        canonical.update(back(g.detach().cpu().numpy()))
    return [np.ascontiguousarray(canonical[i]) for i in sorted(canonical)]


# ================================================================ preparation
def _torch_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise device_not_visible("torch", _no_gpu_words(), *cuda_runtime())
    return torch.device(device)


def _no_gpu_words() -> str:
    """PyTorch's own account of why it sees no GPU: is_available() only says False (and
    may warn), torch.cuda.init() raises the reason ("Torch not compiled with CUDA enabled",
    "The NVIDIA driver on your system is too old (found version ...)", "No CUDA GPUs are
    available")."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.is_available()
        try:
            torch.cuda.init()
            raised = None
        except Exception as exc:  # noqa: BLE001 -- its words are the record
            raised = f"torch.cuda.init() raised {type(exc).__name__}: {exc}"
    said = [str(w.message) for w in caught]
    return "; ".join(dict.fromkeys(["torch.cuda.is_available() is False", *said,
                                    *filter(None, [raised])]))


def build(model: spec.ModelSpec, arrays, dev, dtype):
    """WithLoss(model) with the arrays loaded, on the device, in inference mode (batch norm
    uses its running statistics).  Eager: a mode's transform is applied per task, to the
    module the task calls (see `transform`)."""
    if model.family not in FAMILIES:
        raise UnsupportedCell(f"torch backend has no model family {model.family!r}")
    net = WithLoss(FAMILIES[model.family](model), model.loss).to(dtype)
    binds = bindings(net.model, model)
    load_params(binds, arrays, dtype)
    net = net.to(dev).eval()
    if dev.type == "cuda":
        for rnn in _cudnn_rnns(net):
            rnn.train()
    return net, binds


def _cudnn_rnns(net: nn.Module) -> list[nn.Module]:
    """The RNN layers cuDNN runs on CUDA: its RNN backward refuses eval mode ("can only be
    called in training mode", seen on an H100).  Without dropout both modes compute the same."""
    return [m for m in net.modules() if isinstance(m, nn.RNNBase) and m.dropout == 0]


def inference_mode(net: nn.Module, device: str) -> str:
    rnns = device == "cuda" and _cudnn_rnns(net)
    return ("module.eval(): batch norm uses running statistics"
            + ("; RNN layers in train mode (no dropout: same numbers), as cuDNN's RNN "
               "backward requires" if rnns else ""))


MODE_CHOICES = {
    "eager": "torch.nn modules, define-by-run",
    "script": "torch.jit.script, in prepare (compile_s), of the module the task calls: "
              "WithLoss (model + loss) for loss tasks, the model for output Jacobians",
    "trace": "torch.jit.trace(check_trace=False), in prepare (compile_s), of the module the "
             "task calls on its first batch (WithLoss for loss tasks; the model on an input "
             "requiring grad for output Jacobians); check_trace=False because the check runs "
             "the traced graph, which would make the first timed call not the first",
    "compile": "torch.compile(backend='inductor', mode=None, dynamic=None, fullgraph=False): "
               "Dynamo + AOTAutograd + Inductor {kernels} kernels, compiled lazily in the "
               "first timed iteration (compile_s 0); a shorter last batch recompiles once "
               "with a dynamic batch dimension",
}


# The variable-length task with dynamic shapes ("dynamic") in compile mode.
DYNAMIC_COMPILE_CHOICE = (
    "torch.compile(backend='inductor', mode=None, dynamic=True, fullgraph=False): Dynamo + "
    "AOTAutograd + Inductor {kernels} kernels, compiled lazily in the first timed iteration "
    "(compile_s 0), sizes symbolic from the first compilation")

# What Inductor generates per device (MODE_CHOICES["compile"]).
INDUCTOR_KERNELS = {"cpu": "C++/OpenMP", "cuda": "Triton"}


def transform(module, mode: str, example: tuple) -> tuple[Callable, float, dict[str, str]]:
    """The module (or function) as `mode` runs it, the seconds of ahead-of-time work
    (compile_s), and notes for `choices`.

    Parameters stay shared with `module` (scripting, tracing and torch.compile do not copy
    them), so `binds` still names what is differentiated."""
    if mode == "eager":
        return module, 0.0, {}
    if mode == "compile":  # a wrapper: Dynamo traces and Inductor compiles at the first call
        return torch.compile(module, backend="inductor"), 0.0, {}
    if mode not in ("script", "trace"):
        raise UnsupportedCell(f"torch has no mode {mode!r}")
    notes = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        start = time.perf_counter()
        if mode == "script":
            compiled = torch.jit.script(module)
        else:
            compiled = torch.jit.trace(module, example, check_trace=False)
        seconds = time.perf_counter() - start
    tracer = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    if tracer:  # what the trace may have frozen (a Python value of a traced shape)
        notes["tracer_warnings"] = (f"{len(tracer)}, first: "
                                    f"{str(tracer[0].message).splitlines()[0][:200]}")
    return compiled, seconds, notes


def _jacrev(model, rows: int) -> Callable:
    """torch.func.jacrev of the model's first `rows` outputs w.r.t. its input."""
    def jacobian_of(x, aux):
        return torch.func.jacrev(lambda xx: model(xx, aux).reshape(-1)[:rows])(x)
    return jacobian_of


def _inductor_cache(threads: int) -> dict[str, str]:
    """A cold Inductor cache for this cell, under ADBENCH_CACHE_DIR/torch, removed at exit.

    TORCHINDUCTOR_CACHE_DIR is read at every compile, so it is set here, before the lazy
    compilation of the first timed iteration.  The in-process caches are emptied too, as
    Inductor's own fresh_cache() does (a fresh process per cell makes that a no-op in the
    pipeline; in a process running several cells, Inductor would otherwise reuse compiled
    kernels of identical source, and Dynamo would count earlier cells' recompiles)."""
    root = os.environ.get("ADBENCH_CACHE_DIR")
    base = os.path.join(root, "torch") if root else None
    if base:
        os.makedirs(base, exist_ok=True)
    path = tempfile.mkdtemp(prefix="inductor-", dir=base)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    import torch._dynamo
    import torch._inductor.config
    import torch._inductor.utils

    torch._dynamo.reset()
    torch._inductor.utils.clear_caches()
    # Inductor's compile workers: as many as the cell's threads (1: compiled in-process).
    torch._inductor.config.compile_threads = threads
    return {"inductor_cache": "cold: a fresh TORCHINDUCTOR_CACHE_DIR per cell under "
                              + ("ADBENCH_CACHE_DIR/torch" if base else "the system temp "
                                 "directory (ADBENCH_CACHE_DIR unset)")
                              + ", removed at exit",
            "inductor_precompiled_headers": _precompiled_headers(),
            "inductor_compile_threads": str(threads),
            "inductor_cpp_threads": f"{torch.get_num_threads()} (torch.get_num_threads() "
                                    "when the kernels are generated)"}


def _precompiled_headers() -> str:
    """Whether Inductor's precompiled C++ headers (for its CPU kernels) were there before this
    cell.  Torch keeps them in the temp directory whatever TORCHINDUCTOR_CACHE_DIR says, for
    every later process, and building them is part of the first compile (8 s of 20 here):
    run_cell.py gives each cell a temp directory of its own, so every cell builds them."""
    from torch._inductor import codecache, config

    if not config.cpp_cache_precompile_headers:
        return "off (TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS=0)"
    headers = codecache._HEADER_DIR  # {temp dir}/torchinductor_{user}/precompiled_headers
    if os.path.isdir(headers) and any(n.endswith(".gch") for n in os.listdir(headers)):
        return ("warm: built by an earlier process in the same temp directory (measure.py "
                "run without run_cell.py)")
    return "cold: none in the temp directory when the cell started; built by its first compile"


# What torch.compile leaves out of its graphs, per model family (torch._dynamo.explain).
COMPILE_NOTES = {
    "ctc": "aten._ctc_loss has a data-dependent output shape: Dynamo leaves the CTC loss out "
           "of the compiled graph and it runs eagerly",
    "lstm": "Dynamo does not trace nn.LSTM (torch._dynamo.config.allow_rnn=False, the "
            "default; True fails in backward on CPU's mkldnn_rnn_layer): a graph break, the "
            "LSTM runs eagerly and only what follows it is compiled",
}


# The same on a variable-length batch (the sequence tasks' choices["graph"]).
SEQUENCE_COMPILE_NOTES = {
    "lstm": "Dynamo does not trace nn.LSTM (torch._dynamo.config.allow_rnn=False, the "
            "default): LSTMNet.sequence, whose first op it is, runs eagerly as a whole (the "
            "LSTM, the gather at lengths - 1, the dense layer); only the loss is compiled, so "
            "no compiled graph has a time dimension (a new length retraces only the calling "
            "frame, whose guards saw x's shape)",
    "rnn_cell": "the cell's Python loop over range(T) is unrolled into one graph per length: "
                "Dynamo guards on T (dynamic=True or not), so every new length compiles anew",
}


def _require_a_graph(prepared: Prepared, workload: spec.Workload) -> None:
    """Refuse a compile cell whose first call compiled no graph at all.

    torch.compile falls back to eager without an error where Dynamo cannot trace (a graph
    break at the model's first op, jacrev over a graph break): such a cell would time eager
    PyTorch under the torch.compile label.  Dynamo's counters are read around the first
    call (run or derivatives), outside the clock."""
    from torch._dynamo.utils import counters

    checked = []

    def guarded(fn):
        def call(*args):
            if checked:
                return fn(*args)
            before = counters["aot_autograd"]["total"]
            seen = set(counters["unimplemented"]) | set(counters["graph_break"])
            result = fn(*args)
            checked.append(True)
            if counters["aot_autograd"]["total"] == before:
                reasons = [r for r in (*counters["unimplemented"], *counters["graph_break"])
                           if r not in seen]
                why = reasons[0].strip().splitlines()[0] if reasons else "no reason recorded"
                raise UnsupportedCell(
                    f"torch.compile compiled no graph for {workload.model} {workload.task}: "
                    f"Dynamo fell back to eager PyTorch ({why})")
            return result
        return call

    prepared.run = guarded(prepared.run)
    prepared.derivatives = guarded(prepared.derivatives)


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    if mode not in MODE_CHOICES:
        raise UnsupportedCell(f"torch has no mode {mode!r}")
    check_sequence_model(workload)
    dev = _torch_device(device)
    numerics = apply_cuda_numerics(spec.CUDA_NUMERICS) if device == "cuda" else {}
    sync = device_sync(device)
    tdtype = getattr(torch, dtype)
    net, binds = build(workload.spec, spec.make_params(workload), dev, tdtype)
    # Batches on the device up front: data transfer is not part of the timing.
    # A variable-length task's batches also carry each example's true length (int64).
    lengths = ("lengths",) if workload.sequence else ()
    batches = [tuple(_tensor(b[k], dev, tdtype)
                     for k in ("x", "h0" if "h0" in b else "y", *lengths))
               for b in spec.make_batches(workload)]
    cache = _inductor_cache(torch.get_num_threads()) if mode == "compile" else {}
    notes = SEQUENCE_COMPILE_NOTES if workload.sequence else COMPILE_NOTES
    if mode == "compile" and workload.spec.family in notes:
        cache["graph"] = notes[workload.spec.family]
    task = TASK_BUILDERS[workload.task]
    prepared = task(net, binds, batches, workload, sync, mode)
    if mode == "compile":
        _require_a_graph(prepared, workload)
    model_choice = MODE_CHOICES[mode]
    if mode == "compile" and workload.sequence == "dynamic":
        model_choice = DYNAMIC_COMPILE_CHOICE
    prepared.choices.update({
        "model": model_choice.format(kernels=INDUCTOR_KERNELS[device]),
        "inference_mode": inference_mode(net, device),
        **cache, **numerics,
    })
    return prepared


def _tensor(array: np.ndarray, dev, dtype) -> Tensor:
    tensor = torch.from_numpy(array).to(dev)
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


# ================================================================ known failures
@dataclasses.dataclass(frozen=True)
class KnownFailure:
    """A transform that fails on a module with a known error: the cell is refused (from
    inside run(), at the call that fails: no untimed probe calls before the timed loop)."""

    modes: tuple[str, ...]
    task: str
    error: str  # the exception's class name (Dynamo's classes are not imported here)
    pattern: str  # regular expression searched in the exception's message
    reason: str
    models: tuple[str, ...] = ()  # () for any model


KNOWN_FAILURES = (
    KnownFailure(("script", "trace"), "loss_jacobian", "RuntimeError",
                 r"stateless API can't be used with Jitted modules",
                 "torch.func.functional_call (the stateless API, which swaps the parameters "
                 "for the Jacobian's inputs) refuses TorchScript modules"),
    # TorchScript's profiling executor optimises the graph after its profiling runs; the
    # optimised graph of the raw-op cell reads `.data`, which vmap forbids: the third call
    # fails, so every call is guarded (measured on torch 2.13: only rnn_cell).
    KnownFailure(("script", "trace"), "jacobian_vectorized", "RuntimeError",
                 r"accessing `data` under vmap transform is not allowed",
                 "torch.func.jacrev (vmap) cannot transform TorchScript's optimised graph "
                 "once the profiling runs are over", models=("rnn_cell",)),
    # cuDNN's LSTM kernel has no functorch support: vmap reaches its storage (seen on an
    # H100 with torch 2.11, in compile mode; PyTorch issue #110422, open).
    KnownFailure(tuple(spec.FRAMEWORKS["torch"].modes), "jacobian_vectorized",
                 "NotImplementedError", r"Cannot access storage of TensorWrapper",
                 "torch.func.jacrev (vmap) cannot transform cuDNN's LSTM kernel on CUDA "
                 "(PyTorch issue #110422)", models=("lstm",)),
    # Inductor differentiates the jacrev graph once more w.r.t. the attention weights
    # (they require grad); CPU flash attention's backward has no derivative.
    KnownFailure(("compile",), "jacobian_vectorized", "BackendCompilerFailed",
                 r"derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward "
                 r"is not implemented",
                 "torch.compile of torch.func.jacrev over nn.MultiheadAttention: AOTAutograd "
                 "needs the derivative of CPU flash attention's backward, which PyTorch does "
                 "not implement", models=("attention",)),
)


def _known_failure(mode: str, model: str, task: str, exc: Exception) -> KnownFailure | None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    for known in KNOWN_FAILURES:
        if (mode in known.modes and task == known.task and known.error in names
                and (not known.models or model in known.models)
                and re.search(known.pattern, str(exc))):
            return known
    return None


def _refuse_known(fn: Callable, mode: str, workload: spec.Workload, api: str) -> Callable:
    """fn, with a known failure of the mode's transform turned into UnsupportedCell."""
    def call(*args):
        try:
            return fn(*args)
        except Exception as exc:
            known = _known_failure(mode, workload.model, workload.task, exc)
            if known is None:
                raise
            line = next((line for line in str(exc).splitlines()
                         if re.search(known.pattern, line)), str(exc)[:300])
            line = line.strip()
            if not line.startswith(type(exc).__name__):
                line = f"{type(exc).__name__}: {line}"
            raise UnsupportedCell(f"{api} in {mode} mode: {known.reason} ({line})") from exc
    return call


# ================================================================ tasks
def freeze(binds, workload) -> list:
    """The binds of the parameters the task trains (backends.trained_params); the others
    get requires_grad=False, before any transform, so autograd records no derivative
    through them.  One torch parameter per spec parameter wherever a model has a frozen
    part (attention's packed in_proj, the exception, has none)."""
    trained = trained_params(workload)
    if len(trained) == len(workload.spec.params):
        return binds
    for i, (param, _, _) in enumerate(binds):
        if i not in trained:
            param.requires_grad_(False)
    return [binds[i] for i in trained]


class RetainedGraph:
    """backward_retained's last graph: backward(retain_graph=True) keeps its buffers, and the
    loss that reaches them is held after the step returns, until the next step starts
    (released there, outside the clock)."""

    def __init__(self):
        self.loss = None

    def backward(self, loss: Tensor) -> None:
        loss.backward(retain_graph=True)
        self.loss = loss

    def release(self) -> None:
        self.loss = None


def backward_task(net, binds, batches, workload, sync, mode) -> Prepared:
    binds = freeze(binds, workload)
    params = [p for p, _, _ in binds]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    f, compile_s, notes = transform(net, mode, batch(0))
    retained = RetainedGraph() if workload.task == "backward_retained" else None
    backward = retained.backward if retained else Tensor.backward

    def clear():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None
        if retained:
            retained.release()

    def run(i, clock):
        clear()
        return split_timer(lambda: f(*batch(i)), backward, sync, clock)

    def derivatives(i):
        clear()
        loss = f(*batch(i))
        backward(loss)
        return float(loss.detach()), to_canonical(binds, [p.grad for p in params])

    return Prepared(run, derivatives, {**BACKWARD_CHOICES[workload.task], **notes}, compile_s)


BACKWARD_CHOICES = {
    "backward": {"backward": "loss.backward(), .grad cleared outside the clock"},
    "backward_frozen": {"backward": "loss.backward(), .grad cleared outside the clock",
                        "frozen": "the frozen part's parameters requires_grad_(False) before "
                                  "the mode's transform: autograd records nothing through it"},
    "backward_retained": {"backward": "loss.backward(retain_graph=True), .grad cleared "
                                      "outside the clock",
                          "retained": "the step's loss (and through it its graph's saved "
                                      "tensors) held after the step, released outside the "
                                      "clock when the next step starts"},
}


def _jacobian_inputs(batches, workload):
    """Each example as a leaf requiring grad; the rows' one-hot cotangents, made once."""
    examples = [(x.clone().requires_grad_(True), aux) for x, aux in batches]
    rows = workload.jacobian_rows
    eye = torch.eye(rows, dtype=examples[0][0].dtype, device=examples[0][0].device)
    return examples, rows, eye


def _as_jacobian(rows_of_grads: Tensor, workload) -> np.ndarray:
    return rows_of_grads.detach().cpu().numpy().reshape(workload.spec.jacobian_shape(
        workload.jacobian_rows))


def jacobian_rows_task(net, binds, batches, workload, sync, mode) -> Prepared:
    examples, rows, eye = _jacobian_inputs(batches, workload)
    model, compile_s, notes = transform(net.model, mode, examples[0])  # x requires grad
    example = lambda i: examples[i % len(examples)]  # noqa: E731

    def forward(i):
        x, aux = example(i)
        return x, model(x, aux).reshape(-1)[:rows]

    def row_by_row(x_out):
        x, out = x_out
        return torch.stack([torch.autograd.grad(out, x, eye[r], retain_graph=True)[0]
                            for r in range(rows)])

    def run(i, clock):
        return split_timer(lambda: forward(i), row_by_row, sync, clock)

    def derivatives(i):
        return float("nan"), [_as_jacobian(row_by_row(forward(i)), workload)]

    return Prepared(run, derivatives, {"jacobian": "Python loop of torch.autograd.grad, "
                                       "one-hot grad_outputs, retain_graph=True", **notes},
                    compile_s)


def jacobian_vectorized_task(net, binds, batches, workload, sync, mode) -> Prepared:
    examples, rows, _ = _jacobian_inputs(batches, workload)
    choices = {"jacobian": "torch.func.jacrev (vmap over vector-Jacobian products)"}
    if mode == "compile":
        # torch.func.jacrev over a compiled module runs eagerly: Dynamo captures no graph
        # under a functorch transform (torch 2.13: no graph, no error, no warning).  The
        # transform is compiled as a whole instead, as PyTorch advises (issue #128711).
        jacobian_of, compile_s, notes = transform(_jacrev(net.model, rows), mode, ())
        choices["jacobian"] = ("torch.compile(torch.func.jacrev(model)): the whole vectorised "
                               "Jacobian traced by Dynamo and compiled by Inductor (jacrev "
                               "over a compiled module would silently run eagerly)")
    else:
        model, compile_s, notes = transform(net.model, mode, examples[0])
        jacobian_of = _jacrev(model, rows)
    choices.update(notes)

    def plain(i):
        x, aux = examples[i % len(examples)]
        return jacobian_of(x.detach(), aux)

    jacobian = _refuse_known(plain, mode, workload, "torch.func.jacrev")

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        return float("nan"), [_as_jacobian(jacobian(i), workload)]

    return Prepared(run, derivatives, choices, compile_s)


def loss_jacobian_task(net, binds, batches, workload, sync, mode) -> Prepared:
    params = [p for p, _, _ in binds]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    f, compile_s, notes = transform(net, mode, batch(0))
    names = {id(p): n for n, p in f.named_parameters()}  # compile: "_orig_mod." prefixed

    def loss_function(i):
        args = batch(i)
        return lambda *values: torch.func.functional_call(
            f, {names[id(p)]: v for p, v in zip(params, values)}, args)

    def plain(i):
        return torch.autograd.functional.jacobian(loss_function(i), tuple(params))

    jacobian = _refuse_known(plain, mode, workload,
                             "torch.autograd.functional.jacobian over the parameters")

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        grads = jacobian(i)
        with torch.no_grad():  # the eager module: a compiled one would recompile for no_grad
            loss = float(net(*batch(i)))
        return loss, to_canonical(binds, list(grads))

    return Prepared(run, derivatives, {"jacobian": "torch.autograd.functional.jacobian "
                                       "(vectorize=False) of the loss via "
                                       "torch.func.functional_call", **notes}, compile_s)


def forward_task(net, binds, batches, workload, sync, mode) -> Prepared:
    """The loss alone (spec.FORWARD_TASK) under torch.no_grad(): autograd records nothing, as
    in a user's evaluation; the mode transforms WithLoss as for backward (torch.compile
    compiles its no-grad graph at the first call)."""
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    with torch.no_grad():  # a trace records the graph it is traced in
        f, compile_s, notes = transform(net, mode, batch(0))

    def loss(i):
        with torch.no_grad():
            return f(*batch(i))

    def run(i, clock):
        return whole_timer(lambda: loss(i), sync, clock)

    def derivatives(i):
        value = loss(i)
        return loss_as_array(float(value), str(value.dtype).removeprefix("torch."))

    return Prepared(run, derivatives, {"forward": "WithLoss(model) under torch.no_grad()",
                                       **notes}, compile_s)


# ================================================================ variable-length tasks
def _sequence_refusal(mode: str, strategy: str, workload: spec.Workload) -> str | None:
    """Why a mode cannot run a variable-length strategy as its users would, or would compute
    a wrong thing silently; None where it can."""
    if strategy == "dynamic" and mode != "compile":
        return {
            "eager": "eager PyTorch has no dynamic-shape option and needs none: define-by-run "
                     "runs every batch at its own length, which is the true-length task "
                     "(backward_varlen)",
            "script": "torch.jit.script has no dynamic-shape option: a scripted graph runs "
                      "every length as it is (the true-length task, backward_varlen); "
                      "TorchScript's one shape setting, torch.jit.set_fusion_strategy, "
                      "concerns its fuser and already defaults to dynamic specialisations",
            "trace": "torch.jit.trace has no dynamic-shape option: it records the operations "
                     "of one call on one example (the lengths a trace serves as it is: "
                     "backward_varlen)",
        }[mode]
    if mode == "trace" and workload.spec.family == "rnn_cell" and strategy != "padded":
        first = spec.padded_length(strategy, workload.sequence_length(0))
        return (f"torch.jit.trace unrolls the RNN cell's Python loop over range(T) at the "
                f"first batch's length ({first} steps): a longer batch would silently run "
                f"only {first} of its steps (a wrong gradient), a shorter one fail; only the "
                f"padded task (every batch {spec.SEQUENCE_LENGTHS[1]} steps) has one length")
    return None


def _shape_policy(mode: str, strategy: str, family: str) -> str:
    """How the mode serves the batches' lengths (choices["shape_policy"])."""
    if mode == "eager":
        return "define-by-run: each batch runs at the steps it has, no shape to fix"
    if mode == "script":
        loop = ("the RNN cell's loop over range(T) a TorchScript loop" if family == "rnn_cell"
                else "nn.LSTM one aten::lstm op over the whole sequence")
        return (f"one torch.jit.script graph for every length ({loop}); the profiling "
                "executor's default shape specialisation, nothing set")
    if mode == "trace":
        if family == "rnn_cell":
            return (f"one torch.jit.trace of the loop unrolled over {spec.SEQUENCE_LENGTHS[1]} "
                    "steps, the length of every (padded) batch")
        return ("one torch.jit.trace on the first batch for every length: nn.LSTM is one "
                "aten::lstm op over the whole sequence, the gather reads the lengths input")
    if strategy == "dynamic":
        return ("torch.compile(dynamic=True): sizes symbolic from the first compilation, "
                "except those the code specialises on")
    return ("torch.compile(dynamic=None), the default: the first shape compiles static, a "
            "new one recompiles with the changed size symbolic (automatic dynamic) unless the "
            "code specialises on it")


def _sequence_shapes(workload: spec.Workload) -> str:
    """The batch lengths (time steps as the strategy pads them) of the cell's iterations."""
    steps = sorted({spec.padded_length(workload.sequence, workload.sequence_length(i))
                    for i in range(workload.total_iterations)})
    return (f"{len(steps)} distinct over {workload.total_iterations} iterations "
            f"(warm-up included): {', '.join(map(str, steps))}")


def _no_trace_count() -> None:
    """Prepared.traces where the mode exposes no count: TorchScript (script, trace) keeps
    its profiling executor's shape specialisations to itself."""
    return None


def _dynamo_frames() -> int:
    """Frames Dynamo has traced and compiled in this process (each recompilation counted,
    whether or not it produced a graph)."""
    from torch._dynamo.utils import counters

    return counters["frames"]["ok"]


def _recompile_limit_hits() -> int:
    """Times Dynamo gave up recompiling a frame at its recompile limit (cache_size_limit)."""
    from torch._dynamo.utils import counters

    return sum(n for reason, n in counters["unimplemented"].items()
               if "recompile limit" in reason.lower() or "cache size limit" in reason.lower())


def sequence_task(net, binds, batches, workload, sync, mode) -> Prepared:
    """A variable-length task: the backward step of SequenceLoss(model) on batches of the
    strategy's lengths (batch = (x, aux, lengths)), as backward_task times it."""
    strategy, family = workload.sequence, workload.spec.family
    why = _sequence_refusal(mode, strategy, workload)
    if why:
        raise UnsupportedCell(why)
    if net.loss not in ("l2", "sum") or not hasattr(net.model, "sequence"):
        raise UnsupportedCell(f"torch backend reads no sequence with {workload.model}")
    binds = freeze(binds, workload)
    params = [p for p, _, _ in binds]
    module = SequenceLoss(net.model, net.loss)
    module.training = net.training  # not .eval(): on CUDA, cuDNN's LSTM stays in train mode
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    if mode == "compile" and strategy == "dynamic":  # lazily, at the first timed call
        f, compile_s, notes = torch.compile(module, backend="inductor", dynamic=True), 0.0, {}
    else:
        f, compile_s, notes = transform(module, mode, batch(0))
    choices = {"backward": "loss.backward(), .grad cleared outside the clock",
               "sequence_strategy": strategy,
               "sequence_shapes": _sequence_shapes(workload),
               "shape_policy": _shape_policy(mode, strategy, family),
               "sequence_model": SEQUENCE_MODELS[family], **notes}

    def clear():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None

    def run(i, clock):
        clear()
        return split_timer(lambda: f(*batch(i)), Tensor.backward, sync, clock)

    def derivatives(i):
        clear()
        loss = f(*batch(i))
        loss.backward()
        return float(loss.detach()), to_canonical(binds, [p.grad for p in params])

    traces = _no_trace_count  # script, trace
    if mode == "eager":
        traces = lambda: 0  # noqa: E731
    elif mode == "compile":
        # Past torch._dynamo.config.recompile_limit recompilations of a frame, Dynamo runs
        # it eagerly for every shape it has not compiled, without an error: PyTorch's
        # default behaviour, so the cell is timed, not refused (_require_a_graph still
        # refuses one whose first call compiled nothing); the fallback is recorded in the
        # choices when it happens (outside the clock), and `traces` stops growing there.
        from torch._dynamo import config as dynamo_config

        limit = dynamo_config.recompile_limit
        choices["recompile_limit"] = (
            f"torch._dynamo.config.recompile_limit={limit}: a frame compiled {limit} times "
            "runs eagerly for every shape it has not compiled (Dynamo's fallback, no error); "
            "choices['compile_fallback'] says whether and when that happened")
        frames, hits = _dynamo_frames(), _recompile_limit_hits()
        traces = lambda: _dynamo_frames() - frames  # noqa: E731
        timed = run

        def run(i, clock):
            sample = timed(i, clock)
            if "compile_fallback" not in choices and _recompile_limit_hits() > hits:
                choices["compile_fallback"] = (
                    f"recompile_limit hit at iteration {i} (a batch of "
                    f"{batch(i)[0].shape[1]} steps): from there a length not compiled "
                    "before ran eagerly, under the torch.compile label")
            return sample

    return Prepared(run, derivatives, choices, compile_s, traces)


# How each model reads a variable-length batch (choices["sequence_model"]).
SEQUENCE_MODELS = {
    "lstm": "nn.LSTM over the batch's T steps, each example's output gathered at lengths - 1, "
            "then the dense layer and the l2 loss",
    "rnn_cell": "the cell unrolled in a Python loop over the batch's T steps from h0, "
                "h = torch.where(t < lengths, h_new, h), loss sum(h)",
}


TASK_BUILDERS = {
    "backward": backward_task,
    "backward_frozen": backward_task,
    "backward_retained": backward_task,
    "jacobian_rows": jacobian_rows_task,
    "jacobian_vectorized": jacobian_vectorized_task,
    "loss_jacobian": loss_jacobian_task,
    spec.FORWARD_TASK: forward_task,
    **{task: sequence_task for task in spec.SEQUENCE_TASKS},
}
