"""Where and how a measurement was taken: machine, software, settings, times."""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time

# Environment variables that change timings; recorded with every cell.
TIMING_ENV_VARS = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "TF_ENABLE_ONEDNN_OPTS",
    "TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES", "KMP_AFFINITY", "KMP_BLOCKTIME",
    "PYTORCH_JIT", "XLA_FLAGS", "TF_XLA_FLAGS", "PJRT_NPROC",
    "MXNET_ENGINE_TYPE", "MXNET_CPU_WORKER_NTHREADS", "MXNET_MKLDNN_ENABLED",
    "THEANO_FLAGS", "PYTENSOR_FLAGS", "NUMBA_NUM_THREADS", "TORCHINDUCTOR_CACHE_DIR",
    # CUDA numerics and memory (spec.CUDA_NUMERICS sets the first two for TensorFlow).
    "TF_CUDNN_USE_AUTOTUNE", "TF_CUDNN_RNN_USE_AUTOTUNE", "TF_FORCE_GPU_ALLOW_GROWTH",
    "NVIDIA_TF32_OVERRIDE", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
)
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
)


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def pin_threads_env(threads: int) -> None:
    """Thread counts for every math library, set before any framework is imported."""
    for name in THREAD_ENV_VARS:
        os.environ[name] = str(threads)


def cpu_seconds() -> float:
    """User + system CPU time of this process (all its threads) and of the children it has
    waited for (a compiler: torch.compile runs g++, PyTensor and Theano too).  process_time
    reads CLOCK_PROCESS_CPUTIME_ID (nanoseconds); os.times counts 10 ms clock ticks, too
    coarse for this process's time in a loop of a few milliseconds."""
    children = os.times()
    return time.process_time() + children.children_user + children.children_system


def process_start_epoch() -> float | None:
    """When this process was started (Linux), to measure interpreter start-up.

    /proc gives the start in clock ticks since boot (10 ms); its age is taken against the
    clock that counts from boot, then subtracted from now. Adding the ticks to /proc/stat's
    btime instead would be off by btime's dropped fraction of a second, the same for every
    process (it read 0.7 s of "start-up" where the interpreter took 0.02 s)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_smi(fields: str) -> list[str] | None:
    """One GPU's `fields` (comma-separated) from nvidia-smi: the first the job may use
    (CUDA_VISIBLE_DEVICES' first entry, an index or UUID) where nvidia-smi knows it, else
    the first listed (nvidia-smi ignores CUDA_VISIBLE_DEVICES)."""
    if not shutil.which("nvidia-smi"):
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    for select in ([f"--id={visible}"] if visible else []) + [None]:
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                 *filter(None, [select])],
                capture_output=True, text=True, timeout=20, check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if out:
            return [v.strip() for v in out.splitlines()[0].split(",")]
    return None


def gpu_process_memory(pid: int) -> int | None:
    """The GPU memory nvidia-smi says process `pid` holds, bytes, over every GPU it uses: its
    allocator's pool and its CUDA context, what no other process can use.  None where
    nvidia-smi is missing or does not list the process (a container's PID namespace)."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    mib = [float(used) for line in out.splitlines() if line.count(",") == 1
           for listed, used in [line.split(",")]
           if listed.strip() == str(pid) and used.strip().replace(".", "", 1).isdigit()]
    return int(sum(mib) * 2**20) if mib else None


def gpu_driver() -> str | None:
    values = nvidia_smi("driver_version")
    return values[0] if values else None


def cuda_version(value) -> str | None:
    """A CUDA version as "major.minor[.patch]": CUDA's integer encoding (12080: what
    cudaRuntimeGetVersion and cuDriverGetVersion return) turned into "12.8"; a string kept."""
    if value is None or str(value).strip() in ("", "None"):
        return None
    text = str(value).strip()
    if text.isdigit() and int(text) >= 1000:
        number = int(text)
        return f"{number // 1000}.{number % 1000 // 10}"
    return text


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    numbers = re.findall(r"\d+", version or "")
    return tuple(int(n) for n in numbers[:2]) if numbers else None


def driver_cuda_version() -> str | None:
    """The newest CUDA the installed NVIDIA driver supports ("13.0"): cuDriverGetVersion of
    libcuda (needs no GPU and creates no context), else nvidia-smi's banner; None where no
    driver is found."""
    try:
        version = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0 \
                and version.value:
            return cuda_version(version.value)
    except (OSError, AttributeError):
        pass
    if not shutil.which("nvidia-smi"):
        return None
    try:
        banner = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20
                                ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"CUDA Version:\s*([\d.]+)", banner)
    return match.group(1) if match else None


def cuda_stack(runtime: str | None, runtime_from: str | None = None,
               sees_gpu: bool | None = None) -> dict:
    """What a cuda cell found of the CUDA stack, whatever its status: the driver
    (nvidia-smi) and the newest CUDA it supports (libcuda), the CUDA runtime the framework
    got (`runtime`, read by the backend's cuda_runtime(); `runtime_from` says from where),
    whether the framework saw a GPU, and the GPUs the job was given."""
    runtime = cuda_version(runtime)
    driver_cuda = driver_cuda_version()
    have, need = _version_tuple(driver_cuda), _version_tuple(runtime)
    env = os.environ.get
    return {
        "driver_version": gpu_driver(),
        "driver_cuda_version": driver_cuda,
        "runtime_cuda_version": runtime,
        "runtime_from": runtime_from,
        # The driver supports an older CUDA than the build's: the likely cause of any
        # failure (CUDA's minor-version compatibility covers some of it within one major).
        "driver_older_than_runtime": (have < need) if have and need else None,
        "sees_gpu": sees_gpu,
        "cuda_visible_devices": env("CUDA_VISIBLE_DEVICES"),
        "slurm_gpus": env("SLURM_JOB_GPUS") or env("SLURM_GPUS_ON_NODE"),
    }


