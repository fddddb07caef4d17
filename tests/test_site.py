"""The site's settings (issue 39): a site file named by ADBENCH_SITE that a command-line
--config cannot drop, both GPU request styles and GPU type names as sites write them, the
stop before CUDA cells go to SLURM without a GPU partition, and the guard against a restarted
controller submitting cells whose jobs still run. Unit tier: adbench/cluster.py and
adbench/config.py on fabricated site files; tests/test_slurm.py submits them for real."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from adbench import cluster, spec
from adbench import config as run_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"grid": {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0],
                   "devices": ["cpu", "cuda"]}, "results": "tree"}
SITE = {"account": "proj42", "cpu_partition": "cpu", "gpu_partition": "gpu",
        "gpu_model": "nvidia_a100-sxm4-80gb", "gpu_request": "gres", "cuda_cpus": 6}


def site_file(tmp_path: Path, site: dict) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site))
    return path


def checked(tmp_path: Path, config: dict, environ: dict) -> run_config.Run:
    return run_config.checked(copy.deepcopy(config), validate=validate, configfiles=[],
                              working_dir=tmp_path, core_limit=None, conda_enabled=False,
                              python="python", environ=environ)


def test_the_site_file_survives_a_command_line_config(tmp_path):
    """--config replaces a profile's config: key whole; the site file is read apart, and a
    cluster key given on the command line replaces only that key."""
    environ = {cluster.SITE_VARIABLE: str(site_file(tmp_path, SITE))}
    run = checked(tmp_path, {**CONFIG, "cluster": {"walltime_margin": "1.5"}}, environ)
    settings = run.config["cluster"]
    assert {k: settings[k] for k in SITE} == SITE and settings["walltime_margin"] == 1.5
    assert run.site == Path(environ[cluster.SITE_VARIABLE])
    run = checked(tmp_path, {**CONFIG, "cluster": {"gpu_partition": "other"}}, environ)
    assert run.config["cluster"]["gpu_partition"] == "other"
    assert run.config["cluster"]["account"] == "proj42"


@pytest.mark.parametrize("site, named", [
    ({"partition": "gpu"}, "unknown key 'partition'"),
    ({"gpu_model": "a100:1"}, "gpu_model"),
    ({"gpu_request": "tres"}, "'tres' is not one of ['gpus', 'gres']"),
    (["gpu"], "not a mapping"),
])
def test_a_bad_site_file_is_named_before_any_job(tmp_path, site, named):
    environ = {cluster.SITE_VARIABLE: str(site_file(tmp_path, site))}
    with pytest.raises(Exception) as error:
        checked(tmp_path, CONFIG, environ)
    assert named in str(error.value)


def test_a_missing_site_file_is_named(tmp_path):
    environ = {cluster.SITE_VARIABLE: str(tmp_path / "nowhere.yaml")}
    with pytest.raises(run_config.ConfigError, match="ADBENCH_SITE=.*nowhere.yaml"):
        checked(tmp_path, CONFIG, environ)


# ------------------------------------------------------------------ GPU requests
@pytest.mark.parametrize("style, model, expected", [
    ("gpus", "a100", {"gpu": 1, "gpu_model": "a100"}),
    ("gpus", None, {"gpu": 1}),
    ("gres", "a100", {"gpu": 0, "gres": "gpu:a100:1"}),
    ("gres", None, {"gpu": 0, "gres": "gpu:1"}),
    ("gres", "a100_3g.20gb", {"gpu": 0, "gres": "gpu:a100_3g.20gb:1"}),
    # names the plugin refuses in gpu_model and gres: --gpus-per-node, either style
    ("gpus", "nvidia_a100-sxm4-80gb",
     {"gpu": 0, "slurm_extra": "--gpus-per-node=nvidia_a100-sxm4-80gb:1"}),
    ("gres", "nvidia_a100-sxm4-80gb",
     {"gpu": 0, "slurm_extra": "--gpus-per-node=nvidia_a100-sxm4-80gb:1"}),
])
def test_a_cuda_job_asks_for_its_gpu_as_the_site_does(style, model, expected):
    settings = {"gpu_request": style, **({"gpu_model": model} if model else {})}
    resources = cluster.slurm_resources(settings, "cuda")
    gpu_keys = {k: v for k, v in resources.items()
                if k in ("gpu", "gpu_model", "gres", "slurm_extra")}
    assert gpu_keys == expected
    # a CPU job asks for none, whatever the style
    assert cluster.slurm_resources(settings, "cpu") == {"gpu": 0}


def test_the_plugin_accepts_every_name_passed_to_it_and_sbatch_the_rest():
    """The plugin's own patterns (snakemake_executor_plugin_slurm.utils.set_gres_string)
    accept what gpu_request passes it; a name they refuse goes in slurm_extra, which the
    plugin's validation lets through."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.utils import set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    for style in ("gpus", "gres"):
        for model in ("a100", "a100_3g.20gb", "nvidia_a100-sxm4-80gb"):
            resources = cluster.slurm_resources({"gpu_request": style, "gpu_model": model,
                                                 "slurm_extra": "--nice=7"}, "cuda")
            job = SimpleNamespace(resources=SimpleNamespace(**resources, get=resources.get))
            request = set_gres_string(job) + " " + resources.get("slurm_extra", "")
            validate_slurm_extra(job)
            assert model in request and "--nice=7" in request, request
            assert request.count(model) == 1, request  # one GPU request, not two


