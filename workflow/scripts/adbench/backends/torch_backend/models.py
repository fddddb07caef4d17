"""PyTorch's models: nn.Modules as PyTorch users write them (000 Fig. 1), each taking
`(x, aux)` (aux: rnn_cell's previous hidden state, else the targets, which the model ignores),
WithLoss (the model and its loss) and SequenceLoss (the same on a variable-length batch), the
spec's canonical arrays bound to the modules' parameters (layouts converted once, at
loading, and gradients back), and the batches as tensors on the device."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adbench import spec


# ================================================================ the model families
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


# ================================================================ building on a device
def build(model: spec.ModelSpec, arrays, dev, dtype):
    """WithLoss(model) with the arrays loaded, on the device, in inference mode (batch norm
    uses its running statistics).  Eager: a mode's transform is applied per task, to the
    module the task calls (tasks.transform)."""
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


def as_tensor(array: np.ndarray, dev, dtype) -> Tensor:
    """A batch's array on the device; floating point in the cell's dtype, integers kept."""
    tensor = torch.from_numpy(array).to(dev)
    return tensor.to(dtype) if tensor.is_floating_point() else tensor
