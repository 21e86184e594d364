"""The GPU Conv kernel: a depthwise conv's own kernel (hobbit.gpu.depthwise) where every
channel is its own group, else the implicit GEMM (hobbit.gpu.gemm), as the Conv plan
(hobbit.plan.gpu_conv) chose."""

from __future__ import annotations

from hobbit.gpu.depthwise import lower_depthwise
from hobbit.gpu.matmul import lower_gemm
from hobbit.gpu.kernels import GPU, GpuArgs
from hobbit.plan.gpu_depthwise import is_depthwise


def lower_conv(k: GpuArgs) -> None:
    (lower_depthwise if is_depthwise(k.node) else lower_gemm)(k)


GPU.register("Conv", lower=lower_conv)
