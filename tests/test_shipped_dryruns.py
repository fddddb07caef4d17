"""Every shipped config plans: `snakemake -n` of config/*.yaml (and of the example trees'
configs, which rebuild their analysis) in a fresh copy of the checkout, as the README and
docs/ give the commands; the GPU configs also as a SLURM site plans them (profiles/slurm
and the example site file), where the checks made before any submission run too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import pipeline_cost  # noqa: E402  (a fresh copy of the checkout)

# A dry run of each: about 5-15 s of one core each.
pytestmark = [pytest.mark.e2e]
CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in [
    *ROOT.glob("config/*.yaml"), *ROOT.glob("example-results/*/config.yaml")])
SITE = "profiles/slurm/site-example/site.yaml"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("dryruns")
    pipeline_cost.fresh_copy(workdir, cold=True)
    return workdir


def dry_run(workdir: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2",
                           "--quiet", "rules", *args], cwd=workdir, capture_output=True,
                          text=True, timeout=600, env=env)


def test_every_shipped_config_is_found():
    assert {"config/config.yaml", "config/gpu.yaml", "config/machines-example.yaml",
            "example-results/cuda-h100/config.yaml"} <= set(CONFIGS)


@pytest.mark.parametrize("config", CONFIGS)
def test_a_shipped_config_plans(checkout, config):
    # an example tree's rebuild, as its README gives it, in the pipeline's own environments
    # (its frameworks need not be in this Python)
    extra = ["--config", "environments=venv"] if config.startswith("example-results") else []
    done = dry_run(checkout, "--configfile", config, *extra)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert "This was a dry-run" in text or "Nothing to be done" in text, text[-3000:]


@pytest.mark.parametrize("config", ["config/gpu.yaml", "config/gpu-smoke.yaml"])
def test_a_gpu_config_plans_on_a_slurm_site(checkout, config):
    """profiles/slurm with the example site's file (a hyphenated GPU type) and its profile,
    copied as the docs say: the packs, and no refusal of the checks made before
    submitting."""
    env = {**os.environ, "ADBENCH_SITE": str(checkout / SITE)}
    done = dry_run(checkout, "--workflow-profile", "profiles/slurm", "--profile",
                   str(checkout / Path(SITE).parent), "--configfile", config, env=env)
    text = done.stdout + done.stderr
    assert done.returncode == 0 and "not submitting" not in text, text[-3000:]
    assert "pack" in text, text[-3000:]
