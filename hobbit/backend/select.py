"""The backend of a target (hobbit.backend.base): the CPU's for a CPU target (its naive
child for schedule="naive": hobbit.backend.cpu.naive), the GPU's of its vendor for a GPU
target. The one place compile() asks which device it builds for."""

from __future__ import annotations

from hobbit.backend.base import Backend
from hobbit.backend.cpu.backend import CPU_BACKEND, NAIVE_BACKEND
from hobbit.backend.gpu.backend import gpu_backend
from hobbit.errors import ConfigError
from hobbit.target import GpuTarget, Target, is_gpu

SCHEDULES = ("auto", "naive")


def backend_for(target: Target | GpuTarget, schedule: str = "auto") -> Backend:
    """`schedule`: "auto" (hobbit's schedules, chosen from shapes and target) or "naive"
    (plain loop nests, a CPU's only); anything else is a ConfigError."""
    if schedule not in SCHEDULES:
        raise ConfigError(f"schedule= must be one of {', '.join(map(repr, SCHEDULES))}; got {schedule!r}")
    if is_gpu(target):
        if schedule != "auto":
            raise ConfigError(f"schedule={schedule!r} is a CPU mode; GPU code ({target.arch}) has its own schedules")
        return gpu_backend(target)
    return NAIVE_BACKEND if schedule == "naive" else CPU_BACKEND
