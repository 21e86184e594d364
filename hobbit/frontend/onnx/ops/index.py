"""Converters for index, scatter/gather and rearranging ONNX ops: GatherElements,
GatherND, Scatter*, TensorScatter, OneHot, Trilu, EyeLike, ReverseSequence,
CumSum/CumProd, TopK, Compress, Unique, DepthToSpace/SpaceToDepth, Col2Im, BitCast.

Constant indices are range-checked here (an invalid one is a clear error at
compile time); run-time ones are normalised and clamped by the kernels. Unique of a
run-time input and Compress on a run-time condition, whose output shapes depend on
the data, are bounded ops (hobbit.frontend.common.bounded). SpaceToDepth and
DepthToSpace become Reshape/Transpose."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import ShapeError, Unsupported
from hobbit.frontend.common.bounded import known_of, mark_bounded, new_extent
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.ops import bounded
from hobbit.frontend.onnx.types import onnx_dtype
from hobbit.graph.ir import Value
from hobbit.graph.shapes import normalize_axis
from hobbit.ops.scatter import REDUCTIONS

def _is_number(dtype: np.dtype) -> bool:
    """Integers and floats, bfloat16 (a numpy 'V' kind through ml_dtypes) included."""
    return np.dtype(dtype).kind in "iuf" or np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16)


def _check_range(indices: Value, dims: np.ndarray | int, what: str) -> None:
    """Constant indices must lie in [-dim, dim) (the ONNX rule); run-time ones are clamped."""
    if indices.const is None or not indices.const.size:
        return
    idx = indices.const.astype(np.int64)
    if np.any(idx < -dims) or np.any(idx >= dims):
        raise ShapeError(f"{what} {idx.min()}..{idx.max()} are out of range for dims {dims}")


def _reduction(ctx, node, dtype: np.dtype) -> str:
    reduction = ctx.attrs(node).get("reduction", "none")
    if reduction not in REDUCTIONS:
        raise Unsupported(f"reduction {reduction!r}")
    if reduction != "none" and not _is_number(dtype):
        raise Unsupported(f"reduction {reduction!r} on {np.dtype(dtype).name} data")
    return reduction


@converter("GatherElements", since=11)
def gather_elements(ctx, node, ins):
    data, indices = ins
    axis = normalize_axis(int(ctx.attrs(node).get("axis", 0)), len(data.shape), "GatherElements axis")
    _check_range(indices, data.shape[axis], "GatherElements indices")
    return [ctx.emit1("GatherElements", [data, indices], {"axis": axis})]


@converter("ScatterElements", since=11)
def scatter_elements(ctx, node, ins):
    data, indices, updates = ins
    axis = normalize_axis(int(ctx.attrs(node).get("axis", 0)), len(data.shape), "ScatterElements axis")
    _check_range(indices, data.shape[axis], "ScatterElements indices")
    reduction = _reduction(ctx, node, data.dtype)
    if any(v.bounded is not None for v in ins):
        return [bounded.scatter_elements(ctx, data, indices, updates, axis, reduction)]
    return [ctx.emit1("ScatterElements", [data, indices, updates], {"axis": axis, "reduction": reduction})]


converter("Scatter", since=9)(scatter_elements)


@converter("GatherND", since=11)
def gather_nd(ctx, node, ins):
    data, indices = ins
    batch = int(ctx.attrs(node).get("batch_dims", 0))
    if indices.bounded is not None or data.bounded is not None:
        return [bounded.gather_nd(ctx, data, indices, batch)]
    if indices.shape:
        q = indices.shape[-1]
        _check_range(indices, np.array(data.shape[batch:batch + q], dtype=np.int64), "GatherND indices")
    return [ctx.emit1("GatherND", [data, indices], {"batch_dims": batch})]


@converter("ScatterND", since=11)
def scatter_nd(ctx, node, ins):
    data, indices, updates = ins
    if indices.shape:
        _check_range(indices, np.array(data.shape[:indices.shape[-1]], dtype=np.int64), "ScatterND indices")
    return [ctx.emit1("ScatterND", [data, indices, updates], {"reduction": _reduction(ctx, node, data.dtype)})]


@converter("OneHot", since=9)
def one_hot(ctx, node, ins):
    indices, depth, values = ins
    depth = int(np.asarray(ctx.const_value(depth, "OneHot depth")).reshape(-1)[0])
    if depth < 1:
        raise ShapeError(f"OneHot depth {depth} must be positive")
    axis = normalize_axis(int(ctx.attrs(node).get("axis", -1)), len(indices.shape) + 1, "OneHot axis")
    return [ctx.emit1("OneHot", [indices, values], {"depth": depth, "axis": axis})]


@converter("Trilu", since=14)
def trilu(ctx, node, ins):
    k = ins[1] if len(ins) > 1 else None
    inputs = [ins[0]] if k is None else [ins[0], k]
    return [ctx.emit1("Trilu", inputs, {"upper": int(ctx.attrs(node).get("upper", 1))})]


@converter("EyeLike", since=9)
def eye_like(ctx, node, ins):
    """Only the input's shape matters, so the output is a constant."""
    x = ins[0]
    a = ctx.attrs(node)
    if len(x.shape) != 2:
        raise ShapeError(f"EyeLike needs a 2-D input, got {x.type}")
    dtype = onnx_dtype(a["dtype"], node.name) if "dtype" in a else x.dtype
    return [ctx.const(np.eye(x.shape[0], x.shape[1], int(a.get("k", 0)), dtype=dtype))]


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx, node, ins):
    x, lengths = ins
    a = ctx.attrs(node)
    rank = len(x.shape)
    batch_axis = normalize_axis(int(a.get("batch_axis", 1)), rank, "ReverseSequence batch_axis")
    time_axis = normalize_axis(int(a.get("time_axis", 0)), rank, "ReverseSequence time_axis")
    return [ctx.emit1("ReverseSequence", [x, lengths], {"batch_axis": batch_axis, "time_axis": time_axis})]


