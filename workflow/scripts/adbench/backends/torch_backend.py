"""PyTorch backend: torch.nn models; eager and TorchScript modes; every task of the spec.

Models are nn.Modules as PyTorch users write them (000 Fig. 1), loaded with the spec's
canonical arrays.  Every model takes `(x, aux)`: `aux` is the batch's second array (the
previous hidden state of rnn_cell; the targets otherwise, which the model ignores), so one
scripted `WithLoss(model)` module serves every model.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adbench import spec
from adbench.backends import Prepared, UnsupportedCell
from adbench.timing import split_timer, whole_timer


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
    return [np.ascontiguousarray(canonical[i]) for i in range(len(canonical))]


# ================================================================ preparation
def _torch_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedCell("device cuda requested but torch.cuda.is_available() is False")
    return torch.device(device)


def build(model: spec.ModelSpec, arrays, dev, dtype, mode: str):
    """WithLoss(model) with the arrays loaded, on the device, in inference mode (batch norm
    uses its running statistics); scripted in script mode."""
    if model.family not in FAMILIES:
        raise UnsupportedCell(f"torch backend has no model family {model.family!r}")
    net = WithLoss(FAMILIES[model.family](model), model.loss).to(dtype)
    binds = bindings(net.model, model)
    load_params(binds, arrays, dtype)
    net = net.to(dev).eval()
    if mode == "script":
        net = torch.jit.script(net)
    elif mode != "eager":
        raise UnsupportedCell(f"torch has no mode {mode!r}")
    return net, binds


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    dev = _torch_device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    tdtype = getattr(torch, dtype)
    net, binds = build(workload.spec, spec.make_params(workload), dev, tdtype, mode)
    # Batches on the device up front: data transfer is not part of the timing.
    batches = [tuple(_tensor(b[k], dev, tdtype) for k in ("x", "h0" if "h0" in b else "y"))
               for b in spec.make_batches(workload)]
    task = TASK_BUILDERS[workload.task]
    prepared = task(net, binds, batches, workload, sync)
    prepared.choices.update({
        "model": "torch.nn modules" + (", torch.jit.script of model + loss"
                                       if mode == "script" else ""),
        "inference_mode": "module.eval(): batch norm uses running statistics",
    })
    return prepared


def _tensor(array: np.ndarray, dev, dtype) -> Tensor:
    tensor = torch.from_numpy(array).to(dev)
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


# ================================================================ tasks
# Calls made at preparation to find out whether a transform works on a module: a scripted
# module is optimised only after TorchScript's profiling runs, and may fail only then.
PROBE_CALLS = 3
PROBE_NOTE = f"{PROBE_CALLS} untimed calls at preparation check that the transform works"


def backward_task(net, binds, batches, workload, sync) -> Prepared:
    params = [p for p, _, _ in binds]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def clear():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None

    def run(i, clock):
        clear()
        return split_timer(lambda: net(*batch(i)), Tensor.backward, sync, clock)

    def derivatives(i):
        clear()
        loss = net(*batch(i))
        loss.backward()
        return float(loss.detach()), to_canonical(binds, [p.grad for p in params])

    return Prepared(run, derivatives, {"backward": "loss.backward(), .grad cleared "
                                       "outside the clock"})


def _jacobian_inputs(batches, workload):
    """Each example as a leaf requiring grad; the rows' one-hot cotangents, made once."""
    examples = [(x.clone().requires_grad_(True), aux) for x, aux in batches]
    rows = workload.jacobian_rows
    eye = torch.eye(rows, dtype=examples[0][0].dtype, device=examples[0][0].device)
    return examples, rows, eye


def _as_jacobian(rows_of_grads: Tensor, workload) -> np.ndarray:
    return rows_of_grads.detach().cpu().numpy().reshape(workload.spec.jacobian_shape(
        workload.jacobian_rows))


def jacobian_rows_task(net, binds, batches, workload, sync) -> Prepared:
    examples, rows, eye = _jacobian_inputs(batches, workload)
    model = net.model
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
                                       "one-hot grad_outputs, retain_graph=True"})


def jacobian_vectorized_task(net, binds, batches, workload, sync) -> Prepared:
    examples, rows, _ = _jacobian_inputs(batches, workload)
    model = net.model

    def jacobian(i):
        x, aux = examples[i % len(examples)]
        return torch.func.jacrev(lambda xx: model(xx, aux).reshape(-1)[:rows])(x.detach())

    try:  # torch.func cannot transform every module: TorchScript's optimised graphs
        for i in range(PROBE_CALLS):  # (made after its profiling runs) access .data
            jacobian(i)
    except Exception as exc:  # recorded as the reason; nothing is silently skipped
        raise UnsupportedCell(f"torch.func.jacrev on this {type(model).__name__}: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        return float("nan"), [_as_jacobian(jacobian(i), workload)]

    return Prepared(run, derivatives, {"jacobian": "torch.func.jacrev (vmap over "
                                       "vector-Jacobian products)", "probe": PROBE_NOTE})


def loss_jacobian_task(net, binds, batches, workload, sync) -> Prepared:
    params = [p for p, _, _ in binds]
    names = {id(p): n for n, p in net.named_parameters()}
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def loss_function(i):
        args = batch(i)
        return lambda *values: torch.func.functional_call(
            net, {names[id(p)]: v for p, v in zip(params, values)}, args)

    def jacobian(i):
        return torch.autograd.functional.jacobian(loss_function(i), tuple(params))

    try:
        for i in range(PROBE_CALLS):
            jacobian(i)
    except Exception as exc:
        raise UnsupportedCell(f"torch.autograd.functional.jacobian over the parameters of "
                              f"this {type(net).__name__}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0]}") from exc

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        with torch.no_grad():
            loss = float(net(*batch(i)))
        return loss, to_canonical(binds, list(jacobian(i)))

    return Prepared(run, derivatives, {"jacobian": "torch.autograd.functional.jacobian "
                                       "(vectorize=False) of the loss via "
                                       "torch.func.functional_call", "probe": PROBE_NOTE})


TASK_BUILDERS = {
    "backward": backward_task,
    "jacobian_rows": jacobian_rows_task,
    "jacobian_vectorized": jacobian_vectorized_task,
    "loss_jacobian": loss_jacobian_task,
}
