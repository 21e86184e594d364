"""python -m tests.runtime.with_fake_cuda MODULE [ARGS...]: run MODULE as __main__ with the fake
CUDA driver (tests/runtime/fake_cuda.py) in place of cuda-python.

The seam through which the CPU-only tests drive scripts/gpu_check.sh end to end: with
HOBBIT_TEST_FAKE_CUDA=1 the script starts its Python stages through this module, so hobbit's
CUDA runtime runs every launch on the host (the same kernels built for the CPU) and the
stages' outputs, JSON and markdown are those of a real run, PyTorch's GPU rows excepted."""

from __future__ import annotations

import runpy
import sys

import pytest

from tests.runtime import fake_cuda


def main(argv: list[str]) -> None:
    if not argv:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    patch = pytest.MonkeyPatch()
    fake_cuda.install(patch)
    sys.argv = list(argv)
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    finally:
        patch.undo()


if __name__ == "__main__":
    main(sys.argv[1:])
