# Config validation, the grid of cells and the helpers rules use. Runs at parse time,
# before any job: a bad config stops here with a message naming the key at fault.
import dataclasses
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

ROOT = Path(workflow.basedir)
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

from adbench import spec  # noqa: E402  (pure Python: no framework is imported)

validate(config, "../schemas/config.schema.yaml")


def config_problems(cfg):
    """What the JSON schema cannot know: the framework/mode table and the model registry."""
    grid = cfg["grid"]
    problems = spec.invalid_pairs(grid["frameworks"])
    problems += [
        f"grid.models: unknown model {m!r} (valid: {', '.join(spec.MODELS)})"
        for m in grid["models"]
        if m not in spec.MODELS
    ]
    return problems


if config_problems(config):
    raise WorkflowError("invalid config:\n  " + "\n  ".join(config_problems(config)))

CELLS = list(spec.expand_grid(config["grid"]))
WORKLOAD = config["workload"]


wildcard_constraints:
    framework="|".join(spec.FRAMEWORKS),
    mode="|".join({m for f in spec.FRAMEWORKS.values() for m in f.modes}),
    model="|".join(spec.MODELS),
    task="|".join(spec.TASKS),
    device="|".join(spec.DEVICES),
    threads=r"\d+",
    seed=r"\d+",
    env=r"[A-Za-z0-9_-]+",


# ------------------------------------------------------------------ environments
def conda_enabled():
    settings = workflow.deployment_settings
    return settings is not None and DeploymentMethod.CONDA in settings.deployment_method


def environment_mode():
    """auto -> conda under --sdm conda, else venvs built by the pipeline."""
    mode = config["environments"]
    if mode == "auto":
        return "conda" if conda_enabled() else "venv"
    if (mode == "conda") != conda_enabled():
        raise WorkflowError(
            f"environments: {mode} contradicts the command line: use `--sdm conda` "
            "exactly when environments is conda (or auto)"
        )
    return mode


ENV_MODE = environment_mode()


def env_file(env):
    return str(ROOT / "envs" / f"{env}.yaml")


def venv_receipt(env):
    return f".venvs/{env}.json"


def env_inputs(env):
    """A job's environment as an input: the venv's receipt, so it is built first."""
    return [venv_receipt(env)] if ENV_MODE == "venv" else []


def env_python(env):
    return {
        "venv": f".venvs/{env}/bin/python",
        "conda": "python",
        "current": sys.executable,
    }[ENV_MODE]


def framework_env(wildcards):
    return spec.FRAMEWORKS[wildcards.framework].env


# ------------------------------------------------------------------ code as input
# A job's own code is one of its inputs: editing a backend re-measures its cells, editing
# figures.py redraws the figure (Snakemake tracks the shell line, not the files it runs).
HARNESS = ["spec.py", "timing.py", "schema.py", "provenance.py", "backends/__init__.py"]


def code(script, *modules):
    return [str(SCRIPTS / script)] + [str(SCRIPTS / "adbench" / m) for m in modules]


def measure_code(wildcards):
    backend = f"backends/{spec.FRAMEWORKS[wildcards.framework].backend}.py"
    return code("measure.py", *HARNESS, backend)


# ------------------------------------------------------------------ cells and outputs
def raw_files():
    return [cell.raw_path for cell in CELLS]


def gradient_files():
    return [cell.gradient_path for cell in CELLS]


def workload_args():
    w = WORKLOAD
    return (
        f"--warmup {w['warmup']} --iterations {w['iterations']} "
        f"--batch-size {w['batch_size']} --n-samples {w['n_samples']}"
    )


TABLE_FILES = [
    f"results/tables/{t}.{ext}" for t in spec.TABLE_NAMES for ext in ("csv", "md", "tex")
]
FIGURE_FILES = ["results/figures/first_iterations.pdf", "results/figures/first_iterations.png"]


def final_outputs():
    return [
        *TABLE_FILES,
        *FIGURE_FILES,
        "results/checks/gradients.csv",
        "results/paper/paper.pdf",
    ]
