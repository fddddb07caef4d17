"""A results tree fabricated for a shipped config, analysed and rendered as the workflow does.

The paper of a config that takes hours to run (config/paper.yaml) is checked on fabricated
measurements of that config's own cells: each cell's raw file is written as measure.py writes
it (seeded step times from the walltime cost model, warm-up slower, a few refusals as the
backends declare them), then the workflow's own scripts run on them, in the order and with
the options its rules give: aggregate, compare, tables, verdicts, figures, scaling, the graphs'
drawing (on a stand-in graph: walking a real one needs the frameworks), render_paper.  Only
the timings are made up; every table, figure and sentence of the paper is the pipeline's.

    python tests/fabricated.py config/paper.yaml OUTDIR      # OUTDIR/paper/paper.pdf
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np
import yaml
from snakemake.utils import validate

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import aggregate  # noqa: E402
import compare  # noqa: E402
import figures  # noqa: E402
import graphs as graph_script  # noqa: E402
import make_tables  # noqa: E402
import make_verdicts  # noqa: E402
import render_paper  # noqa: E402
import scaling as scaling_script  # noqa: E402
from adbench import backends, cluster, graphs, schema, spec  # noqa: E402
from adbench import config as run_config  # noqa: E402
from adbench import sweeps  # noqa: E402
from adbench import tables as tbl  # noqa: E402

CPU = "Fabricated Xeon(R) 8480 @ 2.0GHz"
# Two machines of one tree (trees from two sites analysed together): the second 30% slower.
TWO_MACHINES = (CPU, "AMD EPYC 7763 64-Core Processor")
GPUS = {"cuda": ("NVIDIA H100 80GB HBM3", "580.95.05")}
MEASURED_CAP = 40  # measured rows written per cell: enough for every statistic, fast
REPLICATES = 200  # bootstrap replicates (the config's 2000 take minutes on this many cells)
# A mode's step relative to the cost model's (compiled modes skip Python dispatch).
MODE_FACTOR = {True: 0.6, False: 1.0}
FRAMEWORK_FACTOR = {"torch": 1.0, "tensorflow": 1.8, "jax": 1.3, "autograd": 2.5,
                    "pytensor": 1.1, "theano": 1.2, "mxnet": 1.6, "chainer": 2.2}
# One cell of this (framework, mode, model, task) fails, so the paper shows an n/a.
FAILING = ("tensorflow", "eager", "lstm", "jacobian_rows")


def load_run(config_path: Path) -> run_config.Run:
    config = yaml.safe_load(config_path.read_text())  # its results tree: only named
    return run_config.checked(config, validate=validate, configfiles=[str(config_path)],
                              working_dir=ROOT, core_limit=None, conda_enabled=False,
                              python="this-python")


# ------------------------------------------------------------------ raw files
def status_of(cell: spec.Cell) -> tuple[str, str]:
    """ok, or unsupported as the backend declares (before running or at run time)."""
    capabilities = backends.capabilities(cell.framework)
    why = capabilities.refusal(cell.mode, cell.model, cell.task, cell.device)
    if why:
        return "unsupported", why
    met = next((r for r in capabilities.refusals if r.at_run_time
                and r.covers(cell.mode, cell.model, cell.task, cell.device)), None)
    if met is not None:
        return "unsupported", met.reason
    if (cell.framework, cell.mode, cell.model, cell.task) == FAILING and cell.seed == 0:
        return "failed", "RuntimeError: fabricated failure"
    return "ok", ""


def step_seconds(run: run_config.Run, cell: spec.Cell) -> float:
    sizes = run.workloads.sizes(cell.model, cell.task)
    task = cell.task if spec.TASKS[cell.task].variant_of is None else "backward"
    compiled = spec.FRAMEWORKS[cell.framework].modes[cell.mode].compiled
    seconds = cluster.modelled_iteration_s(sizes, cell.model, task)
    seconds *= MODE_FACTOR[compiled] * FRAMEWORK_FACTOR.get(cell.framework, 1.0)
    if cell.device == "cuda":
        seconds = seconds * 0.05 + 2e-4
    return seconds / (1 + 0.8 * (cell.threads - 1))


def iteration_rows(run: run_config.Run, cell: spec.Cell, rng,
                   slower: float = 1.0) -> tuple[list[dict], dict]:
    sizes = run.workloads.sizes(cell.model, cell.task)
    base = step_seconds(run, cell) * slower * (1 + 0.05 * rng.standard_normal())
    quantities = spec.timed_quantities(cell.framework, cell.mode, cell.task)
    sequence = spec.TASKS[cell.task].sequence is not None
    compiled = spec.FRAMEWORKS[cell.framework].modes[cell.mode].compiled
    rows, traces = [], 0
    n_measured = min(sizes["iterations"], MEASURED_CAP)
    for i in range(sizes["warmup"] + n_measured):
        warm = i < sizes["warmup"]
        slow = (30.0 if compiled else 3.0) if i == 0 else (1.3 if warm else 1.0)
        length = int(rng.integers(*spec.SEQUENCE_LENGTHS)) if sequence else None
        step = base * slow * math.exp(0.04 * rng.standard_normal())
        if sequence:
            step *= length / spec.SEQUENCE_LENGTHS[1]
            traces += int(compiled and (i == 0 or rng.random() < 0.1))
        row = {"iteration": i, "phase": "warmup" if warm else "measured", "step_s": step,
               "sequence_length": length, "traces": traces if sequence else None}
        if "backward_s" in quantities:
            row.update(forward_s=step / 3, backward_s=2 * step / 3)
        rows.append(row)
    return rows, {"timed_quantities": list(quantities), "compiled": compiled}


def provenance(run: run_config.Run, cell: spec.Cell, status: str, message: str,
               timed: dict, rng, cpu: str = CPU) -> dict:
    description = run.workloads.description(cell)
    gpu, driver = GPUS.get(cell.device, (None, None))
    memory = 300e6 + spec.MODELS[cell.model].n_parameters * 12 * rng.uniform(1, 1.2)
    compiled = spec.FRAMEWORKS[cell.framework].modes[cell.mode].compiled
    info = {
        "schema_version": schema.SCHEMA_VERSION,
        "cell": description.cell.__dict__ | {},
        "status": status, "message": message,
        "versions": {"torch": "2.9.0+cpu", "tensorflow": "2.20.0", "numpy": "2.2.6"}
        if cell.framework in ("torch", "tensorflow") else {cell.framework: "1.0"},
        "choices": {"dtype": "float32", "jacobian": "a loop of VJPs"
                    if cell.task == "jacobian_rows" else "the vectorised Jacobian API"},
        "threads_reported": {"intra_op": cell.threads},
        "timed_quantities": timed.get("timed_quantities", []),
        "n_parameters": spec.MODELS[cell.model].n_parameters,
        "workload": {k: getattr(description.workload, k) for k in
                     ("batch_size", "jacobian_rows", "warmup", "iterations", "n_samples")},
        "device_name": gpu or "cpu",
        "cpu_utilisation": 0.97 * cell.threads if status == "ok" else None,
        "cpu_model": cpu, "cpu_count": 32, "cpus_granted": cell.threads,
        "hostname": "fabricated", "platform": "Linux-6.8-x86_64", "python": "3.12.3",
        "git_commit": "0123456789abcdef0123", "git_dirty": False, "config_hash": "fab",
        "started_at": "2026-01-02T03:04:05+00:00", "ended_at": "2026-01-02T05:06:07+00:00",
        "phases": {"compile_s": 0.8 if compiled else 0.0, "import_s": 1.2, "prepare_s": 0.3},
    }
    if status == "ok":
        info.update(rss_baseline_bytes=memory, rss_peak_bytes=memory * 1.1,
                    rss_after_step_bytes=memory * 1.02, heap_after_step_bytes=memory * 0.4,
                    rss_peak_scope="measured phase")
    if cell.device == "cuda":
        info["gpu_driver"] = driver
        info["cuda"] = {"driver_version": driver, "runtime_cuda_version": "12.8"}
        if status == "ok":
            info.update(peak_device_memory_bytes=memory / 3, device_after_step_bytes=memory / 9,
                        device_process_bytes=memory * 2)
    return info


def write_raw_files(run: run_config.Run, raw: Path, machines=(CPU,)) -> list[str]:
    """Every cell's raw file, on each machine (a tree of its own per machine, as trees from
    several sites are: the analysis reads them together)."""
    paths = []
    for i, cpu in enumerate(machines):
        for cell in run.cells:
            rng = np.random.default_rng([zlib.crc32(repr(cell).encode()), i])
            status, message = status_of(cell)
            rows, timed = (iteration_rows(run, cell, rng, 1 + 0.3 * i) if status == "ok"
                           else ([], {}))
            path = raw / (f"machine{i}" if len(machines) > 1 else "") / cell.raw_path.removeprefix(
                "raw/")
            schema.write_raw(str(path), cell.__dict__, rows,
                             provenance(run, cell, status, message, timed, rng, cpu))
            paths.append(str(path))
    return paths


# ------------------------------------------------------------------ the analysis
def settings(run: run_config.Run) -> dict:
    statistics = {**run.config["statistics"], "bootstrap_replicates": REPLICATES}
    return {"grid": run.grids, "workload": run_config.without_resources(run.config["workload"]),
            "gradient_check": run.config["gradient_check"], "statistics": statistics}


def write_gradients(run: run_config.Run, path: Path) -> None:
    """check_gradients.py's CSV: every ok cell within tolerance of its group's first."""
    import pandas as pd

    cells = pd.read_parquet(path.parent.parent / "aggregate" / "cells.parquet")
    rows = []
    for _, group in cells.groupby(["model", "task", "device", "threads", "seed"]):
        first = group[group["status"] == "ok"].head(1)
        for r in group.itertuples():
            ok = r.status == "ok"
            rows.append({"model": r.model, "derivative": spec.TASKS[r.task].derivative,
                         "device": r.device, "threads": r.threads, "seed": r.seed,
                         "task": r.task, "framework": r.framework, "mode": r.mode,
                         "reference": (f"{first.iloc[0].framework}/{first.iloc[0]['mode']}/"
                                       f"{r.task}") if ok and len(first) else "",
                         "max_rel_error": 2e-7 if ok else math.nan,
                         "ref_rel_error": 3e-7 if ok else math.nan,
                         "tolerance": run.config["gradient_check"]["tolerance"],
                         "status": r.status, "passed": ok})
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def stand_in_graph(layers: int) -> graphs.Graph:
    """A graph the size and shape of a traced whole step (a walk needs the frameworks): per
    layer its forward ops under a long scope, each reading a variable, then their gradients."""
    g = graphs.Graph()
    previous = "x"
    g.nodes["x"] = graphs.Node("x\nPlaceholder", "input", "Placeholder")
    for i in range(layers):
        for op in ("MatMul", "BiasAdd", "Relu"):
            key = f"sequential_1/dense_{i}/{op}"
            variable = f"{key}/ReadVariableOp/resource"
            g.nodes[variable] = graphs.Node(f"{variable}\nPlaceholder", "input", "Placeholder")
            g.nodes[key] = graphs.Node(f"{key}\n{op}", "forward", op)
            g.edges += [(previous, key), (variable, key)]
            previous = key
    for i in reversed(range(layers)):
        for op in ("ReluGrad", "BiasAddGrad", "MatMul", "MatMul_1", "AddN"):
            key = f"gradient_tape/sequential_1/dense_{i}/{op}"
            g.nodes[key] = graphs.Node(f"{key}\n{op}", "gradient", op)
            g.edges.append((previous, key))
            previous = key
    return g


def layers(model: str) -> int:
    return len(spec.MODELS[model].arch.get("sizes", [1, 1])) - 1


def fabricate_graphs(run: run_config.Run, folder: Path) -> None:
    walked = []
    for framework in graphs.GRAPH_FRAMEWORKS:
        models = {m: graphs.walk_record(stand_in_graph(layers(m)))
                  for m in dict.fromkeys([graphs.FIGURE_MODEL, *(c.model for c in run.cells)])}
        title = f"[512] MLP, {framework}"
        found = {"framework": framework, "versions": {framework: "1.0"}, "models": models,
                 "dot": {graphs.FIGURE_MODEL: graphs.to_dot(stand_in_graph(4), title)}}
        path = folder / "walked" / f"{framework}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(found))
        walked.append(str(path))
    graph_script.main(["draw", *(f"--walked={p}" for p in walked), "--out-dir", str(folder)])


def fabricate_peak(run: run_config.Run, path: Path) -> list[str]:
    threads = sweeps.thread_counts(run.cells)
    if not threads:
        return []
    rate = lambda t: {"gflops": 90.0 * t, "bound": {"gflops": 120.0 * t},  # noqa: E731
                      "fraction_of_bound": 0.75, "size": 2048, "blas": "OpenBLAS"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"threads": {str(t): rate(t) for t in threads}}))
    return [str(path)]


def analyse(run: run_config.Run, tree: Path, raw_files: list[str]) -> None:
    """The workflow's analysis scripts on the tree's raw files, as its rules run them."""
    agg, tables_dir = tree / "aggregate", tree / "tables"
    assert aggregate.main([*raw_files, "--outdir", str(agg),
                           "--settings", json.dumps(settings(run), default=str)]) == 0
    confidence = str(run.config["statistics"]["confidence"])
    compare.main(["--bootstrap", str(agg / "bootstrap.parquet"), "--confidence", confidence,
                  "--outdir", str(agg)])
    make_tables.main(["--summary", str(agg / "summary.parquet"), "--cells",
                      str(agg / "cells.parquet"), "--comparisons",
                      str(agg / "comparisons.parquet"), "--noise-threshold",
                      str(run.config["statistics"]["noise_threshold"]), "--outdir",
                      str(tables_dir)])
    make_verdicts.main(["--comparisons", str(agg / "comparisons.parquet"), "--confidence",
                        confidence, "--outdir", str(tree / "verdicts")])
    write_gradients(run, tree / "checks" / "gradients.csv")
    fig = tree / "figures"
    figure_args = [f"--{name.replace('_', '-')}-out={fig / (name + '.pdf')}"
                   for name in figures.FIGURES]
    figures.main(["--iterations", str(agg / "iterations.parquet"), "--first",
                  str(run.config["figures"]["first_iterations"]),
                  "--out", str(fig / "first_iterations.pdf"), "--summary",
                  str(agg / "summary.parquet"), "--cells", str(agg / "cells.parquet"),
                  "--published", str(ROOT / "report" / "published"), "--conditions",
                  str(agg / "conditions.parquet"), "--confidence", confidence, *figure_args])
    peaks = fabricate_peak(run, tree / "scaling" / "peak.json")
    axes = sweeps.sweep_axes(run.cells)
    scaling_script.main(["--cells", str(agg / "cells.parquet"), "--comparisons",
                         str(agg / "comparisons.parquet"), "--conditions",
                         str(agg / "conditions.parquet"), *(f"--peak={p}" for p in peaks),
                         "--table", str(tables_dir / "scaling.csv"),
                         *(f"--figure={a}={fig / f'scaling_{a}.pdf'}" for a in axes)])
    fabricate_graphs(run, tree / "graphs")


def declared_inputs() -> set[str]:
    """The inputs the paper's sections declare (adbench.sections.paper): render_paper's
    options, so an input a section has newly declared is given once it is."""
    from adbench.sections import paper as declared

    return {i.name for s in declared.SECTIONS for i in s.inputs}


def render_args(run: run_config.Run, tree: Path, config_path: Path) -> list[str]:
    """render_paper's arguments for the analysed tree, as rule paper gives them."""
    agg, tables_dir, fig = tree / "aggregate", tree / "tables", tree / "figures"
    peaks = [str(p) for p in [tree / "scaling" / "peak.json"] if p.exists()]
    axes = sweeps.sweep_axes(run.cells)
    return [
        "--template", str(ROOT / "report" / "paper.tex.j2"),
        "--bib", str(ROOT / "report" / "references.bib"),
        "--published", str(ROOT / "report" / "published"), "--tables", str(tables_dir),
        "--figure", str(fig / "first_iterations.pdf"),
        *(f"--{n.replace('_', '-')}-figure={fig / (n + '.pdf')}" for n in tbl.FIGURES_OF_TABLES),
        "--memory-figure", str(fig / "memory_per_cell.pdf"),
        "--cells", str(agg / "cells.parquet"),
        "--gradients", str(tree / "checks" / "gradients.csv"),
        "--environment", str(agg / "environment.json"),
        "--first-iterations", str(agg / "first_iterations.csv"),
        "--made", str(agg / "comparisons.parquet"),
        *(["--conditions", str(agg / "conditions.parquet")]
          if "conditions" in declared_inputs() else []),
        "--claims", str(tree / "verdicts" / "claims.csv"),
        "--groups", str(tree / "verdicts" / "groups.csv"),
        "--comparisons", str(tree / "verdicts" / "comparisons.csv"),
        "--scaling-table", str(tables_dir / "scaling.csv"), *(f"--peak={p}" for p in peaks),
        *(f"--scaling-figure={a}={fig / f'scaling_{a}.pdf'}" for a in axes),
        "--graphs", str(tree / "graphs"),
        "--configfile", str(config_path.resolve().relative_to(ROOT)),
        "--results", run.results,
        "--out", str(tree / "paper" / "paper.pdf"),
    ]


