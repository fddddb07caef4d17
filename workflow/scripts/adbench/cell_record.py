"""A timing job's command line and the record it leaves: the contract between measure.py,
which times the cell, and run_cell.py, its supervisor, which writes the same record for a
cell whose process was killed before it could (both files, with a status and a message).

parse_args   measure.py's command line: the cell's description whole (--cell JSON,
             spec.CellDescription), its budget, its two output files;
starting_info  the provenance known before anything runs;
write_cell   both files of a cell, whatever its status (schema.write_raw and
             derivatives.write_derivatives), each carrying the cell's description.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from adbench import derivatives, provenance, schema, spec, timing

# measure.py's exit status, under --retime-status, when its record asks the next run to
# re-time the cell (provenance `retime`; EX_TEMPFAIL): run_cell.py passes the flag and reads
# the record only then, so that a cell's supervisor imports no pyarrow in the usual case.
RETIME_STATUS = 75


def parse_args(argv: list[str] | None = None, doc: str | None = None) -> argparse.Namespace:
    """measure.py's arguments, with `description` (spec.CellDescription) read from --cell."""
    p = argparse.ArgumentParser(description=(doc or __doc__).split("\n\n")[0])
    p.add_argument("--cell", required=True, metavar="JSON",
                   help="the cell's description, whole (spec.CellDescription): "
                   '{"cell": {framework, mode, model, task, device, threads, seed}, '
                   '"workload": {model, task, seed, warmup, iterations, n_samples, '
                   'batch_size, jacobian_rows}}, as a raw file\'s metadata holds it')
    p.add_argument("--granted-threads", type=int, help="the cores Snakemake gave the job; a "
                   "cell is not run with fewer cores than threads")
    p.add_argument("--budget-s", type=float, help="the cell's time budget, from process "
                   "start: no iteration starts once it is nearly spent (status timeout, the "
                   "iterations done are kept); run_cell.py kills the process at the budget")
    p.add_argument("--cache-dir", default="results/cache", help="compile caches of the "
                   "frameworks (ADBENCH_CACHE_DIR for the backend); default %(default)s")
    p.add_argument("--retime-status", action="store_true", help=f"exit {RETIME_STATUS} where "
                   "the record asks the next run to re-time the cell (run_cell.py reads it "
                   "then); else 0 whatever the cell's status")
    p.add_argument("--out", required=True, help="raw Parquet file to write")
    p.add_argument("--gradients", required=True, help=".npz file for the correctness check: "
                   "loss and gradients, or the Jacobian, at the first batch")
    args = p.parse_args(argv)
    try:
        args.description = spec.CellDescription.from_json(args.cell)
    except (ValueError, TypeError) as exc:  # json's errors are ValueErrors
        p.error(f"--cell: {exc}")
    if args.budget_s is not None and args.budget_s <= 0:
        p.error("--budget-s: a budget > 0")
    return args


def starting_info(description: spec.CellDescription, budget_s: float | None,
                  script_started_at: float | None = None) -> dict:
    """The provenance known before anything runs; its "cell" and "workload" are the cell's
    description, whole.  `script_started_at`: the epoch at which measure.py began, before
    its imports (None for a record its supervisor writes)."""
    cell, workload = description.cell, description.workload
    return {
        "schema_version": None,
        **description.as_dict(),
        "budget_s": budget_s,
        "config_hash": provenance.config_hash(description.as_dict()),
        "timed_quantities": list(spec.timed_quantities(cell.framework, cell.mode, cell.task)),
        "n_parameters": workload.spec.n_parameters,
        "derivative_shape": list(workload.spec.jacobian_shape(workload.jacobian_rows))
        if workload.per_example else None,
        "dtype": "float32",
        # A cuda cell's GPU: nvidia-smi's view now, so that a cell refused or killed before
        # its framework set the device up still names its machine; the framework's later.
        "gpu": provenance.gpu(cell.device, None),
        # A cuda cell's CUDA stack, whatever its status (provenance.cuda_stack): driver,
        # the CUDA it supports, the runtime the framework got, the GPUs the job was given.
        "cuda": None,
        "retime": None,  # why the next run re-times this cell (run_cell.py), or None
        "peak_device_memory_bytes": None,
        "peak_device_reserved_bytes": None,
        "device_after_step_bytes": None,
        "device_process_bytes": None,
        # The memory of the measured phase (schema.MEMORY_FIELDS), once it has run.
        **timing.ProcessMemory().record,
        # Why it stopped and how busy the machine was (schema.MEASURING_FIELDS), once run.
        **timing.stop_record(timing.Timed([])),
        "started_at": provenance.now_iso(),
        "process_started_at_epoch": provenance.process_start_epoch(),
        "script_started_at_epoch": script_started_at,
        **provenance.git_state(os.path.dirname(os.path.abspath(__file__))),
    }


def write_cell(out: str, gradients: str, description: spec.CellDescription, info: dict,
               status: str, message: str, rows: list[dict], loss=None, grads=()) -> None:
    """Both files of a cell, whatever its status: the report says n/a and why."""
    info.update(
        schema_version=schema.SCHEMA_VERSION, status=status, message=message,
        ended_at=provenance.now_iso(), threads=description.cell.threads,
        frameworks_loaded=provenance.frameworks_loaded(spec.FRAMEWORKS),
        **provenance.machine(),
    )
    derivatives.write_derivatives(gradients, status, loss, list(grads),
                                  about=description.as_dict())
    schema.write_raw(out, dataclasses.asdict(description.cell), rows, info)
