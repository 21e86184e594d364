"""Linear-algebra ops: Det of the trailing square matrices of a tensor."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op


def _det_infer(node: Node) -> list[TensorType]:
    x = node.inputs[0]
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2] or np.dtype(x.dtype).kind != "f":
        raise ShapeError(f"Det needs float square matrices in the last two dims, got {x.type}")
    return [TensorType(x.dtype, tuple(x.shape[:-2]))]


def _det_flops(node: Node) -> int:
    n = node.inputs[0].shape[-1]
    return node.outputs[0].type.size * (2 * n ** 3 // 3 + 1)


register_op(OpDef(
    "Det", infer=_det_infer, flops=_det_flops,
    reference=lambda ins, a: [np.asarray(np.linalg.det(ins[0])).astype(ins[0].dtype)],
    doc="determinant of each [n, n] matrix in the last two dims (LU with partial pivoting)"))
