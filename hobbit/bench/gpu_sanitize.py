"""compute-sanitizer over one launch of each GPU kernel family: racecheck (shared-memory
hazards between a block's threads) and memcheck (out-of-bounds and misaligned global and
shared accesses, driver-call errors).

    python -m hobbit.bench.gpu_sanitize --module tests.runtime.device_families --out sanitizer.json

Each family runs in its own process, `python -m MODULE FAMILY`, under each tool: the module
compiles one small model of the family and runs it once with HOBBIT_CUDA_GRAPH=0, so every
kernel is a cuLaunchKernel of its own that the tool instruments, and a report names one
family. The module's `--list` names the families. A result is "clean" (the tool's summary
counts no error and the run exited 0), "errors" (it counts some: the first lines are kept),
"failed" (no summary, or the program itself failed: a mismatch, no device), "timeout", or
"skipped" once the budget is spent.

Where compute-sanitizer comes from (checked 2026-12 against PyPI): it is part of the CUDA
toolkit, and of PyPI's `nvidia-cuda-sanitizer-api` wheels from CUDA 13 on, which ship the
executable as nvidia/cu13/bin/compute-sanitizer (13.0.85: 14 MB, manylinux_2_25 x86_64; it
needs a driver for CUDA 13). The CUDA 12 wheels, `nvidia-cuda-sanitizer-api-cu12` (up to
12.8.93), hold only the sanitizer API's libraries and headers (libsanitizer-public.so, the
injection libraries) for tools built on it: no executable. So it is looked for in
$COMPUTE_SANITIZER, on PATH, under $CUDA_HOME/bin and /usr/local/cuda/bin, then in the
installed `nvidia` wheels; where none is found each family is recorded "not available" with
that reason, which is not a failure of the check."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable

from hobbit.errors import ConfigError

TOOLS = ("racecheck", "memcheck")
ERROR_EXIT = 86  # --error-exitcode: the tool's exit status when it found errors
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACES = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
NOT_FOUND = ("compute-sanitizer is not on PATH, under $CUDA_HOME/bin or /usr/local/cuda/bin, nor in an installed "
             "nvidia-cuda-sanitizer-api wheel (pip install 'nvidia-cuda-sanitizer-api>=13' ships it; the "
             "CUDA 12 wheels nvidia-cuda-sanitizer-api-cu12 hold only the library)")


@dataclass
class Sanitizer:
    path: str | None
    version: str = ""
    reason: str = ""  # why there is none ("" when path is set)


@dataclass
class Check:
    family: str
    tool: str
    status: str  # clean, errors, failed, timeout, skipped, not available
    errors: int | None = None
    warnings: int | None = None
    seconds: float = 0.0
    detail: list[str] = field(default_factory=list)  # the report's first error lines, or why it failed


def _candidates() -> list[str]:
    found = [os.environ.get("COMPUTE_SANITIZER", ""), shutil.which("compute-sanitizer") or ""]
    for home in (os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"):
        if home:
            found.append(os.path.join(home, "bin", "compute-sanitizer"))
    try:
        import nvidia  # the namespace package of NVIDIA's wheels
        for root in nvidia.__path__:
            found += sorted(glob.glob(os.path.join(root, "cu*", "bin", "compute-sanitizer")), reverse=True)
    except ImportError:
        pass
    return [f for f in found if f]


def find_sanitizer(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Sanitizer:
    """The first compute-sanitizer that answers --version, or None with the reason."""
    tried = []
    for path in _candidates():
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        try:
            done = run([path, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{path}: {exc}")
            continue
        if done.returncode == 0:
            lines = [line for line in done.stdout.splitlines() if line.startswith("Version")]
            return Sanitizer(path, lines[0] if lines else done.stdout.strip()[-80:])
        tried.append(f"{path}: --version exited {done.returncode}")
    return Sanitizer(None, reason="; ".join(tried) if tried else NOT_FOUND)


def parse(tool: str, returncode: int, output: str) -> tuple[str, int | None, int | None, list[str]]:
    """(status, errors, warnings, detail) of one sanitized run from its exit status and output."""
    races = _RACES.search(output)
    counted = _ERRORS.search(output)
    errors = int(races.group(2)) if races else int(counted.group(1)) if counted else None
    warnings = int(races.group(3)) if races else None
    reported = [line.strip() for line in output.splitlines()
                if line.startswith("=========") and ("Error" in line or "Invalid" in line or "Race" in line
                                                     or "Hazard" in line)]
    if errors is None:
        tail = [line for line in output.strip().splitlines() if line.strip()][-5:]
        return "failed", None, None, reported[:5] or tail or [f"{tool}: no summary, exit status {returncode}"]
    if errors or returncode == ERROR_EXIT:
        return "errors", errors, warnings, reported[:20]
    if returncode != 0:
        tail = [line for line in output.strip().splitlines() if line.strip()][-5:]
        return "failed", errors, warnings, tail or [f"exit status {returncode}"]
    return "clean", errors, warnings, []


def sanitize(sanitizer: str, tool: str, family: str, module: str, timeout: float) -> Check:
    """One family's launch under one tool."""
    # application-only: ptxas, should a compile miss the cache, is not instrumented
    command = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "20",
               "--target-processes", "application-only", sys.executable, "-m", module, family]
    env = {**os.environ, "HOBBIT_CUDA_GRAPH": "0", "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Check(family, tool, "timeout", seconds=time.perf_counter() - t0,
                     detail=[f"still running after {timeout:.0f} s"])
    status, errors, warnings, detail = parse(tool, done.returncode, done.stdout + "\n" + done.stderr)
    return Check(family, tool, status, errors, warnings, time.perf_counter() - t0, detail)


