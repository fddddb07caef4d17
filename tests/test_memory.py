"""Memory per cell (issues 26 and 38): the memory of the measured phase, read around the one
timing loop against a baseline taken after freed memory was returned to the system, and
carried from the raw file into cells.parquet and the memory table.

Planted allocations of 200 MB (every page written, so resident) must be found within wide
margins (at least 150 MB), so that the allocator's and the interpreter's noise never decide.
Each framework's own reading of the bytes a step keeps is shown valid in its environment by
tests/test_step_memory.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

import aggregate
from adbench import backends, paper_context, schema, spec, tables, timing

pytestmark = pytest.mark.backend  # imports a framework or runs a timing process

MB = 1024 * 1024
PLANTED = 200 * MB
FOUND = 150 * MB  # what a planted allocation must show at least
QUIET = 50 * MB   # what a loop without one may show at most

linux = pytest.mark.skipif(not timing.proc_memory(), reason="no /proc/self/status (not Linux)")


def resettable() -> bool:
    return bool(timing.proc_memory()) and timing.reset_peak_rss() is None


needs_reset = pytest.mark.skipif(not resettable(), reason="/proc/self/clear_refs not writable")


class Stepper:
    """A fake step: allocates (and writes) `size` bytes in the iterations `allocating`
    says, releases them before returning unless `hold`, and times nothing real."""

    def __init__(self, size: int = 0, allocating=lambda iteration: True, hold=False):
        self.size, self.allocating, self.hold, self.held = size, allocating, hold, []

    def run(self, iteration, clock):
        t0 = clock()
        if self.size and self.allocating(iteration):
            block = bytearray(b"\x01") * self.size  # every page written: resident
            if self.hold:
                self.held.append(block)
            del block
        return {"step_s": clock() - t0}


def measured(stepper, warmup=1, iterations=2, memory=None) -> dict:
    memory = memory or timing.ProcessMemory()
    timing.time_iterations(stepper, warmup, iterations, at_measured=memory.start)
    return memory.stop()


class KeepsUntilNextStep:
    """A fake step that allocates `size` bytes and keeps them until the next step starts (a
    retained graph's lifetime); `release` drops them, as Prepared.release does."""

    def __init__(self, size: int):
        self.size, self.kept = size, None

    def release(self):
        self.kept = None

    def run(self, iteration, clock):
        self.release()
        t0 = clock()
        self.kept = bytearray(b"\x01") * self.size
        return {"step_s": clock() - t0}


class FragmentingWarmup:
    """Warm-up allocates `size` bytes in small blocks (from the C heap, not mmapped), pins the
    heap's top with one more and frees the rest: glibc keeps those pages, resident.  A
    measured step allocates as much again in small blocks and frees them before returning."""

    BLOCK = 4096

    def __init__(self, size: int, warmup: int):
        self.size, self.warmup, self.pin = size, warmup, None

    def blocks(self):
        return [bytearray(b"\x01") * self.BLOCK for _ in range(self.size // self.BLOCK)]

    def run(self, iteration, clock):
        t0 = clock()
        found = self.blocks()
        if iteration < self.warmup and self.pin is None:
            self.pin = bytearray(self.BLOCK)
        del found
        return {"step_s": clock() - t0}


# ------------------------------------------------------------------ reading /proc
def test_proc_memory_reads_vmrss_and_vmhwm_in_bytes(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\n"
                      "VmRSS:\t    1024 kB\nThreads:\t1\n")
    assert timing.proc_memory(str(status)) == {"VmHWM": 2048 * 1024, "VmRSS": 1024 * 1024}
    assert timing.proc_memory(str(tmp_path / "absent")) == {}


@linux
def test_proc_memory_of_this_process_is_plausible():
    now = timing.proc_memory()
    assert set(now) == {"VmRSS", "VmHWM"}
    assert 1 * MB < now["VmRSS"] <= now["VmHWM"]


# ------------------------------------------------------------------ the measured phase
@needs_reset
def test_a_planted_allocation_is_found_and_a_later_loop_without_one_is_not():
    planted = measured(Stepper(PLANTED))
    assert planted["rss_peak_scope"].startswith("measured phase")
    assert planted["rss_peak_bytes"] - planted["rss_baseline_bytes"] >= FOUND
    # Released before the step returned: not held afterwards.
    assert planted["rss_after_step_bytes"] - planted["rss_baseline_bytes"] < QUIET

    # The same process, a later loop: the reset forgets the earlier peak.
    quiet = measured(Stepper())
    assert quiet["rss_peak_bytes"] - quiet["rss_baseline_bytes"] < QUIET
    assert quiet["rss_peak_bytes"] < planted["rss_peak_bytes"] - (FOUND - QUIET)


@needs_reset
def test_warmup_stays_out_of_the_peak():
    """What only the warm-up allocates (compilation, first-call caches) is not the step's."""
    record = measured(Stepper(PLANTED, allocating=lambda iteration: iteration == 0))
    assert record["rss_peak_bytes"] - record["rss_baseline_bytes"] < QUIET


@linux
def test_memory_held_after_a_step_is_found():
    stepper = Stepper(PLANTED, allocating=lambda iteration: iteration == 1, hold=True)
    record = measured(stepper)
    try:
        assert record["rss_after_step_bytes"] - record["rss_baseline_bytes"] >= FOUND
        assert record["rss_peak_bytes"] >= record["rss_after_step_bytes"]
    finally:
        stepper.held.clear()


needs_mallinfo2 = pytest.mark.skipif(timing.heap_in_use() is None,
                                     reason="no glibc mallinfo2 (another libc, or glibc < 2.33)")


@needs_mallinfo2
def test_the_heap_in_use_after_a_step_finds_what_it_holds_and_not_what_it_freed():
    """graph_freed's CPU reading: a step that keeps 200 MB shows them in the C heap's bytes in
    use; one that freed them does not, though its pages may stay resident."""
    freed = measured(Stepper(PLANTED))
    stepper = Stepper(PLANTED, allocating=lambda iteration: iteration == 1, hold=True)
    try:
        held = measured(stepper)
        assert held["heap_after_step_bytes"] - freed["heap_after_step_bytes"] >= FOUND
    finally:
        stepper.held.clear()
    assert abs(measured(Stepper(PLANTED))["heap_after_step_bytes"]
               - freed["heap_after_step_bytes"]) < QUIET


@needs_reset
def test_a_step_shows_above_a_baseline_read_after_warmups_freed_pages_went_back(monkeypatch):
    """Issue 38: warm-up leaves freed pages resident, and a step reusing them added nothing
    to resident memory (a ResNet50 step read 0.0078 MiB).  The baseline is read after
    malloc_trim(0), so the step's own pages show; without it they do not."""
    record = measured(FragmentingWarmup(PLANTED, warmup=1))
    assert record["rss_peak_bytes"] - record["rss_baseline_bytes"] >= FOUND
    monkeypatch.setattr(timing, "return_freed_memory", lambda step_memory=None: None)
    record = measured(FragmentingWarmup(PLANTED, warmup=1))
    assert record["rss_peak_bytes"] - record["rss_baseline_bytes"] < QUIET


@needs_mallinfo2
def test_what_a_step_keeps_until_the_next_one_is_found_once_the_last_step_released_it():
    """The bytes a step keeps (a retained graph): the baseline follows `release` (what the
    last warm-up step kept), so the last measured step's allocation shows in bytes; without
    the release the baseline holds the warm-up's and nothing shows."""
    stepper = KeepsUntilNextStep(PLANTED)
    released = measured(stepper, memory=timing.ProcessMemory(release=stepper.release))
    assert released["kept_by_step_reading"] == backends.C_HEAP.reading
    assert abs(released["kept_by_step_bytes"] - PLANTED) < PLANTED * 0.05
    stepper = KeepsUntilNextStep(PLANTED)
    assert abs(measured(stepper)["kept_by_step_bytes"]) < QUIET
    stepper.release()
    assert abs(measured(Stepper(PLANTED))["kept_by_step_bytes"]) < QUIET


def test_a_declared_reading_and_the_frameworks_own_return_of_freed_memory_are_used():
    """A backend's StepMemory: its `in_use` is read at the baseline and after the last step,
    each time after its `return_freed` (a pool emptied) ran."""
    log, in_use = [], iter([100, 350])
    step_memory = backends.StepMemory("a pool's bytes", in_use=lambda: log.append("read")
                                      or next(in_use), return_freed=lambda: log.append("freed"))
    record = measured(Stepper(), memory=timing.ProcessMemory(step_memory))
    assert log == ["freed", "read", "freed", "read"]
    assert (record["kept_baseline_bytes"], record["kept_by_step_bytes"]) == (100, 250)
    assert record["kept_by_step_reading"] == "a pool's bytes"


def test_a_device_declared_not_measurable_records_why_and_no_bytes():
    declared = backends.memory_not_measurable("a pool that never shrinks")
    record = measured(Stepper(), memory=timing.ProcessMemory(declared))
    assert record["kept_by_step_reading"] == (f"{backends.NOT_MEASURABLE}: a pool that never "
                                              "shrinks")
    assert record["kept_by_step_bytes"] is None and record["kept_baseline_bytes"] is None
    assert record["rss_after_step_bytes"]  # the process's own readings still taken


def test_a_backend_declares_no_reading_unless_it_says_which():
    """The interface's default: not measurable, naming the framework and device."""
    class Bare(backends.Backend):
        configure_threads = versions = device_name = None

    declared = Bare(backends.capabilities("autograd"), {}, None).step_memory("cpu")
    assert declared.not_measurable and "autograd on cpu" in declared.not_measurable


# ------------------------------------------------------------------ when /proc cannot
@linux
def test_a_peak_that_cannot_be_reset_counts_from_process_start_and_says_so(monkeypatch):
    monkeypatch.setattr(timing, "reset_peak_rss",
                        lambda path=timing.CLEAR_REFS: "PermissionError: [Errno 13] denied")
    record = measured(Stepper())
    assert record["rss_peak_scope"].startswith("process start")
    assert "PermissionError" in record["rss_peak_scope"]
    # Still measured: the peak since the process started, never below what is resident.
    assert record["rss_peak_bytes"] >= record["rss_after_step_bytes"] > 0
    assert record["rss_baseline_bytes"] > 0


@linux
def test_an_unwritable_clear_refs_is_the_same_fallback(tmp_path):
    memory = timing.ProcessMemory(clear_refs=str(tmp_path / "no" / "clear_refs"))
    record = measured(Stepper(), memory=memory)
    assert "process start" in record["rss_peak_scope"]
    assert "FileNotFoundError" in record["rss_peak_scope"]
    assert record["rss_peak_bytes"] > 0


def test_without_proc_nothing_is_measured_and_the_record_says_so(tmp_path):
    memory = timing.ProcessMemory(status=str(tmp_path / "absent"),
                                  clear_refs=str(tmp_path / "no" / "clear_refs"))
    record = measured(Stepper(), memory=memory)
    assert [record[k] for k in ("rss_baseline_bytes", "rss_peak_bytes",
                                "rss_after_step_bytes")] == [None] * 3
    assert record["rss_peak_scope"].startswith("not measured")


def test_a_loop_stopped_before_the_measured_phase_records_nothing():
    memory = timing.ProcessMemory()
    timing.time_iterations(Stepper(), 3, 2, clock=iter(range(0, 100, 10)).__next__,
                           deadline=5, at_measured=memory.start)
    record = memory.stop()
    assert record["rss_peak_bytes"] is None and record["rss_after_step_bytes"] is None
    assert record["heap_after_step_bytes"] is None and record["kept_by_step_bytes"] is None
    assert record["rss_peak_scope"].startswith("not measured")


# ------------------------------------------------------------------ raw file -> cells.parquet
def test_every_memory_field_is_documented_in_the_schema():
    assert set(timing.PROCESS_MEMORY_FIELDS) <= set(schema.MEMORY_FIELDS)
    assert {"peak_device_memory_bytes", "peak_device_reserved_bytes"} <= set(schema.MEMORY_FIELDS)


def test_memory_fields_reach_the_cells_record_and_old_files_give_none(tmp_path):
    cell = {"framework": "torch", "mode": "eager", "model": "mlp512", "task": "backward",
            "device": "cpu", "threads": 1, "seed": 0}
    rows = [{"iteration": 0, "phase": "measured", "step_s": 0.1}]
    memory = {"rss_baseline_bytes": 100 * MB, "rss_peak_bytes": 300 * MB,
              "rss_after_step_bytes": 120 * MB, "rss_peak_scope": "measured phase (...)",
              "heap_baseline_bytes": 19 * MB, "heap_after_step_bytes": 20 * MB,
              "kept_by_step_reading": backends.C_HEAP.reading,
              "kept_baseline_bytes": 19 * MB, "kept_by_step_bytes": 1 * MB,
              "peak_device_memory_bytes": None, "peak_device_reserved_bytes": None,
              "device_after_step_bytes": None, "device_process_bytes": None}
    new = str(tmp_path / "raw/cpu/torch/eager/mlp512/backward/t1/seed0.parquet")
    old = str(tmp_path / "raw/cpu/torch/eager/mlp512/backward/t1/seed1.parquet")
    schema.write_raw(new, cell, rows, {"status": "ok", "message": "", "cell": cell, **memory})
    schema.write_raw(old, {**cell, "seed": 1}, rows,
                     {"status": "ok", "message": "", "cell": {**cell, "seed": 1}})
    record = aggregate.cell_record(new)
    assert {k: record[k] for k in schema.MEMORY_FIELDS} == memory
    assert all(aggregate.cell_record(old)[k] is None for k in schema.MEMORY_FIELDS)


def test_a_measured_cell_records_its_memory(repo, tmp_path):
    """measure.py as Snakemake runs it (torch eager, tiny): the memory fields are there,
    bytes, the peak reset at the measured phase, nothing on the device of a cpu cell."""
    pytest.importorskip("torch")
    out = tmp_path / "cell.parquet"
    cmd = [sys.executable, str(repo / "workflow" / "scripts" / "measure.py"),
           "--cell", spec.CellDescription.of("torch", "eager", "mlp512", warmup=1,
                                             iterations=2, n_samples=8,
                                             batch_size=4).to_json(), "--out", str(out),
           "--gradients", str(tmp_path / "cell.npz")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-4000:]
    info = schema.read_provenance(str(out))
    assert info["status"] == "ok"
    assert set(schema.MEMORY_FIELDS) <= set(info)
    if not resettable():
        pytest.skip("/proc/self/clear_refs not writable: the scope is the fallback's")
    assert info["rss_peak_scope"].startswith("measured phase")
    assert 10 * MB < info["rss_baseline_bytes"] <= info["rss_peak_bytes"] + MB
    assert 10 * MB < info["rss_after_step_bytes"] <= info["rss_peak_bytes"]
    assert info["peak_device_memory_bytes"] is None
    assert info["peak_device_reserved_bytes"] is None
    assert info["device_after_step_bytes"] is None
    # PyTorch's CPU reading, the C heap: a backward step keeps nothing past its return
    assert info["kept_by_step_reading"] == backends.C_HEAP.reading
    assert abs(info["kept_by_step_bytes"]) < MB


# ------------------------------------------------------------------ the memory table
def memory_cells() -> "pd.DataFrame":
    import pandas as pd

    base = {"machine": "x86 CPU", "mode": "eager", "model": "mlp512", "task": "backward",
            "device": "cpu", "threads": 1, "status": "ok", "peak_device_memory_bytes": None,
            "peak_device_reserved_bytes": None}
    scope = "measured phase (VmHWM reset by /proc/self/clear_refs)"
    rows = [  # torch: three processes, peaks over baseline 10, 30 and 20 MB; jax: one
        {**base, "framework": "torch", "seed": s, "rss_baseline_bytes": 100 * MB,
         "rss_peak_bytes": (100 + add) * MB, "rss_after_step_bytes": (100 + held) * MB,
         "rss_peak_scope": scope}
        for s, add, held in ((0, 10, 1), (1, 30, 3), (2, 20, 2))
    ] + [
        {**base, "framework": "jax", "seed": 0, "rss_baseline_bytes": 200 * MB,
         "rss_peak_bytes": 400 * MB, "rss_after_step_bytes": 250 * MB,
         "rss_peak_scope": "process start: the peak could not be reset (PermissionError)"},
        {**base, "framework": "jax", "seed": 1, "status": "failed", "rss_baseline_bytes": 1,
         "rss_peak_bytes": 10 ** 12, "rss_after_step_bytes": 1, "rss_peak_scope": scope},
    ]
    return pd.DataFrame(rows)


def test_memory_table_medians_over_ok_processes_per_condition():
    from adbench import tables

    table = tables.memory_table(memory_cells())
    assert list(table.columns) == tables.MEMORY_COLUMNS
    assert list(table["framework"]) == ["torch", "jax"]  # spec order, failed cell left out
    torch, jax = (r for _, r in table.iterrows())
    assert (torch["n_processes"], torch["n_peak_from_start"]) == (3, 0)
    assert torch["peak_over_baseline_bytes"] == 20 * MB
    assert torch["held_after_step_bytes"] == 102 * MB
    assert torch["held_over_baseline_bytes"] == 2 * MB
    assert (jax["n_processes"], jax["n_peak_from_start"]) == (1, 1)
    assert jax["peak_over_baseline_bytes"] == 200 * MB
    assert table["device_peak_allocated_bytes"].isna().all()


def test_memory_table_orders_each_frameworks_modes_as_the_spec_does():
    import pandas as pd

    from adbench import spec, tables

    one = memory_cells().iloc[0]
    modes = list(spec.FRAMEWORKS["torch"].modes)  # eager, script, trace, compile
    cells = pd.DataFrame([{**one, "mode": m} for m in sorted(modes, reverse=True)])
    assert list(tables.memory_table(cells)["mode"]) == modes


def test_memory_table_of_cells_without_memory_is_empty_with_its_header():
    from adbench import tables

    old = memory_cells().drop(columns=["rss_peak_bytes", "rss_peak_scope"])
    assert tables.memory_table(old).empty
    assert list(tables.memory_table(old).columns) == tables.MEMORY_COLUMNS


def test_the_papers_memory_table_has_device_columns_only_where_a_cuda_cell_ran():
    row = {"machine": "x86 CPU", "framework": "torch", "mode": "eager", "model": "mlp512",
           "task": "backward",
           "threads": 1, "n_processes": 2, "n_peak_from_start": 0,
           "peak_over_baseline_bytes": 3 * MB, "held_after_step_bytes": 300 * MB,
           "held_over_baseline_bytes": 1 * MB, "heap_after_step_bytes": 40 * MB,
           "n_not_measurable": 0, "kept_by_step_bytes": 0.25 * MB,
           "saved_activations_bytes": 0.25 * MB, "kept_over_saved": 1.0,
           "device_peak_allocated_bytes": float("nan"),
           "device_peak_reserved_bytes": float("nan"),
           "device_held_after_step_bytes": float("nan"), "device_process_bytes": float("nan")}
    cpu = pd.DataFrame([{**row, "device": "cpu"}])[tables.MEMORY_COLUMNS]
    context = paper_context.memory_context(cpu, None)
    assert not context["cuda"] and [(r["peak"], r["held"], r["heap"])
                                    for r in context["rows"]] == [("3.00", "300", "40.0")]
    cuda = pd.DataFrame([{**row, "device": "cuda", "n_peak_from_start": 1,
                          "device_peak_allocated_bytes": 40 * MB,
                          "device_peak_reserved_bytes": 64 * MB,
                          "device_held_after_step_bytes": 2 * MB,
                          "device_process_bytes": 700 * MB}])[tables.MEMORY_COLUMNS]
    context = paper_context.memory_context(pd.concat([cpu, cuda]), None)
    assert context["cuda"] and context["any_from_start"]
    assert [(r["device_allocated"], r["device_reserved"], r["device_held"], r["device_process"])
            for r in context["rows"]] == [("n/a", "n/a", "n/a", "n/a"),
                                          ("40.0", "64.0", "2.00", "700")]
    assert all(r["block"] for r in context["rows"])  # two blocks: each row says its own
    assert paper_context.memory_context(cpu.iloc[0:0], None) is None


def test_a_kept_figure_beyond_one_graph_is_explained_by_its_task():
    """The study's protocol keeps its accumulated gradients; an output Jacobian's step, state
    across steps; a loss derivative's, more than its batch's graph."""
    from adbench import activation_memory
    assert "gradient" in activation_memory.beyond_one_graph(spec.STUDY_PROTOCOL_TASK)
    assert "one example" in activation_memory.beyond_one_graph("jacobian_vectorized")
    assert "batch" in activation_memory.beyond_one_graph("backward_retained")
