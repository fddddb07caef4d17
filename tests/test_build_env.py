"""build_env.py reads the pins of envs/*.yaml (no environment is built here: too slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import build_env
from adbench import config as run_config
from adbench import spec

ROOT = Path(__file__).resolve().parents[1]
ENV_FILES = sorted((ROOT / "envs").glob("*.yaml"))
# name, optional [extras] (tensorflow[and-cuda]), exact version
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,-]+\])?==([0-9][^\s;]*)$")


# An option line of a pip section: a CUDA build's own wheel index.
INDEX = re.compile(r"^--extra-index-url https://\S+$")
CUDA_BUILDS = run_config.load_schema()["properties"]["cuda_builds"]["properties"]


def pins(path):
    requirements = build_env.installer_args(build_env.read_pins(str(path))[1])[1]
    return dict(PIN.match(r).groups() for r in requirements)


def cuda_build_files(framework):
    """Each CUDA build the schema offers a framework, and its pin file."""
    return {build: ROOT / "envs" / f"{run_config.cell_env({framework: build}, framework, 'cuda')}.yaml"
            for build in CUDA_BUILDS[framework]["enum"]}


def test_every_framework_and_the_analysis_env_has_a_pin_file():
    names = {p.stem for p in ENV_FILES}
    assert {info.env for info in spec.FRAMEWORKS.values()} | {spec.ANALYSIS_ENV} <= names
    assert {info.cuda_env for info in spec.FRAMEWORKS.values() if info.cuda_env} <= names


@pytest.mark.parametrize("framework", [f for f, i in spec.FRAMEWORKS.items() if i.cuda_env])
def test_every_cuda_build_pins_the_same_versions_as_the_cpu_build(framework):
    """CPU and GPU numbers compare one version of a framework: each CUDA build's pin file
    differs in its build (the package, its extra, a local version label: +cu126), never in
    a version."""
    info = spec.FRAMEWORKS[framework]
    cpu = pins(ROOT / "envs" / f"{info.env}.yaml")
    strip = lambda name: name.removesuffix("-cpu")  # noqa: E731  tensorflow-cpu -> tensorflow
    for build, path in cuda_build_files(framework).items():
        cuda = {k: v.split("+")[0] for k, v in pins(path).items()}
        assert {strip(k): v for k, v in cpu.items()} == cuda, (build, path.name)


def test_the_schemas_cuda_builds_are_the_pin_files():
    """Each build the schema offers has its pin file, its default is the spec's cuda_env
    (the pins tested), and every CUDA pin file is a build the schema offers."""
    with_cuda = {f for f, i in spec.FRAMEWORKS.items() if i.cuda_env}
    assert set(CUDA_BUILDS) == with_cuda
    offered = set()
    for framework in with_cuda:
        files = cuda_build_files(framework)
        default = CUDA_BUILDS[framework]["default"]
        assert files[default].stem == spec.FRAMEWORKS[framework].cuda_env
        assert all(path.exists() for path in files.values()), files
        offered |= {path.name for path in files.values()}
    cuda_files = {p.name for p in ENV_FILES
                  if p.stem not in {i.env for i in spec.FRAMEWORKS.values()} | {spec.ANALYSIS_ENV}}
    assert cuda_files == offered


def test_a_cuda_build_pin_file_says_where_it_is_built_and_what_the_nodes_share():
    for framework in CUDA_BUILDS:
        for path in cuda_build_files(framework).values():
            comments = " ".join(" ".join(line.lstrip("# ").split())
                                for line in path.read_text().splitlines() if line.startswith("#"))
            assert "the submit host builds it" in comments, path.name
            assert "the GPU nodes share" in comments and "interpreter" in comments, path.name
            assert "driver" in comments and "GB" in comments, path.name


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_read_pins_python_and_exact_pip_pins(path):
    python, requirements = build_env.read_pins(str(path))
    assert python == "3.11"
    assert requirements
    for requirement in requirements:
        assert PIN.match(requirement) or INDEX.match(requirement), (
            f"{path.name}: {requirement!r} is neither an exact pin nor an index")


def test_an_index_line_goes_to_the_installer_as_options(monkeypatch, tmp_path):
    """uv gets the build's index, and takes each exact pin from whichever index has it; the
    requirements stay exact pins."""
    commands = []
    monkeypatch.setattr(build_env, "run", lambda cmd: commands.append(cmd) or "")
    monkeypatch.setattr(build_env.shutil, "which", lambda name: "/usr/bin/uv")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    build_env.build(str(ROOT / "envs" / "torch-cu126.yaml"), str(tmp_path / "venv"))
    install = next(c for c in commands if c[1:3] == ["pip", "install"])
    assert install[-3:] == ["torch==2.13.0+cu126", "numpy==2.4.6", "pyarrow==26.0.1"]
    at = install.index("--extra-index-url")
    assert install[at + 1] == "https://download.pytorch.org/whl/cu126"
    assert install[install.index("--index-strategy") + 1] == "unsafe-best-match"
    commands.clear()
    build_env.build(str(ROOT / "envs" / "torch-cuda.yaml"), str(tmp_path / "venv"))
    install = next(c for c in commands if c[1:3] == ["pip", "install"])
    assert "--index-strategy" not in install and "--extra-index-url" not in install


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