def describe_cuda(found: dict, framework: str = "the framework") -> str:
    """A cell message's account of the CUDA stack found (cuda_stack), naming the versions."""
    if found.get("driver_version") or found.get("driver_cuda_version"):
        driver = (f"NVIDIA driver {found.get('driver_version') or '(version unknown)'}"
                  + (f" supporting CUDA up to {found['driver_cuda_version']}"
                     if found.get("driver_cuda_version") else ""))
    else:
        driver = "no NVIDIA driver (neither libcuda nor nvidia-smi)"
    runtime = (f"{framework}'s CUDA {found['runtime_cuda_version']}"
               if found.get("runtime_cuda_version")
               else f"{framework} has no CUDA runtime (a CPU build)")
    parts = [f"found {driver}; {runtime}"]
    if found.get("driver_older_than_runtime"):
        parts.append(f"the driver is older than this build's CUDA "
                     f"({found['driver_cuda_version']} < {found['runtime_cuda_version']}): "
                     "update the driver, or choose a build for the driver's CUDA (the "
                     "config's cuda_builds)")
    granted = []
    if found.get("slurm_gpus"):
        granted.append(f"SLURM granted GPU(s) {found['slurm_gpus']}")
    if found.get("cuda_visible_devices") is not None:
        granted.append(f"CUDA_VISIBLE_DEVICES={found['cuda_visible_devices']!r}")
    if granted:
        parts.append(", ".join(granted))
    return "; ".join(parts)


def _mib_to_bytes(value: str) -> int | None:
    try:
        return int(float(value) * 2**20)
    except ValueError:  # "[N/A]"
        return None


def gpu(device: str, framework_info: dict | None) -> dict | None:
    """What a cuda cell ran on: the framework's view of its GPU (backend.gpu_info), nvidia-smi
    for what the framework does not say (always the driver); None on cpu."""
    if device != "cuda":
        return None
    smi = nvidia_smi("name,driver_version,memory.total")
    info = {"name": smi[0], "driver_version": smi[1],
            "total_memory_bytes": _mib_to_bytes(smi[2])} if smi else {}
    info.update({k: v for k, v in (framework_info or {}).items() if v is not None})
    sources = [name for name, used in (("framework", framework_info), ("nvidia-smi", smi))
               if used]
    return {**info, "sources": sources} if info else None


def git_state(directory: str) -> dict:
    def git(*args):
        return subprocess.run(["git", "-C", directory, *args], capture_output=True,
                              text=True, timeout=20).stdout.strip()
    try:
        return {"git_commit": git("rev-parse", "HEAD") or None,
                "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def frameworks_loaded(frameworks) -> list[str]:
    """Which frameworks this process imported: a timing job must load its own alone."""
    return sorted(name for name in frameworks if name in sys.modules)


def config_hash(settings: dict) -> str:
    """Stable hash of everything that defines a cell's computation."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def allocation() -> dict:
    """What the scheduler gave the job this process runs in (SLURM's variables, inherited
    through run_cell.py), or Nones outside a scheduler."""
    env = os.environ.get
    slurm = bool(env("SLURM_JOB_ID"))
    return {
        "scheduler": "slurm" if slurm else None,
        "job_id": env("SLURM_JOB_ID"),
        "node": env("SLURMD_NODENAME") or env("SLURM_NODELIST"),
        "cpus": (env("SLURM_CPUS_PER_TASK") or env("SLURM_CPUS_ON_NODE")
                 or env("SLURM_JOB_CPUS_PER_NODE")),
        "gpus": env("SLURM_JOB_GPUS") or env("SLURM_GPUS_ON_NODE"),
        "cuda_visible_devices": env("CUDA_VISIBLE_DEVICES"),
        "partition": env("SLURM_JOB_PARTITION"),
    }


def cpus_granted() -> int | None:
    """The CPUs this process was given: those it may run on (its affinity, which SLURM's
    task binding and cgroups narrow), at most SLURM_CPUS_PER_TASK where SLURM sets it (a
    node without binding leaves the affinity at the whole node). Not os.cpu_count(), which
    counts the node's CPUs whatever the job was given."""
    try:
        granted = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        granted = os.cpu_count()
    per_task = os.environ.get("SLURM_CPUS_PER_TASK", "").strip()
    if per_task.isdigit():
        granted = min(granted, int(per_task)) if granted else int(per_task)
    return granted


def machine() -> dict:
    return {
        "allocation": allocation(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),  # the node's; what the job was given is cpus_granted
        "cpus_granted": cpus_granted(),
        "gpu_driver": gpu_driver(),
        "env": {name: os.environ[name] for name in TIMING_ENV_VARS if name in os.environ},
    }
