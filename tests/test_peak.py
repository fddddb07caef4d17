"""measure_peak.py: the matmul rate it reports lies within physical bounds.

The bound is cores x clock x float32 FLOPs per cycle per core, read from /proc/cpuinfo.
Assumed (measure_peak.float32_flops_per_cycle): two FMA units per core at the widest vector
width its flags name, so AVX-512 FMA = 2 units x 16 lanes x 2 = 64 float32 FLOPs per cycle
(AVX2 + FMA 32, AVX 16, SSE 8); the clock at the cpufreq maximum, else the cpuinfo clock
times a turbo allowance of 2.  No timed assertion: a tiny product, a few repeats, and only
0 < rate < bound is checked.  A GPU's bound is SMs x clock x float32 lanes x 2
(measure_peak.gpu_bound), checked on NVIDIA's published figures; here no GPU, so its rule
writes the reason instead of a rate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import measure_peak

SCRIPT = measure_peak.__file__

CPUINFO = """processor	: 0
model name	: Test CPU
flags		: fpu sse sse2 avx fma avx2 avx512f
cpu MHz		: 2000.000

processor	: 1
model name	: Test CPU
flags		: fpu sse sse2 avx fma avx2 avx512f
cpu MHz		: 2100.000
"""


@pytest.fixture
def fake_cpu(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    return str(path)


def test_bound_from_a_fabricated_cpuinfo(fake_cpu, tmp_path):
    no_cpufreq = str(tmp_path / "absent")
    bound = measure_peak.physical_bound(1, fake_cpu, no_cpufreq)
    assert bound["flops_per_cycle"] == 64  # avx512f
    assert bound["clock_ghz"] == pytest.approx(2.1 * measure_peak.TURBO_ALLOWANCE)
    assert bound["gflops"] == pytest.approx(2.1 * 2 * 64)
    # more threads than processors: the processors bound it
    assert measure_peak.physical_bound(8, fake_cpu, no_cpufreq)["cores"] == 2


def test_the_cpufreq_maximum_replaces_the_allowance(fake_cpu, tmp_path):
    max_freq = tmp_path / "cpuinfo_max_freq"
    max_freq.write_text("3500000\n")  # kHz
    assert measure_peak.physical_bound(1, fake_cpu, str(max_freq))["clock_ghz"] == 3.5


def test_flops_per_cycle_by_vector_width():
    per_cycle = measure_peak.float32_flops_per_cycle
    assert per_cycle({"avx512f", "fma", "avx2"}) == 64
    assert per_cycle({"fma", "avx2", "avx"}) == 32
    assert per_cycle({"avx"}) == 16
    assert per_cycle({"sse2"}) == 8


@pytest.mark.skipif(not os.path.exists(measure_peak.CPUINFO), reason="no /proc/cpuinfo")
def test_measured_rate_is_within_this_machines_physical_bound(tmp_path):
    out = tmp_path / "peak.json"
    assert measure_peak.main(["--threads", "1", "--size", "128", "--repeats", "3",
                              "--out", str(out)]) == 0
    rate = json.loads(out.read_text())["threads"]["1"]
    bound = measure_peak.physical_bound(1)
    assert 0 < rate["gflops_median"] <= rate["gflops"] < bound["gflops"]
    assert rate["bound"] == bound
    assert len(rate["seconds"]) == 3


def test_gpu_bound_is_sms_times_clock_times_lanes_times_two():
    # NVIDIA's float32 figures: an A100 (108 SMs of 64 lanes, 1410 MHz) 19.5 TFLOP/s, an
    # H100 SXM (132 SMs of 128 lanes, 1980 MHz) 67 TFLOP/s.
    a100 = measure_peak.gpu_bound(108, (8, 0), 1410)
    h100 = measure_peak.gpu_bound(132, (9, 0), 1980)
    assert a100["gflops"] == pytest.approx(19_492, rel=1e-3)
    assert h100["gflops"] == pytest.approx(66_908, rel=1e-3)
    assert measure_peak.gpu_bound(1, (99, 9), 1000)["fp32_lanes_per_sm"] == 128  # unknown


def test_no_gpu_writes_the_reason_not_a_rate(tmp_path):
    """Here (no GPU, a CPU build of PyTorch): the file exists, with why there is no rate."""
    out = tmp_path / "peak_cuda.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rate = json.loads(out.read_text())["cuda"]
    assert rate["gflops"] is None and "no CUDA device" in rate["reason"]
    assert "no CUDA device" in done.stdout


def test_threads_are_the_cpus_and_a_gpu_needs_none():
    with pytest.raises(SystemExit):
        measure_peak.parse_args(["--device", "cuda", "--threads", "1", "--out", "x.json"])
    with pytest.raises(SystemExit):
        measure_peak.parse_args(["--out", "x.json"])  # the CPU: --threads required
    assert measure_peak.parse_args(["--device", "cuda", "--out", "x.json"]).size == 8192
