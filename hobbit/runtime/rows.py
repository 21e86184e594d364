"""A model over a block of rows of any size, in a worker of a distributed engine.

Ray Data and Dask hand a worker blocks of rows (images, sentences) whose count is theirs to
choose, and a compiled model may take a fixed batch (1, as most exported models do), or any
batch (a symbolic batch dim: hobbit.runtime.specialize, hobbit.runtime.dynamic). `run_rows`
runs a block either way; `worker_threads` sizes the model where the engine placed the worker
(hobbit.workers loads it there)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hobbit.errors import ConfigError, InputError
from hobbit.runtime.cpus import available_cpus

# Which table column feeds (or takes) each model tensor: the model's one tensor's column (a
# str), {tensor name: column}, or None for columns named as the tensors.
Columns = str | dict[str, str] | None


def run_rows(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs for every row of `feeds` (dim 0 of each input is the rows), in order.
    A model with a symbolic batch dim takes the block as it is; one compiled for a fixed batch
    b runs it b rows at a time, the last slice padded with zeros and its padding cut off (rows
    are independent in a model whose every output has the batch as dim 0, checked here)."""
    declared = model.get_inputs()
    rows = {name: int(np.shape(value)[0]) if np.ndim(value) else 0 for name, value in feeds.items()}
    if len(set(rows.values())) > 1:
        raise InputError(f"every input of a block needs the same number of rows, got {rows}")
    count = next(iter(rows.values()), 0)
    batch = declared[0].shape[0] if declared and declared[0].shape else None
    if not isinstance(batch, int) or batch == count:
        return model.run(feeds)
    fixed = [arg for arg in model.get_outputs() if not arg.shape or arg.shape[0] != batch]
    if fixed:
        raise InputError(f"the model takes {batch} row(s) per run and its output '{fixed[0].name}' "
                         f"{tuple(fixed[0].shape)} does not have them as dim 0, so a block of {count} rows "
                         f"cannot be cut into runs: compile it with a symbolic batch dim or feed {batch} rows")
    parts = [model.run(_slice(feeds, start, batch)) for start in range(0, count, batch)]
    return [np.concatenate(pieces)[:count] for pieces in zip(*parts)]


def _slice(feeds: dict[str, np.ndarray], start: int, batch: int) -> dict[str, np.ndarray]:
    """Rows start..start+batch of every input, zero-padded past the end."""
    out = {}
    for name, value in feeds.items():
        piece = value[start:start + batch]
        if piece.shape[0] < batch:
            padded = np.zeros((batch,) + piece.shape[1:], piece.dtype)
            padded[:piece.shape[0]] = piece
            piece = padded
        out[name] = np.ascontiguousarray(piece)
    return out


def worker_threads(granted: float | None, asked: int | None = None) -> int:
    """Threads per inference in a worker the engine granted `granted` CPUs (None: not said):
    `asked` where given, but never more than the grant rounded up (a fraction of a CPU still
    runs one thread); else the whole CPUs granted, at least 1; else the CPUs this process may
    use (hobbit.runtime.cpus)."""
    if asked is not None and (isinstance(asked, bool) or not isinstance(asked, int) or asked < 1):
        raise ConfigError(f"threads must be a positive integer or None, got {asked!r}")
    if granted is None:
        return asked or available_cpus()
    if asked is not None:
        return max(1, min(asked, math.ceil(granted)))
    return max(1, math.floor(granted))


def column_map(columns: Columns, names: list[str], what: str) -> dict[str, str]:
    """{model tensor name: column}; a lone str names the model's one tensor."""
    if columns is None:
        return {name: name for name in names}
    if isinstance(columns, str):
        if len(names) != 1:
            raise ConfigError(f"the model has {len(names)} {what} ({names}): give {what}= as a dict of name -> column")
        return {names[0]: columns}
    unknown = [name for name in columns if name not in names]
    if unknown:
        raise ConfigError(f"the model has no {what[:-1]} named {unknown[0]!r}; its {what}: {names}")
    return {name: columns.get(name, name) for name in names}
