#!/usr/bin/env python
"""Every estimate and comparison the outputs show, made once (adbench.comparisons).

    python workflow/scripts/compare.py --bootstrap results/aggregate/bootstrap.parquet \
        --confidence 0.95 --outdir results/aggregate

Writes <outdir>/conditions.parquet (per condition, quantity and statistic: the mean over its
processes, its interval, its processes, seeds and the interval's basis) and
<outdir>/comparisons.parquet (per comparison: its sides, pairing seeds, statistic, each
side's mean over those seeds, the ratio with its interval and replicates, the difference of
two times, processes per side, basis; and the pooled rows).  The tables, figures, scaling,
verdicts and the paper read these and recompute nothing.
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import comparisons  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    bootstrap = pd.read_parquet(args.bootstrap)
    os.makedirs(args.outdir, exist_ok=True)
    conditions = comparisons.conditions(bootstrap, args.confidence)
    made = comparisons.compare_all(bootstrap, args.confidence)
    conditions.to_parquet(os.path.join(args.outdir, "conditions.parquet"), index=False)
    made.to_parquet(os.path.join(args.outdir, "comparisons.parquet"), index=False)
    print(f"compare: {len(conditions)} condition estimates, {len(made)} comparisons "
          f"({made['kind'].value_counts().to_dict()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
