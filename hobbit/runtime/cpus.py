"""How many CPUs this process may use, and so how many threads a model gets by default.

os.cpu_count() counts the host's CPUs, but a process pinned with taskset or a
cpuset, or running in a container with a CPU quota (docker --cpus=1, a
Kubernetes CPU limit), may use fewer. More threads than that only take turns on
the same CPUs (the team copes, see hobbit.runtime.pool, but gains nothing), so
the default is the smallest of

- the affinity mask (os.sched_getaffinity; cpusets show up here too), and
- the cgroup CPU quota rounded up to whole CPUs: cgroup v2 `cpu.max`
  ("QUOTA PERIOD", or "max PERIOD" for none), or cgroup v1
  `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota -1 for none), read in the
  process's own cgroup and in every parent up to the hierarchy's root, because a
  parent's quota binds its children as well.

HOBBIT_NUM_THREADS overrides that default. OMP_NUM_THREADS is deliberately not
read: hobbit does not use OpenMP, and that variable is set for other libraries
in the same process (numpy's BLAS, for one), whose thread counts are not ours.

Files that are missing, unreadable or malformed mean "no limit from that
source", never an error: the count is a default, and guessing high on an odd
system is better than refusing to compile. Every path is taken under `root` so
tests can build a fake /proc and /sys/fs/cgroup."""

from __future__ import annotations

import os
import re

from hobbit.errors import ConfigError

ENV_VAR = "HOBBIT_NUM_THREADS"

# Where cgroup hierarchies conventionally live, for when /proc/self/mountinfo cannot be read.
_FALLBACK_V2 = "/sys/fs/cgroup"
_FALLBACK_V1 = ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu")


def default_threads() -> int:
    """Threads per inference when compile() is not told: HOBBIT_NUM_THREADS if set, else
    available_cpus(). A set but unusable value is an error rather than ignored, so a typo
    does not silently fall back to another count."""
    text = os.environ.get(ENV_VAR)
    if text is None:
        return available_cpus()
    if not re.fullmatch(r"\s*[0-9]+\s*", text) or int(text) < 1:
        raise ConfigError(f"{ENV_VAR} must be a positive integer (threads per inference), got {text!r}; "
                          f"unset it to use the CPUs this process may run on")
    return int(text)


def available_cpus(root: str = "/") -> int:
    """CPUs this process may keep busy: the affinity mask, capped by any cgroup CPU quota; at least 1."""
    cpus = _affinity()
    quota = cgroup_cpu_limit(root)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def _affinity() -> int:
    """CPUs in the affinity mask; platforms without sched_getaffinity (macOS) give all CPUs."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_cpu_limit(root: str = "/") -> int | None:
    """Whole CPUs (rounded up) the tightest cgroup CPU quota on this process allows, or None
    when no v1 or v2 quota applies. Both versions are read because a hybrid host has both
    mounted, and whichever hierarchy holds the cpu controller is the one with the files."""
    v2_path, v1_path = _own_cgroups(root)
    mounts = _cgroup_mounts(root)
    limits = []
    if v2_path is not None:
        for mount_root, mount_point in mounts["v2"]:
            for folder in _folders_up(root, mount_point, mount_root, v2_path):
                limits.append(_v2_limit(folder))
    if v1_path is not None:
        for mount_root, mount_point in mounts["v1"]:
            for folder in _folders_up(root, mount_point, mount_root, v1_path):
                limits.append(_v1_limit(folder))
    found = [n for n in limits if n is not None]
    return min(found) if found else None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _own_cgroups(root: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 cpu-controller path) of this process from /proc/self/cgroup, e.g. from
    "0::/user.slice" and "4:cpu,cpuacct:/docker/abc"; None where there is no such line."""
    v2 = v1 = None
    for line in (_read(os.path.join(root, "proc/self/cgroup")) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040 ...)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _cgroup_mounts(root: str) -> dict[str, list[tuple[str, str]]]:
    """(mount root, mount point) of every cgroup v2 mount and every v1 mount holding the cpu
    controller, from /proc/self/mountinfo; the conventional places if it cannot be read."""
    text = _read(os.path.join(root, "proc/self/mountinfo"))
    if text is None:
        return {"v2": [("/", _FALLBACK_V2)], "v1": [("/", point) for point in _FALLBACK_V1]}
    mounts: dict[str, list[tuple[str, str]]] = {"v2": [], "v1": []}
    for line in text.splitlines():
        # ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 4:
            continue
        fstype, super_options = fields[dash + 1], fields[dash + 3].split(",")
        entry = (_unescape(fields[3]), _unescape(fields[4]))
        if fstype == "cgroup2":
            mounts["v2"].append(entry)
        elif fstype == "cgroup" and "cpu" in super_options:
            mounts["v1"].append(entry)
    return mounts


