"""Choices a pass makes from tensor sizes alone, for speed (a Winograd tile, a weight layout),
made once at the bound for a model with run-time dims.

hobbit.dynamic_compile imports a model at its bounds and at small probe sizes and requires
the graphs after the passes to agree (hobbit.graph.extents): a tile or layout picked from a
probe's small image would differ from the bound's and send the model back to one compile
per shape, though the bound's choice computes the same values at every size (only its speed
was tuned for the bound's). So the bound's import runs under `recording()` and the probes'
under `replaying()` of what it recorded. A choice that decides what is *valid* (a fusion that
needs even sizes) must not go through here: at a probe where it does not hold, the graphs
must differ.

The same recording also keeps what a pass computes from a constant alone, by the constant's
content (`computed_once`): every import repeats the pass's work on weights that do not
depend on sizes, and Winograd's weight transform (einsum over every 3x3 weight) was 21 s of
a dynamic RetinaNet-ResNet50-FPN compile's 31 s of imports, measured with six imports."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Hashable, TypeVar

import numpy as np

T = TypeVar("T")

_RECORDING: ContextVar[dict | None] = ContextVar("hobbit_choices_recording", default=None)
_REPLAYING: ContextVar[dict | None] = ContextVar("hobbit_choices_replaying", default=None)
_COMPUTED = object()  # the key, in a recording, of computed_once's results


def sized_choice(key: Hashable, decide: Callable[[], T]) -> T:
    """`decide()`, or while replaying, what it gave for `key` (a pass's name and the node's)
    when recorded."""
    replay = _REPLAYING.get()
    if replay is not None and key in replay:
        return replay[key]
    value = decide()
    record = _RECORDING.get()
    if record is not None:
        record[key] = value
    return value


def computed_once(kind: Hashable, const: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`compute(const)`, a pure function of the constant; inside a recording, or a replaying
    of one, computed once per `kind` and content of `const`."""
    shared = _RECORDING.get() if _RECORDING.get() is not None else _REPLAYING.get()
    if shared is None:
        return compute(const)
    digest = hashlib.blake2b(np.ascontiguousarray(const).data, digest_size=16).digest()
    key = (kind, const.dtype.str, const.shape, digest)
    results = shared.setdefault(_COMPUTED, {})
    if key not in results:
        results[key] = compute(const)
    return results[key]


@contextmanager
def recording() -> Iterator[dict]:
    """Every sized_choice made inside, by key."""
    choices: dict = {}
    token = _RECORDING.set(choices)
    try:
        yield choices
    finally:
        _RECORDING.reset(token)


@contextmanager
def replaying(choices: dict) -> Iterator[None]:
    token = _REPLAYING.set(choices)
    try:
        yield
    finally:
        _REPLAYING.reset(token)
