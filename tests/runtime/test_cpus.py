"""The default thread count: the affinity mask capped by the cgroup CPU quota (v1 and v2,
parents included, rounded up), HOBBIT_NUM_THREADS over that, threads= over both, and bad
values refused with a ConfigError. cgroup rules run against a fake /proc and
/sys/fs/cgroup built in tmp_path; one test checks a real pinned process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.runtime import cpus
from hobbit.errors import ConfigError, HobbitError
from hobbit.runtime.cache import CachedReport
from tests.helpers import make_model, rand

REAL_AFFINITY = os.sched_getaffinity(0)  # before the fixture below replaces it
V2_MOUNT = "31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n"
V1_MOUNT = ("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct\n"
            "33 31 0:30 / /sys/fs/cgroup/memory rw,relatime shared:11 - cgroup cgroup rw,memory\n")


@pytest.fixture(autouse=True)
def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from an affinity mask of 8 CPUs and no HOBBIT_NUM_THREADS."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv(cpus.ENV_VAR, raising=False)


def _write(root: Path, path: str, text: str) -> None:
    file = root / path.lstrip("/")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def _v2(root: Path, cgroup: str, limits: dict[str, str]) -> str:
    """A cgroup v2 host: this process in `cgroup`, cpu.max text per folder under the mount."""
    _write(root, "proc/self/cgroup", f"0::{cgroup}\n")
    _write(root, "proc/self/mountinfo", V2_MOUNT)
    for folder, text in limits.items():
        _write(root, f"sys/fs/cgroup/{folder}/cpu.max", text)
    return str(root)


def _v1(root: Path, cgroup: str, limits: dict[str, tuple[str, str]], mountinfo: bool = True) -> str:
    """A cgroup v1 host: (cfs_quota_us, cfs_period_us) text per folder of the cpu,cpuacct mount."""
    _write(root, "proc/self/cgroup", f"5:memory:{cgroup}\n4:cpu,cpuacct:{cgroup}\n3:cpuset:/\n")
    if mountinfo:
        _write(root, "proc/self/mountinfo", V1_MOUNT)
    for folder, (quota, period) in limits.items():
        _write(root, f"sys/fs/cgroup/cpu,cpuacct/{folder}/cpu.cfs_quota_us", quota)
        _write(root, f"sys/fs/cgroup/cpu,cpuacct/{folder}/cpu.cfs_period_us", period)
    return str(root)


# -- affinity and cgroup quotas ----------------------------------------------------------------

def test_affinity_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpus.available_cpus(str(tmp_path)) == 8  # no /proc at all: no quota
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5})
    assert cpus.available_cpus(str(tmp_path)) == 2


@pytest.mark.parametrize("text, expected", [("50000 100000\n", 1), ("150000 100000\n", 2),
                                            ("100000 100000\n", 1), ("400000 100000\n", 4),
                                            ("max 100000\n", 8), ("2000000 100000\n", 8)])
def test_v2_quota_rounded_up_and_capped_by_affinity(tmp_path: Path, text: str, expected: int) -> None:
    root = _v2(tmp_path, "/app.slice/job", {"app.slice/job": text})
    assert cpus.available_cpus(root) == expected


def test_v2_parent_limit_applies(tmp_path: Path) -> None:
    """A container's own cgroup says max, its parent allows 3 CPUs, the grandparent 5."""
    root = _v2(tmp_path, "/kubepods/pod1/ctr", {"kubepods": "500000 100000", "kubepods/pod1": "300000 100000",
                                                "kubepods/pod1/ctr": "max 100000"})
    assert cpus.available_cpus(root) == 3


def test_v2_mount_root_below_the_host_root(tmp_path: Path) -> None:
    """A container without its own cgroup namespace: /proc/self/cgroup names the host's path,
    the mount shows only the container's subtree, whose top is the container's cgroup."""
    _write(tmp_path, "proc/self/cgroup", "0::/docker/abc\n")
    _write(tmp_path, "proc/self/mountinfo",
           "31 23 0:28 /docker/abc /sys/fs/cgroup ro,relatime - cgroup2 cgroup2 rw\n")
    _write(tmp_path, "sys/fs/cgroup/cpu.max", "100000 100000\n")
    assert cpus.available_cpus(str(tmp_path)) == 1


