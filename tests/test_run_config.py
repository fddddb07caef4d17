"""adbench/config.py without Snakemake: --config values read by the schema, the checks the
schema cannot make, the results tree, the workloads; every fault named before any job.

tests/test_e2e_config.py keeps a few of these through a real `snakemake -n`, to show that
common.smk calls them."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from adbench import config as run_config
from adbench import spec

ROOT = Path(__file__).resolve().parents[1]
TEST_CONFIG = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())


def checked(config: dict, *, cores: int | None = 2, conda: bool = False):
    return run_config.checked(config, validate=validate, configfiles=[], working_dir=ROOT,
                              core_limit=cores, conda_enabled=conda, python="this-python")


def with_fault(override: dict) -> dict:
    """The tiny test config with `override` merged in (a list of grids: into the first)."""
    config = copy.deepcopy(TEST_CONFIG)
    for key, value in override.items():
        target = config.get(key)
        if isinstance(target, list):
            target = target[0]
        if isinstance(value, dict) and isinstance(target, dict):
            target.update(value)
        else:
            config[key] = value
    return config


def test_the_tiny_config_passes_and_gives_its_cells():
    run = checked(copy.deepcopy(TEST_CONFIG))
    assert run.results == "results-test"
    assert run.cells == spec.config_cells(TEST_CONFIG)
    assert run.env_mode == "venv"
    assert run.config["workload"]["iterations"] == 12  # the file's, not the default


@pytest.mark.parametrize(
    "override, named",
    [
        ({"grid": {"frameworks": {"torch": ["graph"]}}}, "grid[0].frameworks.torch: mode 'graph'"),
        ({"grid": {"frameworks": {"caffe": ["eager"]}}}, "unknown framework 'caffe'"),
        ({"grid": {"models": ["resnet9000"]}}, "unknown model 'resnet9000'"),
        ({"grid": {"tasks": ["hessian"]}}, "grid[0].tasks: unknown task 'hessian'"),
        ({"grid": {"devices": ["gpu"]}}, "'gpu' is not one of"),
        ({"workload": {"iterations": 0}}, "iterations"),
        ({"workload": {"models": {"resnet9000": {"iterations": 1}}}},
         "workload.models: unknown model 'resnet9000'"),
        ({"warmup": 3}, "'warmup' was unexpected"),
        ({"grid": {"threads": [1, 64]}}, "grid[0].threads: 64 exceeds the 2 CPU(s)"),
        ({"workload": {"models": {"mlp512": {"batch_size": 512, "n_samples": 100}}}},
         "workload.models.mlp512: batch_size 512 exceeds n_samples 100"),
        ({"workload": {"models": {"mlp512": {"jacobian_rows": 100000}}}},
         "workload.models.mlp512.jacobian_rows: 100000 exceeds"),
        ({"workload": {"budget_s": 0}}, "budget_s"),
        ({"workload": {"tasks": {"hessian": {"iterations": 3}}}},
         "workload.tasks: unknown task 'hessian'"),
        ({"workload": {"tasks": {"backward": {"batch_size": 3}}}}, "'batch_size' was unexpected"),
        ({"grid": {"frameworks": {"torch": []}}}, "'torch'"),
        ({"grid": {"frameworks": {"torch": ["eager", "eager"]}}}, "non-unique"),
        ({"grid": {"seeds": [-1]}}, "'seeds'"),
        ({"grid": {"threads": [0]}}, "'threads'"),
        ({"every_grid": {"seeds": "zero"}}, "'every_grid'"),
        ({"environments": "docker"}, "'docker' is not one of"),
        ({"environments": "conda"}, "environments: conda contradicts the command line"),
        ({"gradient_check": {"tolerance": -1}}, "'tolerance'"),
        ({"gradient_check": {"models": {"resnet9000": 1e-3}}},
         "gradient_check.models: unknown model 'resnet9000'"),
        ({"figures": {"first_iterations": 1}}, "'first_iterations'"),
        ({"statistics": {"confidence": 1.5}}, "'confidence'"),
        ({"statistics": {"bootstrap_replicates": 10}}, "'bootstrap_replicates'"),
        ({"workload": {"mem_mb": 0}}, "mem_mb"),
        ({"results": "report/published"}, "results: 'report/published' lies inside report/"),
        ({"results": "workflow"}, "results: 'workflow' lies inside workflow/"),
        ({"results": "."}, "results: '.' is the project's own folder"),
        ({"results": "./tests/out"}, "lies inside tests/"),
        ({"results": "example-results"}, "lies inside example-results/"),
        ({"results": "example-results/cuda-h100/raw"}, "lies inside example-results/"),
        ({"results": "/tmp/elsewhere"}, "'results'"),  # the schema: relative paths only
        ({"results": "../elsewhere"}, "'results'"),
        ({"cluster": {"gpu_model": "a100:1"}}, "'gpu_model'"),  # the count is the rule's
        ({"cluster": {"cuda_cpus": 0}}, "'cuda_cpus'"),
        ({"cluster": {"partition": "gpu"}}, "'partition' was unexpected"),
        ({"cluster": {"account": ""}}, "'account'"),
        ({"cuda_builds": {"torch": "cu118"}}, "'cu118' is not one of ['cu130', 'cu126']"),
        ({"cuda_builds": {"torch": "cu118"}}, "['cuda_builds']['torch']"),
        ({"cuda_builds": {"theano": "cuda12"}}, "'theano' was unexpected"),
        ({"raw_trees": ["no/such/tree"]}, "raw_trees: 'no/such/tree' is no folder"),
        ({"raw_trees": ["docs"]}, "raw_trees: 'docs' holds no raw files"),
        ({"raw_trees": ["results-test"]}, "raw_trees: 'results-test' is this config's own"),
        ({"raw_trees": ["/tmp/site"]}, "'raw_trees'"),  # the schema: relative paths only
        ({"grid": []}, "grid: no cells to time, and no raw_trees to read"),
    ],
)
def test_a_bad_config_is_refused_naming_the_fault(override, named):
    with pytest.raises(Exception) as error:
        checked(with_fault(override))
    assert named in str(error.value)


def test_other_trees_raw_files_join_this_trees_analysis():
    trees = ["example-results/cuda-h100", "example-results/cuda-h200"]
    run = checked({**copy.deepcopy(TEST_CONFIG), "raw_trees": trees})
    own = [f"results-test/{cell.raw_path}" for cell in run.cells]
    others = [str(p.relative_to(ROOT)) for tree in trees
              for p in sorted((ROOT / tree / "raw").rglob("*.parquet"))]
    assert run.raw_files(ROOT) == own + others
    nothing_of_its_own = checked({**copy.deepcopy(TEST_CONFIG), "grid": [], "raw_trees": trees})
    assert nothing_of_its_own.cells == [] and nothing_of_its_own.raw_files(ROOT) == others


def test_every_problem_of_a_step_is_named_at_once():
    config = with_fault({"grid": {"models": ["resnet9000"], "tasks": ["hessian"]}})
    with pytest.raises(run_config.ConfigError) as error:
        checked(config)
    assert len(error.value.problems) == 2
    assert str(error.value).startswith("invalid config:\n  ")


def test_command_line_strings_are_read_as_the_numbers_the_schema_wants():
    config = with_fault({"every_grid": {"seeds": ["0", "2"]}, "workload": {"iterations": "7"}})
    run = checked(config)
    assert {c.seed for c in run.cells} == {0, 2}
    assert run.workloads.sizes("mlp512", "backward")["iterations"] == 7


def test_a_grid_on_the_command_line_must_give_its_own_axes():
    config = with_fault({})
    config["grid"] = {"seeds": ["0", "1"]}
    with pytest.raises(run_config.ConfigError, match="every_grid=") as error:
        checked(config)
    assert {p.split(": ", 1)[0] for p in error.value.problems} == {"grid"}


def test_threads_are_checked_against_the_machine_only_when_jobs_run_here():
    config = with_fault({"grid": {"threads": [64]}})
    assert checked(config, cores=None).cells  # a cluster: each job asks for its own


def test_workloads_apply_task_then_model_overrides_and_scale_nothing_else():
    w = run_config.Workloads({"warmup": 5, "iterations": 100, "budget_s": 90, "mem_mb": 4000,
                              "tasks": {"jacobian_rows": {"iterations": 20, "budget_s": 600}},
                              "models": {"cnn": {"iterations": 7, "batch_size": 16}}})
    assert w.settings("mlp512", "backward")["iterations"] == 100
    assert w.settings("fcn", "jacobian_rows")["iterations"] == 20
    assert w.settings("cnn", "jacobian_rows")["iterations"] == 7  # the model's wins
    assert w.sizes("cnn", "backward")["batch_size"] == 16
    assert w.sizes("mlp512", "backward")["batch_size"] == spec.MODELS["mlp512"].batch_size
    assert w.runtime_min("fcn", "jacobian_rows") == 11  # 600 s -> 10 min + 1 to spare
    assert w.runtime_min("mlp512", "backward") == 3
    assert run_config.without_resources(w.workload) == {
        "warmup": 5, "iterations": 100, "tasks": {"jacobian_rows": {"iterations": 20}},
        "models": {"cnn": {"iterations": 7, "batch_size": 16}}}


@pytest.mark.parametrize("configfiles, tree", [
    ([], "results"),
    ([ROOT / "config" / "config.yaml"], "results"),
    ([ROOT / "config" / "paper.yaml"], "results-paper"),
    ([Path("/somewhere/my config.yaml")], "results-my_config"),
])
def test_each_config_file_gets_its_own_results_tree(configfiles, tree):
    assert run_config.default_results_tree(configfiles) == tree


def test_a_results_tree_outside_the_project_or_a_shipped_one_is_accepted(tmp_path):
    assert run_config.results_tree_problems("results-x", ROOT) == []
    assert run_config.results_tree_problems("example-results/cuda-h100", ROOT) == []
    assert run_config.results_tree_problems("out/results", tmp_path) == []


def test_the_shipped_folders_are_the_projects_top_level_folders():
    """A new top-level folder of the project must join SHIPPED_FOLDERS, or a run could write
    its results into it."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path}
    assert folders <= {*run_config.SHIPPED_FOLDERS, *run_config.SHIPPED_RESULTS}