def fabricated_tree(config_path: Path, tree: Path, machines=(CPU,)) -> list[str]:
    """`config_path`'s cells on fabricated timings (on each of `machines`), analysed under
    `tree`; render_paper's arguments."""
    run = load_run(config_path)
    if tree.exists():
        shutil.rmtree(tree)
    # a config's raw_trees are real measurements (example-results/): read as they are
    theirs = [str(ROOT / f) for tree_ in run.raw_trees
              for f in run.raw_files(ROOT) if f.startswith(tree_)]
    with contextlib.redirect_stdout(io.StringIO()):  # the scripts' tables, printed
        analyse(run, tree, write_raw_files(run, tree / "raw", machines) + theirs)
    return render_args(run, tree, config_path)


def fabricated_paper(config_path: Path, tree: Path, tex_only: bool = False) -> Path:
    """The paper of a fabricated tree (fabricated_tree): its PDF, or its .tex (tex_only)."""
    render_paper.main(fabricated_tree(config_path, tree) + (["--tex-only"] if tex_only else []))
    return tree / "paper" / ("paper.tex" if tex_only else "paper.pdf")


if __name__ == "__main__":
    # python tests/fabricated.py CONFIG OUTDIR [--render-only]
    config, out = ROOT / sys.argv[1], Path(sys.argv[2]).resolve()
    if "--render-only" in sys.argv:
        render_paper.main(render_args(load_run(config), out, config))
    else:
        print(fabricated_paper(config, out))
