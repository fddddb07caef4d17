"""run_cell.py and measure.py's time budget, with real processes: a child that hangs, one
killed by SIGKILL, one interrupted, and a real PyTorch cell whose budget runs out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from adbench import cell_record, derivatives, schema, spec

SCRIPTS = os.path.join(os.path.dirname(__file__), os.pardir, "workflow", "scripts")
RUN_CELL = os.path.join(SCRIPTS, "run_cell.py")
DEVICE_FAILED = 3  # run_cell.DEVICE_FAILED
MEASURE = os.path.join(SCRIPTS, "measure.py")


def measure_args(tmp_path, iterations=5, model="mlp512", *extra):
    cell = spec.CellDescription.of("torch", "eager", model, warmup=2, iterations=iterations,
                                   n_samples=512)
    return ["--cell", cell.to_json(),
            "--out", str(tmp_path / "raw.parquet"), "--gradients", str(tmp_path / "g.npz"),
            *extra]


def child_script(tmp_path, body: str) -> str:
    """A stand-in for measure.py (run_cell passes it measure.py's arguments)."""
    path = tmp_path / "child.py"
    path.write_text(f"import os, signal, sys, time\n{body}\n")
    return str(path)


def run_cell(tmp_path, child: list[str], budget_s: float = 60, receipt=None, **kwargs):
    extra = ["--receipt", str(receipt)] if receipt else []
    cmd = [sys.executable, RUN_CELL, "--budget-s", str(budget_s),
           "--killed-log", str(tmp_path / "killed.log"), *extra, "--", *child]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


def test_a_child_killed_by_sigkill_is_recorded_failed_and_logged(tmp_path):
    child = [sys.executable, child_script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)"),
             *measure_args(tmp_path)]
    done = run_cell(tmp_path, child)
    assert done.returncode == 0, done.stderr
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "failed"
    assert "killed by SIGKILL" in info["message"] and "out-of-memory" in info["message"]
    assert info["cell"]["model"] == "mlp512" and info["workload"]["iterations"] == 5
    assert pq.read_table(tmp_path / "raw.parquet").num_rows == 0
    assert derivatives.read_derivatives(str(tmp_path / "g.npz"))[0] == "failed"
    assert len((tmp_path / "killed.log").read_text().splitlines()) == 1
    run_cell(tmp_path, child)  # a second kill: a second line, so a second re-try
    assert len((tmp_path / "killed.log").read_text().splitlines()) == 2


def test_a_hanging_child_is_killed_at_the_budget_and_recorded_timeout(tmp_path):
    finished = tmp_path / "finished"
    child = [sys.executable, child_script(
        tmp_path, f"time.sleep(120)\nopen({str(finished)!r}, 'w').close()"),
        *measure_args(tmp_path)]
    done = run_cell(tmp_path, child, budget_s=2)
    assert done.returncode == 0, done.stderr
    assert not finished.exists()  # killed at 2 s, not waited for
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "timeout" and "budget of 2 s" in info["message"]
    assert not (tmp_path / "killed.log").exists()  # a timeout is not re-tried by itself


@pytest.mark.parametrize("ends", ["exits", "killed at the budget"])
def test_the_child_gets_a_temp_directory_of_its_own_removed_when_it_ends(tmp_path, ends):
    """Nothing a cell leaves in its temp directory reaches the next cell, or stays."""
    job_tmp, seen = tmp_path / "job-tmp", tmp_path / "seen"
    job_tmp.mkdir()
    body = ("import tempfile; d = tempfile.gettempdir(); "
            f"open({str(seen)!r}, 'w').write(os.environ['TMPDIR'] + chr(10) + d); "
            "open(os.path.join(d, 'left-behind'), 'w').write('state')"
            + ("; time.sleep(120)" if ends != "exits" else ""))
    child = [sys.executable, child_script(tmp_path, body), *measure_args(tmp_path)]
    done = run_cell(tmp_path, child, budget_s=3, env={**os.environ, "TMPDIR": str(job_tmp)})
    assert done.returncode == 0, done.stderr
    given, used = seen.read_text().splitlines()
    assert given == used and os.path.dirname(given) == str(job_tmp)
    assert list(job_tmp.iterdir()) == []  # removed, with what the child left in it


def test_a_child_that_wrote_its_files_is_left_alone(tmp_path):
    body = ("out = sys.argv[sys.argv.index('--out') + 1]; open(out, 'w').write('mine'); "
            "g = sys.argv[sys.argv.index('--gradients') + 1]; open(g, 'w').write('mine')")
    child = [sys.executable, child_script(tmp_path, body), *measure_args(tmp_path)]
    assert run_cell(tmp_path, child).returncode == 0
    assert (tmp_path / "raw.parquet").read_text() == "mine"


