"""What one run allocates besides the caller's arrays: contiguous copies of inputs given as
strided views, the outputs and the arena, checked against the machine's memory before any of
it is made. An input that implies an absurd batch (one row seen 2**28 times through a
zero-stride view costs nothing to pass) is then an InputError at once, as at compile time,
instead of a MemoryError after seconds of copying; an allocation that fits the machine but
not this process (a ulimit) fails with the same error."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np

from hobbit.errors import InputError
from hobbit.frontend.validate import memory_limit


def needs_copy(array: np.ndarray) -> bool:
    """Whether run() must copy the array: generated code reads contiguous, aligned buffers."""
    return not (array.flags.c_contiguous and array.flags.aligned)


def copy_bytes(arrays: Iterable[np.ndarray]) -> int:
    """Bytes of the contiguous copies run() makes of these inputs."""
    return sum(a.nbytes for a in arrays if needs_copy(a))


def check_run_bytes(nbytes: int, shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse a run needing more than the machine's memory, naming the inputs' shapes."""
    limit = memory_limit()
    if nbytes > limit:
        shown = ", ".join(f"'{name}' {shape}" for name, shape in shapes.items())
        raise InputError(f"this run needs {_gib(nbytes)} for its outputs, working memory and input copies "
                         f"(inputs {shown}), more than this process can have ({_gib(limit)}: the machine's memory "
                         "or its ulimit); "
                         "pass fewer samples per run")


@contextmanager
def allocating(what: str) -> Iterator[None]:
    """An allocation failure inside as an InputError naming what was being allocated."""
    try:
        yield
    except MemoryError as exc:
        raise InputError(f"this run could not allocate {what}: {exc}; pass fewer samples per run") from exc


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 30:.4g} GiB"
