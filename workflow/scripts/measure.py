#!/usr/bin/env python
"""Time one cell of the grid in a fresh process and write its raw Parquet file.

Standalone (no snakemake object): Snakemake calls it with the interpreter of the cell's
framework environment, so only that framework is ever imported here.

    python workflow/scripts/measure.py --framework torch --mode eager --model mlp512 \
        --task backward --device cpu --threads 1 --seed 0 --warmup 5 --iterations 100 \
        --out results/raw/....parquet --gradients results/gradients/....npz

A failed or unsupported cell still writes both files, with its status and message, and
exits 0: the report then says "n/a" and why, instead of losing the cell.
"""

from __future__ import annotations

import time

SCRIPT_START = time.time()  # before any import: interpreter start-up vs. imports

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import provenance, schema, spec, timing  # noqa: E402
from adbench.backends import UnsupportedCell, load  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", required=True, choices=sorted(spec.FRAMEWORKS))
    p.add_argument("--mode", required=True)
    p.add_argument("--model", required=True, choices=sorted(spec.MODELS))
    p.add_argument("--task", required=True, choices=spec.TASKS)
    p.add_argument("--device", required=True, choices=spec.DEVICES)
    p.add_argument("--threads", required=True, type=int)
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--warmup", type=int, default=spec.Workload.warmup)
    p.add_argument("--iterations", type=int, default=spec.Workload.iterations)
    p.add_argument("--batch-size", type=int, default=spec.Workload.batch_size)
    p.add_argument("--n-samples", type=int, default=spec.Workload.n_samples)
    p.add_argument("--out", required=True, help="raw Parquet file to write")
    p.add_argument("--gradients", required=True, help=".npz file for the gradient cross-check")
    args = p.parse_args(argv)
    if args.mode not in spec.FRAMEWORKS[args.framework].modes:
        p.error(spec.invalid_pairs({args.framework: [args.mode]})[0])
    if min(args.threads, args.batch_size, args.n_samples, args.iterations) < 1 or args.warmup < 0:
        p.error("threads, batch size, samples and iterations must be >= 1; warm-up >= 0")
    return args


def log(message: str) -> None:
    print(f"[measure {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_gradients(path: str, status: str, loss: float | None, grads: list) -> None:
    import numpy as np

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp.npz"
    arrays = {f"g{i}": g for i, g in enumerate(grads)}
    np.savez(tmp, status=np.array(status), loss=np.array(np.nan if loss is None else loss),
             **arrays)
    os.replace(tmp, path)


def measure(args: argparse.Namespace) -> int:
    cell = spec.Cell(args.framework, args.mode, args.model, args.task, args.device,
                     args.threads, args.seed)
    workload = spec.Workload(model=args.model, seed=args.seed, n_samples=args.n_samples,
                             batch_size=args.batch_size, warmup=args.warmup,
                             iterations=args.iterations)
    mode_info = spec.FRAMEWORKS[args.framework].modes[args.mode]
    info = {
        "schema_version": None,
        "cell": dataclasses.asdict(cell),
        "workload": dataclasses.asdict(workload),
        "config_hash": provenance.config_hash(
            {"cell": dataclasses.asdict(cell), "workload": dataclasses.asdict(workload)}),
        "mode_description": mode_info.description,
        "timed_quantities": list(mode_info.timed_quantities),
        "dtype": "float32",
        "started_at": provenance.now_iso(),
        "process_started_at_epoch": provenance.process_start_epoch(),
        "script_started_at_epoch": SCRIPT_START,
        **provenance.git_state(os.path.dirname(os.path.abspath(__file__))),
    }
    provenance.pin_threads_env(args.threads)
    rows, status, message = [], "ok", ""
    loss, grads = None, []
    phases = {}
    try:
        t = time.perf_counter()
        backend = load(args.framework)
        backend.configure_threads(args.threads)
        phases["import_s"] = time.perf_counter() - t
        info["versions"] = backend.versions()
        log(f"{cell} with {info['versions']}")

        t = time.perf_counter()
        prepared = backend.prepare(workload, args.mode, args.device)
        phases["prepare_s"] = time.perf_counter() - t
        info["device_name"] = backend.device_name(args.device)

        t = time.perf_counter()
        rows = timing.time_iterations(prepared, args.warmup, args.iterations, progress=log)
        phases["timed_loop_s"] = time.perf_counter() - t
        log(f"{len(rows)} iterations in {phases['timed_loop_s']:.2f} s")

        # After the timed loop, so the first timed iterations really are the first calls.
        t = time.perf_counter()
        loss, grads = prepared.gradients(0)
        phases["gradients_s"] = time.perf_counter() - t
    except Exception as exc:  # recorded in the file: the report says n/a and why
        unsupported = isinstance(exc, UnsupportedCell)
        status = "unsupported" if unsupported else "failed"
        message = f"{type(exc).__name__}: {exc}"
        log(f"{status}: {message}")
        if not unsupported:
            traceback.print_exc()
        rows, grads = [], []

    info.update(
        schema_version=schema.SCHEMA_VERSION, status=status, message=message,
        phases=phases, ended_at=provenance.now_iso(), threads=args.threads,
        frameworks_loaded=provenance.frameworks_loaded(spec.FRAMEWORKS),
        **provenance.machine(),
    )
    write_gradients(args.gradients, status, loss, grads)
    schema.write_raw(args.out, dataclasses.asdict(cell), rows, info)
    log(f"wrote {args.out} (status {status})")
    return 0


if __name__ == "__main__":
    sys.exit(measure(parse_args()))