def _cumulative(op: str):
    def convert(ctx, node, ins):
        x, axis = ins
        if not _is_number(x.dtype):
            raise Unsupported(f"{op} on {np.dtype(x.dtype).name} tensors")
        axis = int(np.asarray(ctx.const_value(axis, f"{op} axis")).reshape(-1)[0])
        a = ctx.attrs(node)
        attrs = {"axis": normalize_axis(axis, len(x.shape), f"{op} axis"),
                 "exclusive": int(a.get("exclusive", 0)), "reverse": int(a.get("reverse", 0))}
        return [ctx.emit1(op, [x], attrs)]
    return convert


converter("CumSum", since=11)(_cumulative("CumSum"))
converter("CumProd", since=26)(_cumulative("CumProd"))


def _top_k(ctx, node, x, k: int, k_value=None):
    """`k_value`: a run-time k (shape arithmetic on data-dependent dims), bounded by `k`."""
    a = ctx.attrs(node)
    if not _is_number(x.dtype):
        raise Unsupported(f"TopK on {np.dtype(x.dtype).name} tensors")
    axis = normalize_axis(int(a.get("axis", -1)), len(x.shape), "TopK axis")
    if x.bounded is not None or k_value is not None:
        return bounded.top_k(ctx, x, k_value, k, axis, int(a.get("largest", 1)))
    if not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"TopK k={k} is outside [0, {x.shape[axis]}] for axis {axis} of {x.type}")
    attrs = {"axis": axis, "k": k, "largest": int(a.get("largest", 1))}
    return ctx.emit("TopK", [x], attrs, n_outputs=2)


@converter("TopK", since=1)
def top_k_attr(ctx, node, ins):
    return _top_k(ctx, node, ins[0], int(ctx.attrs(node)["k"]))


@converter("TopK", since=10)
def top_k_input(ctx, node, ins):
    if ins[1].const is None and known_of(ctx, ins[1]) is not None:
        return _top_k(ctx, node, ins[0], ins[0].shape[normalize_axis(int(ctx.attrs(node).get("axis", -1)),
                                                                     len(ins[0].shape), "TopK axis")], ins[1])
    k = int(np.asarray(ctx.const_value(ins[1], "TopK k")).reshape(-1)[0])
    return _top_k(ctx, node, ins[0], k)


@converter("Compress", since=9)
def compress(ctx, node, ins):
    """A Gather of the positions where a compile-time condition holds; on a run-time one, the
    slices bounded by their count (hobbit.ops.selection). Condition entries past the axis
    are ignored, as onnxruntime does."""
    x, condition = ins
    axis = ctx.attrs(node).get("axis")
    if axis is not None:
        axis = normalize_axis(int(axis), len(x.shape), "Compress axis")
    if condition.const is None:
        if x.bounded is not None or condition.bounded is not None:
            raise Unsupported("Compress of a value with a data-dependent dim")
        data, extent = ctx.emit("BoundedCompress", [x, condition], {"axis": axis}, n_outputs=2)
        along = 0 if axis is None else axis
        most = min(data.shape[along], condition.type.size)
        return [mark_bounded(data, along, new_extent(ctx, extent, 0, most))]
    keep = np.asarray(condition.const).reshape(-1).astype(bool)
    if axis is None:
        x = ctx.emit1("Reshape", [x], {"shape": (x.type.size,)})
        axis = 0
    positions = ctx.const(np.flatnonzero(keep[:x.shape[axis]]).astype(np.int64))
    return [ctx.emit1("Gather", [x, positions], {"axis": axis})]


