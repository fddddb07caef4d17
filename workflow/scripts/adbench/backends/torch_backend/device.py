"""PyTorch's environment and device: threads, versions, the device (CPU, or the GPU PyTorch
sees), the GPU probes, CUDA numerics, and the sync before a clock read."""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import torch

from adbench.backends import C_HEAP, Backend, StepMemory, device_not_visible, no_sync


# ================================================================ the device a cell runs on
def torch_device(device: str) -> torch.device:
    """The torch.device of a cell; a cuda cell that sees no GPU fails (DeviceNotVisible)."""
    if device == "cuda" and not torch.cuda.is_available():
        raise device_not_visible("torch", no_gpu_words(), *TorchDevice.cuda_runtime())
    return torch.device(device)


def no_gpu_words() -> str:
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


def on_gpu(device: str) -> bool:
    return device == "cuda" and torch.cuda.is_available()


# ================================================================ sync and numerics
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


# ================================================================ the Backend's device half
class TorchDevice(Backend):
    """Threads, versions, the device's name and the GPU probes (torch.cuda's allocator)."""

    def configure_threads(self, threads: int) -> dict:
        torch.set_num_threads(threads)
        if torch.get_num_interop_threads() != threads:  # settable once, before parallel work
            torch.set_num_interop_threads(threads)
        return {"intra_op": torch.get_num_threads(),
                "inter_op": torch.get_num_interop_threads()}

    def versions(self) -> dict[str, str]:
        info = {"torch": torch.__version__, "numpy": np.__version__}
        if torch.version.cuda:
            info["cuda"] = torch.version.cuda
        return info

    def device_name(self, device: str) -> str:
        return torch.cuda.get_device_name(0) if on_gpu(device) else "cpu"

    @staticmethod
    def cuda_runtime() -> tuple[str | None, str]:
        """The CUDA runtime this PyTorch build ships and runs (None: a CPU build)."""
        return torch.version.cuda, "torch.version.cuda"

    def gpu_info(self, device: str) -> dict | None:
        """The GPU a cuda cell runs on, as PyTorch sees it (driver: provenance.gpu,
        nvidia-smi)."""
        if not on_gpu(device):
            return None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        cudnn = torch.backends.cudnn.version()  # None where PyTorch has no cuDNN
        return {"name": props.name, "total_memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "cuda_version": torch.version.cuda,
                "cudnn_version": str(cudnn) if cudnn else None,
                "peak_memory_scope": "torch.cuda.max_memory_allocated (tensors), reset at the "
                                     "first measured iteration (warm-up excluded)"}

    def reset_peak_memory(self, device: str) -> None:
        """Outside the clock, before the timed loop: the peak is then the loop's own."""
        if on_gpu(device):
            torch.cuda.reset_peak_memory_stats()

    def peak_memory(self, device: str) -> int | None:
        return int(torch.cuda.max_memory_allocated()) if on_gpu(device) else None

    def peak_reserved_memory(self, device: str) -> int | None:
        """The caching allocator's peak reserved memory (reset with the allocated peak)."""
        return int(torch.cuda.max_memory_reserved()) if on_gpu(device) else None

    def device_memory_in_use(self, device: str) -> int | None:
        """The tensors' memory still allocated now (a retained graph's buffers included)."""
        return int(torch.cuda.memory_allocated()) if on_gpu(device) else None

    def step_memory(self, device: str) -> StepMemory:
        """The C heap on the CPU (PyTorch's CPU tensors are malloc's, freed on release:
        tests/test_step_memory.py finds a retained graph's saved activations in it); on a
        GPU, the caching allocator's bytes in live tensors (freed blocks are not counted, so
        its pool needs no emptying)."""
        if device != "cuda":
            return C_HEAP
        return StepMemory("torch.cuda.memory_allocated(): the caching allocator's bytes in "
                          "live tensors", in_use=lambda: self.device_memory_in_use(device))