def test_current_environment_names_the_framework_this_python_lacks():
    cells = spec.config_cells({"grid": {"frameworks": {"mxnet": ["eager"], "torch": ["eager"]},
                                        "models": ["mlp512"], "seeds": [0]}})
    problems = run_config.current_env_problems("current", cells, "py")
    assert len(problems) == 1 and "cannot import 'mxnet'" in problems[0]
    assert run_config.current_env_problems("venv", cells, "py") == []


# ------------------------------------------------------------------ the cluster section
SITE = {"account": "proj42", "qos": "normal", "cpu_partition": "cpu", "gpu_partition": "gpu",
        "gpu_model": "a100", "gpu_constraint": "a100_80g", "cuda_cpus": 6}


def test_the_cluster_section_routes_a_job_by_its_device():
    cpu, cuda = (run_config.slurm_resources(SITE, device, 1) for device in ("cpu", "cuda"))
    assert cpu == {"slurm_partition": "cpu", "slurm_account": "proj42", "qos": "normal",
                   "gpu": 0}
    # a CPU job never gets the GPU model (with gpu=0 it would ask for --gpus=a100:0), nor
    # the GPU partition's constraint, nor cpus_per_task (its threads are its CPUs)
    assert cuda == {"slurm_partition": "gpu", "slurm_account": "proj42", "qos": "normal",
                    "constraint": "a100_80g", "gpu": 1, "gpu_model": "a100",
                    "cpus_per_task": 6}
    assert run_config.slurm_resources({**SITE, "gpu_qos": "gpu"}, "cuda")["qos"] == "gpu"
    assert run_config.slurm_resources({**SITE, "gpu_qos": "gpu"}, "cpu")["qos"] == "normal"
    assert run_config.cell_gpus("cuda") == 1 and run_config.cell_gpus("cpu") == 0


