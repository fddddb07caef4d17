"""measure_peak.py: the matmul rate it reports lies within physical bounds.

The bound is cores x clock x float32 FLOPs per cycle per core, read from /proc/cpuinfo.
Assumed (measure_peak.float32_flops_per_cycle): two FMA units per core at the widest vector
width its flags name, so AVX-512 FMA = 2 units x 16 lanes x 2 = 64 float32 FLOPs per cycle
(AVX2 + FMA 32, AVX 16, SSE 8); the clock at the cpufreq maximum, else the cpuinfo clock
times a turbo allowance of 2.  No timed assertion: a tiny product, a few repeats, and only
0 < rate < bound is checked.
"""

from __future__ import annotations

import json
import os

import pytest

import measure_peak

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
