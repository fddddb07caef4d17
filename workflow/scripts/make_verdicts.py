#!/usr/bin/env python
"""Verdicts on the seeds' claims (adbench.claims) from the comparisons product (compare.py).

    python workflow/scripts/make_verdicts.py \
        --comparisons results/aggregate/comparisons.parquet --confidence 0.95 \
        --outdir results/verdicts

Writes <outdir>/claims.csv (a row per claim: its verdict by the rule over its groups, whether
it is provisional, the counts of what its groups and comparisons say, the pooled ratio as a
summary), <outdir>/groups.csv (a row per group of comparisons and (machine, device, threads)
block measured: pooled ratio, Holm-corrected verdict) and <outdir>/comparisons.csv (a row per
comparison measured and block, "one process" where it cannot be judged), and prints them as
Markdown.  The rule: adbench.verdicts, adbench.inference and docs/statistics.md.
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
    p.add_argument("--comparisons", required=True)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    claims, groups, comparisons = verdicts.evaluate(pd.read_parquet(args.comparisons),
                                                    args.confidence)
    os.makedirs(args.outdir, exist_ok=True)
    claims.to_csv(os.path.join(args.outdir, "claims.csv"), index=False)
    groups.to_csv(os.path.join(args.outdir, "groups.csv"), index=False)
    comparisons.to_csv(os.path.join(args.outdir, "comparisons.csv"), index=False)
    print(claims.to_markdown(index=False, floatfmt=".3g"))
    for frame in (groups, comparisons):
        print("\n" + frame.to_markdown(index=False, floatfmt=".3g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
