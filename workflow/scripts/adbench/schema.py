"""The raw Parquet contract: one row per iteration, provenance in the file's metadata.

The one place for the raw schema.  Writers go through `write_raw`, which writes to a
temporary file beside the target and renames it, so a raw file is complete or absent.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
METADATA_KEY = b"adbench.provenance"
# timeout: the cell's time budget ran out (its completed iterations kept, never summarised).
STATUSES = ("ok", "unsupported", "failed", "timeout")
PHASES = ("warmup", "measured")
# Timed quantities, seconds. Eager modes fill all three; compiled modes only step_s.
QUANTITIES = ("forward_s", "backward_s", "step_s")

RAW_SCHEMA = pa.schema(
    [
        pa.field("framework", pa.string(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("device", pa.string(), nullable=False),
        pa.field("threads", pa.int32(), nullable=False),
        pa.field("seed", pa.int32(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("phase", pa.string(), nullable=False),
        pa.field("forward_s", pa.float64()),
        pa.field("backward_s", pa.float64()),
        pa.field("step_s", pa.float64()),
        # Variable-length tasks (spec.TaskInfo.sequence): the batch's true length, and the
        # step's traces/compilations so far once the iteration returned (null where the
        # mode exposes no counter, and in fixed-shape tasks).
        pa.field("sequence_length", pa.int32()),
        pa.field("traces", pa.int32()),
    ]
)

# Memory per cell, in the provenance metadata (per cell, not per row), bytes or None where
# not measured.  Read around the measured phase (adbench.timing.ProcessMemory): its
# baseline after what the previous step keeps was released and freed memory returned to the
# system (malloc_trim(0), and the framework's own equivalent), so that warm-up's freed pages
# do not hide a step; the host's resident memory from Linux's /proc, the C heap from glibc,
# the bytes a step keeps by the reading its backend declares valid for the device
# (adbench.backends.StepMemory); the device's from the framework, on cuda cells whose
# backend records it.  aggregate.py carries each into cells.parquet under the same name.
# Raw files written before a field existed read None for it (the example results have the
# first five and the device fields; their baselines were read without malloc_trim).
MEMORY_FIELDS = {
    "rss_baseline_bytes": "resident memory (VmRSS) just before the first measured iteration, "
                          "after freed memory was returned to the system",
    "rss_peak_bytes": "peak resident memory (VmHWM) of the measured phase, reset at its start "
                      "(rss_peak_scope says where it could not be)",
    "rss_after_step_bytes": "resident memory (VmRSS) still held once the last step returned, "
                            "after freed memory was returned to the system",
    "heap_baseline_bytes": "the C heap's bytes in use (glibc mallinfo2) at the baseline of "
                           "rss_baseline_bytes",
    "heap_after_step_bytes": "the C heap's bytes in use (glibc mallinfo2) once the last step "
                             "returned: live objects only, where resident memory also counts "
                             "the freed pages the allocator keeps",
    "rss_peak_scope": "what rss_peak_bytes covers: the measured phase, or since process start "
                      "(and why) where the peak could not be reset",
    "kept_by_step_reading": "what kept_by_step_bytes reads on the cell's device (the C heap's "
                            "bytes in use, a framework allocator's), or 'not measurable on "
                            "this device: why' where no reading is shown valid there",
    "kept_baseline_bytes": "that reading at the start of the measured phase, after what the "
                           "previous step keeps was released and freed memory returned",
    "kept_by_step_bytes": "the bytes a step allocates and keeps past its return (a retained "
                          "graph's saved tensors): the reading once the last step returned "
                          "(freed memory returned again) less kept_baseline_bytes; None "
                          "where not measurable",
    "peak_device_memory_bytes": "a cuda cell's peak memory allocated by the framework "
                                "(gpu.peak_memory_scope says how and since when)",
    "peak_device_reserved_bytes": "a cuda cell's peak memory reserved by the framework's "
                                  "allocator, where its backend reports it",
    "device_after_step_bytes": "a cuda cell's device memory still allocated by the framework "
                               "once the last step returned (the GPU's rss_after_step_bytes)",
    "device_process_bytes": "a cuda cell's GPU memory held by its process once the last step "
                            "returned, nvidia-smi's per-process reading: the framework's "
                            "allocator pool (reserved, used or not) and CUDA context",
}


# What a cell's measured phase did, in the provenance metadata (per cell): why it stopped
# (adbench.timing.StopRule) and what the rest of the machine did while it ran
# (adbench.machine_load).  aggregate.py carries each into cells.parquet under the same name.
# Raw files written before a field existed read None for it.
MEASURING_FIELDS = {
    "stop_reason": "why the measured phase ended: precision (the 95 % interval of the median "
                   "step within workload.precision), budget (workload.measure_s measured), "
                   "max_count (workload.iterations reached first), fixed (a fixed count, "
                   "workload.stop fixed), timeout (the process's budget_s); None: it never "
                   "started",
    "precision_reached": "the larger half of the 95 % distribution-free interval of the "
                         "median step, over the median, of the measured rows kept (None: "
                         "fewer than 6)",
    "busy": "whether other processes took more than workload.busy_share of a core on the "
            "cell's CPUs (or steal as much) during the kept measured phase, after "
            "workload.busy_retimes re-timings; None: not judged",
    "busy_retimed": "how many times the measured phase was measured again for a busy machine",
    "measured_attempts": "one record per measured attempt, in order: iterations, "
                         "stop_reason, median_step_s, busy, the load_* readings, and kept "
                         "(whose rows the file holds: the last, unless the process's budget "
                         "cut a re-timing short)",
    "load_window_s": "the kept measured attempt's length, seconds (monotonic clock)",
    "load_cpus": "the CPUs the cell could run on (its affinity), over which the load is read",
    "load_own_cpu_s": "the cell's own process CPU time over the window, seconds",
    "load_other_cpu_s": "CPU time other processes took on those CPUs over the window "
                        "(/proc/stat's busy ticks less the cell's own), seconds",
    "load_other_cores": "load_other_cpu_s over the window: cores other processes kept busy",
    "load_steal_cores": "steal over the window, in cores: time a virtual machine's host gave "
                        "to others while this one wanted to run",
    "load_resolution_cores": "the smallest load a window of this length can tell from none "
                             "(a clock tick per CPU, in cores)",
    "load_loadavg_1m": "the one-minute load average at the window's end (/proc/loadavg)",
    "load_cpu_mhz": "the mean current frequency of the cell's CPUs at the window's end "
                    "(cpufreq's scaling_cur_freq), MHz; None where the system exposes none",
}


# The raw schema's column types, as numpy stores them and as Python values may be given.
NUMPY_TYPES = {pa.int32(): np.int32, pa.float64(): np.float64}
PYTHON_TYPES = {pa.string(): str, pa.int32(): (int, np.integer),
                pa.float64(): (int, float, np.integer, np.floating)}


def column(kind: pa.DataType, values: list) -> pa.Array:
    """One column from Python values (None: null), built from its buffers.  pa.array would
    do the same but imports pandas first to ask whether the values are pandas objects: 0.2
    to 0.8 s of every timing job that imports no pandas otherwise."""
    valid = np.array([v is not None for v in values], dtype=bool)
    wrong = [v for v in values if v is not None and not isinstance(v, PYTHON_TYPES[kind])]
    if wrong or any(isinstance(v, bool) for v in values):
        raise TypeError(f"a {kind} column cannot hold {(wrong or [True])[0]!r}")
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_string(kind):
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    else:
        numbers = np.array([0 if v is None else v for v in values], dtype=NUMPY_TYPES[kind])
        buffers = [bitmap, pa.py_buffer(numbers)]
    return pa.Array.from_buffers(kind, len(values), buffers, null_count=int((~valid).sum()))


def raw_table(cell: dict, rows: list[dict], provenance: dict) -> pa.Table:
    """Rows of one cell as a table of RAW_SCHEMA, with provenance attached as metadata."""
    if provenance.get("status") not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {provenance.get('status')!r}")
    columns = []
    for field in RAW_SCHEMA:
        if field.name in cell:
            values = [cell[field.name]] * len(rows)
        else:
            values = [row.get(field.name) for row in rows]
        if not field.nullable and None in values:
            raise ValueError(f"raw column {field.name}: a row has no value")
        columns.append(column(field.type, values))
    table = pa.Table.from_arrays(columns, schema=RAW_SCHEMA)
    table.validate(full=True)
    metadata = {METADATA_KEY: json.dumps(provenance, sort_keys=True).encode()}
    return table.replace_schema_metadata(metadata)


def process_umask() -> int:
    """The process's file mode creation mask: /proc/self/status's Umask (Linux >= 4.7), else
    read by setting it and setting it back."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_raw(path: str, cell: dict, rows: list[dict], provenance: dict) -> None:
    table = raw_table(cell, rows, provenance)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".parquet.tmp")
    os.close(fd)
    # mkstemp makes its file 0600 whatever the umask: a group sharing the results tree
    # could not read the raw file.  It gets the mode any new file would.
    os.chmod(tmp, 0o666 & ~process_umask())
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_provenance(path: str) -> dict:
    metadata = pq.read_schema(path).metadata or {}
    if METADATA_KEY not in metadata:
        raise ValueError(f"{path}: not an adbench raw file (no {METADATA_KEY.decode()} metadata)")
    return json.loads(metadata[METADATA_KEY])
