#!/usr/bin/env python
"""Measure the bytes a step keeps, as measure.py does, inside a framework's own environment
(for tests/test_step_memory.py).

    .venvs/torch/bin/python tests/step_memory_runner.py '{"framework": ..., ...}'

The argument: framework, mode, model, task, batch_size, warmup, iterations, device (cpu
unless given), and `plant`:
    "step"         the backend's own step (Prepared.run): a backward_retained cell keeps its
                   graph until the next step starts (Prepared.release), a backward cell
                   keeps nothing
    "derivatives"  a step that computes the cell's derivatives (Prepared.derivatives) and
                   keeps them until the next step starts; with "keep": false it drops them
                   before returning
The memory is read by adbench.timing.ProcessMemory with the backend's declaration for the
device (Backend.step_memory) around adbench.timing.time_iterations, as in measure.py.  Prints
the record as JSON on its last line.  Threads are pinned to 1 before the import.
"""

from __future__ import annotations

import json
import os
import sys

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "workflow", "scripts"))

from adbench import backends, spec, timing  # noqa: E402


class KeepsDerivatives:
    """A step that computes the cell's derivatives and keeps them until the next step
    starts (or drops them before returning when not `keep`)."""

    def __init__(self, prepared, keep: bool):
        self.prepared, self.keep, self.kept = prepared, keep, None

    def release(self) -> None:
        self.kept = None

    def run(self, iteration, clock):
        self.release()
        start = clock()
        found = self.prepared.derivatives(iteration)
        self.kept = found if self.keep else None
        del found
        return {"step_s": clock() - start}


def main(args: dict) -> dict:
    backend = backends.load(args["framework"])
    backend.configure_threads(1)
    workload = spec.Workload(args["model"], 0, task=args["task"],
                             batch_size=args["batch_size"], n_samples=2 * args["batch_size"],
                             warmup=args["warmup"], iterations=args["iterations"])
    device = args.get("device", "cpu")
    prepared = backend.prepare(workload, args["mode"], device)
    stepper, release = prepared, prepared.release
    if args["plant"] == "derivatives":
        stepper = KeepsDerivatives(prepared, args.get("keep", True))
        release = stepper.release
    memory = timing.ProcessMemory(backend.step_memory(device), release)
    timing.time_iterations(stepper, workload.warmup, workload.iterations,
                           at_measured=memory.start)
    return memory.stop()


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
