#!/usr/bin/env python
"""Run tiny cells of one framework inside that framework's own environment (for the tests).

    .venvs/jax/bin/python tests/backend_runner.py jax cells.json outdir/

cells.json: a list of {"mode", "model", "task", "seed", "n_samples", "batch_size",
"jacobian_rows", "warmup", "iterations"}.  One process for all of a framework's cells (the
imports are paid once).  For cell k it writes outdir/k.npz (derivatives.write_derivatives) and
appends to outdir/results.json: status, message, the rows' quantities, choices, compile_s,
the rows' traces (Prepared.traces after each iteration; None where a cell has no counter),
the threads the framework reports and the loop's CPU utilisation.  The test process, which
has the float64 references, compares.  Threads are pinned to 1, before the import.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "workflow", "scripts"))

from adbench import derivatives, provenance, spec, timing  # noqa: E402
from adbench import backends  # noqa: E402
from adbench.backends import UnsupportedCell  # noqa: E402


def run_cell(backend, framework: str, cell: dict, npz: str) -> dict:
    workload = spec.Workload(
        model=cell["model"], seed=cell["seed"], task=cell["task"],
        n_samples=cell.get("n_samples"), batch_size=cell.get("batch_size"),
        jacobian_rows=cell.get("jacobian_rows"), warmup=cell.get("warmup", 1),
        iterations=cell.get("iterations", 2))
    result = {**cell, "status": "ok", "message": ""}
    loss, grads = None, []
    capabilities = backends.capabilities(framework)
    try:
        # As measure.py: what the backend declares it refuses never reaches prepare.
        declared = capabilities.refusal(cell["mode"], cell["model"], cell["task"], "cpu")
        if declared:
            raise UnsupportedCell(declared)
        prepared = backend.prepare(workload, cell["mode"], "cpu")
        t, cpu = time.perf_counter(), provenance.cpu_seconds()
        rows = timing.time_iterations(prepared, workload.warmup, workload.iterations,
                                      traces=prepared.traces)
        wall = time.perf_counter() - t
        result.update(
            quantities=sorted({k for row in rows for k in row if k.endswith("_s")}),
            steps=[row["step_s"] for row in rows], choices=prepared.choices,
            compile_s=prepared.compile_s, cpu_utilisation=(provenance.cpu_seconds() - cpu) / wall)
        result["traces"] = [row.get("traces") for row in rows]  # Prepared.traces, per row
        loss, grads = prepared.derivatives(0)
    except Exception as exc:  # a declared refusal, or a failure the test reports
        refusal = backends.refused(capabilities, cell["mode"], workload, "cpu", exc)
        if refusal is not None:
            result.update(status="unsupported", message=str(refusal),
                          at_run_time=not isinstance(exc, UnsupportedCell))
        else:
            result.update(status="failed", message=f"{type(exc).__name__}: {exc}",
                          traceback=traceback.format_exc())
    derivatives.write_derivatives(npz, result["status"], loss, grads)
    return result


def main(framework: str, cells_file: str, outdir: str) -> int:
    provenance.pin_threads_env(1)
    os.makedirs(outdir, exist_ok=True)
    os.environ["ADBENCH_CACHE_DIR"] = os.path.abspath(os.path.join(outdir, "cache"))
    with open(cells_file) as f:
        cells = json.load(f)
    backend = backends.load(framework)
    # The registry loaded here, with the framework, is the one the declaration asks for.
    problems = backends.capabilities(framework).registry_problems(backend.tasks)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    summary = {"threads_reported": backend.configure_threads(1),
               "versions": backend.versions(), "cells": []}
    for k, cell in enumerate(cells):
        start = time.perf_counter()
        result = run_cell(backend, framework, cell, os.path.join(outdir, f"{k}.npz"))
        # what the cell cost this test tier (compilations included): for the tiers' budgets
        result["wall_s"] = time.perf_counter() - start
        summary["cells"].append(result)
        print(f"[runner] {framework} {cell['mode']} {cell['model']} {cell['task']}: "
              f"{result['status']} in {result['wall_s']:.1f} s", file=sys.stderr, flush=True)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
