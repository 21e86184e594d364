"""The GPU MatMul kernel, and the GEMM emitter of a Conv that is not depthwise: the
tensor-core kernel (hobbit.backend.gpu.mma) where the plan chose an mma operand format
(GemmPlan.format, precision "tf32" or "bf16"), else (FP32) the SIMT one (hobbit.backend.gpu.gemm)."""

from __future__ import annotations

import numpy as np

from hobbit.errors import CodegenError
from hobbit.backend.gpu.gemm import F32, conv_operands, emit_gemm, matmul_operands
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.backend.gpu.mma import emit_mma_gemm
from hobbit.plan.gpu.gemm import GemmPlan, gemm_dims
from hobbit.plan.gpu.mma import MmaFormat


def lower_gemm(k: GpuArgs) -> None:
    node = k.node
    if any(v is not None and np.dtype(v.dtype) != F32 for v in list(node.inputs) + list(node.outputs)):
        raise CodegenError(f"the GPU {node.op} computes float32 only")
    dims = gemm_dims(node)
    ops = conv_operands(k, dims) if node.op == "Conv" else matmul_operands(k, dims)
    plan: GemmPlan = k.plan
    if isinstance(plan.format, MmaFormat):
        emit_mma_gemm(k, plan.tile, plan.format, dims, ops)
    else:
        emit_gemm(k, plan.tile, dims, ops)


GPU.register("MatMul", lower=lower_gemm)
