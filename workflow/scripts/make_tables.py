#!/usr/bin/env python
"""Write the study's Tables 1-2 (CSV, Markdown, LaTeX) from aggregated statistics.

    python workflow/scripts/make_tables.py --summary results/aggregate/summary.parquet \
        --cells results/aggregate/cells.parquet --outdir results/tables
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import tables  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--summary", required=True)
    p.add_argument("--cells", required=True)
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    summary = pd.read_parquet(args.summary)
    cells = pd.read_parquet(args.cells)
    os.makedirs(args.outdir, exist_ok=True)
    for spec in tables.TABLES:
        tidy = tables.tidy_table(spec, summary, cells)
        tables.write_table(spec, tidy, os.path.join(args.outdir, spec.name))
        print(tables.to_markdown(tidy, spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
