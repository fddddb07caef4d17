#!/usr/bin/env python
"""Collect raw per-cell Parquet files into the aggregated tables the report reads.

    python workflow/scripts/aggregate.py --outdir results/aggregate --settings '{...}' RAW...

Writes iterations.parquet (every raw row), cells.parquet (one row per cell: status,
provenance, the warm-up its data show and its noise), trials.parquet (per cell and
quantity), summary.parquet (per condition over seeds), bootstrap.parquet (per process,
quantity and statistic: replicates over its iterations, for every interval downstream),
first_iterations.csv and environment.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import pandas as pd
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import provenance, schema, spec, stats  # noqa: E402


def log_of(raw_path: str, cell: spec.Cell) -> str:
    """The cell's timing-job log, in the raw file's results tree (the cell is the file's
    own description; its path only says where the tree is)."""
    if not raw_path.endswith(cell.raw_path):
        return ""  # a raw file moved out of a results tree: no log beside it
    return raw_path[: len(raw_path) - len(cell.raw_path)] + cell.log_path


def cell_record(path: str) -> dict:
    info = schema.read_provenance(path)
    cell = spec.Cell(**info["cell"])
    return {
        **info["cell"],
        "status": info["status"],
        "message": info["message"],
        "log": log_of(path, cell),
        "versions": json.dumps(info.get("versions", {}), sort_keys=True),
        # Implementation choices that move the numbers, and what the framework reported.
        "choices": json.dumps(info.get("choices", {}), sort_keys=True),
        "threads_reported": json.dumps(info.get("threads_reported", {}), sort_keys=True),
        "timed_quantities": ",".join(info.get("timed_quantities", [])),
        "n_parameters": info.get("n_parameters"),
        "batch_size": info.get("workload", {}).get("batch_size"),
        "jacobian_rows": info.get("workload", {}).get("jacobian_rows"),
        "warmup": info.get("workload", {}).get("warmup"),
        "iterations": info.get("workload", {}).get("iterations"),
        "device_name": info.get("device_name"),
        # CPU-seconds per second of the timed loop: the cores the cell really kept busy.
        "cpu_utilisation": info.get("cpu_utilisation"),
        # The memory of the measured phase, bytes (schema.MEMORY_FIELDS); None: not measured.
        **{field: info.get(field) for field in schema.MEMORY_FIELDS},
        "cpu_model": info.get("cpu_model"),
        "cpu_count": info.get("cpu_count"),
        "cpus_granted": info.get("cpus_granted"),
        **cuda_facts(info),
        "hostname": info.get("hostname"),
        "platform": info.get("platform"),
        "python": info.get("python"),
        "git_commit": info.get("git_commit"),
        "git_dirty": info.get("git_dirty"),
        "config_hash": info.get("config_hash"),
        "started_at": info.get("started_at"),
        "ended_at": info.get("ended_at"),
        **{f"phase_{k}": v for k, v in info.get("phases", {}).items()},
    }


def cuda_facts(info: dict) -> dict:
    """A cuda cell's GPU driver and the CUDA runtime its framework got (provenance `cuda`;
    for a cell recorded before it, `gpu` and the machine's driver); None on cpu."""
    if info["cell"]["device"] != "cuda":
        return {"gpu_driver": None, "cuda_runtime": None}
    cuda, gpu = info.get("cuda") or {}, info.get("gpu") or {}
    return {
        "gpu_driver": (cuda.get("driver_version") or gpu.get("driver_version")
                       or info.get("gpu_driver")),
        "cuda_runtime": (cuda.get("runtime_cuda_version")
                         or provenance.cuda_version(gpu.get("cuda_version"))),
    }


# What cells averaged into one number must share (their ok cells; a field's values named
# where they differ). Per device, the machine: its CPU model, the device and, on cuda, the
# GPU driver. Per device and thread count, the CPUs the job was granted (not the node's
# os.cpu_count(): a cluster job gets part of a node, and a CPU cell as many as its threads).
# Per framework, its versions (on every device); on cuda, the CUDA runtime its build brought.
MACHINE_FIELDS = {"cpu": ("cpu_model", "device_name"),
                  "cuda": ("cpu_model", "device_name", "gpu_driver")}


def shown(value) -> str:
    """A provenance value as a message prints it: whole numbers without '.0', none as
    'unknown' (a cell recorded before the field existed)."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "unknown"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def unlike(group: pd.DataFrame, field: str) -> str | None:
    """`field` and each of its values with its number of cells, where the group's differ."""
    counts = group[field].map(shown).value_counts()
    if len(counts) < 2:
        return None
    return f"{field} " + "; ".join(f"{value} ({n} cell{'s' if n != 1 else ''})"
                                   for value, n in counts.items())