def test_an_error_of_the_job_itself_fails_the_job(tmp_path):
    child = [sys.executable, child_script(tmp_path, "sys.exit(2)"), *measure_args(tmp_path)]
    assert run_cell(tmp_path, child).returncode == 2
    assert not (tmp_path / "raw.parquet").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_stops_the_child_and_writes_nothing(tmp_path, signum):
    """SIGINT (Ctrl-C) as SIGTERM (scancel): exit 130, the child gone, no record."""
    pid_file = tmp_path / "child.pid"
    body = f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    child = [sys.executable, child_script(tmp_path, body), *measure_args(tmp_path)]
    cmd = [sys.executable, RUN_CELL, "--budget-s", "100", "--killed-log",
           str(tmp_path / "killed.log"), "--", *child]
    parent = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True,  # SIGINT not ignored,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    parent.send_signal(signum)
    assert parent.wait(timeout=30) == 130
    assert f"interrupted ({signal.Signals(signum).name})" in parent.stderr.read()
    child_pid = int(pid_file.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)  # gone, not orphaned
    assert not (tmp_path / "raw.parquet").exists()
    assert not (tmp_path / "killed.log").exists()  # an interrupt is not a kill to re-try


SIGNAL_INSIDE_WAIT = """
import os, signal, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import run_cell

class SignallingLock:  # sends SIGTERM to this process the first time it is taken
    def __init__(self):
        self.lock, self.sent = threading.Lock(), False
    def acquire(self, blocking=True, timeout=-1):
        taken = self.lock.acquire(blocking, timeout)
        if taken and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        return taken
    def release(self):
        self.lock.release()
    def __enter__(self):
        self.acquire()
    def __exit__(self, *exc):
        self.release()

locks = []
class Popen(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._waitpid_lock = SignallingLock()
        locks.append(self._waitpid_lock)

subprocess.Popen = Popen
rc = run_cell.main(sys.argv[2:])
print("rc", rc, "signalled inside wait", all(lock.sent for lock in locks) and len(locks) == 1)
"""


def test_a_signal_inside_popen_wait_does_not_hang_the_job(tmp_path):
    """The SIGTERM lands just after Popen.wait takes its internal lock: the moment a handler
    that raised left that lock held and the job hung for ever (CI saw it once)."""
    driver = tmp_path / "driver.py"
    driver.write_text(SIGNAL_INSIDE_WAIT)
    child = [sys.executable, child_script(tmp_path, "time.sleep(120)"), *measure_args(tmp_path)]
    cmd = [sys.executable, str(driver), SCRIPTS, "--budget-s", "100", "--killed-log",
           str(tmp_path / "killed.log"), "--", *child]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "rc 130 signalled inside wait True" in done.stdout, done.stdout
    assert not (tmp_path / "raw.parquet").exists()


