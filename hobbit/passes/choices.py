"""Choices a pass makes from tensor sizes alone, for speed (a Winograd tile, a weight layout),
made once at the bound for a model with run-time dims.

hobbit.dynamic_compile imports a model at its bounds and at small probe sizes and requires
the graphs after the passes to agree (hobbit.graph.extents): a tile or layout picked from a
probe's small image would differ from the bound's and send the model back to one compile
per shape, though the bound's choice computes the same values at every size (only its speed
was tuned for the bound's). So the bound's import runs under `recording()` and the probes'
under `replaying()` of what it recorded. A choice that decides what is *valid* (a fusion that
needs even sizes) must not go through here: at a probe where it does not hold, the graphs
must differ."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Hashable, TypeVar

T = TypeVar("T")

_RECORDING: ContextVar[dict | None] = ContextVar("hobbit_choices_recording", default=None)
_REPLAYING: ContextVar[dict | None] = ContextVar("hobbit_choices_replaying", default=None)


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
