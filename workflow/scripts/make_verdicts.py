#!/usr/bin/env python
"""Verdicts on the seeds' claims (adbench.claims) from the aggregated bootstrap replicates.

    python workflow/scripts/make_verdicts.py --bootstrap results/aggregate/bootstrap.parquet \
        --confidence 0.95 --outdir results/verdicts

Writes <outdir>/claims.csv (a row per claim: verdict, counts, geometric-mean ratio and its
interval) and <outdir>/comparisons.csv (a row per comparison and (device, threads) block,
"not measured" where the run lacks its cells), and prints both as Markdown.
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import verdicts  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    claims, comparisons = verdicts.evaluate(pd.read_parquet(args.bootstrap), args.confidence)
    os.makedirs(args.outdir, exist_ok=True)
    claims.to_csv(os.path.join(args.outdir, "claims.csv"), index=False)
    comparisons.to_csv(os.path.join(args.outdir, "comparisons.csv"), index=False)
    print(claims.drop(columns="test").to_markdown(index=False, floatfmt=".3g"))
    measured = comparisons[comparisons["verdict"] != verdicts.NOT_MEASURED]
    print(measured.to_markdown(index=False, floatfmt=".3g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