def _folders_up(root: str, mount_point: str, mount_root: str, path: str) -> list[str]:
    """The folders of cgroup `path` under one mount, from its own up to the mount point.

    A mount whose root is not "/" (a container's view of the host's hierarchy) shows
    only the part of `path` below that root; a path outside the mount's root cannot be
    found there, so only the mount point itself (the container's own cgroup) is read."""
    if mount_root != "/":
        if path == mount_root or path.startswith(mount_root.rstrip("/") + "/"):
            path = path[len(mount_root):]
        else:
            path = "/"
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    base = os.path.join(root, mount_point.lstrip("/"))
    return [os.path.join(base, *parts[:depth]) for depth in range(len(parts), -1, -1)]


def _ceil_cpus(quota: int, period: int) -> int | None:
    """A quota of `quota` microseconds per `period` -> whole CPUs, rounded up (1.5 CPUs can
    keep 2 threads busy part of the time); None for values no kernel writes."""
    if quota <= 0 or period <= 0:
        return None
    return -(-quota // period)


def _v2_limit(folder: str) -> int | None:
    """cpu.max of one cgroup v2 folder: "QUOTA PERIOD" -> CPUs, "max PERIOD" -> None."""
    fields = (_read(os.path.join(folder, "cpu.max")) or "").split()
    if len(fields) != 2 or not all(re.fullmatch("[0-9]+", f) for f in fields):
        return None
    return _ceil_cpus(int(fields[0]), int(fields[1]))


def _v1_limit(folder: str) -> int | None:
    """cpu.cfs_quota_us / cpu.cfs_period_us of one cgroup v1 folder; quota -1 (no limit) -> None."""
    try:
        quota = int(_read(os.path.join(folder, "cpu.cfs_quota_us")) or "")
        period = int(_read(os.path.join(folder, "cpu.cfs_period_us")) or "")
    except ValueError:
        return None
    return _ceil_cpus(quota, period)


# -- a cap on the threads of every inference in this process ------------------------------
# A Ray actor or a Dask worker is granted fewer CPUs than the process can see (neither
# engine sets an affinity mask: Ray sets OMP_NUM_THREADS, Dask's nanny sets it to 1), and
# the code it runs may have been built elsewhere for more threads. Generated code takes its
# thread count per call (1 to the count it was built for; the work is cut for that count,
# so fewer is correct, only slower), so the cap is applied where models call their code.
_CAP: int | None = None


def cap_threads(threads: int | None) -> None:
    """From now on every inference in this process uses at most `threads` threads (None: no
    cap, each model uses all the threads it was built for). Set by hobbit.ray and hobbit.dask
    in their workers, from the CPUs the engine granted."""
    global _CAP
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"a thread cap must be a positive integer or None, got {threads!r}")
    _CAP = threads


def capped_threads(built: int) -> int:
    """The thread count to run code built for `built` threads with: the cap where it is lower,
    else 0 (the entry points' "all of them")."""
    return _CAP if _CAP is not None and _CAP < built else 0
