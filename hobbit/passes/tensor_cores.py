"""precision="tf32" or "bf16" on an NVIDIA GPU: the GEMM-shaped nodes (Conv and MatMul in
float32) are marked to run on tensor cores with operands in that format and float32
accumulation (attrs["tensor_cores"]); the GEMM plan (hobbit.plan.gpu.mma) decides, per
node, whether the tensor-core tiles pay.

Depthwise convs keep their own kernel (bound by memory, no GEMM to speak of), and every
other op stays float32: the precision changes only how the big GEMMs round their
operands (TF32: 10 mantissa bits, bf16: 7)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from hobbit.errors import ConfigError
from hobbit.graph.ir import Graph, Node
from hobbit.target import Target, is_gpu

FLOAT32 = np.dtype(np.float32)


def require_tensor_cores(target: Target, precision: str) -> None:
    """TF32 and bf16 tensor cores are NVIDIA's (mma.sync, sm_80 and later)."""
    if not is_gpu(target) or target.vendor != "cuda":
        name = f"{target.vendor}:{target.arch}" if is_gpu(target) else f"'{target.cpu}' ({target.triple})"
        raise ConfigError(f"precision={precision!r} runs on NVIDIA tensor cores (target 'cuda', sm_80 or later); "
                          f"target {name} has none: use precision='fp32'")


def tensor_cores(fmt: str) -> Callable[[Graph, Target], Graph]:
    """The pass that marks the float32 Conv and MatMul nodes for `fmt` tensor cores."""
    def mark(graph: Graph, target: Target) -> Graph:
        require_tensor_cores(target, fmt)
        for node in graph.nodes:
            if node.op in ("Conv", "MatMul") and _float32(node):
                node.attrs["tensor_cores"] = fmt
        return graph
    return mark


def _float32(node: Node) -> bool:
    return all(v is None or np.dtype(v.dtype) == FLOAT32 for v in list(node.inputs[:2]) + list(node.outputs))
