"""adbench.schema: the raw Parquet contract (columns, types, provenance metadata, atomic write)."""

from __future__ import annotations

import dataclasses
import os

import pyarrow.parquet as pq
import pytest

from adbench import schema, spec

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workflow", "scripts")
EAGER = dataclasses.asdict(spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 2, 3))
SCRIPT = dataclasses.asdict(spec.Cell("torch", "script", "mlp512", "backward", "cpu", 2, 3))
EAGER_ROWS = [
    {"iteration": i, "phase": "warmup" if i < 1 else "measured",
     "forward_s": 0.001 * (i + 1), "backward_s": 0.002 * (i + 1), "step_s": 0.003 * (i + 1)}
    for i in range(3)
]
PROVENANCE = {"status": "ok", "message": "", "versions": {"torch": "2.13.0"},
              "phases": {"import_s": 1.5}, "threads": 2}


def test_round_trip_columns_dtypes_values_and_metadata(tmp_path):
    path = str(tmp_path / "deep" / "dir" / "seed3.parquet")  # directories are created
    schema.write_raw(path, EAGER, EAGER_ROWS, PROVENANCE)
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == schema.RAW_SCHEMA
    assert schema.read_provenance(path) == PROVENANCE
    df = table.to_pandas()
    assert len(df) == 3
    assert set(df["framework"]) == {"torch"} and set(df["threads"]) == {2}
    assert list(df["iteration"]) == [0, 1, 2]
    assert list(df["phase"]) == ["warmup", "measured", "measured"]
    assert list(df["backward_s"]) == [0.002, 0.004, 0.006]
    assert os.listdir(os.path.dirname(path)) == ["seed3.parquet"]  # no temp file left


def test_failed_cell_with_no_rows_is_still_a_valid_file(tmp_path):
    path = str(tmp_path / "failed.parquet")
    info = {"status": "failed", "message": "RuntimeError: out of memory"}
    schema.write_raw(path, EAGER, [], info)
    table = pq.read_table(path)
    assert table.num_rows == 0
    assert table.schema.remove_metadata() == schema.RAW_SCHEMA
    assert schema.read_provenance(path) == info
    assert os.listdir(tmp_path) == ["failed.parquet"]


@pytest.mark.parametrize("status", ["error", "", None])
def test_invalid_status_is_rejected_and_nothing_is_written(tmp_path, status):
    path = tmp_path / "bad.parquet"
    with pytest.raises(ValueError, match="status"):
        schema.write_raw(str(path), EAGER, EAGER_ROWS, {"status": status})
    assert os.listdir(tmp_path) == []


def test_a_failing_write_leaves_neither_target_nor_temp_file(tmp_path, monkeypatch):
    def broken(table, where):
        with open(where, "wb") as f:
            f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(schema.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        schema.write_raw(str(tmp_path / "x.parquet"), EAGER, EAGER_ROWS, PROVENANCE)
    assert os.listdir(tmp_path) == []


def test_compiled_mode_rows_have_null_forward_and_backward(tmp_path):
    path = str(tmp_path / "script.parquet")
    rows = [{"iteration": i, "phase": "measured", "step_s": 0.01} for i in range(4)]
    schema.write_raw(path, SCRIPT, rows, PROVENANCE)
    table = pq.read_table(path)
    assert table.column("forward_s").null_count == 4
    assert table.column("backward_s").null_count == 4
    assert table.column("step_s").null_count == 0


def test_read_provenance_rejects_a_foreign_parquet_file(tmp_path):
    path = str(tmp_path / "plain.parquet")
    pq.write_table(schema.RAW_SCHEMA.empty_table(), path)
    with pytest.raises(ValueError, match="not an adbench raw file"):
        schema.read_provenance(path)


def test_the_allocation_is_recorded_under_slurm_and_none_outside(monkeypatch):
    from adbench import provenance
    for name in list(os.environ):
        if name.startswith("SLURM"):
            monkeypatch.delenv(name)
    assert provenance.allocation()["scheduler"] is None
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURMD_NODENAME", "node7")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    got = provenance.allocation()
    assert (got["scheduler"], got["job_id"], got["node"], got["cpus"], got["gpus"]) == (
        "slurm", "42", "node7", "2", "0")
    assert provenance.machine()["allocation"]["job_id"] == "42"


@pytest.mark.parametrize("umask, mode", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_every_file_of_a_cell_honours_the_umask(tmp_path, umask, mode):
    """A group sharing a results tree reads what the umask lets it (mkstemp alone: 0600)."""
    from adbench import cell_record

    description = spec.CellDescription.of("torch", "eager", "mlp512")
    before = os.umask(umask)
    try:
        assert schema.process_umask() == umask
        raw, grads = tmp_path / "raw" / "c.parquet", tmp_path / "gradients" / "c.npz"
        cell_record.write_cell(str(raw), str(grads), description,
                               cell_record.starting_info(description, None), "failed", "why",
                               [])
    finally:
        os.umask(before)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in (raw, grads)} == {
        "c.parquet": oct(mode), "c.npz": oct(mode)}


def test_writing_a_raw_file_imports_no_pandas(tmp_path):
    """A timing job imports its framework, numpy and pyarrow; pa.array would import pandas
    (0.2-0.8 s of every job) to ask whether the values are pandas objects."""
    import subprocess
    import sys

    code = (f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); from adbench import schema; "
            f"schema.write_raw({str(tmp_path / 'r.parquet')!r}, {EAGER!r}, {EAGER_ROWS!r}, "
            f"{PROVENANCE!r}); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    assert pq.read_table(tmp_path / "r.parquet").num_rows == len(EAGER_ROWS)


@pytest.mark.parametrize("column, value", [("threads", 1.5), ("framework", 3),
                                           ("step_s", "1 s"), ("iteration", True)])
def test_a_value_of_the_wrong_type_is_refused_naming_it(tmp_path, column, value):
    cell = {**EAGER, **({column: value} if column in EAGER else {})}
    rows = [{**row, **({column: value} if column not in EAGER else {})} for row in EAGER_ROWS]
    with pytest.raises(TypeError, match=repr(value)):
        schema.raw_table(cell, rows, {"status": "ok"})
