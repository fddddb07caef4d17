#!/usr/bin/env python
"""Time one cell of the grid in a fresh process and write its raw Parquet file.

Standalone (no snakemake object): Snakemake calls it with the interpreter of the cell's
framework environment, so only that framework is ever imported here.

    python workflow/scripts/measure.py --cell '{"cell": {"framework": "torch", "mode":
        "eager", "model": "mlp512", "task": "backward", "device": "cpu", "threads": 1,
        "seed": 0}, "workload": {"model": "mlp512", "task": "backward", "seed": 0,
        "warmup": 5, "iterations": 100}}' \
        --out results/raw/....parquet --gradients results/gradients/....npz

The cell arrives whole, as its description (spec.CellDescription: the workload keys it
leaves out take the model's defaults), and is written whole into both files.

A failed or unsupported cell still writes both files, with its status and message, and
exits 0 (with --retime-status, cell_record.RETIME_STATUS where its record asks to be
re-timed): the report then says "n/a" and why, instead of losing the cell.  `unsupported` is
what cannot run (the spec gives the framework no path to the device, the framework or mode
refuses the model or task); a cuda cell whose framework sees no GPU is `failed`, with the
framework's words and the driver and CUDA versions found, and re-timed by the next run
(`retime`: run_cell.py adds a line to the cell's killed log, a value of its params).
"""

from __future__ import annotations

import time

SCRIPT_START = time.time()  # before any import: interpreter start-up vs. imports

import argparse  # noqa: E402
import atexit  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import cell_record, machine_load, provenance, spec, timing  # noqa: E402
from adbench import backends  # noqa: E402
from adbench.backends import DeviceNotVisible, UnsupportedCell  # noqa: E402


def log(message: str) -> None:
    print(f"[measure {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class TimeBudgetSpent(Exception):
    """The timed loop stopped early: the cell's budget ran out."""


def loop_deadline(budget_s: float | None) -> float | None:
    """The perf_counter reading after which no iteration starts: the budget counts from the
    process's start, less a fifth (at most a minute) kept for writing the files, since
    run_cell.py kills the process at the budget."""
    if budget_s is None:
        return None
    # The process's start (/proc, to 10 ms), else the script's: the earlier is the safe one.
    started = min(filter(None, (provenance.process_start_epoch(), SCRIPT_START)))
    reserve = min(60.0, 0.2 * budget_s)
    return time.perf_counter() + budget_s - reserve - (time.time() - started)


def busy_rule(workload: spec.Workload, threads: int) -> machine_load.BusyRule:
    """The workload's busy rule: the machine's load is read around every measured phase,
    and judged where the workload states a busy_share, on the cores the cell's threads
    need (other processes on the CPUs it leaves spare do not compete with it)."""
    judged = workload.busy_share is not None
    return machine_load.BusyRule(workload.busy_share,
                                 workload.busy_retimes if judged else 0,
                                 cell_cores=threads)


def check_threads(reported: dict, wanted: int) -> None:
    """A thread count the framework did not take would label every number wrongly."""
    wrong = {k: v for k, v in reported.items() if v is not None and int(v) != wanted}
    if wrong:
        raise RuntimeError(f"asked for {wanted} threads, the framework reports {wrong}")


def with_sequence_lengths(rows: list[dict], workload: spec.Workload) -> list[dict]:
    """Each iteration's batch length, from the spec (the same for every framework)."""
    if workload.sequence is None:
        return rows
    lengths = workload.batch_lengths()  # drawn once, not per row
    return [{**row, "sequence_length": int(lengths[row["iteration"] % workload.n_batches])}
            for row in rows]


def check_declared(capabilities: backends.Capabilities, cell: spec.Cell) -> None:
    """What the backend declares it cannot run (a device it has no build for, a task or
    model it refuses: Capabilities.refusal) is `unsupported` before anything is imported."""
    reason = capabilities.refusal(cell.mode, cell.model, cell.task, cell.device)
    if reason:
        raise UnsupportedCell(reason)


def classify(exc: BaseException, device: str, found: dict | None = None
             ) -> tuple[str, str, str | None]:
    """A cell's status, message and `retime` (why the next run must time it again, or None)
    from what ended it.  UnsupportedCell is `unsupported` (the cell cannot run there); a GPU
    the framework does not see on a cuda cell is `failed` and re-timed (DeviceNotVisible:
    the spec gives the framework a CUDA path and the cell asked for the device); anything
    else is `failed`, naming the driver's and the framework's CUDA versions (`found`:
    provenance.cuda_stack) where the driver is the older."""
    if isinstance(exc, TimeBudgetSpent):
        return "timeout", str(exc), None
    if isinstance(exc, UnsupportedCell):  # the message is the refusal's reason, whole
        return "unsupported", str(exc), None
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DeviceNotVisible):
        return "failed", message, "the framework saw no GPU on a cuda cell"
    if device == "cuda" and found and found.get("driver_older_than_runtime"):
        message += f" ({provenance.describe_cuda(found)})"
    return "failed", message, None


def cuda_found(backend, device: str, exc: BaseException | None, info: dict) -> dict | None:
    """A cuda cell's CUDA stack (provenance.cuda_stack): the one its DeviceNotVisible
    found, else read now, with the runtime the backend reports (no backend: an import that
    failed); None on cpu."""
    if device != "cuda":
        return None
    if isinstance(exc, DeviceNotVisible):
        return exc.cuda
    try:
        runtime, where = backend.cuda_runtime() if backend is not None else (None, None)
        name = info.get("device_name")  # set once prepare ran on the device
        return provenance.cuda_stack(runtime, where,
                                     sees_gpu=None if name is None else name != "cpu")
    except Exception as probe:  # noqa: BLE001 -- never lose the cell over its record
        log(f"could not read the CUDA stack: {type(probe).__name__}: {probe}")
        return None


