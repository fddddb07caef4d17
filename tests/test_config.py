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


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shipped_config_validates_and_names_only_known_cells(path):
    config = yaml.safe_load(path.read_text())
    validate(config, str(SCHEMA))
    grid = config["grid"]
    assert spec.invalid_pairs(grid["frameworks"]) == []
    assert set(grid["models"]) <= set(spec.MODELS)
    assert len(list(spec.expand_grid(grid))) > 0
    # Defaults filled in by validation.
    assert {"tasks", "devices", "threads"} <= set(grid)
    assert {"n_samples", "batch_size", "warmup", "iterations"} <= set(config["workload"])
    assert config["gradient_check"]["tolerance"] > 0


def test_defaults_are_filled_in_and_match_the_workload_defaults():
    config = copy.deepcopy(MINIMAL)
    validate(config, str(SCHEMA))
    assert config["environments"] == "auto"
    assert (config["grid"]["tasks"], config["grid"]["devices"], config["grid"]["threads"]) == (
        ["backward"], ["cpu"], [1])
    workload = spec.Workload(model="mlp512", seed=0)
    assert config["workload"] == {k: getattr(workload, k) for k in config["workload"]}
    assert set(config["workload"]) == {"n_samples", "batch_size", "warmup", "iterations"}


def _bad(change):
    config = copy.deepcopy(MINIMAL)
    change(config)
    return config


@pytest.mark.parametrize("config, culprit", [
    (_bad(lambda c: c.update(bogus_key=1)), "bogus_key"),
    (_bad(lambda c: c["grid"].update(devices=["gpu"])), "'gpu'"),
    (_bad(lambda c: c["grid"].update(threads=[0])), "threads"),
    (_bad(lambda c: c["grid"].pop("seeds")), "'seeds'"),
    (_bad(lambda c: c.update(workload={"iterations": 0})), "iterations"),
], ids=["unknown-key", "device-gpu", "threads-0", "seeds-missing", "iterations-0"])
def test_bad_config_is_rejected_naming_the_culprit(config, culprit):
    with pytest.raises(Exception, match="ValidationError") as error:
        validate(config, str(SCHEMA))
    assert culprit in str(error.value)


def test_schema_enums_are_the_spec_tables():
    schema = yaml.safe_load(SCHEMA.read_text())
    grid = schema["properties"]["grid"]["properties"]
    assert tuple(grid["devices"]["items"]["enum"]) == spec.DEVICES
    assert tuple(grid["tasks"]["items"]["enum"]) == spec.TASKS
