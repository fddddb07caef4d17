"""TensorFlow's environment and device: thread pools, versions, the device (CPU, or the GPU
TensorFlow sees), the GPU probes (tf.config.experimental's memory info), CUDA numerics,
oneDNN, and the sync before a clock read."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import tensorflow as tf

from adbench.backends import (C_HEAP, Backend, StepMemory, device_not_visible,
                              memory_not_measurable, no_sync)

keras = tf.keras  # Keras 3, as `import keras` gives TensorFlow users


# ================================================================ the device a cell runs on
def gpus() -> list:
    return tf.config.list_physical_devices("GPU")


def on_gpu(device: str) -> bool:
    return device == "cuda" and bool(gpus())


def check_device(device: str) -> None:
    """A cuda cell that sees no GPU fails (DeviceNotVisible).  TensorFlow says why only in
    its log (the cell's log: "Cannot dlopen some GPU libraries", a driver too old, ...);
    here, what it reports."""
    if device == "cuda" and not gpus():
        raise device_not_visible(
            "tensorflow", "tf.config.list_physical_devices('GPU') is [] "
            f"(tf.test.is_built_with_cuda() is {tf.test.is_built_with_cuda()}; TensorFlow's "
            "reasons are in the cell's log)", *TensorFlowDevice.cuda_runtime())


def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels on CPU (TF_ENABLE_ONEDNN_OPTS, default on)."""
    from tensorflow.python.util import _pywrap_util_port  # no public API reports it

    return bool(_pywrap_util_port.IsMklEnabled())


# ================================================================ sync and numerics
def device_sync(device: str) -> Callable[[], None]:
    """What the timer calls before every clock read: GPU kernels run asynchronously."""
    return tf.test.experimental.sync_devices if device == "cuda" else no_sync


def _force_xla_flag(name: str, value: str) -> None:
    """XLA_FLAGS with `name` set to `value`, the user's other flags kept."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(name)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{name}={value}"])


def apply_cuda_numerics(numerics: dict) -> dict[str, str]:
    """spec.CUDA_NUMERICS in TensorFlow's switches, set before the first op; returns what is
    now in force (read back) for the cell's choices."""
    tf.config.experimental.enable_tensor_float_32_execution(bool(numerics["tf32"]))
    autotune = "1" if numerics["cudnn_autotune"] else "0"
    # Read from the environment whenever a cuDNN kernel is constructed (tsl/util/use_cudnn.cc
    # caches nothing), so setting them before the first op is in time.
    os.environ["TF_CUDNN_USE_AUTOTUNE"] = autotune
    os.environ["TF_CUDNN_RNN_USE_AUTOTUNE"] = autotune  # the LSTM's cuDNN kernel
    if not numerics["cudnn_autotune"]:  # mode xla: XLA parses XLA_FLAGS at its first compile
        _force_xla_flag("--xla_gpu_autotune_level", "0")
    # Settable only before the GPUs are initialised (the first op); a task that runs the
    # allocator as it comes (spec.cuda_numerics) leaves TensorFlow's default: no growth.
    growth = numerics.get("tf_memory_growth")
    for gpu in gpus() if growth is not None else []:
        if tf.config.experimental.get_memory_growth(gpu) != bool(growth):
            tf.config.experimental.set_memory_growth(gpu, bool(growth))
    return {
        "cuda_tf32": "tf.config.experimental.tensor_float_32_execution_enabled()="
                     f"{tf.config.experimental.tensor_float_32_execution_enabled()}",
        "cuda_autotune": f"TF_CUDNN_USE_AUTOTUNE={os.environ['TF_CUDNN_USE_AUTOTUNE']}, "
                         f"TF_CUDNN_RNN_USE_AUTOTUNE={os.environ['TF_CUDNN_RNN_USE_AUTOTUNE']}"
                         f", XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        "cuda_memory": "tf.config.experimental.get_memory_growth="
                       f"{[tf.config.experimental.get_memory_growth(g) for g in gpus()]}"
                       + (" (TensorFlow's default, left unset)" if growth is None else ""),
    }


# ================================================================ the GPU's memory
def gpu_memory_info(device: str, key: str) -> int | None:
    """One entry of tf.config.experimental.get_memory_info('GPU:0') on a cuda cell ('current':
    bytes allocated now, 'peak': since the last reset); None elsewhere."""
    if not on_gpu(device):
        return None
    return int(tf.config.experimental.get_memory_info("GPU:0")[key])


# ================================================================ the memory a step keeps
# TensorFlow's BFC allocator (the GPU's, and the CPU's while oneDNN is on: MklCPUAllocator
# pools the larger tensors in one) hands a tensor a whole free chunk when the chunk is under
# twice its size, and counts chunks: get_memory_info's 'current' read 480 KiB for the
# 261 KiB of a retained mlp512 graph's activations (oneDNN on, TensorFlow 2.21), and 13-18%
# over 40 tensors of known sizes.  Its pool never goes back to the C heap, which therefore
# does not see a freed tensor either.
BFC_CHUNKS = ("TensorFlow's BFC allocator ({where}) counts the chunks it hands out, up to "
              "twice what a tensor asks for (get_memory_info read 480 KiB for the 261 KiB "
              "of a retained mlp512 graph's activations), and never returns its pool to the "
              "C heap, so neither reading is the bytes a step keeps")


class TensorFlowDevice(Backend):
    """Thread pools, versions, the device's name and the GPU probes (TensorFlow's allocator
    on GPU:0, through tf.config.experimental's memory info)."""

    def configure_threads(self, threads: int) -> dict:
        """Thread pools; settable before TensorFlow's first op only (TF raises RuntimeError
        after), so a setting already in force is left alone.

        They bound XLA too (mode xla): TensorFlow's XLA launch op runs the compiled
        executable with the device's intra-op Eigen pool.  Measured on TF 2.21 with
        per-thread CPU times of a timed XLA loop: at 1 thread one thread is busy (one core),
        at 2 two pool workers join the calling thread; XLA_FLAGS'
        --xla_cpu_multi_thread_eigen=false changes nothing at 1 thread, so no XLA flag is
        set.  The compiling first call keeps two more threads busy (XLA's CPU compiler has a
        process-wide LLVM codegen pool of min(32, cores)); neither
        --xla_cpu_multi_thread_eigen nor --xla_cpu_parallel_codegen_split_count=1 bounds
        them: only CPU affinity would."""
        threading = tf.config.threading
        if threading.get_intra_op_parallelism_threads() != threads:
            threading.set_intra_op_parallelism_threads(threads)
        if threading.get_inter_op_parallelism_threads() != threads:
            threading.set_inter_op_parallelism_threads(threads)
        return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}

    def versions(self) -> dict[str, str]:
        info = {"tensorflow": tf.__version__, "keras": keras.__version__,
                "numpy": np.__version__}
        build = tf.sysconfig.get_build_info()
        if build.get("cuda_version"):
            info["cuda"] = str(build["cuda_version"])
        return info

    def device_name(self, device: str) -> str:
        if on_gpu(device):
            details = tf.config.experimental.get_device_details(gpus()[0])
            return str(details.get("device_name", "GPU:0"))
        return "cpu"

    @staticmethod
    def cuda_runtime() -> tuple[str | None, str]:
        """The CUDA TensorFlow was built with and loads (None: a CPU build)."""
        return (tf.sysconfig.get_build_info().get("cuda_version"),
                "tf.sysconfig.get_build_info()['cuda_version']")

    def gpu_info(self, device: str) -> dict | None:
        """The GPU a cuda cell runs on, as TensorFlow sees it; CUDA and cuDNN are the versions
        TensorFlow was built with (its total memory: provenance.gpu, from nvidia-smi)."""
        if not on_gpu(device):
            return None
        details = tf.config.experimental.get_device_details(gpus()[0])
        build = tf.sysconfig.get_build_info()
        capability = details.get("compute_capability")
        return {"name": details.get("device_name"),
                "compute_capability": ".".join(map(str, capability)) if capability else None,
                "cuda_version": build.get("cuda_version"),
                "cudnn_version": build.get("cudnn_version"),
                "peak_memory_scope": "tf.config.experimental.get_memory_info('GPU:0')"
                                     "['peak'], reset at the first measured iteration "
                                     "(warm-up excluded)"}

    def reset_peak_memory(self, device: str) -> None:
        """Outside the clock, before the timed loop: the peak is then the loop's own."""
        if on_gpu(device):
            tf.config.experimental.reset_memory_stats("GPU:0")

    def peak_memory(self, device: str) -> int | None:
        return gpu_memory_info(device, "peak")

    def device_memory_in_use(self, device: str) -> int | None:
        """What TensorFlow's allocator holds for tensors on the GPU now (a persistent tape's
        saved tensors included): get_memory_info's 'current'."""
        return gpu_memory_info(device, "current")

    def step_memory(self, device: str) -> StepMemory:
        """The C heap on a CPU whose oneDNN is off (TensorFlow's CPU allocator is then
        malloc's: tests/test_step_memory.py finds a persistent tape's saved activations in
        it); not measurable where a BFC pool serves the tensors (BFC_CHUNKS): the GPU, and
        the CPU with oneDNN on (TensorFlow's default)."""
        if device == "cuda":
            return memory_not_measurable(BFC_CHUNKS.format(where="GPU:0"))
        if onednn_enabled():
            return memory_not_measurable(BFC_CHUNKS.format(
                where="the CPU's, with oneDNN on: MklCPUAllocator"))
        return C_HEAP