def test_v2_mount_point_with_escaped_space(tmp_path: Path) -> None:
    _write(tmp_path, "proc/self/cgroup", "0::/job\n")
    _write(tmp_path, "proc/self/mountinfo", "31 23 0:28 / /my\\040cgroups rw - cgroup2 none rw\n")
    _write(tmp_path, "my cgroups/job/cpu.max", "200000 100000\n")
    assert cpus.available_cpus(str(tmp_path)) == 2


def test_v1_quota_and_period(tmp_path: Path) -> None:
    root = _v1(tmp_path, "/docker/abc", {"docker/abc": ("250000", "100000")})
    assert cpus.available_cpus(root) == 3


def test_v1_minus_one_is_no_limit_and_parents_apply(tmp_path: Path) -> None:
    root = _v1(tmp_path, "/docker/abc", {"": ("-1", "100000"), "docker": ("100000", "100000"),
                                         "docker/abc": ("-1", "100000")})
    assert cpus.available_cpus(root) == 1
    root = _v1(tmp_path / "unlimited", "/docker/abc", {"docker/abc": ("-1", "100000")})
    assert cpus.available_cpus(root) == 8


def test_v1_found_without_mountinfo(tmp_path: Path) -> None:
    """No readable mountinfo: the conventional /sys/fs/cgroup/cpu,cpuacct is tried."""
    root = _v1(tmp_path, "/job", {"job": ("50000", "100000")}, mountinfo=False)
    assert cpus.available_cpus(root) == 1


def test_hybrid_host_takes_the_tighter_of_v1_and_v2(tmp_path: Path) -> None:
    _write(tmp_path, "proc/self/cgroup", "4:cpu,cpuacct:/job\n0::/job\n")
    _write(tmp_path, "proc/self/mountinfo", V1_MOUNT + V2_MOUNT.replace("/sys/fs/cgroup ", "/sys/fs/cgroup/unified "))
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "600000\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n")
    _write(tmp_path, "sys/fs/cgroup/unified/job/cpu.max", "200000 100000\n")
    assert cpus.available_cpus(str(tmp_path)) == 2


@pytest.mark.parametrize("text", ["", "garbage", "50000", "50000 0", "0 100000", "-5 100000", "max",
                                  "1.5 100000", "50000 100000 7", "\u0662 100000"])
def test_malformed_cpu_max_is_no_limit(tmp_path: Path, text: str) -> None:
    root = _v2(tmp_path, "/job", {"job": text})
    assert cpus.available_cpus(root) == 8


@pytest.mark.parametrize("quota, period", [("", "100000"), ("abc", "100000"), ("50000", ""),
                                           ("50000", "0"), ("50000", "-100000"), ("0", "100000")])
def test_malformed_v1_files_are_no_limit(tmp_path: Path, quota: str, period: str) -> None:
    root = _v1(tmp_path, "/job", {"job": (quota, period)})
    assert cpus.available_cpus(root) == 8


@pytest.mark.parametrize("cgroup, mountinfo", [
    ("", V2_MOUNT), ("not a cgroup file\n::\n0::relative\n", V2_MOUNT),
    ("0::/job\n", "short line\n31 23 0:28 / /sys/fs/cgroup rw - cgroup2\n"), ("0::/job\n", "\n\n")])
def test_malformed_proc_files_are_no_limit(tmp_path: Path, cgroup: str, mountinfo: str) -> None:
    _write(tmp_path, "proc/self/cgroup", cgroup)
    _write(tmp_path, "proc/self/mountinfo", mountinfo)
    _write(tmp_path, "sys/fs/cgroup/job/cpu.max", "100000 100000\n")
    assert cpus.available_cpus(str(tmp_path)) == 8


