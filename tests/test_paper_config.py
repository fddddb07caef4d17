"""config/paper.yaml, the full configuration, runs at least paper_context.FULL_PROCESSES
processes (seeds) for every cell that enters a verdict: the number the quick default's paper
promises it (issue 24, part 7).  The config is expanded as the workflow expands it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import yaml
from snakemake.utils import validate

from adbench import config as run_config
from adbench import paper_context

ROOT = Path(__file__).resolve().parents[1]


def paper_cells() -> list:
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    run = run_config.checked(config, validate=validate, configfiles=["config/paper.yaml"],
                             working_dir=ROOT, core_limit=None, conda_enabled=False,
                             python="this-python")
    return run.cells


def test_every_cell_entering_a_verdict_runs_the_full_processes():
    sides = paper_context.verdict_sides()
    seeds = defaultdict(set)
    for cell in paper_cells():
        if (cell.framework, cell.mode, cell.model, cell.task) in sides:
            seeds[(cell.framework, cell.mode, cell.model, cell.task, cell.device,
                   cell.threads)].add(cell.seed)
    assert seeds, "config/paper.yaml has no cell of any claim"
    short = {k: len(v) for k, v in seeds.items() if len(v) < paper_context.FULL_PROCESSES}
    assert not short


def test_every_claim_has_cells_in_the_full_configuration():
    from adbench.claims import CLAIMS

    measured = {(c.framework, c.mode, c.model, c.task) for c in paper_cells()}
    for claim in CLAIMS:
        assert any(
            (s.framework, s.mode, s.model, s.task) in measured
            for c in claim.comparisons for s in (c.numerator, c.denominator)
        ), claim.key
