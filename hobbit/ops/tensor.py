"""Data-movement and shape ops. View ops share their input's memory; the rest
are strided copies. Shape-only ops have no lowering: they are always folded."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.graph.registry import OpDef, register_op
from hobbit.lower.copy import emit_strided_copy
from hobbit.lower.elementwise import emit_elementwise
from hobbit.lower.kernel import KernelArgs


def _reshape_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    shape = tuple(node.attrs["shape"])
    if int(np.prod(shape, dtype=np.int64)) != x.type.size:
        raise ShapeError(f"cannot reshape {x.type} to {shape}")
    return [TensorType(x.dtype, shape)]


register_op(OpDef(
    "Reshape", infer=_reshape_infer, kind="view",
    reference=lambda ins, a: [np.reshape(ins[0], a["shape"])],
    lower=lambda k: None, attrs={"shape": ()},
    doc="reinterpret the input with a static shape (Reshape, Flatten, Squeeze, Unsqueeze); no copy"))


def _lower_copy(k: KernelArgs) -> None:
    out = k.node.outputs[0]
    emit_elementwise(k.kb, k.node, k.inputs, k.epilogue, k.outputs[0], k.width(out.dtype))


register_op(OpDef(
    "Copy", infer=lambda n: [n.inputs[0].type], reference=lambda ins, a: [np.array(ins[0])],
    lower=_lower_copy, kind="elementwise", scalar=lambda e, args, a: args[0],
    doc="materialise a tensor in its own buffer (graph outputs that alias inputs or constants)"))


register_op(OpDef(
    "Shape", infer=lambda n: [TensorType(np.dtype(np.int64), (len(n.inputs[0].shape),))],
    reference=lambda ins, a: [np.array(ins[0].shape, dtype=np.int64)], lower=None,
    doc="the static shape of a tensor; always folded"))


def _transpose_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    perm = tuple(node.attrs["perm"]) or tuple(reversed(range(len(x.shape))))
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(f"Transpose perm {perm} does not fit rank {len(x.shape)}")
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm))]


def _transpose_reference(ins: list[np.ndarray], a: dict) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(ins[0], a["perm"] or None))]


def _lower_transpose(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    perm = tuple(k.node.attrs["perm"]) or tuple(reversed(range(len(x.shape))))
    in_strides = [int(np.prod(x.shape[d + 1:], dtype=np.int64)) for d in range(len(x.shape))]
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], x.dtype, tuple(k.node.outputs[0].shape),
                      [in_strides[p] for p in perm], 0)


register_op(OpDef(
    "Transpose", infer=_transpose_infer, reference=_transpose_reference, lower=_lower_transpose,
    attrs={"perm": ()}, doc="permute dims (empty perm reverses them)"))