def measure(args: argparse.Namespace) -> int:
    cell, workload = args.description.cell, args.description.workload
    info = cell_record.starting_info(args.description, args.budget_s, SCRIPT_START)
    provenance.pin_threads_env(cell.threads)
    os.environ["ADBENCH_CACHE_DIR"] = os.path.abspath(args.cache_dir)
    rows, status, message = [], "ok", ""
    loss, grads = None, []
    phases = {}
    backend, prepared, error = None, None, None
    capabilities = backends.capabilities(cell.framework)  # declared: no framework import
    try:
        check_declared(capabilities, cell)
        if args.granted_threads is not None and args.granted_threads < cell.threads:
            raise RuntimeError(f"the job was given {args.granted_threads} core(s) for "
                               f"{cell.threads} threads (raise --cores): its numbers would "
                               "carry a wrong label")
        t = time.perf_counter()
        backend = backends.load(cell.framework)
        info["threads_reported"] = backend.configure_threads(cell.threads)
        check_threads(info["threads_reported"], cell.threads)
        phases["import_s"] = time.perf_counter() - t
        info["versions"] = backend.versions()
        log(f"{cell} with {info['versions']}")

        t = time.perf_counter()
        prepared = backend.prepare(workload, cell.mode, cell.device)
        phases["prepare_s"] = time.perf_counter() - t
        info["device_name"] = backend.device_name(cell.device)
        on_gpu = cell.device == "cuda"
        info["gpu"] = provenance.gpu(cell.device,
                                     backend.gpu_info(cell.device) if on_gpu else None)
        phases["compile_s"] = prepared.compile_s

        # Peaks reset outside the clock, at the first measured iteration: warm-up and
        # compilation stay out of the memory a step needs (JAX's device peak cannot be reset).
        # The baseline follows the release of what the last warm-up step kept, read as the
        # backend declares valid for the device (backends.StepMemory).
        memory = timing.ProcessMemory(backend.step_memory(cell.device), prepared.release)

        def at_measured():
            memory.start()
            if on_gpu:
                backend.reset_peak_memory(cell.device)

        t, cpu = time.perf_counter(), provenance.cpu_seconds()
        timed = timing.time_cell(prepared, workload.warmup, timing.StopRule.of(workload),
                                 progress=log, deadline=loop_deadline(args.budget_s),
                                 at_measured=at_measured, traces=prepared.traces,
                                 load=busy_rule(workload, cell.threads))
        rows = with_sequence_lengths(timed.rows, workload)
        phases["timed_loop_s"] = time.perf_counter() - t
        info.update(memory.stop())  # the last step has returned: what it still holds
        info.update(timing.stop_record(timed))
        if on_gpu:  # the framework's readings, and what the process holds (pool, context)
            info["device_after_step_bytes"] = backend.device_memory_in_use(cell.device)
            info["peak_device_memory_bytes"] = backend.peak_memory(cell.device)
            info["peak_device_reserved_bytes"] = backend.peak_reserved_memory(cell.device)
            info["device_process_bytes"] = provenance.gpu_process_memory(os.getpid())
        # Cores the loop kept busy: checks that the thread setting took effect (a framework
        # that ignores it shows more CPU-seconds per second than threads).
        info["cpu_utilisation"] = (provenance.cpu_seconds() - cpu) / phases["timed_loop_s"]
        log(f"{len(rows)} iterations in {phases['timed_loop_s']:.2f} s, stopped: "
            f"{timed.stop_reason}, precision {timed.precision_reached}, busy {timed.busy}")
        if timed.stop_reason in (None, "timeout"):
            raise TimeBudgetSpent(
                f"time budget of {args.budget_s:g} s (workload.budget_s) spent after "
                f"{len(rows)} of {workload.warmup + workload.iterations} iterations (warm-up "
                "included; the most, under a precision stop); the iterations done are in "
                "the raw file")

        # After the timed loop, so the first timed iterations really are the first calls.
        t = time.perf_counter()
        loss, grads = prepared.derivatives(0)
        phases["gradients_s"] = time.perf_counter() - t
    except Exception as exc:  # recorded in the file: the report says n/a and why
        # A declared run-time refusal (the framework's known error) is `unsupported`.
        exc = backends.refused(capabilities, cell.mode, workload, cell.device, exc) or exc
        error = exc
        info["cuda"] = cuda_found(backend, cell.device, exc, info)
        status, message, info["retime"] = classify(exc, cell.device, info["cuda"])
        log(f"{status}: {message}")
        if status == "failed":
            traceback.print_exc()
        if status != "timeout":  # a timed-out cell keeps the iterations it completed
            rows = []
        grads = []
    if error is None:
        info["cuda"] = cuda_found(backend, cell.device, None, info)

    if prepared is not None:  # what prepare chose and what the loop added (Prepared.choices)
        info["choices"] = dict(prepared.choices)
    info["phases"] = phases
    cell_record.write_cell(args.out, args.gradients, args.description, info, status,
                           message, rows, loss, grads)
    log(f"wrote {args.out} (status {status})")
    return cell_record.RETIME_STATUS if args.retime_status and info.get("retime") else 0


def exit_now(status: int) -> None:
    """Exit once the files are written, without the interpreter's finalisation: tearing down
    a framework's modules measures nothing and took longer than the cell's own work (1.6 s
    after PyTorch, 3.1 s after TensorFlow, against 0.1 s this way).  The atexit handlers
    still run (a compile cache of this cell removed, a framework's own clean-up); only the
    module-by-module teardown and garbage collection are skipped."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    exit_now(measure(cell_record.parse_args(doc=__doc__)))
