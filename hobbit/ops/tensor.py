"""Data-movement and shape ops. View ops share their input's memory; the rest
are strided copies (or index-table copies for Gather and reflect/edge Pad; the CPU
kernels are in hobbit/backend/cpu/tensor.py). Shape-only ops have no kernel: they are
always folded. The comparison,
logic and Where ops that shape arithmetic uses are element-wise with bool values,
so they also run (and fuse) at run time."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.ops import per_sample
from hobbit.ops.selection import nonzero_coordinates
from hobbit.graph.shapes import broadcast


def _reshape_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    shape = tuple(node.attrs["shape"])
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != x.type.size:
        raise ShapeError(f"cannot reshape {x.type} to {shape}")
    return [TensorType(x.dtype, shape)]


register_op(OpDef(
    "Reshape", infer=_reshape_infer, kind="view",
    reference=lambda ins, a: [np.reshape(ins[0], a["shape"])],
    attrs={"shape": ()}, per_sample=per_sample.first_input,
    doc="reinterpret the input with a static shape (Reshape, Flatten, Squeeze, Unsqueeze); no copy"))


register_op(OpDef(
    "Copy", infer=lambda n: [n.inputs[0].type], reference=lambda ins, a: [np.array(ins[0])],
    kind="elementwise",
    per_sample=per_sample.broadcasting,
    doc="materialise a tensor in its own buffer (graph outputs that alias inputs or constants)"))


def _shape_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    dims = np.array(ins[0].shape, dtype=np.int64)
    return [dims[a["start"]:a["end"]]]


register_op(OpDef(
    "Shape",
    infer=lambda n: [TensorType(np.dtype(np.int64),
                                (len(n.inputs[0].shape[n.attrs["start"]:n.attrs["end"]]),))],
    reference=_shape_reference, kernel=None, attrs={"start": 0, "end": None},
    doc="the static shape of a tensor, dims[start:end]; always folded"))


def _transpose_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    perm = tuple(node.attrs["perm"]) or tuple(reversed(range(len(x.shape))))
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(f"Transpose perm {perm} does not fit rank {len(x.shape)}")
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm))]


def _transpose_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(ins[0], a["perm"] or None))]


register_op(OpDef(
    "Transpose", infer=_transpose_infer, reference=_transpose_reference,
    attrs={"perm": ()}, per_sample=per_sample.transpose_keeps_batch, doc="permute dims (empty perm reverses them)"))


# -- Concat and Split: each piece is one strided copy -------------------------------

def _concat_infer(node: Node) -> list[TensorType]:
    first = node.inputs[0]
    axis = node.attrs["axis"]
    if not 0 <= axis < len(first.shape):
        raise ShapeError(f"Concat '{node.name}': axis {axis} is outside {first.type}")
    total = 0
    for v in node.inputs:
        same = len(v.shape) == len(first.shape) and all(
            a == b for d, (a, b) in enumerate(zip(v.shape, first.shape)) if d != axis)
        if not same or v.dtype != first.dtype:
            raise ShapeError(f"Concat on axis {axis}: {v.type} does not fit {first.type}")
        total += v.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return [TensorType(first.dtype, tuple(shape))]


register_op(OpDef(
    "Concat", infer=_concat_infer, attrs={"axis": 0}, per_sample=per_sample.concat_not_batch,
    reference=lambda ins, a: [np.concatenate(ins, axis=a["axis"])],
    doc="join inputs along `axis` (non-negative); each input is copied into its slice"))


def _split_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    axis, sizes = node.attrs["axis"], tuple(node.attrs["split"])
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ShapeError(f"Split sizes {sizes} do not add up to dim {axis} of {x.type}")
    return [TensorType(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]


def _split_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    cuts = np.cumsum(a["split"])[:-1]
    return [np.ascontiguousarray(p) for p in np.split(ins[0], cuts, axis=a["axis"])]


register_op(OpDef(
    "Split", infer=_split_infer, reference=_split_reference,
    attrs={"axis": 0, "split": ()}, per_sample=per_sample.axis_not_batch(), doc="cut `axis` into pieces of the sizes in `split`, one output each"))


# -- Slice: per-dim start and step, already clamped by the converter ----------------

def _slice_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    a = node.attrs
    if not len(a["starts"]) == len(a["steps"]) == len(a["sizes"]) == len(x.shape):
        raise ShapeError(f"Slice attributes do not match the rank of {x.type}")
    for dim, start, step, size in zip(x.shape, a["starts"], a["steps"], a["sizes"]):
        if size and not (0 <= start < dim and 0 <= start + step * (size - 1) < dim):
            raise ShapeError(f"Slice start {start} step {step} size {size} leaves dim {dim}")
    return [TensorType(x.dtype, tuple(a["sizes"]))]


def _slice_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    index = []
    for start, step, size in zip(a["starts"], a["steps"], a["sizes"]):
        stop = start + step * size
        index.append(slice(start, stop if stop >= 0 else None, step))
    return [np.ascontiguousarray(ins[0][tuple(index)])]


register_op(OpDef(
    "Slice", infer=_slice_infer, reference=_slice_reference,
    attrs={"starts": (), "steps": (), "sizes": ()}, per_sample=per_sample.slice_keeps_batch,
    doc="out[i] = x[starts + i * steps] per dim, with output dims `sizes` (steps may be negative)"))


# -- Pad ---------------------------------------------------------------------------

def _pad_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    pads, rank = tuple(node.attrs["pads"]), len(x.shape)
    if len(pads) != 2 * rank:
        raise ShapeError(f"Pad needs {2 * rank} pads for {x.type}, got {pads}")
    shape = tuple(d + pads[i] + pads[i + rank] for i, d in enumerate(x.shape))
    if any(d < 0 for d in shape):
        raise ShapeError(f"Pad pads {pads} crop {x.type} below zero")
    if node.attrs["mode"] != "constant" and (any(p < 0 for p in pads) or 0 in x.shape):
        raise ShapeError(f"Pad mode {node.attrs['mode']!r} needs non-negative pads and a non-empty input")
    return [TensorType(x.dtype, shape)]


def _pad_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    x, rank = ins[0], ins[0].ndim
    pads = a["pads"]
    crop = tuple(slice(max(0, -pads[i]), x.shape[i] - max(0, -pads[i + rank])) for i in range(rank))
    widths = [(max(0, pads[i]), max(0, pads[i + rank])) for i in range(rank)]
    mode = a["mode"]
    if mode == "constant":
        return [np.pad(x[crop], widths, mode="constant", constant_values=np.asarray(a["value"]).astype(x.dtype))]
    return [np.pad(x[crop], widths, mode=mode)]


register_op(OpDef(
    "Pad", infer=_pad_infer, reference=_pad_reference,
    attrs={"pads": (), "mode": "constant", "value": 0.0}, per_sample=per_sample.pad_keeps_batch,
    doc="pad (begins..., ends...) per dim, negative pads crop; mode constant, reflect, edge or wrap"))


# -- Gather ------------------------------------------------------------------------

def _gather_infer(node: Node) -> list[TensorType]:
    data, indices = node.inputs
    axis = node.attrs["axis"]
    if indices.dtype.kind not in "iu":
        raise ShapeError(f"Gather indices must be integers, got {indices.type}")
    if indices.type.size and data.shape[axis] == 0:
        raise ShapeError(f"Gather indexes the empty axis {axis} of {data.type}")
    return [TensorType(data.dtype, data.shape[:axis] + tuple(indices.shape) + data.shape[axis + 1:])]


def _gather_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    return [np.take(ins[0], ins[1].astype(np.int64), axis=a["axis"])]


register_op(OpDef(
    "Gather", infer=_gather_infer, reference=_gather_reference, attrs={"axis": 0},
    per_sample=per_sample.gather_per_sample,
    bakes_constants=True, checks_data=True,
    doc="numpy take along `axis`; a run-time index out of range is a RunError (see backend/cpu/gather.py)"))


# -- Expand and Tile: strided copies with zero strides -----------------------------

def _expand_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    return [TensorType(x.dtype, broadcast(tuple(x.shape), tuple(node.attrs["shape"])))]


def _expand_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    shape = broadcast(ins[0].shape, tuple(a["shape"]))
    return [np.ascontiguousarray(np.broadcast_to(ins[0], shape))]


register_op(OpDef(
    "Expand", infer=_expand_infer, attrs={"shape": ()}, reference=_expand_reference,
    per_sample=per_sample.expand_keeps_batch,
    doc="broadcast the input to `shape` (ONNX two-way broadcasting)"))


def _tile_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    reps = tuple(node.attrs["repeats"])
    if len(reps) != len(x.shape) or any(r < 0 for r in reps):
        raise ShapeError(f"Tile repeats {reps} do not fit {x.type}")
    return [TensorType(x.dtype, tuple(d * r for d, r in zip(x.shape, reps)))]


register_op(OpDef(
    "Tile", infer=_tile_infer, attrs={"repeats": ()},
    reference=lambda ins, a: [np.tile(ins[0], tuple(a["repeats"]))], per_sample=per_sample.tile_keeps_batch,
    doc="repeat the input `repeats[d]` times along each dim d"))


# -- Fold-only shape arithmetic: inputs are always compile-time constants -----------

def _folded_only(node: Node) -> list[TensorType]:
    raise ShapeError(f"{node.op} needs compile-time constant inputs")


register_op(OpDef(
    "Size", infer=lambda n: [TensorType(np.dtype(np.int64), ())],
    reference=lambda ins, a: [np.array(ins[0].size, dtype=np.int64)], kernel=None,
    doc="the element count of a tensor; always folded"))

register_op(OpDef(
    "Range", infer=_folded_only, kernel=None,
    reference=lambda ins, a: [np.arange(*(np.asarray(x).reshape(-1)[0] for x in ins)).astype(ins[0].dtype)],
    doc="start, limit, delta -> 1-D arange; always folded"))

def _constant_of_shape_type(node: Node) -> list[TensorType]:
    """Known from the (constant) shape alone, so the importer can refuse an absurd one
    before numpy tries to allocate it."""
    shape = node.inputs[0].const
    if shape is None:
        return _folded_only(node)
    return [TensorType(np.asarray(node.attrs["value"]).dtype, tuple(int(d) for d in shape))]


register_op(OpDef(
    "ConstantOfShape", infer=_constant_of_shape_type, kernel=None, attrs={"value": np.zeros(1, np.float32)},
    reference=lambda ins, a: [np.full(tuple(int(d) for d in ins[0]), np.asarray(a["value"]).reshape(-1)[0],
                                      dtype=np.asarray(a["value"]).dtype)],
    doc="a tensor of the given shape filled with `value` (a one-element array); always folded"))

register_op(OpDef(
    "NonZero", infer=_folded_only, kernel=None,
    reference=lambda ins, a: [nonzero_coordinates(ins[0])],
    doc="indices of non-zero elements, [rank, count]; always folded (data-dependent shape)"))


# -- Comparisons, logic and Where: element-wise with bool values --------------------

def _bool_binary_infer(node: Node) -> list[TensorType]:
    a, b = node.inputs
    if a.dtype != b.dtype:
        raise ShapeError(f"{node.op} operands {a.type} and {b.type} differ in dtype")
    return [TensorType(np.dtype(np.bool_), broadcast(tuple(a.shape), tuple(b.shape)))]


def _bool_binary(name: str, ref) -> None:
    register_op(OpDef(
        name, infer=_bool_binary_infer, kind="elementwise",
        reference=lambda ins, a: [np.asarray(ref(ins[0], ins[1]), dtype=np.bool_)],
        per_sample=per_sample.broadcasting,
        doc=f"element-wise {ref.__name__} with broadcasting; bool result"))


_bool_binary("Equal", np.equal)
_bool_binary("Less", np.less)
_bool_binary("Greater", np.greater)
_bool_binary("LessOrEqual", np.less_equal)
_bool_binary("GreaterOrEqual", np.greater_equal)
_bool_binary("And", np.logical_and)
_bool_binary("Or", np.logical_or)
_bool_binary("Xor", np.logical_xor)

register_op(OpDef(
    "Not", infer=lambda n: [TensorType(np.dtype(np.bool_), n.inputs[0].shape)],
    kind="elementwise",
    reference=lambda ins, a: [np.logical_not(ins[0])], per_sample=per_sample.broadcasting, doc="logical not of a bool tensor"))


def _where_infer(node: Node) -> list[TensorType]:
    cond, x, y = node.inputs
    if x.dtype != y.dtype or cond.dtype != np.bool_:
        raise ShapeError(f"Where needs a bool condition and equal branch dtypes: {cond.type}, {x.type}, {y.type}")
    return [TensorType(x.dtype, broadcast(tuple(cond.shape), tuple(x.shape), tuple(y.shape)))]


register_op(OpDef(
    "Where", infer=_where_infer, kind="elementwise",
    reference=lambda ins, a: [np.where(ins[0], ins[1], ins[2])], per_sample=per_sample.broadcasting,
    doc="cond ? x : y with three-way broadcasting"))