def test_an_unset_key_is_no_resource_so_a_site_default_applies():
    run = checked(with_fault({}))
    # the schema's defaults: none of them a resource of the plugin's
    assert run.config["cluster"] == {"cuda_cpus": 4, "walltime_margin": 2,
                                     "walltime_floor_min": 5, "gpu_request": "gpus",
                                     "pack_minutes": 120}
    assert run_config.slurm_resources(run.config["cluster"], "cpu", 2) == {"gpu": 0}
    assert run_config.slurm_resources(run.config["cluster"], "cuda", 1) == {
        "gpu": 1, "cpus_per_task": 4}


def test_a_cuda_job_asks_for_cuda_cpus_cores_and_at_least_its_threads():
    assert run_config.job_cpus({"cuda_cpus": 4}, "cuda", 1) == 4
    assert run_config.job_cpus({"cuda_cpus": 4}, "cuda", 8) == 8
    assert run_config.job_cpus({"cuda_cpus": 4}, "cpu", 2) == 2


def test_cluster_values_from_the_command_line_are_read_by_the_schema():
    run = checked(with_fault({"cluster": {"cuda_cpus": "8", "gpu_partition": "gpu"}}))
    assert run.config["cluster"] == {"cuda_cpus": 8, "gpu_partition": "gpu",
                                     "walltime_margin": 2, "walltime_floor_min": 5,
                                     "gpu_request": "gpus", "pack_minutes": 120}


