"""Axis permutations as the transpose passes use them: a Transpose node's perm, inverses,
composition, and when a transpose is only a view (it moves size-1 dims)."""

from __future__ import annotations

from hobbit.graph.ir import Node

Perm = tuple[int, ...]


def perm_of(node: Node) -> Perm:
    perm = tuple(node.attrs.get("perm") or ())
    return perm or tuple(reversed(range(len(node.inputs[0].shape))))


def inverse(perm: Perm) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose(first: Perm, then: Perm) -> Perm:
    """transpose(transpose(v, first), then) == transpose(v, compose(first, then))."""
    return tuple(first[i] for i in then)


def is_identity(perm: Perm) -> bool:
    return perm == tuple(range(len(perm)))


def keeps_order(shape: tuple[int, ...], perm: Perm) -> bool:
    """The transpose only moves size-1 dims, so the data stays in memory order: a view."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)
