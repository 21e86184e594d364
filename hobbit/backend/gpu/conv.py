"""The GPU Conv kernel: a depthwise conv's own kernel (hobbit.backend.gpu.depthwise) where every
channel is its own group, else the implicit GEMM (hobbit.backend.gpu.gemm), as the Conv plan
(hobbit.plan.gpu.conv) chose."""

from __future__ import annotations

from hobbit.backend.gpu.depthwise import lower_depthwise
from hobbit.backend.gpu.matmul import lower_gemm
from hobbit.backend.gpu.args import GPU, GpuArgs
from hobbit.plan.gpu.depthwise import is_depthwise


def lower_conv(k: GpuArgs) -> None:
    (lower_depthwise if is_depthwise(k.node) else lower_gemm)(k)


GPU.register("Conv", lower=lower_conv)
