"""JAX's environment and device: XLA's CPU threads, the versions, the device (CPU, or the GPU
of the CUDA plugin), the GPU probes, CUDA numerics, and the sync before a clock read."""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata

import jax
import numpy as np

from adbench import spec
from adbench.backends import (C_HEAP, Backend, StepMemory, device_not_visible,
                              memory_not_measurable)


# ================================================================ threads and the CUDA plugin
def pool_threads() -> int:
    """Threads of XLA:CPU's intra-op (Eigen) pool alive in this process, by their names."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                if "XLAEigen" in f.read():
                    count += 1
        except OSError:  # a thread that ended while we looked
            pass
    return count


def cuda_plugin_installed() -> bool:
    """Whether this is a CUDA environment (envs/jax-cuda.yaml: jax[cuda12]), which the
    pipeline uses for cuda cells only."""
    return any(importlib.util.find_spec(name) is not None
               for name in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


def cuda_autotune_flags() -> dict[str, str]:
    """XLA's GPU autotuning as spec.CUDA_NUMERICS says, in a CUDA environment only (a CPU
    environment's XLA_FLAGS stay as they were).  It is set in configure_threads, before the
    device is known, because XLA parses XLA_FLAGS once, when the first client starts (measured:
    a flag added after jax.devices() is ignored)."""
    if spec.CUDA_NUMERICS["cudnn_autotune"] or not cuda_plugin_installed():
        return {}
    return {"--xla_gpu_autotune_level": "0"}


def apply_cuda_numerics(numerics: dict) -> dict[str, str]:
    """spec.CUDA_NUMERICS in JAX's switches, before anything is traced; returns what is in
    force for the cell's choices (autotuning: see cuda_autotune_flags)."""
    # JAX's default float32 matmul/conv precision on GPU is TF32; "highest" is full float32.
    jax.config.update("jax_default_matmul_precision",
                      "tensorfloat32" if numerics["tf32"] else "highest")
    flags = os.environ.get("XLA_FLAGS", "")
    return {
        "cuda_tf32": f"jax_default_matmul_precision={jax.config.jax_default_matmul_precision}",
        "cuda_autotune": f"XLA_FLAGS={flags!r}, parsed when configure_threads started the "
                         "client" + ("" if "--xla_gpu_autotune_level=0" in flags
                                     else " (no --xla_gpu_autotune_level=0: XLA autotunes)"),
        "cuda_memory": "XLA_PYTHON_CLIENT_PREALLOCATE="
                       f"{os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE', 'unset')} (JAX's "
                       "default preallocates 75% of the GPU's memory)",
    }


# ================================================================ the device
def gpus() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib (the CPU wheel)
        return []


def cuda_runtime_found() -> tuple[str | None, str]:
    """The CUDA runtime JAX's CUDA plugin loaded (None: the CPU jaxlib); where the plugin
    cannot say, the CUDA major version its package is built for."""
    try:  # the CUDA plugin's own versions (private module, absent from the CPU jaxlib)
        from jax._src.lib import cuda_versions
        return (str(cuda_versions.cuda_runtime_get_version()),
                "jax._src.lib.cuda_versions.cuda_runtime_get_version()")
    except (ImportError, AttributeError, RuntimeError):
        pass
    for major in ("13", "12"):
        plugin = f"jax_cuda{major}_plugin"
        if importlib.util.find_spec(plugin) is not None:
            return major, f"the installed {plugin}"
    return None, "no jax_cuda*_plugin installed"


def no_gpu_words() -> str:
    """JAX's own account: asking for the CUDA platform raises why it is absent ("Backend
    'cuda' failed to initialize: ..." keeps the plugin's error, a driver too old among them)."""
    try:
        jax.devices("cuda")
        words = "jax.devices('gpu') is empty"
    except RuntimeError as exc:
        words = f"jax.devices('cuda') raised RuntimeError: {exc}"
    if not cuda_plugin_installed():
        words += " (no jax_cuda*_plugin: this environment has the CPU jaxlib)"
    return words


def jax_device(device: str):
    """The jax.Device a cell runs on; a cuda cell that sees no GPU fails (DeviceNotVisible)."""
    if device == "cuda":
        if not gpus():
            raise device_not_visible("jax", no_gpu_words(), *cuda_runtime_found())
        return gpus()[0]
    return jax.devices("cpu")[0]


def gpu_memory_stat(device: str, name: str) -> int | None:
    """One entry of the GPU's memory_stats() on a cuda cell (None elsewhere, or unreported)."""
    if device != "cuda" or not gpus():
        return None
    value = (gpus()[0].memory_stats() or {}).get(name)
    return int(value) if value is not None else None


