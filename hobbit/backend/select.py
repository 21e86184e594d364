"""The backend of a target (hobbit.backend.base): the CPU's for a CPU target, the GPU's of
its vendor for a GPU target. The one place compile() asks which device it builds for."""

from __future__ import annotations

from hobbit.backend.base import Backend
from hobbit.backend.cpu.backend import CPU_BACKEND
from hobbit.backend.gpu.backend import gpu_backend
from hobbit.target import GpuTarget, Target, is_gpu


def backend_for(target: Target | GpuTarget) -> Backend:
    return gpu_backend(target) if is_gpu(target) else CPU_BACKEND