def test_the_schema_takes_gpu_types_as_sites_write_them(tmp_path):
    for model in ("a100", "nvidia_a100-sxm4-80gb", "a100_3g.20gb", "H100"):
        run = checked(tmp_path, {**CONFIG, "cluster": {"gpu_model": model}}, {})
        assert run.config["cluster"]["gpu_model"] == model


# ------------------------------------------------------------------ before submitting
def test_cuda_cells_without_a_gpu_partition_are_named():
    cells = [spec.Cell("torch", "eager", "mlp512", "backward", "cuda", 1, 0)]
    (problem,) = cluster.gpu_partition_problems({"account": "x"}, cells)
    assert "cluster.gpu_partition" in problem and cluster.SITE_VARIABLE in problem
    assert cluster.gpu_partition_problems({"gpu_partition": "gpu"}, cells) == []
    cpu_only = [spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, 0)]
    assert cluster.gpu_partition_problems({}, cpu_only) == []


def squeue_says(lines: list[str]):
    def run(args, **kwargs):
        assert args[:2] == ["squeue", "--me"], args
        return subprocess.CompletedProcess(args, 0, "\n".join(lines) + "\n", "")
    return run


def test_a_restarted_controller_names_the_jobs_still_running_in_its_tree(tmp_path,
                                                                        monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    here = str(tmp_path)
    run = squeue_says([
        f"101|RUNNING|{here}|rule_pack_tree_cuda_torch_000_wildcards_",
        f"102|PENDING|{here}|rule_pack_other_cuda_torch_000_wildcards_",  # another tree's
        "103|RUNNING|/elsewhere|rule_pack_tree_cuda_torch_001_wildcards_",  # another checkout
        f"104|RUNNING|{here}|my interactive job",  # not the plugin's
        f"105|PENDING|{here}|rule_measure_wildcards_cuda_torch_eager",  # a cell of its own
    ])
    (problem,) = cluster.running_jobs_problems(here, "tree", run)
    assert "101 RUNNING, 105 PENDING" in problem and "scancel 101,105" in problem
    # the controller's own job (a long CPU job) is never one of them
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    (problem,) = cluster.running_jobs_problems(here, "tree", run)
    assert "101" not in problem.split(":")[0]
    assert cluster.running_jobs_problems(here, "tree", squeue_says([])) == []


# ------------------------------------------------------------------ no GPU request lost
class Resources(dict):
    """A job's resources as the plugin reads them: .get and attribute access."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def sbatch_line(resources: dict) -> str:
    """The sbatch call snakemake-executor-plugin-slurm builds for a job with `resources`
    (its own functions, as its executor calls them), after its check of slurm_extra."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    job = SimpleNamespace(resources=Resources(resources), threads=1)
    validate_slurm_extra(job)
    params = {"run_uuid": "u", "slurm_logfile": "log", "comment_str": "rule_measure",
              "account": "-A proj42", "partition": "-p gpu", "workdir": "."}
    return get_submit_command(job, params) + set_gres_string(job)


# (a count of 0, --gpus=h100:0, asks for none)
GPU_ON_SBATCH = re.compile(r"--gpus=\S+|--gres=gpu\S*|--gpus-per-node=\S+")
# Every way a site asks for a GPU, with every sbatch extra of the docs' recipes, given in
# the site file or replacing the timing rule's own through set-resources (a profile's, or
# --set-resources).
STYLES = ["gpus", "gres"]
TYPES = [None, "h100", "a100_3g.20gb", "nvidia_h100-80gb-hbm3"]
EXTRAS = [None, "--exclusive", "--nice=7 --exclusive"]
OVERRIDES = [{}, {"slurm_extra": "--exclusive"}, {"slurm_extra": "--exclusive --nice=7"},
             {"gpu": 0}, {"gres": "tmpdisk:10"}]


@pytest.mark.parametrize("override", OVERRIDES, ids=str)
@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("model", TYPES)
@pytest.mark.parametrize("style", STYLES)
def test_a_cuda_job_reaches_sbatch_with_its_gpu_or_is_refused_naming_the_key(
        style, model, extra, override):
    site = {"gpu_partition": "gpu", "gpu_request": style,
            **({"gpu_model": model} if model else {}),
            **({"slurm_extra": extra} if extra else {})}
    problems = cluster.gpu_request_problems(site, {"measure": override}, cuda=True)
    resources = {**cluster.slurm_resources(site, "cuda"), "runtime": 10, "mem_mb": 1000,
                 **override}
    line = sbatch_line(resources)
    gpu = [g for g in GPU_ON_SBATCH.findall(line) if not re.search(r"[:=]0$", g)]
    if problems:  # refused before submission, and only where the GPU was lost
        (problem,) = problems
        assert not gpu and problem.startswith("set-resources measure:"), (problem, line)
        assert any(f"measure:{key}=" in problem for key in override)
    else:
        assert len(gpu) == 1, line  # one GPU request, never two
        assert (model or "gpu") in gpu[0]
    if extra and "slurm_extra" not in override:  # the site's extras reach every job
        assert extra in line


def test_the_hyphenated_type_with_the_sites_exclusive_reaches_sbatch():
    site = {"gpu_partition": "gpu-h100", "gpu_model": "nvidia_h100-80gb-hbm3",
            "slurm_extra": "--exclusive"}
    line = sbatch_line({**cluster.slurm_resources(site, "cuda"), "runtime": 10})
    assert "--exclusive --gpus-per-node=nvidia_h100-80gb-hbm3:1" in line


@pytest.mark.parametrize("extra, named", [
    ("--gres=gpu:1", "asks every job for a GPU"),
    ("--gpus-per-node=2", "asks every job for a GPU"),
    ("-p other", "sets the partition"),
    ("--time=10", "runtime"),
])
def test_a_sites_slurm_extra_the_plugin_refuses_is_named_before_any_job(extra, named):
    problems = cluster.gpu_request_problems({"slurm_extra": extra}, {}, cuda=False)
    assert problems and all(p.startswith("cluster.slurm_extra") for p in problems)
    assert any(named in p for p in problems), problems


@pytest.mark.parametrize("results, cluster_keys, cuda, tree", [
    ("results-gpu", {"gpu_model": "nvidia_h100-80gb-hbm3"}, True, "results-gpu-h100"),
    ("results-gpu", {"gpu_model": "nvidia_h200"}, True, "results-gpu-h200"),
    ("results-gpu-h100", {"gpu_model": "h100"}, True, "results-gpu-h100"),
    ("results-gpu", {}, True, "results-gpu"),
    ("results", {"gpu_model": "h100"}, False, "results"),
])
def test_a_site_naming_its_gpu_type_gets_a_tree_of_its_own(results, cluster_keys, cuda, tree):
    assert cluster.machine_tree(results, cluster_keys, cuda) == tree