@converter("Unique", since=11)
def unique(ctx, node, ins):
    """A constant input folds; a run-time one becomes BoundedUnique, whose Y, indices and
    counts share its extent (inverse_indices has the input's static length)."""
    x = ins[0]
    a = ctx.attrs(node)
    axis = a.get("axis")
    if axis is not None:
        axis = normalize_axis(int(axis), len(x.shape), "Unique axis")
    attrs = {"axis": axis, "sorted": int(a.get("sorted", 1))}
    if x.const is not None:
        return ctx.emit("Unique", [x], attrs, n_outputs=4)
    if x.bounded is not None:  # the kernel would count the padding past the extent as data
        raise Unsupported(f"Unique of '{x.name}', whose dim {x.bounded.axis} depends on the data")
    y, indices, inverse, counts, extent = ctx.emit("BoundedUnique", [x], attrs, n_outputs=5)
    mark_bounded(y, 0 if axis is None else axis, extent)
    mark_bounded(indices, 0, extent)
    mark_bounded(counts, 0, extent)
    return [y, indices, inverse, counts]


def _block_shape(x: Value, op: str, blocksize: int) -> tuple[int, int, int, int]:
    if len(x.shape) != 4 or blocksize < 1:
        raise ShapeError(f"{op} needs a 4-D NCHW input and blocksize >= 1, got {x.type}, {blocksize}")
    return tuple(int(d) for d in x.shape)


@converter("DepthToSpace", since=1)
def depth_to_space(ctx, node, ins):
    """[N, C, H, W] -> [N, C/b², H*b, W*b] as reshape, transpose, reshape (DCR or CRD channel order)."""
    a = ctx.attrs(node)
    b = int(a["blocksize"])
    n, c, h, w = _block_shape(ins[0], "DepthToSpace", b)
    if c % (b * b):
        raise ShapeError(f"DepthToSpace channels {c} are not a multiple of blocksize² {b * b}")
    mode = a.get("mode", "DCR")
    if mode == "DCR":
        split, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        split, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
    else:
        raise Unsupported(f"DepthToSpace mode {mode!r}")
    blocks = ctx.emit1("Reshape", [ins[0]], {"shape": split})
    moved = ctx.emit1("Transpose", [blocks], {"perm": perm})
    return [ctx.emit1("Reshape", [moved], {"shape": (n, c // (b * b), h * b, w * b)})]


@converter("SpaceToDepth", since=1)
def space_to_depth(ctx, node, ins):
    """[N, C, H, W] -> [N, C*b², H/b, W/b]; DCR puts the block offsets before the channel, CRD after."""
    a = ctx.attrs(node)
    b = int(a["blocksize"])
    n, c, h, w = _block_shape(ins[0], "SpaceToDepth", b)
    if h % b or w % b:
        raise ShapeError(f"SpaceToDepth spatial dims {h}x{w} are not multiples of blocksize {b}")
    mode = a.get("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"SpaceToDepth mode {mode!r}")
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    blocks = ctx.emit1("Reshape", [ins[0]], {"shape": (n, c, h // b, b, w // b, b)})
    moved = ctx.emit1("Transpose", [blocks], {"perm": perm})
    return [ctx.emit1("Reshape", [moved], {"shape": (n, c * b * b, h // b, w // b)})]


@converter("TensorScatter", since=24)
def tensor_scatter(ctx, node, ins):
    cache, update = ins[:2]
    a = ctx.attrs(node)
    axis = normalize_axis(int(a.get("axis", -2)), len(cache.shape), "TensorScatter axis")
    mode = a.get("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise Unsupported(f"TensorScatter mode {mode!r} on axis {axis}")
    inputs = [cache, update] + ([ins[2]] if len(ins) > 2 and ins[2] is not None else [])
    return [ctx.emit1("TensorScatter", inputs, {"axis": axis, "mode": mode})]


@converter("BitCast", since=26)
def bit_cast(ctx, node, ins):
    to = onnx_dtype(ctx.attrs(node)["to"], node.name)
    if to == ins[0].dtype:
        return [ins[0]]
    return [ctx.emit1("BitCast", ins[:1], {"to": np.dtype(to).name})]


@converter("Col2Im", since=18)
def col2im(ctx, node, ins):
    x, image, block = ins
    image = tuple(int(d) for d in np.asarray(ctx.const_value(image, "Col2Im image_shape")).reshape(-1))
    block = tuple(int(d) for d in np.asarray(ctx.const_value(block, "Col2Im block_shape")).reshape(-1))
    rank = len(image)
    a = ctx.attrs(node)
    strides = tuple(int(v) for v in a.get("strides", [1] * rank))
    dilations = tuple(int(v) for v in a.get("dilations", [1] * rank))
    pads = tuple(int(v) for v in a.get("pads", [0] * (2 * rank)))
    if len(block) != rank or len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ShapeError(f"Col2Im image_shape {image}, block_shape {block}, strides {strides}, "
                         f"dilations {dilations} and pads {pads} disagree on the number of spatial dims")
    if min(strides + dilations + block, default=1) < 1 or min(pads, default=0) < 0:
        raise ShapeError("Col2Im needs positive strides, dilations and block sizes and non-negative pads")
    attrs = {"image": image, "block": block, "strides": strides, "dilations": dilations, "pads": pads}
    return [ctx.emit1("Col2Im", [x], attrs)]
