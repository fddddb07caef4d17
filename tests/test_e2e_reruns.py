"""End to end, what re-runs after an edit (docs/outputs.md, "Re-runs"), each test on its own
copy of the finished run (tests/e2e.py), by dry runs: the report's words and code re-time no
cell, a template re-builds the paper alone, a pin file its environment and its cells, a
backend's code its framework's cells (its comments none), the spec's comments no cell and
one model's or task's entry that model's or task's cells, a module the jobs whose scripts
import it."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
from pathlib import Path

import pytest

from adbench import code_inputs, spec
from e2e import OUT, TEST_CONFIG, planned_jobs, planned_outputs, snakemake, tiny_cells
from test_code_inputs import planned_inputs  # (a dry run's inputs per job)

pytestmark = pytest.mark.e2e


@pytest.fixture
def run(e2e_copy):
    """A copy of the finished run, this test's own to edit."""
    return e2e_copy


def test_template_edit_rebuilds_only_the_paper(run):
    template = run / "report/paper.tex.j2"
    template.write_text(template.read_text() + "\n% edited\n")
    plan = snakemake(run, "-n", "--config", "environments=venv").log
    assert [job for job in planned_jobs(plan) if job != "all"] == ["paper"], plan


def test_editing_one_pin_file_rebuilds_that_environment_alone(run):
    """Environments are cached: a pin edit rebuilds its env and re-measures its cells only."""
    assert "build_venv" not in planned_jobs(snakemake(run, "-n", "--config",
                                                      "environments=venv").log)
    counts = {f: sum(c.framework == f for c in tiny_cells())
              for f in dict.fromkeys(c.framework for c in tiny_cells())}
    framework = min(counts, key=counts.get)
    pins = run / "envs" / f"{spec.FRAMEWORKS[framework].env}.yaml"
    before, text = pins.stat(), pins.read_text()
    # A real edit: Snakemake records the checksum of small inputs, so a touch alone (same
    # content, newer mtime) rebuilds nothing.
    pins.write_text(text + "# edited\n")
    try:
        plan = snakemake(run, "-n", "--config", "environments=venv").log
    finally:  # the later tests run on a tree whose environments are up to date
        pins.write_text(text)
        os.utime(pins, ns=(before.st_atime_ns, before.st_mtime_ns))
    jobs = planned_jobs(plan)
    assert jobs.count("build_venv") == 1 and jobs.count("measure") == counts[framework], plan
    measured = [line.split(f"{OUT}/raw/", 1)[1] for line in plan.splitlines()
                if line.strip().startswith(f"output: {OUT}/raw/")]
    assert measured and all(path.split("/")[1] == framework for path in measured), measured


def test_editing_a_backend_re_times_its_framework_alone(run):
    """The timing jobs' one input is their harness file (common.smk), re-made when the
    digest of what its code executes changes (measure.smk, adbench/code_inputs.py): a code
    edit re-times exactly the cells that ran the edited file, and a touch or a comment
    nothing. The file edited is one of the backend package's own (its models): no other
    framework's timing job loads it, nor a reference job unless the framework computes
    references."""
    framework = tiny_cells()[0].framework
    backend = (run / "workflow/scripts/adbench/backends"
               / spec.FRAMEWORKS[framework].backend / "models.py")
    text = backend.read_text()
    harness = json.loads((run / OUT / f"harness/cpu/{framework}.json").read_text())
    assert harness["code"][str(backend.relative_to(run))] == code_inputs.code_digest(
        str(backend), run / "workflow" / "scripts")
    backend.touch()
    touched = planned_jobs(snakemake(run, "-n", "--config", "environments=venv").log)
    backend.write_text(text + "# edited\n")
    commented = planned_jobs(snakemake(run, "-n", "--config", "environments=venv").log)
    backend.write_text(text + "EDITED = True\n")
    edited = snakemake(run, "-n", "--config", "environments=venv").log
    assert "measure" not in touched and "harness" not in touched, touched
    assert "measure" not in commented and "harness" not in commented, commented
    ours = [c for c in tiny_cells() if c.framework == framework]
    assert planned_jobs(edited).count("measure") == len(ours), edited
    measured = planned_outputs(edited, "raw")
    assert measured and all(path.split("/")[1] == framework for path in measured), measured
    references = {c.model for c in ours if spec.MODELS[c.model].reference == framework}
    assert {p.split("/")[0] for p in planned_outputs(edited, "reference")} <= references


SPEC = "workflow/scripts/adbench/spec.py"


def test_a_comment_docstring_or_reformatting_of_the_spec_re_times_no_cell(run):
    """What a cell executes is digested, not dated (adbench/code_inputs.py): the experiment
    spec written out again by ast.unparse (every comment dropped, every line re-formatted),
    a docstring reworded and a comment appended plan no harness, timing or reference job."""
    path = run / SPEC
    tree = ast.parse(path.read_text())
    documented = next(node for node in tree.body if isinstance(node, ast.ClassDef)
                      and ast.get_docstring(node))
    documented.body[0].value.value += " (Edited.)"
    path.write_text(ast.unparse(tree) + "\n# edited\n")
    jobs = planned_jobs(snakemake(run, "-n", "--config", "environments=venv").log)
    assert not {"harness", "measure", "reference"} & set(jobs), jobs


