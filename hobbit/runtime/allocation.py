"""What one run allocates besides the caller's arrays: contiguous copies of inputs given as
strided views, the outputs and the arena, checked against the machine's memory before any of
it is made. An input that implies an absurd batch (one row seen 2**28 times through a
zero-stride view costs nothing to pass) is then an InputError at once, as at compile time,
instead of a MemoryError after seconds of copying; an allocation that fits the machine but
not this process (a ulimit) fails with the same error."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from hobbit.errors import InputError
from hobbit.frontend.common.sizes import memory_limit


# Generated code uses aligned vector loads and stores on its arena and its weights.
ALIGN = 64


def aligned_empty(nbytes: int) -> np.ndarray:
    """`nbytes` uninitialised bytes starting on an ALIGN-byte boundary."""
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    shift = (-raw.ctypes.data) % ALIGN
    return raw[shift: shift + nbytes]


def needs_copy(array: np.ndarray) -> bool:
    """Whether run() must copy the array: generated code reads contiguous, aligned buffers."""
    return not (array.flags.c_contiguous and array.flags.aligned)


def copy_bytes(arrays: Iterable[np.ndarray]) -> int:
    """Bytes of the contiguous copies run() makes of these inputs."""
    return sum(a.nbytes for a in arrays if needs_copy(a))


def check_run_bytes(nbytes: int, shapes: Iterable[tuple[str, tuple[int, ...]]]) -> None:
    """Refuse a run needing more than the machine's memory, naming the inputs' (name, shape)
    pairs, which are read only then: this check is on every run's path."""
    limit = memory_limit()
    if nbytes > limit:
        shown = ", ".join(f"'{name}' {tuple(shape)}" for name, shape in shapes)
        raise InputError(f"this run needs {_gib(nbytes)} for its outputs, working memory and input copies "
                         f"(inputs {shown}), more than this process can have ({_gib(limit)}: the machine's memory "
                         "or its ulimit); "
                         "pass fewer samples per run")


class allocating:  # noqa: N801 - used as a context manager, named like one
    """An allocation failure inside as an InputError naming what was being allocated. A class,
    not a generator context manager: it is entered twice on every run, and this costs a
    fraction of contextlib's overhead (about 1.5 us a run on a small model)."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, traceback: object) -> None:
        if isinstance(exc, MemoryError):
            raise InputError(f"this run could not allocate {self.what}: {exc}; pass fewer samples per run") from exc


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 30:.4g} GiB"