def test_a_budget_is_an_integer_resource_where_it_is_whole():
    """Cells packed into one cluster job may differ in it: Snakemake merges integers, and
    refuses strings that differ (docs/cluster.md, "Packs")."""
    assert run_config.budget_resource(3600.0) == 3600
    assert isinstance(run_config.budget_resource(3600.0), int)
    assert run_config.budget_resource(0.5) == "0.5"


# ------------------------------------------------------------------ the CUDA build
def test_a_cuda_cell_runs_in_the_cuda_build_the_config_chose():
    run = checked(copy.deepcopy(TEST_CONFIG))
    assert run.config["cuda_builds"] == {"torch": "cu130", "jax": "cuda12",
                                         "tensorflow": "cuda12"}  # the tested pins
    assert run.env_for("torch", "cuda") == "torch-cuda" and run.env_for("torch", "cpu") == "torch"
    run = checked(with_fault({"cuda_builds": {"torch": "cu126", "jax": "cuda13"}}))
    assert (run.env_for("torch", "cuda"), run.env_for("jax", "cuda")) == ("torch-cu126",
                                                                          "jax-cuda13")
    assert run.env_for("torch", "cpu") == "torch"  # a CPU cell keeps its CPU build
    assert run.env_for("tensorflow", "cuda") == "tensorflow-cuda"
    assert run.env_for("theano", "cpu") == "theano"



def test_a_cell_stops_by_the_schemas_precision_rule_unless_its_block_asks_for_a_fixed_count():
    config = with_fault({"workload": {"models": {"mlp512": {"tasks": {
        "backward": {"stop": "fixed", "iterations": 469}}}}}})
    run = checked(config)
    defaults = run_config.load_schema()["properties"]["workload"]["properties"]
    precise = run.workloads.description(spec.Cell("torch", "eager", "mlp512", "jacobian_rows",
                                                  "cpu", 1, 0)).workload
    assert precise.stop == "precision" == defaults["stop"]["default"]
    for key in ("precision", "min_iterations", "measure_s", "busy_share"):
        assert getattr(precise, key) == defaults[key]["default"], key
    assert precise.busy_retimes == 0  # the tiny config's own: its tests run side by side
    # The model's own entry for one task wins over the task's and the model's.
    fixed = run.workloads.description(spec.Cell("torch", "eager", "mlp512", "backward",
                                                 "cpu", 1, 0)).workload
    assert (fixed.stop, fixed.iterations) == ("fixed", 469)
    assert run_config.without_resources({"warmup": 1, "tasks": {}, "models": {
        "cnn": {"budget_s": 5, "tasks": {"backward": {"budget_s": 5}}}}}) == {
        "warmup": 1, "tasks": {}, "models": {}}


@pytest.mark.parametrize("override, named", [
    ({"stop": "forever"}, "workload.stop"),
    ({"precision": 0}, "workload.precision"),
    ({"min_iterations": 3}, "workload.min_iterations"),
    ({"busy_retimes": -1}, "workload.busy_retimes"),
])
def test_a_bad_stop_or_busy_key_is_refused_naming_it(override, named):
    with pytest.raises(Exception, match=named.split(".")[-1]):
        checked(with_fault({"workload": override}))


def test_a_site_naming_its_gpu_type_gets_a_results_tree_of_its_own():
    """Two GPU types never price or overwrite each other's cells: the tree of a config with
    CUDA cells on a site naming its GPU type carries the type; a CPU-only config's does not."""
    cuda_grid = {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0],
                 "devices": ["cuda"]}
    site = {"gpu_model": "nvidia_h100-80gb-hbm3"}
    run = checked(with_fault({"grid": [cuda_grid], "cluster": dict(site)}))
    assert run.results == f"{TEST_CONFIG['results']}-h100"
    h200 = checked(with_fault({"grid": [cuda_grid], "cluster": {"gpu_model": "h200"}}))
    assert h200.results == f"{TEST_CONFIG['results']}-h200"
    cpu = checked(with_fault({"cluster": dict(site)}))
    assert cpu.results == TEST_CONFIG["results"]