@pytest.mark.parametrize("entry, edited, uses", [
    # one model's size: its hidden layer's width
    ('"mlp512": _mlp((512,)),', '"mlp512": _mlp((520,)),', lambda cell: cell.model == "mlp512"),
    # one task's definition
    ('"backward_retained": TaskInfo("gradients", separable=True,',
     '"backward_retained": TaskInfo("gradients", separable=False,',
     lambda cell: cell.task == "backward_retained"),
], ids=["model", "task"])
def test_editing_one_entry_of_the_spec_re_times_the_cells_that_use_it_alone(run, entry, edited,
                                                                            uses):
    """A cell's params hold the digest of its model's and its task's entries in the spec
    (measure.smk): editing one re-times that model's (or task's) cells and no other, and
    re-computes the references of that model (or whose data sizes that task gives:
    spec.REFERENCE_TASK); the harness, the rest of the spec, is left as it is."""
    path = run / SPEC
    text = path.read_text()
    assert entry in text
    path.write_text(text.replace(entry, edited))
    plan = snakemake(run, "-n", "--config", "environments=venv").log
    ours = {c.raw_path.removeprefix("raw/") for c in tiny_cells() if uses(c)}
    assert ours and "harness" not in planned_jobs(plan), plan
    assert set(planned_outputs(plan, "raw")) == ours, plan

    def reference_job(cell):  # what a cell's reference job reads of the spec
        task = spec.REFERENCE_TASK[spec.TASKS[cell.task].derivative]
        return dataclasses.replace(cell, task=task)

    references = {c.reference_path.removeprefix("reference/") for c in tiny_cells()
                  if uses(reference_job(c))}
    assert set(planned_outputs(plan, "reference")) == references, plan


def test_editing_the_report_re_times_no_cell(run):
    """Every module no timing or reference job loads (the analysis and the presentation:
    tests/test_architecture.py REPORT_LAYERS), the report spec's titles and words among them,
    the templates and the published numbers, edited at once: a dry run plans no timing job
    and no reference job (more edits can only plan more jobs, so each edit alone plans none
    either)."""
    from test_architecture import REPORT_LAYERS, layer_of

    scripts = run / "workflow/scripts"
    modules = [p for p in scripts.rglob("*.py") if p.parent != scripts
               and layer_of(".".join(p.relative_to(scripts).with_suffix("").parts)
                            .removesuffix(".__init__")) in REPORT_LAYERS]
    words = scripts / "adbench/report_spec.py"
    assert words in modules and len(modules) > 10
    for module in modules:
        module.write_text(module.read_text() + "# edited\n")
    title = "Eager mode: backward pass"
    words.write_text(words.read_text().replace(title, title + " (edited)"))
    for other in [*(run / "report").rglob("*.j2"), *(run / "report/published").glob("*")]:
        other.write_text(other.read_text() + ("\n% edited\n" if other.suffix == ".j2" else "\n"))
    plan = snakemake(run, "-n", "--config", "environments=venv").log
    jobs = planned_jobs(plan)
    assert "measure" not in jobs and "reference" not in jobs and "harness" not in jobs, plan
    assert "paper" in jobs and "tables" in jobs, plan


def test_editing_a_module_no_timing_job_imports_re_runs_its_users_alone(run):
    """Code inputs are derived from the scripts' imports (adbench/code_inputs.py): editing a
    module the figures import, and no timing job does, re-draws the figures, re-runs the
    other jobs whose scripts import it and the paper after them, and re-times nothing."""
    jobs = planned_inputs(run, "--configfile", TEST_CONFIG, "--config", "environments=venv")
    users = {}
    for rule, planned in jobs.items():
        for _, inputs in planned:
            for path in inputs:
                users.setdefault(path, set()).add(rule)
    timed = {"harness", "measure", "reference"}
    candidates = [p for p in users if p.endswith(".py") and "figures" in users[p]
                  and not users[p] & timed and not p.endswith("figures.py")]
    module = Path(min(candidates, key=lambda p: (len(users[p]), p)))
    before, text = module.stat(), module.read_text()
    try:
        module.write_text(text + "# edited\n")
        plan = snakemake(run, "-n", "--config", "environments=venv").log
    finally:
        module.write_text(text)
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    planned = set(planned_jobs(plan)) - {"all"}
    assert planned == users[str(module)] | {"paper"}, (module, plan[-3000:])


def test_a_workload_change_re_times_its_cells_in_packs_on_a_cluster(run):
    """On a cluster the cells a run re-times go in packs (adbench/cluster.py, pending_cell):
    a config that changes one model's iterations re-times that model's cells, each in a
    pack with the others of its framework, none in a job of its own; the other cells, left
    as they were timed, in none."""
    site = run / "profiles/slurm/site-example"
    env = {**os.environ, "ADBENCH_SITE": str(site / "site.yaml")}
    model = "mlp512"
    plan = snakemake(run, "-n", "--workflow-profile", "profiles/slurm", "--profile", str(site),
                     "--config", "environments=venv",
                     f"workload={{models: {{{model}: {{iterations: 13}}}}}}", env=env).log
    ours = {c.raw_path.removeprefix("raw/") for c in tiny_cells() if c.model == model}
    assert set(planned_outputs(plan, "raw")) == ours, plan[-3000:]
    # A group's jobs are printed indented under its "Group job pack_..." line.
    lines = plan.splitlines()
    assert "rule measure:" not in lines, plan[-3000:]  # a job of its own
    assert lines.count("    rule measure:") == len(ours), plan[-3000:]
    assert sum("Group job pack_" in line for line in lines) == len(
        {c.framework for c in tiny_cells() if c.model == model}), plan[-3000:]
