"""config/paper.yaml, the full configuration, runs at least paper_context.FULL_PROCESSES
processes (seeds) for every cell that enters a verdict: the number the quick default's paper
promises it (issue 24, part 7); config/varlen.yaml does the same for the variable-length
claim, whose cells have a config of their own.  Configs are expanded as the workflow
expands them."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import yaml
from snakemake.utils import validate

from adbench import config as run_config
from adbench import paper_context

ROOT = Path(__file__).resolve().parents[1]


def config_cells(name: str) -> list:
    config = yaml.safe_load((ROOT / "config" / name).read_text())
    run = run_config.checked(config, validate=validate, configfiles=[f"config/{name}"],
                             working_dir=ROOT, core_limit=None, conda_enabled=False,
                             python="this-python")
    return run.cells


def paper_cells() -> list:
    return config_cells("paper.yaml")


def full_cells() -> list:
    """The full configurations' cells: the paper's and the variable-length inputs'."""
    return paper_cells() + config_cells("varlen.yaml")


def test_every_cell_entering_a_verdict_runs_the_full_processes():
    sides = paper_context.verdict_sides()
    seeds = defaultdict(set)
    for cell in full_cells():
        if (cell.framework, cell.mode, cell.model, cell.task) in sides:
            seeds[(cell.framework, cell.mode, cell.model, cell.task, cell.device,
                   cell.threads)].add(cell.seed)
    assert seeds, "config/paper.yaml has no cell of any claim"
    short = {k: len(v) for k, v in seeds.items() if len(v) < paper_context.FULL_PROCESSES}
    assert not short


def test_every_claim_has_cells_in_the_full_configuration():
    """The CPU configs for a claim the CPU can measure; config/gpu.yaml for one whose cells
    run on a GPU only (spec.TaskInfo.devices: the memory_grab claim)."""
    from adbench.claims import CLAIMS
    from adbench.variants import claim_devices

    cpu = {(c.framework, c.mode, c.model, c.task) for c in full_cells()}
    gpu = {(c.framework, c.mode, c.model, c.task) for c in config_cells("gpu.yaml")}
    for claim in CLAIMS:
        measured = cpu if "cpu" in claim_devices(claim) else gpu
        assert any(
            (s.framework, s.mode, s.model, s.task) in measured
            for c in claim.comparisons for s in c.sides
        ), claim.key


def test_each_variant_task_runs_beside_the_backward_cells_it_varies():
    """Issue 26: backward_frozen on every model with a frozen part, backward_retained on
    every model, in each (framework, mode) whose backward step the config times, with the
    same seeds (the claims pair them by seed)."""
    from adbench import spec

    cells = paper_cells()
    seeds = defaultdict(set)
    for c in cells:
        seeds[(c.framework, c.mode, c.model, c.task)].add(c.seed)
    backward = {k[:3] for k in seeds if k[3] == "backward"}
    for task, info in spec.TASKS.items():
        # Sequences: config/varlen.yaml; a GPU's memory: config/gpu.yaml (the next test).
        if not info.variant_of or info.sequence or "cpu" not in info.devices:
            continue
        models = {m for m, model in spec.MODELS.items() if model.frozen or not info.frozen}
        expected = {k for k in backward if k[2] in models}
        ran = {k[:3] for k in seeds if k[3] == task}
        assert ran == expected, task
        assert all(seeds[(*k, task)] == seeds[(*k, info.variant_of)] for k in ran), task


def test_gpu_config_runs_the_variants_and_the_forward_beside_the_backward_cells():
    """config/gpu.yaml: every variant task (the default allocator's on cuda only) and the
    forward alone run beside backward cells of the same (framework, mode, model) with their
    seeds, as the claims pair them; the default allocator in every mode of each framework
    whose GPU memory policy the spec sets (spec.CUDA_MEMORY_POLICY), every study model, and
    in no other framework (elsewhere the backward cells are its)."""
    from adbench import spec

    seeds = defaultdict(set)
    for c in config_cells("gpu.yaml"):
        assert c.device == "cuda"
        seeds[(c.framework, c.mode, c.model, c.task)].add(c.seed)
    fixed = [t for t, info in spec.TASKS.items() if info.variant_of and not info.sequence]
    assert {k[3] for k in seeds} >= {"backward", spec.FORWARD_TASK, *fixed}
    for (framework, mode, model, task), ran in seeds.items():
        if task != "backward" and task in (*fixed, spec.FORWARD_TASK):
            assert ran <= seeds[(framework, mode, model, "backward")], (framework, mode, model)
    for task in (t for t in fixed if spec.TASKS[t].default_allocator):
        expected = {(f, m, model) for f in spec.CUDA_MEMORY_POLICY
                    for m in spec.FRAMEWORKS[f].modes for model in spec.STUDY_MODELS}
        ran = {k[:3] for k in seeds if k[3] == task}
        assert ran == expected and all(len(seeds[(*k, task)]) >= 3 for k in ran)


def test_every_whole_step_mode_runs_the_forward_alone_beside_its_backward_cells():
    """Issue 27: a mode whose step is one call is judged on the cheap gradient through the
    forward task (claims.forward_of), paired by seed with its backward cells."""
    from adbench import spec

    seeds = defaultdict(set)
    for c in paper_cells():
        seeds[(c.framework, c.mode, c.model, c.task)].add(c.seed)
    whole_step = {k[:3] for k in seeds if k[3] == "backward"
                  and "forward_s" not in spec.timed_quantities(k[0], k[1], "backward")}
    assert whole_step
    for k in whole_step:
        assert seeds[(*k, spec.FORWARD_TASK)] == seeds[(*k, "backward")], k


def test_varlen_runs_every_strategy_beside_the_true_length_with_the_same_seeds():
    """The claim pairs each padded epoch with the true-length one of the same (framework,
    mode, model) and seed; the other strategies are shown beside them."""
    from adbench import spec

    seeds = defaultdict(set)
    for c in config_cells("varlen.yaml"):
        seeds[(c.framework, c.mode, c.model, c.task)].add(c.seed)
    sequence_models = {m for m, model in spec.MODELS.items() if model.sequence_features}
    conditions = {k[:3] for k in seeds}
    assert {k[2] for k in conditions} == sequence_models
    for condition in conditions:
        assert {frozenset(seeds[(*condition, t)]) for t in spec.SEQUENCE_TASKS} == {
            frozenset(seeds[(*condition, "backward_varlen")])}, condition
