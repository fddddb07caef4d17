#!/usr/bin/env python
"""Write every table of report_spec.TABLES (CSV, Markdown, LaTeX) from aggregated statistics.

    python workflow/scripts/make_tables.py --summary results/aggregate/summary.parquet \
        --cells results/aggregate/cells.parquet \
        --comparisons results/aggregate/comparisons.parquet --outdir results/tables

Writes <outdir>/<table>.{csv,md,tex} for every table, also those this run measured nothing
of (an empty CSV with its header, and a "not measured" note).
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import tables, varlen  # noqa: E402
from adbench.report_spec import TABLES  # noqa: E402


MEMORY_FILE = "memory.csv"
VARLEN_FILE = "varlen.csv"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--summary", required=True)
    p.add_argument("--cells", required=True)
    p.add_argument("--comparisons", help="compare.py's comparisons.parquet: every ratio and "
                   "its interval (none without)")
    p.add_argument("--noise-threshold", type=float, help="as the config's statistics, for "
                   "the words of the noisy flag")
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    summary = pd.read_parquet(args.summary)
    cells = pd.read_parquet(args.cells)
    made = pd.read_parquet(args.comparisons) if args.comparisons else None
    os.makedirs(args.outdir, exist_ok=True)
    for table in TABLES:
        tidy = tables.tidy_table(table, summary, cells, made, args.noise_threshold)
        tables.write_table(table, tidy, os.path.join(args.outdir, table.name))
        print(tables.to_markdown(tidy, table))
    # Not one of the study's tables: the memory each condition's measured phase needed.
    tables.memory_table(cells).to_csv(os.path.join(args.outdir, MEMORY_FILE), index=False)
    # Nor this: each variable-length condition's epoch and what its compiler paid.
    varlen.varlen_table(cells).to_csv(os.path.join(args.outdir, VARLEN_FILE), index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
