"""build_env.py reads the pins of envs/*.yaml (no environment is built here: too slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import build_env
from adbench import spec

ROOT = Path(__file__).resolve().parents[1]
ENV_FILES = sorted((ROOT / "envs").glob("*.yaml"))
# name, optional [extras] (tensorflow[and-cuda]), exact version
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,-]+\])?==([0-9][^\s;]*)$")


def pins(path):
    return dict(PIN.match(r).groups() for r in build_env.read_pins(str(path))[1])


def test_every_framework_and_the_analysis_env_has_a_pin_file():
    names = {p.stem for p in ENV_FILES}
    assert {info.env for info in spec.FRAMEWORKS.values()} | {spec.ANALYSIS_ENV} <= names
    assert {info.cuda_env for info in spec.FRAMEWORKS.values() if info.cuda_env} <= names


@pytest.mark.parametrize("framework", [f for f, i in spec.FRAMEWORKS.items() if i.cuda_env])
def test_a_cuda_build_pins_the_same_versions_as_the_cpu_build(framework):
    """CPU and GPU numbers compare one version of a framework: the CUDA pin file differs in
    its build (the package or its extra), never in a version."""
    info = spec.FRAMEWORKS[framework]
    cpu, cuda = (pins(ROOT / "envs" / f"{env}.yaml") for env in (info.env, info.cuda_env))
    strip = lambda name: name.removesuffix("-cpu")  # noqa: E731  tensorflow-cpu -> tensorflow
    assert {strip(k): v for k, v in cpu.items()} == cuda


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_read_pins_python_and_exact_pip_pins(path):
    python, requirements = build_env.read_pins(str(path))
    assert python == "3.11"
    assert requirements
    for requirement in requirements:
        assert PIN.match(requirement), f"{path.name}: {requirement!r} is not an exact pin"


def test_torch_is_pinned():
    assert pins(ROOT / "envs" / "torch.yaml")["torch"] == "2.13.0"


@pytest.mark.parametrize("package", ["numpy", "pyarrow"])
def test_shared_packages_have_one_pin_unless_the_env_says_why(package):
    """The old frameworks (MXNet, Theano, Chainer) need an older numpy, and a pyarrow built
    for it: such an env must say so in its comments; all others share the analysis pin."""
    versions = {p: pins(p)[package] for p in ENV_FILES if package in pins(p)}
    assert len(versions) >= 2, versions  # the check compares something
    common = pins(ROOT / "envs" / "analysis.yaml")[package]
    for path, version in versions.items():
        if version != common:
            comments = " ".join(line for line in path.read_text().splitlines()
                                if line.lstrip().startswith("#"))
            assert package in comments, f"{path.name}: {package}=={version}, no reason given"


def test_print_requirements(capsys):
    files = [str(ROOT / "envs" / "torch.yaml"), str(ROOT / "envs" / "analysis.yaml")]
    assert build_env.main([*files, "--print-requirements"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == build_env.read_pins(files[0])[1] + build_env.read_pins(files[1])[1]
    assert "torch==2.13.0" in printed


def test_env_file_without_pip_section_exits_naming_the_file(tmp_path):
    path = tmp_path / "nopip.yaml"
    path.write_text("name: x\ndependencies:\n  - python=3.11\n  - numpy=2.4.6\n")
    with pytest.raises(SystemExit, match="nopip.yaml") as error:
        build_env.read_pins(str(path))
    assert "pip" in str(error.value)


def test_building_needs_prefix_and_receipt(capsys):
    with pytest.raises(SystemExit) as error:
        build_env.main([str(ROOT / "envs" / "torch.yaml")])
    assert error.value.code != 0
    assert "--prefix" in capsys.readouterr().err


def test_pins_that_cannot_be_installed_give_a_failed_receipt(tmp_path):
    """With --record-failure (the pipeline's way) the receipt says failed and why; without
    it the build fails.  The pin is a wheel file that does not exist: no index is asked."""
    pins = tmp_path / "broken.yaml"
    pins.write_text("dependencies:\n  - pip:\n"
                    "      - adbench-missing @ file:///nonexistent/adbench_missing-1.0-py3-none-any.whl\n")
    receipt = tmp_path / "broken.json"
    args = [str(pins), "--prefix", str(tmp_path / "venv"), "--receipt", str(receipt)]
    with pytest.raises(SystemExit, match="broken.yaml"):
        build_env.main(args)
    assert not receipt.exists()
    assert build_env.main([*args, "--record-failure"]) == 0
    written = json.loads(receipt.read_text())
    assert written["status"] == "failed" and written["env_file"] == str(pins)
    assert "nonexistent" in written["message"] or "adbench" in written["message"], written