@pytest.mark.backend  # a real timing process
def test_a_real_cell_over_its_budget_keeps_the_iterations_it_completed(tmp_path):
    """measure.py under run_cell, PyTorch eager: a million iterations in a 10 s budget. It
    stops itself before the budget (no kill: its own record, the rows it timed)."""
    child = [sys.executable, MEASURE, *measure_args(tmp_path, 10**6, "mlp512", "--budget-s",
                                                    "10")]
    done = run_cell(tmp_path, child, budget_s=10,
                    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "timeout", info["message"]
    assert "budget of 10 s" in info["message"] and "of 1000002 iterations" in info["message"]
    rows = pq.read_table(tmp_path / "raw.parquet").to_pandas()
    # Rows: measure.py wrote its own record (a cell killed at the budget has none).
    assert len(rows) > 2 and (rows["phase"] == "measured").any()
    assert np.all(rows["step_s"] > 0)
    assert info["budget_s"] == 10


def test_a_cell_whose_environment_could_not_be_built_is_recorded_failed(tmp_path):
    receipt = tmp_path / "broken.json"
    receipt.write_text(json.dumps({"status": "failed", "env_file": "envs/broken.yaml",
                                   "message": "uv exited 1: Distribution not found"}))
    never = tmp_path / "ran"
    child = [sys.executable, child_script(tmp_path, f"open({str(never)!r}, 'w')"),
             *measure_args(tmp_path)]
    done = run_cell(tmp_path, child, receipt=receipt)
    assert done.returncode == 0, done.stderr
    assert not never.exists()  # the child was not started
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "failed"
    assert "envs/broken.yaml" in info["message"] and "Distribution not found" in info["message"]


RECORD_BODY = """
sys.path.insert(0, {scripts!r})
from adbench import schema
out = sys.argv[sys.argv.index('--out') + 1]
open(sys.argv[sys.argv.index('--gradients') + 1], 'w').write('g')
schema.write_raw(out, {{}}, [], {{'status': {status!r}, 'retime': {retime!r}}})
sys.exit({code} if {retime!r} and '--retime-status' in sys.argv else 0)  # as measure.py
"""


@pytest.mark.parametrize("status, retime", [("failed", "the framework saw no GPU"),
                                            ("failed", None), ("unsupported", None)])
def test_a_record_asking_to_be_retimed_gets_a_line_in_the_killed_log(tmp_path, status,
                                                                     retime):
    """measure.py's `retime` (a cuda cell whose framework saw no GPU): a line, as after a
    kill, so the next run re-times the cell; any other record: none."""
    body = RECORD_BODY.format(scripts=SCRIPTS, status=status, retime=retime,
                              code=cell_record.RETIME_STATUS)
    child = [sys.executable, child_script(tmp_path, body), *measure_args(tmp_path)]
    done = run_cell(tmp_path, child, env={**os.environ, "SLURM_JOB_ID": "77",
                                          "SLURMD_NODENAME": "gpu-node-3"})
    log = tmp_path / "killed.log"
    if retime:
        # failed for its device: the job fails, after its record is written, naming the node
        assert done.returncode == DEVICE_FAILED, done.stderr
        assert schema.read_provenance(str(tmp_path / "raw.parquet"))["retime"] == retime
        assert "SLURM job 77 on node gpu-node-3" in done.stderr
        assert retime in log.read_text() and len(log.read_text().splitlines()) == 1
    else:
        assert done.returncode == 0, done.stderr
        assert not log.exists()


def test_a_local_run_goes_on_after_a_cell_that_failed_for_its_device(tmp_path):
    """Outside SLURM the job ends 0 (Snakemake would remove a failed job's files): the cell
    is recorded, and the next run re-times it."""
    body = RECORD_BODY.format(scripts=SCRIPTS, status="failed", retime="no GPU",
                              code=cell_record.RETIME_STATUS)
    child = [sys.executable, child_script(tmp_path, body), *measure_args(tmp_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    done = run_cell(tmp_path, child, env=env)
    assert done.returncode == 0, done.stderr
    assert "no GPU" in (tmp_path / "killed.log").read_text()


def test_the_kill_message_names_sacct_for_the_job(tmp_path):
    child = [sys.executable, child_script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)"),
             *measure_args(tmp_path)]
    done = run_cell(tmp_path, child, env={**os.environ, "SLURM_JOB_ID": "4242"})
    assert done.returncode == 0, done.stderr
    message = schema.read_provenance(str(tmp_path / "raw.parquet"))["message"]
    assert "sacct -j 4242 -o State,MaxRSS,ExitCode" in message and "dmesg" not in message


def test_compile_caches_go_to_the_node_not_the_results_tree(tmp_path):
    """measure.py's --cache-dir becomes ADBENCH_CACHE_DIR, else a folder under the job's
    temp directory (Snakemake's tmpdir resource)."""
    seen = tmp_path / "seen"
    body = (f"open({str(seen)!r}, 'w').write(sys.argv[sys.argv.index('--cache-dir') + 1])")
    child = [sys.executable, child_script(tmp_path, body),
             *measure_args(tmp_path, 5, "mlp512", "--cache-dir", "results/cache")]
    job_tmp = tmp_path / "job-tmp"
    job_tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ADBENCH_CACHE_DIR"}
    run_cell(tmp_path, child, env={**env, "TMPDIR": str(job_tmp)})
    assert seen.read_text().startswith(str(job_tmp) + os.sep)
    run_cell(tmp_path, child, env={**env, "ADBENCH_CACHE_DIR": str(tmp_path / "scratch")})
    assert seen.read_text() == str(tmp_path / "scratch")


def test_a_process_start_is_read_to_the_tick_not_to_the_boot_second(tmp_path):
    """provenance.process_start_epoch (start-up in every record, and the job wall time
    run_cell.py logs): a child's own start-up cannot exceed the wall time its parent saw
    around it. (From /proc/stat's whole-second btime it read up to a second more.)"""
    code = ("import time; now = time.time(); import sys; sys.path.insert(0, sys.argv[1]); "
            "from adbench import provenance; print(now - provenance.process_start_epoch())")
    for _ in range(3):
        before = time.time()
        done = subprocess.run([sys.executable, "-c", code, SCRIPTS], capture_output=True,
                              text=True, check=True)
        parent_saw = time.time() - before
        startup = float(done.stdout)
        assert -0.02 <= startup <= parent_saw + 0.02, (startup, parent_saw)


def test_the_job_log_ends_with_the_job_wall_time(tmp_path):
    child = [sys.executable, child_script(tmp_path, "time.sleep(0.3)"), *measure_args(tmp_path)]
    done = run_cell(tmp_path, child)
    wall = [line for line in done.stderr.splitlines() if "job wall time" in line]
    assert len(wall) == 1 and done.stderr.strip().endswith(wall[0]), done.stderr
    assert float(wall[0].split("job wall time ")[1].split(" s")[0]) >= 0.3


def test_measure_exits_once_its_files_are_written_running_the_atexit_handlers(tmp_path):
    """exit_now skips the interpreter's teardown of a framework's modules (seconds), not the
    atexit handlers (a compiled cell's cache removed there)."""
    ran = tmp_path / "ran"
    code = (f"import sys, atexit; sys.path.insert(0, {str(SCRIPTS)!r}); import measure; "
            f"atexit.register(lambda: open({str(ran)!r}, 'w').write('yes')); "
            "print('flushed', end=''); measure.exit_now(3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3 and done.stdout == "flushed"
    assert ran.read_text() == "yes"
