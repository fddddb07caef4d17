"""The config schema: every shipped config validates; bad ones fail naming the culprit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from adbench import spec

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
CONFIGS = sorted({*ROOT.glob("config/*.yaml"), *ROOT.glob(".test/**/config/*.yaml"),
                  *ROOT.glob(".test/config*.yaml")})
MINIMAL = {"grid": {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0]}}


def test_the_default_and_paper_configs_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in CONFIGS}
    assert {"config/config.yaml", "config/paper.yaml"} <= names


def as_list(config):
    """What common.smk does before validating: a single grid becomes a list of one."""
    if isinstance(config.get("grid"), dict):
        config["grid"] = [config["grid"]]
    return config


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shipped_config_validates_and_names_only_known_cells(path):
    config = as_list(yaml.safe_load(path.read_text()))
    validate(config, str(SCHEMA))
    for grid in spec.config_grids(config):
        assert spec.invalid_pairs(grid["frameworks"]) == []
        assert set(grid["models"]) <= set(spec.MODELS)
        assert set(grid["tasks"]) <= set(spec.TASKS)
        assert spec.grid_cells([grid]), grid
    assert set(config["workload"]["models"]) <= set(spec.MODELS)
    assert set(config["workload"]["tasks"]) <= set(spec.TASKS)
    # Defaults filled in by validation.
    assert {"warmup", "iterations"} <= set(config["workload"])
    assert config["gradient_check"]["tolerance"] > 0


def test_defaults_are_filled_in_and_match_the_workload_defaults():
    config = as_list(copy.deepcopy(MINIMAL))
    validate(config, str(SCHEMA))
    assert config["environments"] == "auto"
    workload = spec.Workload(model="mlp512", seed=0)
    assert {k: config["workload"][k] for k in ("warmup", "iterations")} == {
        "warmup": workload.warmup, "iterations": workload.iterations}
    assert config["workload"]["models"] == config["workload"]["tasks"] == {}
    assert config["gradient_check"]["models"] == {"resnet50": 1e-2}


def test_a_list_of_grids_validates():
    config = {"grid": [MINIMAL["grid"], {**MINIMAL["grid"], "models": ["cnn"],
                                         "tasks": ["jacobian_rows"]}],
              "workload": {"models": {"cnn": {"jacobian_rows": 3}}}}
    validate(config, str(SCHEMA))


def _bad(change):
    config = copy.deepcopy(MINIMAL)
    change(config)
    return as_list(config)


@pytest.mark.parametrize("config, culprit", [
    (_bad(lambda c: c.update(bogus_key=1)), "bogus_key"),
    (_bad(lambda c: c["grid"].update(devices=["gpu"])), "'gpu'"),
    (_bad(lambda c: c["grid"].update(threads=[0])), "threads"),
    (_bad(lambda c: c["grid"].pop("seeds")), "'seeds'"),
    (_bad(lambda c: c.update(workload={"iterations": 0})), "iterations"),
    (_bad(lambda c: c.update(workload={"models": {"cnn": {"batch_size": 0}}})), "batch_size"),
    (_bad(lambda c: c.update(workload={"models": {"cnn": {"bogus": 1}}})), "bogus"),
], ids=["unknown-key", "device-gpu", "threads-0", "seeds-missing", "iterations-0",
        "model-batch-0", "model-unknown-key"])
def test_bad_config_is_rejected_naming_the_culprit(config, culprit):
    with pytest.raises(Exception, match="ValidationError") as error:
        validate(config, str(SCHEMA))
    assert culprit in str(error.value)


def test_schema_enums_are_the_spec_tables():
    schema = yaml.safe_load(SCHEMA.read_text())
    grid = schema["$defs"]["grid_axes"]["properties"]
    assert tuple(grid["devices"]["items"]["enum"]) == spec.DEVICES
    # Tasks, models and frameworks are checked against the spec itself (common.smk).
    assert "enum" not in grid["tasks"]["items"]


def test_the_schema_states_the_spec_grid_defaults():
    described = yaml.safe_load(SCHEMA.read_text())["$defs"]["grid"]["description"]
    for axis, values in spec.GRID_DEFAULTS.items():
        assert f"{axis} [{', '.join(map(str, values))}]" in described, axis
