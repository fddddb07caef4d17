#!/usr/bin/env python
"""Compute the float64 ground truth of one model's derivative for one seed.

    python workflow/scripts/make_reference.py --model cnn --derivative jacobian --seed 0 \
        [--batch-size B] [--n-samples N] [--jacobian-rows R] --out results/reference/....npz

Numpy for the small models; a float64 run of the PyTorch backend where the spec says so
(`reference="torch"`), in which case this runs in the torch environment.  The derivative
kinds are spec.TaskInfo.derivative's (trainable_gradients: the gradients restricted to the
parameters a frozen task trains).  The .npz has the
same keys as a cell's derivative file (status, loss, g0, g1, ...).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import derivatives, reference, spec  # noqa: E402

TASK_OF = spec.REFERENCE_TASK  # derivative kind -> the task that computes it


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=sorted(spec.MODELS))
    p.add_argument("--derivative", required=True, choices=sorted(TASK_OF))
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--n-samples", type=int)
    p.add_argument("--jacobian-rows", type=int)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    workload = spec.Workload(args.model, args.seed, TASK_OF[args.derivative],
                             n_samples=args.n_samples, batch_size=args.batch_size,
                             warmup=0, iterations=1, jacobian_rows=args.jacobian_rows)
    print(f"make_reference: float64 {args.derivative} of {args.model}, seed {args.seed}, "
        f"by {workload.spec.reference}", file=sys.stderr)
    loss, arrays = reference.reference_derivatives(workload)
    about = {"model": args.model, "derivative": args.derivative, "seed": args.seed}
    derivatives.write_derivatives(args.out, "ok", loss, arrays,
                                  kink=reference.kink_margin(workload), about=about)
    print(f"make_reference: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