def families_of(module: str) -> list[str]:
    """The families `python -m module --list` names."""
    done = subprocess.run([sys.executable, "-m", module, "--list"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ConfigError(f"python -m {module} --list failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def run_all(module: str, families: list[str], tools: list[str], sanitizer: Sanitizer, jobs: int = 4,
            timeout: float = 120.0, budget: float = float("inf"),
            show: Callable[[str], None] = lambda line: None) -> list[Check]:
    """Every family under every tool, `jobs` processes at a time; what starts past `budget`
    seconds is skipped, and with no sanitizer every pair is "not available"."""
    pairs = [(f, t) for t in tools for f in families]
    if sanitizer.path is None:
        return [Check(f, t, "not available", detail=[sanitizer.reason]) for f, t in pairs]
    start = time.perf_counter()

    def one(pair: tuple[str, str]) -> Check:
        family, tool = pair
        left = budget - (time.perf_counter() - start)
        if left <= 0:
            return Check(family, tool, "skipped", detail=[f"the {budget:.0f} s budget was spent"])
        check = sanitize(sanitizer.path, tool, family, module, min(timeout, left))
        show(f"{tool} {family}: {check.status}" + (f" ({check.errors} errors)" if check.errors else "")
             + f", {check.seconds:.1f} s")
        return check
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, pairs))


def report(sanitizer: Sanitizer, checks: list[Check]) -> dict:
    return {"available": sanitizer.path is not None, "path": sanitizer.path, "version": sanitizer.version,
            "reason": sanitizer.reason, "results": [asdict(c) for c in checks]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hobbit.bench.gpu_sanitize", description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", default="tests.runtime.device_families",
                        help="runs one family: python -m MODULE FAMILY; lists them: --list")
    parser.add_argument("--families", default="", help="comma-separated (default: all the module lists)")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--jobs", type=int, default=4, help="sanitized processes at a time")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for one family under one tool")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds in all; the rest is skipped")
    parser.add_argument("--out", required=True, help="the JSON report")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f] or families_of(args.module)
    tools = [t for t in args.tools.split(",") if t]
    sanitizer = find_sanitizer()
    print(f"sanitizer: {sanitizer.path} {sanitizer.version}" if sanitizer.path
          else f"sanitizer: not available ({sanitizer.reason})", file=sys.stderr, flush=True)
    checks = run_all(args.module, families, tools, sanitizer, args.jobs, args.timeout, args.budget,
                     lambda line: print(line, file=sys.stderr, flush=True))
    with open(args.out, "w") as f:
        json.dump(report(sanitizer, checks), f, indent=1)
    return 1 if any(c.status in ("errors", "failed", "timeout") for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
