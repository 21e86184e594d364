"""precision="tf32" on an NVIDIA GPU: the GEMM-shaped nodes (Conv and MatMul in float32)
are marked to run on tensor cores with TF32 operands and float32 accumulation; the GEMM
plan (hobbit.plan.gpu_mma) decides, per node, whether the tensor-core tiles pay.

Depthwise convs keep their own kernel (bound by memory, no GEMM to speak of), and every
other op stays float32: TF32 changes only how the big GEMMs round their operands."""

from __future__ import annotations

import numpy as np

from hobbit.errors import ConfigError
from hobbit.graph.ir import Graph, Node
from hobbit.target import Target, is_gpu

FLOAT32 = np.dtype(np.float32)


def require_tf32(target: Target) -> None:
    """TF32 is an NVIDIA tensor-core format (mma.sync, sm_80 and later)."""
    if not is_gpu(target) or target.vendor != "cuda":
        name = f"{target.vendor}:{target.arch}" if is_gpu(target) else f"'{target.cpu}' ({target.triple})"
        raise ConfigError(f"precision='tf32' runs on NVIDIA tensor cores (target 'cuda', sm_80 or later); "
                          f"target {name} has none: use precision='fp32'")


def use_tf32(graph: Graph, target: Target) -> Graph:
    require_tf32(target)
    for node in graph.nodes:
        if node.op in ("Conv", "MatMul") and _float32(node):
            node.attrs["tf32"] = True
    return graph


def _float32(node: Node) -> bool:
    return all(v is None or np.dtype(v.dtype) == FLOAT32 for v in list(node.inputs[:2]) + list(node.outputs))