def test_unreadable_files_are_no_limit(tmp_path: Path) -> None:
    root = _v2(tmp_path, "/job", {})
    (tmp_path / "sys/fs/cgroup/job/cpu.max").mkdir(parents=True)  # a folder where a file should be
    assert cpus.available_cpus(root) == 8
    (tmp_path / "sys/fs/cgroup/job/cpu.max").rmdir()
    (tmp_path / "sys/fs/cgroup/job/cpu.max").write_bytes(b"\xff\xfe 100000\n")  # not UTF-8
    assert cpus.available_cpus(root) == 8


def test_this_host_gives_a_sane_count() -> None:
    """The real /proc and /sys of whatever machine runs the suite: never an error, never 0."""
    assert 1 <= cpus.available_cpus() <= 8


@pytest.mark.skipif(len(REAL_AFFINITY) < 2, reason="a single CPU: pinning to one changes nothing")
def test_pinned_process_counts_one_cpu() -> None:
    """A real child process pinned to one CPU (as `taskset -c N` does) reports 1."""
    cpu = min(REAL_AFFINITY)
    out = subprocess.run([sys.executable, "-c", "import hobbit.runtime.cpus as c; print(c.available_cpus())"],
                         preexec_fn=lambda: os.sched_setaffinity(0, {cpu}), capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "1"


# -- HOBBIT_NUM_THREADS ------------------------------------------------------------------------

def test_env_var_overrides_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpus.default_threads() == cpus.available_cpus()
    monkeypatch.setenv(cpus.ENV_VAR, "3")
    assert cpus.default_threads() == 3
    monkeypatch.setenv(cpus.ENV_VAR, "16")  # more than the CPUs: the user's call
    assert cpus.default_threads() == 16


def test_omp_num_threads_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cpus.default_threads() == cpus.available_cpus()


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5", "", " ", "4_0", "²"])
def test_bad_env_var_raises(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(cpus.ENV_VAR, text)
    with pytest.raises(ConfigError, match=cpus.ENV_VAR) as info:
        cpus.default_threads()
    assert repr(text) in str(info.value) and isinstance(info.value, HobbitError)


# -- hobbit.compile(threads=...) ---------------------------------------------------------------

def _relu():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"])


def test_compile_defaults_to_the_env_var_and_threads_beats_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hobbit.compile(_relu(), cache=False).report.threads == cpus.available_cpus()
    monkeypatch.setenv(cpus.ENV_VAR, "2")
    assert hobbit.compile(_relu(), cache=False).report.threads == 2
    assert hobbit.compile(_relu(), threads=3, cache=False).report.threads == 3


def test_threads_beats_a_bad_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit threads= never consults HOBBIT_NUM_THREADS, so a bad value there is no error."""
    monkeypatch.setenv(cpus.ENV_VAR, "lots")
    assert hobbit.compile(_relu(), threads=1, cache=False).report.threads == 1
    with pytest.raises(ConfigError, match="HOBBIT_NUM_THREADS"):
        hobbit.compile(_relu(), cache=False)


def test_cache_key_uses_the_resolved_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same model at two default thread counts is two cache entries, and threads=2 finds
    the entry that HOBBIT_NUM_THREADS=2 made."""
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(cpus.ENV_VAR, "1")
    assert not isinstance(hobbit.compile(_relu(), cache=True).report, CachedReport)
    monkeypatch.setenv(cpus.ENV_VAR, "2")
    assert not isinstance(hobbit.compile(_relu(), cache=True).report, CachedReport)
    monkeypatch.delenv(cpus.ENV_VAR)
    assert isinstance(hobbit.compile(_relu(), threads=2, cache=True).report, CachedReport)


@pytest.mark.parametrize("threads", [0, -1, True, False, 1.5, 2.0, "2", [2]])
def test_bad_threads_argument_raises(threads: object) -> None:
    with pytest.raises(ConfigError, match="threads=") as info:
        hobbit.compile(_relu(), threads=threads, cache=False)
    assert repr(threads) in str(info.value)


def test_numpy_integer_threads_accepted() -> None:
    assert hobbit.compile(_relu(), threads=np.int64(2), cache=False).report.threads == 2