def mixed_measurements(cells: pd.DataFrame) -> list[str]:
    """What would average unlike measurements into one number: ok cells of one device
    measured on different machines or given different CPUs, or a framework's cells measured
    with different versions or CUDA runtimes (the fields above MACHINE_FIELDS)."""
    ok = cells[cells["status"] == "ok"]
    problems = []
    for device, group in ok.groupby("device"):
        problems += [f"{device} cells measured on different machines: {found}"
                     for field in MACHINE_FIELDS[device]
                     if (found := unlike(group, field))]
        for threads, same in group.groupby("threads"):
            if found := unlike(same, "cpus_granted"):
                problems.append(f"{device} cells of {threads} thread(s) given different "
                                f"CPUs: {found}")
    for framework, group in ok.groupby("framework"):
        if found := unlike(group, "versions"):
            problems.append(f"{framework} cells measured with different versions: {found}")
        if found := unlike(group[group["device"] == "cuda"], "cuda_runtime"):
            problems.append(f"{framework} cuda cells measured with different CUDA runtimes: "
                            f"{found}")
    return problems


def union(lists) -> list:
    """The values of several grids' lists, each once, sorted."""
    return sorted({value for values in lists for value in values})


def environment(cells: pd.DataFrame, settings: dict) -> dict:
    """What the paper says about where and with what the numbers were measured.

    Machine and software facts come from the timing processes' provenance, not from this one.
    """
    first = cells.iloc[0]

    def distinct(column):
        return ", ".join(str(v) for v in sorted(set(cells[column].dropna()))) or None

    versions: dict[str, str] = {}
    for blob in cells["versions"]:
        versions.update(json.loads(blob))
    return {
        "cpu_model": first["cpu_model"],
        "cpu_count": int(first["cpu_count"]) if pd.notna(first["cpu_count"]) else None,
        "hostname": first["hostname"],
        "platform": distinct("platform"),
        "python": distinct("python"),
        "versions": versions,
        "device_names": sorted(set(cells["device_name"].dropna())),
        "git_commit": distinct("git_commit"),
        "git_dirty": bool(cells["git_dirty"].fillna(False).any()),
        "seeds": union(grid["seeds"] for grid in settings["grid"]),
        "threads": union(grid["threads"] for grid in settings["grid"]),
        "devices": union(grid["devices"] for grid in settings["grid"]),
        "workload": settings["workload"],
        "n_cells": int(len(cells)),
        "n_ok": int((cells["status"] == "ok").sum()),
        "gradient_tolerance": settings["gradient_check"]["tolerance"],
        "gradient_tolerances": settings["gradient_check"]["models"],
        "statistics": settings["statistics"],
        "n_noisy": int(cells["noisy"].sum()),
        "n_warmup_short": int(cells["warmup_short"].sum()),
        "started_at": cells["started_at"].min(),
        "ended_at": cells["ended_at"].max(),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                fromfile_prefix_chars="@")
    p.add_argument("raw", nargs="+", help="raw files, or @FILE with one per line")
    p.add_argument("--outdir", required=True)
    p.add_argument("--settings", required=True,
                   help="JSON: grid, workload, gradient_check, statistics")
    args = p.parse_args(argv)
    settings = json.loads(args.settings)
    os.makedirs(args.outdir, exist_ok=True)
    out = lambda name: os.path.join(args.outdir, name)  # noqa: E731

    iterations = pd.concat([pq.read_table(f).to_pandas() for f in args.raw], ignore_index=True)
    cells = pd.DataFrame([cell_record(f) for f in args.raw])
    mixed = mixed_measurements(cells)
    if mixed:
        print("aggregate: refusing to average unlike measurements into one number:\n  "
              + "\n  ".join(mixed) + "\nRe-time one side (snakemake --forcerun with its raw "
              "files) so that every cell of the results tree comes from one "
              "machine and one set of versions.", file=sys.stderr)
        return 1
    rules = settings["statistics"]
    summarised = stats.rows_of_ok_cells(iterations, cells)
    trials = stats.trial_stats(summarised)
    summary = stats.across_seeds(trials)
    first = stats.first_iteration_stats(summarised)
    cells = stats.with_time_to_first_step(cells, first)
    cells = stats.with_sequence_epochs(cells, stats.sequence_epochs(summarised))
    warmup = stats.warmup_of_cells(summarised, rules["warmup_window"], rules["warmup_tolerance"])
    cells = stats.with_warmup_and_noise(cells, warmup, trials, rules["noise_threshold"])
    bootstrap = stats.bootstrap_replicates(summarised, rules["bootstrap_replicates"],
                                           rules["bootstrap_seed"], cells=cells)

    iterations.to_parquet(out("iterations.parquet"), index=False)
    cells.to_parquet(out("cells.parquet"), index=False)
    trials.to_parquet(out("trials.parquet"), index=False)
    summary.to_parquet(out("summary.parquet"), index=False)
    bootstrap.to_parquet(out("bootstrap.parquet"), index=False)
    first.to_csv(out("first_iterations.csv"), index=False)
    with open(out("environment.json"), "w") as f:
        json.dump(environment(cells, settings), f, indent=2, default=str)

    bad = cells[cells["status"] != "ok"]
    print(f"{len(cells)} cells, {len(iterations)} rows; {len(bad)} not ok", file=sys.stderr)
    for r in bad.itertuples():
        print(f"  {r.framework}/{r.mode}/{r.model} seed {r.seed}: {r.status}: {r.message}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
