"""Reducers: what every backend's reductions combine, and how.

A reduction (ReduceX ops, pooling, softmax and normalisation rows) is
combine(acc, pre(x)) over the reduced elements, then post(acc). The CPU reduces
rows in vector registers (hobbit/backend/cpu/reduce.py), the GPU across the threads
of a block (hobbit/backend/gpu/reduce.py); both read these definitions."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.emit.scalar import Emit


@dataclass(frozen=True)
class Reducer:
    """A reduction as combine(acc, pre(x)) over the reduced elements, then post(acc)."""

    combine: str  # "add" | "mul" | "max" | "min"
    pre: str | None = None  # "square" | "abs"
    post: str | None = None  # "mean" | "sqrt" | "log"


REDUCERS: dict[str, Reducer] = {
    "ReduceSum": Reducer("add"),
    "ReduceMean": Reducer("add", post="mean"),
    "ReduceMax": Reducer("max"),
    "ReduceMin": Reducer("min"),
    "ReduceProd": Reducer("mul"),
    "ReduceSumSquare": Reducer("add", pre="square"),
    "ReduceL1": Reducer("add", pre="abs"),
    "ReduceL2": Reducer("add", pre="square", post="sqrt"),
    "ReduceLogSum": Reducer("add", post="log"),
}


def combine(e: Emit, how: str, acc, x):
    """acc (op) x. max/min take `x` unless `acc` strictly wins, so a NaN on either
    side yields `x`: the semantics of x86 maxps/minps, which onnxruntime's pooling
    kernels have and which LLVM lowers this select to."""
    if how == "add":
        return e.add(acc, x)
    if how == "mul":
        return e.mul(acc, x)
    if how == "max":
        return e.select(e.gt(acc, x), acc, x)
    return e.select(e.lt(acc, x), acc, x)


def apply_pre(e: Emit, r: Reducer, x):
    """x as the reducer combines it: squared, absolute, or unchanged."""
    if r.pre == "square":
        return e.mul(x, x)
    if r.pre == "abs":
        return e.abs(x)
    return x


def apply_post(e: Emit, r: Reducer, x, count: int):
    """The combined value of `count` elements as the reduction returns it (mean, sqrt, log)."""
    if r.post == "mean":
        return e.mul(x, e.c(1.0 / count))
    if r.post == "sqrt":
        return e.sqrt(x)
    if r.post == "log":
        return e.log(x)
    return x
