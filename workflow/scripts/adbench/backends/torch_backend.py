"""PyTorch backend: eager (loss.backward) and TorchScript (scripted whole step)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import torch

from adbench.backends import Prepared, UnsupportedCell
from adbench.spec import Workload, make_batches, make_weights
from adbench.timing import split_timer, whole_timer


def configure_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)


def versions() -> dict[str, str]:
    info = {"torch": torch.__version__, "numpy": np.__version__}
    if torch.version.cuda:
        info["cuda"] = torch.version.cuda
    return info


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return "cpu"


def mlp_forward(x: torch.Tensor, params: List[torch.Tensor]) -> torch.Tensor:
    n_layers = len(params) // 2
    for i in range(n_layers):
        x = torch.matmul(x, params[2 * i]) + params[2 * i + 1]
        if i < n_layers - 1:
            x = torch.relu(x)
    return x


def mlp_loss(x: torch.Tensor, y: torch.Tensor, params: List[torch.Tensor]) -> torch.Tensor:
    return torch.norm(y - mlp_forward(x, params))


def whole_step(
    x: torch.Tensor, y: torch.Tensor, params: List[torch.Tensor]
) -> Tuple[torch.Tensor, List[Optional[torch.Tensor]]]:
    loss = mlp_loss(x, y, params)
    grads = torch.autograd.grad([loss], params)
    return loss, grads


def _torch_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedCell("device cuda requested but torch.cuda.is_available() is False")
    return torch.device(device)


def prepare(workload: Workload, mode: str, device: str) -> Prepared:
    dev = _torch_device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # All batches moved to the device up front: data transfer is not part of the timing.
    batches = [(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
               for x, y in make_batches(workload)]
    params = [
        torch.from_numpy(array).to(dev).requires_grad_(True)
        for layer in make_weights(workload)
        for array in layer
    ]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def clear_grads():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None

    if mode == "eager":

        def run(i, clock):
            clear_grads()
            return split_timer(lambda: mlp_loss(*batch(i), params), torch.Tensor.backward,
                               sync, clock)

        def gradients(i):
            clear_grads()
            loss = mlp_loss(*batch(i), params)
            loss.backward()
            return float(loss.detach()), [p.grad.cpu().numpy() for p in params]

    elif mode == "script":
        scripted = torch.jit.script(whole_step)

        def run(i, clock):
            return whole_timer(lambda: scripted(*batch(i), params), sync, clock)

        def gradients(i):
            loss, grads = scripted(*batch(i), params)
            return float(loss.detach()), [g.detach().cpu().numpy() for g in grads]

    else:
        raise UnsupportedCell(f"torch has no mode {mode!r}")
    return Prepared(run=run, gradients=gradients)
