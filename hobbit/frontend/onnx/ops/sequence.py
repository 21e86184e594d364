"""ONNX sequences, resolved at import.

A sequence in hobbit is a list of tensors whose length is known at compile
time: SplitToSequence of a static shape, SequenceConstruct, a Loop that
inserts once per unrolled iteration, or a graph input (the compiled variant is
specialised on its length and element shapes, hobbit.runtime.specialize).
Sequence ops are therefore list manipulations here, and only the tensors
reach the graph. Positions (SequenceAt, SequenceInsert, SequenceErase) must be
known at compile time like any shape-deciding value."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError, Unsupported
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.types import Sequence, onnx_dtype


def _sequence(value, what: str) -> Sequence:
    if not isinstance(value, Sequence):
        raise Unsupported(f"{what} must be a sequence")
    return value


def _position(ctx, value, length: int, default: int, what: str, inclusive_end: bool = False) -> int:
    if value is None:
        return default
    position = int(np.asarray(ctx.const_value(value, what)).reshape(-1)[0])
    limit = length + 1 if inclusive_end else length
    if not -length <= position < limit:
        raise ShapeError(f"{what} {position} is out of range for a sequence of {length}")
    return position + length if position < 0 else position


@converter("SequenceConstruct", since=11)
def sequence_construct(ctx, node, ins):
    return [Sequence(list(ins), ins[0].dtype)]


@converter("SequenceEmpty", since=11)
def sequence_empty(ctx, node, ins):
    dtype = onnx_dtype(int(ctx.attrs(node).get("dtype", 1)), ctx.node_name)
    return [Sequence([], dtype)]


@converter("SequenceLength", since=11)
def sequence_length(ctx, node, ins):
    return [ctx.const(np.int64(len(_sequence(ins[0], "SequenceLength input").items)))]


@converter("SequenceAt", since=11)
def sequence_at(ctx, node, ins):
    seq = _sequence(ins[0], "SequenceAt input")
    return [seq.items[_position(ctx, ins[1], len(seq.items), 0, "SequenceAt position")]]


@converter("SequenceInsert", since=11)
def sequence_insert(ctx, node, ins):
    seq = _sequence(ins[0], "SequenceInsert input")
    position = _position(ctx, ins[2] if len(ins) > 2 else None, len(seq.items), len(seq.items),
                         "SequenceInsert position", inclusive_end=True)
    return [Sequence(seq.items[:position] + [ins[1]] + seq.items[position:], seq.dtype)]


@converter("SequenceErase", since=11)
def sequence_erase(ctx, node, ins):
    seq = _sequence(ins[0], "SequenceErase input")
    position = _position(ctx, ins[1] if len(ins) > 1 else None, len(seq.items), len(seq.items) - 1,
                         "SequenceErase position")
    return [Sequence(seq.items[:position] + seq.items[position + 1:], seq.dtype)]


@converter("SplitToSequence", since=11)
def split_to_sequence(ctx, node, ins):
    a = ctx.attrs(node)
    x = ins[0]
    axis = int(a.get("axis", 0)) % len(x.shape)
    dim = x.shape[axis]
    split = ctx.const_value(ins[1], "SplitToSequence split") if len(ins) > 1 and ins[1] is not None else None
    if split is None:
        sizes, squeeze = [1] * dim, not int(a.get("keepdims", 1))
    elif np.ndim(split) == 0:
        step = int(split)
        if step <= 0:
            raise ShapeError(f"SplitToSequence split {step} must be positive")
        sizes, squeeze = [min(step, dim - start) for start in range(0, dim, step)], False
    else:
        sizes, squeeze = [int(s) for s in split], False
        if sum(sizes) != dim or min(sizes, default=0) < 0:
            raise ShapeError(f"SplitToSequence sizes {sizes} do not add up to dim {dim}")
    parts = ctx.emit("Split", [x], {"axis": axis, "split": tuple(sizes)}, n_outputs=len(sizes)) \
        if len(sizes) > 1 else [x]
    if squeeze:
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        parts = [ctx.emit1("Reshape", [p], {"shape": shape}) for p in parts]
    return [Sequence(list(parts), x.dtype)]


@converter("ConcatFromSequence", since=11)
def concat_from_sequence(ctx, node, ins):
    a = ctx.attrs(node)
    seq = _sequence(ins[0], "ConcatFromSequence input")
    if not seq.items:
        raise ShapeError("ConcatFromSequence of an empty sequence")
    rank = len(seq.items[0].shape)
    new_axis = int(a.get("new_axis", 0))
    axis = int(a["axis"]) % (rank + new_axis)
    items = seq.items
    if new_axis:
        items = [ctx.emit1("Reshape", [v], {"shape": tuple(v.shape[:axis]) + (1,) + tuple(v.shape[axis:])})
                 for v in items]
    return [items[0] if len(items) == 1 else ctx.emit1("Concat", items, {"axis": axis})]
