"""The passes' choices that follow the shapes for speed only, made once for a model with
run-time dims.

Some passes pick a node's form by the sizes they see: a conv's weight layout (by how well
its positions fill the vectors), a Winograd conv's tile. Each form is correct at every
size, only faster at some. A model with run-time dims is put through the passes at its
bound and at small probe sizes (hobbit.dynamic_compile), and the graphs must match node
for node: a choice that flips between them would make the model fall back to per-shape
compiles although every kernel could follow the dims. So such a choice goes through
`choose`: outside a dynamic compile it simply decides; while the bound's graph is put
through the passes (`recording`) each choice is kept by node, and while a probe's is
(`replaying`) the bound's choice is taken, so every size runs the form chosen for the
bound. A choice that decides whether a form is valid at all (a fusion that needs even
sizes) must not go through here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from hobbit.graph.ir import Node

T = TypeVar("T")

# (kind, node name) -> the choice, and whether this import records them (else replays).
_BOOK: ContextVar[tuple[dict[tuple[str, str], Any], bool] | None] = ContextVar("hobbit_pass_choices", default=None)


def choose(kind: str, node: Node, decide: Callable[[], T]) -> T:
    """decide(), or in a probe's import the choice the bound's import made for this node."""
    book = _BOOK.get()
    if book is None:
        return decide()
    choices, record = book
    key = (kind, node.name)
    if record:
        choices[key] = decide()
        return choices[key]
    return choices[key] if key in choices else decide()


@contextmanager
def recording(choices: dict[tuple[str, str], Any]) -> Iterator[None]:
    """Keep every choice made inside the with-block in `choices`."""
    token = _BOOK.set((choices, True))
    try:
        yield
    finally:
        _BOOK.reset(token)


@contextmanager
def replaying(choices: dict[tuple[str, str], Any]) -> Iterator[None]:
    """Take the choices in `choices` inside the with-block (others are made as usual)."""
    token = _BOOK.set((choices, False))
    try:
        yield
    finally:
        _BOOK.reset(token)