# ================================================================ the sync
def ready(tree):
    """Wait for every array of a result (a pullback's residuals included)."""
    return jax.block_until_ready(tree)


class ResultSync:
    """JAX's sync before a clock read.  JAX has no device-wide barrier and dispatches
    asynchronously on every device (the CPU too), so the timed call hands its result over
    (`hold`) and the sync waits for every array of it (a pullback's residuals included)."""

    def __init__(self):
        self.pending = None

    def hold(self, result):
        self.pending = result
        return result

    def __call__(self) -> None:
        if self.pending is not None:
            ready(self.pending)
            self.pending = None


def device_sync(device: str) -> ResultSync:
    """What the timer calls before every clock read: the same on cpu and cuda (see ResultSync)."""
    return ResultSync()


# ================================================================ the backend's device part
class JaxDevice(Backend):
    """Threads, versions, the device's name and the GPU probes of a JAX process."""

    def configure_threads(self, threads: int) -> dict:
        """XLA's CPU client ignores OMP_NUM_THREADS: it sizes its client and intra-op (Eigen)
        thread pools from PJRT_NPROC (else every core), read when the client is created; at
        one thread, --xla_cpu_multi_thread_eigen=false also keeps Eigen's matmuls and
        convolutions on the calling thread.  Both are set here, then the CPU client is
        created, so the backend starts with them; the report counts the intra-op pool's live
        threads."""
        os.environ["PJRT_NPROC"] = str(threads)
        forced = {"--xla_cpu_multi_thread_eigen": "false" if threads == 1 else "true",
                  **cuda_autotune_flags()}
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
                 if f.split("=", 1)[0] not in forced]
        flags += [f"{name}={value}" for name, value in forced.items()]
        os.environ["XLA_FLAGS"] = " ".join(flags)
        # JAX's persistent compilation cache (used when a directory is configured, e.g. by
        # JAX_COMPILATION_CACHE_DIR) stays off, so no cell reads another's: every process
        # compiles cold and nothing is written outside the process.
        jax.config.update("jax_enable_compilation_cache", False)
        jax.devices("cpu")  # creates the CPU client now, with these settings
        return {"xla_cpu_intra_op_pool": pool_threads()}

    def versions(self) -> dict[str, str]:
        return {"jax": jax.__version__, "jaxlib": metadata.version("jaxlib"),
                "numpy": np.__version__}

    def device_name(self, device: str) -> str:
        if device == "cuda" and gpus():
            return gpus()[0].device_kind
        return "cpu"

    # ---------------------------------------------------------------- the GPU
    def cuda_runtime(self) -> tuple[str | None, str]:
        return cuda_runtime_found()

    def gpu_info(self, device: str) -> dict | None:
        """The GPU a cuda cell runs on, as JAX sees it (driver and total memory:
        provenance.gpu, from nvidia-smi)."""
        if device != "cuda" or not gpus():
            return None
        gpu = gpus()[0]
        info = {"name": gpu.device_kind,
                "compute_capability": getattr(gpu, "compute_capability", None),
                "peak_memory_scope": "device.memory_stats()['peak_bytes_in_use'] since the "
                                     "process started (JAX has no reset): preparation and "
                                     "warm-up included"}
        try:  # the CUDA plugin's own versions (private module, absent from the CPU jaxlib)
            from jax._src.lib import cuda_versions
            info["cuda_version"] = str(cuda_versions.cuda_runtime_get_version())
            info["cudnn_version"] = str(cuda_versions.cudnn_get_version())
        except (ImportError, AttributeError, RuntimeError):
            pass
        return info

    def reset_peak_memory(self, device: str) -> None:
        """JAX exposes no reset of its peak: the peak covers the whole process (gpu_info
        says)."""

    def peak_memory(self, device: str) -> int | None:
        return gpu_memory_stat(device, "peak_bytes_in_use")

    def device_memory_in_use(self, device: str) -> int | None:
        """The device buffers still allocated now (live arrays, a kept VJP's residuals
        included)."""
        return gpu_memory_stat(device, "bytes_in_use")

    def step_memory(self, device: str) -> StepMemory:
        """The C heap on the CPU (XLA's CPU buffers are malloc's, freed when their arrays
        go: tests/test_step_memory.py finds kept arrays of known size in it); not
        measurable on a GPU, whose buffers come from XLA's BFC allocator (its bytes_in_use
        counts the chunks it hands out, up to twice what a buffer asks for, and no test has
        shown it within 20%)."""
        if device != "cuda":
            return C_HEAP
        return memory_not_measurable(
            "XLA's GPU allocator (BFC) counts the chunks it hands out (memory_stats' "
            "bytes_in_use), up to twice what a buffer asks for: not shown within 20%")
