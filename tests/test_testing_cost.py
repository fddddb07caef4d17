"""benchmarks/testing_cost.py: the README's test command in a fresh clone, on the whole
machine or under a CPU quota that stands in for a slower host. The quota's arithmetic and
its control groups (v2 and v1) on fabricated cgroup trees, what it reads of pytest's output;
in the extended tier, the benchmark itself on two small test files, whole machine and quota."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import testing_cost as cost  # noqa: E402


@pytest.mark.parametrize("share, cores, quota", [(1.0, 2, 200_000), (0.67, 2, 134_000),
                                                 (0.5, 2, 100_000), (0.5, 1, 50_000)])
def test_the_quota_is_the_share_of_the_machines_cores(share, cores, quota):
    assert cost.quota_us(share, cores) == quota


@pytest.mark.parametrize("share", [0, -0.5, 1.5])
def test_a_share_outside_the_machine_is_refused_naming_it(share):
    with pytest.raises(ValueError, match=r"--cpu-share: .*\(0, 1\]"):
        cost.quota_us(share, 2)


def test_a_cgroup_v2_tree_gets_a_group_with_its_cpu_max(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    procs = cost.make_cgroup(0.67, 2, root=tmp_path)
    assert procs.name == "cgroup.procs" and procs.parent.parent == tmp_path
    assert (procs.parent / "cpu.max").read_text() == "134000 100000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"  # enabled for it
    cost.remove_cgroup(procs)  # a group it cannot remove (here, files in it) is left, named
    assert procs.parent.is_dir()


def test_a_cgroup_v1_tree_gets_a_group_with_its_cfs_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    procs = cost.make_cgroup(0.5, 2, root=tmp_path)
    assert procs.name == "tasks" and procs.parent.parent == tmp_path / "cpu"
    assert (procs.parent / "cpu.cfs_quota_us").read_text() == "100000"
    assert (procs.parent / "cpu.cfs_period_us").read_text() == "100000"


def test_a_group_it_cannot_set_is_named_and_not_left_behind(tmp_path, monkeypatch):
    """The kernel refuses the group's first setting once the group is made: the error names
    it, and the group is removed."""
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    real_write = Path.write_text

    def refused(self, *args, **kwargs):
        if self.parent.parent == tmp_path / "cpu":
            raise PermissionError(13, "Permission denied", str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refused)
    with pytest.raises(SystemExit, match="cannot make a control group.*Permission denied"):
        cost.make_cgroup(0.5, 2, root=tmp_path)
    assert [p.name for p in (tmp_path / "cpu").iterdir()] == ["cpu.cfs_quota_us"]


def test_no_cpu_controller_is_named_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit, match="no cgroup cpu controller"):
        cost.make_cgroup(0.5, 2, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("log, summary", [
    ("....\n2400 passed, 1 skipped, 56 warnings in 724.29s (0:12:04)\n",
     "2400 passed, 1 skipped, 56 warnings"),
    ("=== FAILURES ===\n==== 3 failed, 2 passed in 1.20s ====\n", "3 failed, 2 passed"),
    ("no tests ran in 0.01s\n", None),
])
def test_pytests_summary_line_is_read_with_or_without_its_rules(log, summary):
    found = cost.SUMMARY.findall(log)
    assert (found[-1] if found else None) == summary


def test_the_slowest_tests_come_from_the_junit_file(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="tests.a" name="x" '
                     'time="1.5"/><testcase classname="tests.b" name="y" time="9.0"/>'
                     '<testcase classname="tests.a" name="z" time="0.1"/></testsuite>'
                     '</testsuites>')
    assert cost.slowest_tests(junit, 2) == [(9.0, "tests.b::y"), (1.5, "tests.a::x")]
    assert cost.slowest_tests(tmp_path / "absent.xml", 2) == []


def test_the_report_holds_the_total_to_the_budget_and_names_a_failed_step():
    def result(setup_s, pytest_s, rc):
        steps = [{"command": "./setup.sh --test", "rc": 0, "wall_s": setup_s, "cpu_s": 1.0},
                 {"command": "python3 -m pytest", "rc": rc, "wall_s": pytest_s, "cpu_s": 9.0}]
        return {"commit": "0123456789abcdef", "uncommitted": ["a.py"], "workdir": "/w",
                "cpu_share": 0.5, "cores": 2, "peak_gflops": 120.0, "steps": steps,
                "summary": "1 failed, 9 passed" if rc else "10 passed", "slowest": []}

    fine = cost.report(result(10.0, 880.0, 0))
    assert "890.0 s in all: within the 15 minutes\n" in fine + "\n"
    assert "0123456789ab with 1 uncommitted file(s)" in fine and "(a CPU quota)" in fine
    late = cost.report(result(10.0, 900.0, 1))
    assert "910.0 s in all: over the 15 minutes (a step failed)" in late
    assert "pytest: 1 failed, 9 passed" in late


def test_the_clone_is_heads_with_the_uncommitted_work_laid_over_it(tmp_path):
    """A git clone (tests read its git), plus the work not committed yet: a file changed,
    one added, one deleted; an ignored file left out."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in {"kept.txt": "a\n", "changed.txt": "old\n", "gone.txt": "x\n",
                       ".gitignore": "ignored.txt\n"}.items():
        (repo / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=repo, check=True)
    (repo / "changed.txt").write_text("new\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "added.txt").write_text("b\n")
    (repo / "gone.txt").unlink()
    (repo / "ignored.txt").write_text("not copied\n")
    dest = tmp_path / "clone"
    dest.mkdir()
    clone = cost.fresh_clone(dest, repo)
    assert (dest / ".git").is_dir() and (dest / "kept.txt").read_text() == "a\n"
    assert (dest / "changed.txt").read_text() == "new\n"
    assert (dest / "sub" / "added.txt").read_text() == "b\n"
    assert not (dest / "gone.txt").exists() and not (dest / "ignored.txt").exists()
    assert clone["uncommitted"] == ["changed.txt", "gone.txt", "sub/added.txt"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True).stdout.strip()
    assert clone["commit"] == head


def run_benchmark(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    out = tmp_path / "cost.json"
    # test_run_config reads the clone's git (its tracked folders)
    return subprocess.run([sys.executable, "benchmarks/testing_cost.py", *args,
                           "--out", str(out), "--", "-n", "0", "-m", "unit",
                           "tests/test_formatting.py", "tests/test_run_config.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.extended
def test_the_benchmark_runs_the_command_in_a_fresh_copy_and_reports_it(tmp_path):
    """setup.sh --test, then pytest (here on two small files), in a clone it removes after."""
    done = run_benchmark(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    result = json.loads((tmp_path / "cost.json").read_text())
    assert [s["command"].split()[0] for s in result["steps"]] == ["./setup.sh", sys.executable]
    assert all(s["rc"] == 0 and s["wall_s"] > 0 and s["cpu_s"] > 0 for s in result["steps"])
    assert result["summary"].split()[1] == "passed" and result["peak_gflops"] > 0
    assert result["slowest"] and not Path(result["workdir"]).exists()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert result["commit"] == head
    assert "within the 15 minutes" in done.stdout and "1 of" in done.stdout


@pytest.mark.extended
def test_under_a_quota_the_run_is_held_to_its_share(tmp_path):
    """Half the machine: the command's CPU seconds stay within half its cores' wall time."""
    try:
        cost.remove_cgroup(cost.make_cgroup(0.5, 1))
    except SystemExit as exc:
        pytest.skip(str(exc))
    done = run_benchmark(tmp_path, "--cpu-share", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    result = json.loads((tmp_path / "cost.json").read_text())
    cores = result["cores"]
    for step in result["steps"]:
        # a margin for the period's granularity
        assert step["cpu_s"] <= 0.5 * cores * step["wall_s"] * 1.1 + 0.5, step
    assert "(a CPU quota)" in done.stdout
