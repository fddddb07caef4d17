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


def tree_of(raw_path: str, cell: spec.Cell) -> str | None:
    """The results tree a raw file lies in (the cell is the file's own description; its
    path only says where the tree is); None: a raw file moved out of a results tree."""
    if not raw_path.endswith(cell.raw_path):
        return None
    return raw_path[: len(raw_path) - len(cell.raw_path)]


def log_of(raw_path: str, cell: spec.Cell) -> str:
    """The cell's timing-job log, in the raw file's results tree."""
    tree = tree_of(raw_path, cell)
    return "" if tree is None else tree + cell.log_path


def cell_record(path: str) -> dict:
    info = schema.read_provenance(path)
    cell = spec.Cell(**info["cell"])
    record = {
        **info["cell"],
        "status": info["status"],
        "message": reason_of(info),
        "log": log_of(path, cell),
        "raw_file": path,
        "results_tree": tree_of(path, cell),
        "versions": json.dumps(info.get("versions", {}), sort_keys=True),
        # Implementation choices that move the numbers, and what the framework reported.
        "choices": json.dumps(info.get("choices", {}), sort_keys=True),
        "threads_reported": json.dumps(info.get("threads_reported", {}), sort_keys=True),
        "timed_quantities": ",".join(info.get("timed_quantities", [])),
        "n_parameters": info.get("n_parameters"),
        "batch_size": info.get("workload", {}).get("batch_size"),
        "jacobian_rows": info.get("workload", {}).get("jacobian_rows"),
        # The data a variable-length cell draws its batches from (its FLOPs as run).
        "n_samples": info.get("workload", {}).get("n_samples"),
        "warmup": info.get("workload", {}).get("warmup"),
        "iterations": info.get("workload", {}).get("iterations"),
        # The framework's name for the device, else nvidia-smi's (a cell refused or killed
        # before its framework set the device up).
        "device_name": info.get("device_name") or (info.get("gpu") or {}).get("name"),
        # CPU-seconds per second of the timed loop: the cores the cell really kept busy.
        "cpu_utilisation": info.get("cpu_utilisation"),
        # The memory of the measured phase, bytes (schema.MEMORY_FIELDS); None: not measured.
        **{field: info.get(field) for field in schema.MEMORY_FIELDS},
        # Why the measured phase stopped, and what the rest of the machine did meanwhile
        # (schema.MEASURING_FIELDS; the attempts' list stays in the raw file).
        **{field: info.get(field) for field in schema.MEASURING_FIELDS
           if field != "measured_attempts"},
        # Each cell's own stopping rule (a config may set it per model and task).
        **{key: info.get("workload", {}).get(key)
           for key in ("stop", "precision", "min_iterations", "measure_s")},
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
    record["machine"] = stats.machine_of(record)
    return record


def with_unnamed_gpus_placed(cells: pd.DataFrame) -> pd.DataFrame:
    """A cuda cell whose record names no GPU (refused or killed before its framework set the
    device up, in a file from before nvidia-smi's name was recorded at start) is placed on
    the one GPU machine of its results tree with its CPU model and driver, where there is
    exactly one; else it stays a machine of its own ("unknown GPU")."""
    cuda = cells["device"] == "cuda"
    named = cells[cuda & cells["device_name"].notna()]
    machine = cells["machine"].copy()
    same = ["results_tree", "cpu_model", "gpu_driver"]
    for i, cell in cells[cuda & cells["device_name"].isna()].iterrows():
        found = named.loc[(named[same] == cell[same]).all(axis=1), "machine"].unique()
        if len(found) == 1:
            machine[i] = found[0]
    return cells.assign(machine=machine)


def reason_of(info: dict) -> str:
    """A cell's message; an unsupported cell's is its reason alone (files written before
    the backends declared their refusals prefix it with the exception's class)."""
    message = info.get("message") or ""
    return message.removeprefix("UnsupportedCell: ") if info["status"] == "unsupported" \
        else message


def iteration_rows(path: str, machine: str) -> pd.DataFrame:
    """A raw file's rows, with the machine its process ran on (a column of the analysis)."""
    return pq.read_table(path).to_pandas().assign(machine=machine)


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


# What cells averaged into one number must share, beyond their machine (a stratum of its
# own, stats.machine_of): per machine, device and thread count, the CPUs the job was granted
# (not the node's os.cpu_count(): a cluster job gets part of a node, and a CPU cell as many
# as its threads); per machine and framework, its versions; on cuda, the CUDA runtime its
# build brought.  Two machines may differ in all of these: they are compared, not averaged.


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
    """What would average unlike measurements into one number on one machine: one cell
    measured twice there (two results trees holding it: config raw_trees), its ok cells of
    one device and thread count given different CPUs, or a framework's cells measured with
    different versions or CUDA runtimes."""
    ok = cells[cells["status"] == "ok"]
    problems = [f"{', '.join(f'{k} {v}' for k, v in zip(stats.PROCESS_FIELDS, key))}: "
                f"measured more than once ({', '.join(same['raw_file'])})"
                for key, same in cells.groupby(list(stats.PROCESS_FIELDS)) if len(same) > 1]
    for (machine, device, threads), same in ok.groupby(["machine", "device", "threads"]):
        if found := unlike(same, "cpus_granted"):
            problems.append(f"{device} cells of {threads} thread(s) on {machine} given "
                            f"different CPUs: {found}")
    for (machine, framework), group in ok.groupby(["machine", "framework"]):
        if found := unlike(group, "versions"):
            problems.append(f"{framework} cells on {machine} measured with different "
                            f"versions: {found}")
        if found := unlike(group[group["device"] == "cuda"], "cuda_runtime"):
            problems.append(f"{framework} cuda cells on {machine} measured with different "
                            f"CUDA runtimes: {found}")
    return problems


def machine_facts(cells: pd.DataFrame) -> dict:
    """What the paper says of one machine: its hardware and the software its cells ran."""
    first = cells.iloc[0]

    def distinct(column):
        return ", ".join(str(v) for v in sorted(set(cells[column].dropna()))) or None

    versions: dict[str, str] = {}
    for blob in cells["versions"]:
        versions.update(json.loads(blob))
    return {
        "machine": first["machine"],
        "cpu_model": first["cpu_model"],
        "cpu_count": int(first["cpu_count"]) if pd.notna(first["cpu_count"]) else None,
        "hostname": distinct("hostname"),
        "platform": distinct("platform"),
        "python": distinct("python"),
        "versions": versions,
        "device_names": sorted(set(cells["device_name"].dropna())),
        "gpu_drivers": sorted(set(cells["gpu_driver"].dropna())),
        "n_cells": int(len(cells)),
    }


def environment(cells: pd.DataFrame, settings: dict) -> dict:
    """What the paper says about where and with what the numbers were measured: a record per
    machine (machine_facts), in the order of its first cell, then the run's settings.

    Machine and software facts come from the timing processes' provenance, not from this one.
    """
    machines = [machine_facts(group) for _, group in cells.groupby("machine", sort=False)]

    def distinct(column):
        return ", ".join(str(v) for v in sorted(set(cells[column].dropna()))) or None

    return {
        "machines": machines,
        # The first machine's, for a paper of one machine.
        **{k: machines[0][k] for k in ("cpu_model", "cpu_count", "hostname", "platform",
                                       "python", "versions")},
        "device_names": sorted(set(cells["device_name"].dropna())),
        "git_commit": distinct("git_commit"),
        "git_dirty": bool(cells["git_dirty"].fillna(False).any()),
        # The cells' own (a tree may read other trees' raw files: config raw_trees).
        "seeds": sorted(int(s) for s in set(cells["seed"])),
        "threads": sorted(int(t) for t in set(cells["threads"])),
        "devices": sorted(set(cells["device"])),
        "workload": settings["workload"],
        "n_cells": int(len(cells)),
        "n_ok": int((cells["status"] == "ok").sum()),
        "gradient_tolerance": settings["gradient_check"]["tolerance"],
        "gradient_tolerances": settings["gradient_check"]["models"],
        "statistics": settings["statistics"],
        "n_noisy": int(cells["noisy"].sum()),
        "n_warmup_dropped": int((cells["warmup_dropped"] > 0).sum()),
        "iterations_dropped": int(cells["warmup_dropped"].sum()),
        "n_no_steady_state": int(cells["no_steady_state"].sum()),
        **measuring_facts(cells),
        "started_at": cells["started_at"].min(),
        "ended_at": cells["ended_at"].max(),
    }


def measuring_facts(cells: pd.DataFrame) -> dict:
    """What the protocol and the limitations say of the measured phases: how many ok cells
    stopped for each reason, the range of precision they reached, how many were measured
    while the machine was busy (after their re-timings) and how busy, how many re-timed."""
    ok = cells[cells["status"] == "ok"]
    reached = ok["precision_reached"].dropna().astype(float)
    busy = ok[ok["busy"].fillna(False).astype(bool)]
    return {
        "stop_reasons": {str(k): int(v) for k, v in ok["stop_reason"].value_counts().items()},
        "precision_reached": [float(reached.min()), float(reached.max())] if len(reached)
        else None,
        "n_busy": int(len(busy)),
        "busy_other_cores": [float(busy["load_other_cores"].min()),
                             float(busy["load_other_cores"].max())] if len(busy) else None,
        "n_busy_retimed": int((ok["busy_retimed"].fillna(0) > 0).sum()),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                fromfile_prefix_chars="@")
    p.add_argument("raw", nargs="+", help="raw files, or @FILE with one per line")
    p.add_argument("--outdir", required=True)
    p.add_argument("--settings", required=True,
                   help="JSON: workload, gradient_check, statistics")
    args = p.parse_args(argv)
    settings = json.loads(args.settings)
    os.makedirs(args.outdir, exist_ok=True)
    out = lambda name: os.path.join(args.outdir, name)  # noqa: E731

    cells = with_unnamed_gpus_placed(pd.DataFrame([cell_record(f) for f in args.raw]))
    iterations = pd.concat([iteration_rows(f, m) for f, m in zip(args.raw, cells["machine"])],
                           ignore_index=True)
    mixed = mixed_measurements(cells)
    if mixed:
        print("aggregate: refusing to average unlike measurements into one number:\n  "
              + "\n  ".join(mixed) + "\nRe-time one side (snakemake --forcerun with its raw "
              "files) so that every cell of one machine comes from one set of versions and "
              "CPUs.", file=sys.stderr)
        return 1
    rules = settings["statistics"]
    summarised = stats.rows_of_ok_cells(iterations, cells)
    warmup = stats.warmup_of_cells(summarised, rules["warmup_window"], rules["warmup_tolerance"])
    cells = stats.with_warmup(cells, warmup)
    steady = stats.steady_rows(summarised, cells)  # the warm-up rule: what every statistic uses
    trials = stats.trial_stats(steady)
    summary = stats.across_seeds(trials)
    first = stats.first_iteration_stats(summarised, steady)
    cells = stats.with_time_to_first_step(cells, first)
    cells = stats.with_sequence_epochs(cells, stats.sequence_epochs(summarised))
    cells = stats.with_noise(cells, trials, rules["noise_threshold"])
    bootstrap = stats.bootstrap_replicates(steady, rules["bootstrap_replicates"],
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
