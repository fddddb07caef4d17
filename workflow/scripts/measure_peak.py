#!/usr/bin/env python
"""The machine's float32 matrix-multiply rate, the ceiling a cell's FLOP rate is set against.

    python workflow/scripts/measure_peak.py --threads 1 --threads 2 --out scaling/peak.json

For each thread count, a fresh process multiplies two n x n float32 matrices (numpy's
BLAS, limited to those threads by the environment variables every BLAS reads at load) after
one untimed product, `repeats` times; its rate is 2 n^3 FLOPs over the best time (a peak is
the best the machine achieves), the median beside it.  It runs in the analysis environment
(numpy, no framework) under the timing lock, as the cells do.

Beside each rate, the physical bound it must stay under: cores x clock x float32 FLOPs per
cycle per core, read from /proc/cpuinfo (physical_bound says what it assumes).

    python workflow/scripts/measure_peak.py --device cuda --out scaling/peak_cuda.json

On a GPU the same product runs in PyTorch (in the torch environment, where the CUDA cells
run): cuBLAS's float32 product of two n x n matrices on the first visible GPU, each timed
between device synchronisations as the cells are, TF32 off (PyTorch's default for a float32
matmul, as the PyTorch cells run; JAX's default precision may use TF32 and outrun it).  Its
bound: streaming multiprocessors x the SM clock's maximum (nvidia-smi) x float32 lanes per SM
x 2 (gpu_bound).  A machine where PyTorch sees no GPU writes the file with the reason
instead of a rate: the CUDA cells' rates are then set against nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# Every BLAS a numpy wheel or conda package may load reads one of these at load.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS")
CPUINFO = "/proc/cpuinfo"


# ---------------------------------------------------------------- what the CPU can do
def cpuinfo(path: str = CPUINFO) -> dict:
    """The first processor's flags and clock (MHz) and the count of logical processors."""
    flags, mhz, processors = set(), [], 0
    with open(path) as f:
        for line in f:
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "processor":
                processors += 1
            elif key == "flags" and not flags:
                flags = set(value.split())
            elif key == "cpu MHz":
                mhz.append(float(value))
    return {"flags": flags, "mhz": max(mhz, default=None), "processors": processors}


def float32_flops_per_cycle(flags: set[str]) -> int:
    """The most float32 FLOPs one core can retire per cycle by its widest vector unit:
    two fused multiply-add units (FLOPs = 2 x 2 x lanes), the most any x86 core has had
    (AVX-512: 16 lanes, 64 FLOPs; AVX2 with FMA: 8 lanes, 32; AVX without FMA: one add and
    one multiply per cycle, 16; SSE: 8).  An upper bound: a core with one FMA unit reaches
    half.  AMX multiplies bf16 and int8, never float32 (no BLAS uses it for sgemm)."""
    if "avx512f" in flags:
        return 64
    if "fma" in flags and "avx2" in flags:
        return 32
    if "avx" in flags:
        return 16
    return 8


# A virtual machine reports its nominal clock only (no cpufreq, no max MHz): the turbo a
# core may reach above it is allowed for by this factor (x86 server parts turbo to at most
# about 1.6x their base clock; 2x leaves a margin).
TURBO_ALLOWANCE = 2.0
MAX_FREQ = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"  # kHz


def max_clock_ghz(info: dict, max_freq: str = MAX_FREQ) -> tuple[float, str]:
    """The highest clock a core may run at, and where it was read."""
    try:
        with open(max_freq) as f:
            return int(f.read()) / 1e6, max_freq
    except (OSError, ValueError):
        pass
    if not info["mhz"]:
        raise ValueError(f"{CPUINFO} gives no clock (cpu MHz)")
    return (info["mhz"] / 1e3 * TURBO_ALLOWANCE,
            f"{CPUINFO} cpu MHz x {TURBO_ALLOWANCE} (turbo allowance: no cpufreq maximum)")


def physical_bound(threads: int, path: str = CPUINFO, max_freq: str = MAX_FREQ) -> dict:
    """GFLOP/s no float32 matmul on `threads` cores can exceed: cores x clock x FLOPs per
    cycle, each at its upper bound (float32_flops_per_cycle, max_clock_ghz); the cores are
    the threads, at most the processors listed."""
    info = cpuinfo(path)
    cores = min(threads, info["processors"] or threads)
    ghz, clock_from = max_clock_ghz(info, max_freq)
    per_cycle = float32_flops_per_cycle(info["flags"])
    return {"gflops": cores * ghz * per_cycle, "cores": cores, "clock_ghz": ghz,
            "clock_from": clock_from, "flops_per_cycle": per_cycle,
            "assumption": "two FMA units per core at its widest vector width; the clock at "
                          "its maximum"}


# ---------------------------------------------------------------- the measurement
def matmul_rate(size: int, repeats: int) -> dict:
    """numpy's float32 product of two size x size matrices: GFLOP/s at the best and median
    of `repeats` timed products, after one untimed (the BLAS's threads and buffers start)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - start)
    flops = 2 * size**3
    return {"gflops": flops / min(seconds) / 1e9,
            "gflops_median": flops / statistics.median(seconds) / 1e9,
            "size": size, "repeats": repeats, "seconds": seconds, "numpy": np.__version__,
            "blas": blas_name(np)}


def blas_name(np) -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 -- a record, never a reason to fail
        return "unknown"


# float32 lanes (CUDA cores) per streaming multiprocessor by compute capability: Volta and
# Turing 64, the A100 64, every later architecture 128 (NVIDIA's CUDA C++ Programming Guide,
# "Arithmetic Instructions"); an unknown one gets the largest, an upper bound.
FP32_LANES_PER_SM = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}
MAX_FP32_LANES_PER_SM = 128


def gpu_bound(sms: int, capability: tuple[int, int], max_sm_mhz: float) -> dict:
    """GFLOP/s no float32 product on this GPU can exceed: SMs x clock x lanes x 2 (an FMA)."""
    lanes = FP32_LANES_PER_SM.get(tuple(capability), MAX_FP32_LANES_PER_SM)
    return {"gflops": sms * max_sm_mhz / 1e3 * lanes * 2, "sms": sms,
            "clock_ghz": max_sm_mhz / 1e3, "clock_from": "nvidia-smi clocks.max.sm",
            "fp32_lanes_per_sm": lanes, "capability": list(capability),
            "assumption": "every float32 lane retires one FMA per cycle at the SM clock's "
                          "maximum (no TF32)"}


def max_sm_clock_mhz() -> float:
    out = subprocess.run(["nvidia-smi", "--id=0", "--query-gpu=clocks.max.sm",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return float(out.split()[0])


def cuda_matmul_rate(size: int, repeats: int) -> dict:
    """PyTorch's float32 product of two size x size matrices on the first GPU (see the module
    docstring), or the reason there is none: {"gflops": None, "reason": ...}."""
    import torch

    if not torch.cuda.is_available():
        return {"gflops": None, "torch": torch.__version__,
                "reason": "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"}
    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn((size, size), device="cuda", dtype=torch.float32,
                        generator=generator) for _ in range(2))
    a @ b
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    flops = 2 * size**3
    props = torch.cuda.get_device_properties(0)
    rate = {"gflops": flops / min(seconds) / 1e9,
            "gflops_median": flops / statistics.median(seconds) / 1e9, "size": size,
            "repeats": repeats, "seconds": seconds, "torch": torch.__version__,
            "blas": f"cuBLAS (PyTorch {torch.__version__}, CUDA {torch.version.cuda})",
            "gpu_name": props.name}
    rate["bound"] = gpu_bound(props.multi_processor_count, (props.major, props.minor),
                              max_sm_clock_mhz())
    rate["fraction_of_bound"] = rate["gflops"] / rate["bound"]["gflops"]
    return rate


def rate_with_threads(threads: int, size: int, repeats: int) -> dict:
    """matmul_rate in a fresh process whose BLAS loads with `threads` threads (a BLAS reads
    its thread count once, at load)."""
    env = {**os.environ, **{v: str(threads) for v in THREAD_VARIABLES}}
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", "--size", str(size),
         "--repeats", str(repeats)],
        env=env, capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)


def measure(threads: list[int], size: int, repeats: int) -> dict:
    rates = {}
    for t in sorted(set(threads)):
        rate = rate_with_threads(t, size, repeats)
        rate["bound"] = physical_bound(t)
        rate["fraction_of_bound"] = rate["gflops"] / rate["bound"]["gflops"]
        rates[str(t)] = rate
    return {"what": "float32 matmul (numpy's BLAS), best of repeats, GFLOP/s per thread count",
            "threads": rates, "cpu_model": cpu_model(), "python": platform.python_version(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def cpu_model() -> str:
    try:
        with open(CPUINFO) as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), platform.machine())
    except OSError:
        return platform.machine()


def measure_cuda(size: int, repeats: int) -> dict:
    return {"what": "float32 matmul (PyTorch, cuBLAS) on the first GPU, best of repeats, "
                    "GFLOP/s", "cuda": cuda_matmul_rate(size, repeats),
            "python": platform.python_version(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: numpy's BLAS per thread count; cuda: PyTorch on the first GPU")
    p.add_argument("--threads", type=int, action="append", default=[],
                   help="a thread count of the cells (repeatable; cpu only)")
    p.add_argument("--size", type=int, help="matrix side (default 2048 on the CPU, 8192 on "
                   "a GPU)")
    p.add_argument("--repeats", type=int, default=10, help="timed products (default "
                   "%(default)s)")
    p.add_argument("--out", help="the JSON file to write")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.size = args.size or (8192 if args.device == "cuda" else 2048)
    if not args.child and not args.out:
        p.error("--out is required")
    if not args.child and args.device == "cpu" and not args.threads:
        p.error("--threads (at least one) is required on the CPU")
    if args.device == "cuda" and args.threads:
        p.error("--threads is the CPU's: a GPU's product has no thread count")
    if min([args.size, args.repeats, *args.threads]) < 1:
        p.error("sizes, repeats and threads must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(matmul_rate(args.size, args.repeats)))
        return 0
    if args.device == "cuda":
        result = measure_cuda(args.size, args.repeats)
        rate = result["cuda"]
        print(f"cuda: {rate['gflops']:.0f} GFLOP/s ({rate['fraction_of_bound']:.0%} of the "
              f"bound {rate['bound']['gflops']:.0f})" if rate["gflops"] else
              f"cuda: {rate['reason']}")
    else:
        result = measure(args.threads, args.size, args.repeats)
    tmp = f"{args.out}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)  # complete or absent
    for t, rate in result.get("threads", {}).items():
        print(f"{t} threads: {rate['gflops']:.1f} GFLOP/s ({rate['fraction_of_bound']:.0%} of "
              f"the bound {rate['bound']['gflops']:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
