"""GpuModel: what compile(model, target="cuda" | "rocm") returns.

It holds the device code (PTX and, where ptxas is installed, the cubin it assembles to;
or an AMDGPU code object), the launch sequence, the packed weights and the arena size.
`run` runs it on the GPU through the CUDA driver (hobbit.runtime.cuda), opened on first
use; without a GPU, driver or cuda-python it raises a DeviceError, and everything else
(export, inspect, `emulate`) still works. `emulate` runs the same kernels built for the
host over their grids (hobbit.runtime.emulate): the CPU check of the GPU kernels."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hobbit.backend.gpu.device_code import KernelResources
from hobbit.backend.gpu.module import Launch
from hobbit.errors import DeviceError
from hobbit.runtime.jit import TensorSpec, validate_feeds
from hobbit.target import GpuTarget

MANIFEST = "hobbit-gpu.json"


@dataclass
class GpuModel:
    target: GpuTarget
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    launches: list[Launch]
    weights: np.ndarray
    arena_bytes: int
    device_code: str | bytes  # PTX text (cuda) or the .hsaco code object (rocm)
    cubin: bytes | None = None  # ptxas's output for target.arch, where ptxas was found
    resources: dict[str, KernelResources] = field(default_factory=dict)
    host_module: Callable[[], str] | None = None  # builds the host-flavour IR, for emulate()
    report: object = None
    recipe: object = None
    _device: object = field(default=None, repr=False)
    _emulator: object = field(default=None, repr=False)

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.outputs]

    def run(self, feeds: dict[str, np.ndarray], device_outputs: bool = False) -> list:
        """Inputs as numpy arrays (or objects with __cuda_array_interface__ / DLPack on the
        GPU) -> the outputs as numpy arrays, in graph-output order; with device_outputs=True
        as hobbit.runtime.device_arrays.DeviceArrays left on the GPU (valid until the next run)."""
        if self.target.vendor != "cuda":
            raise DeviceError(f"running {self.target.arch} code objects is not built into hobbit yet (no HIP "
                              f"runtime); export the model (GpuModel.export) for a ROCm loader, or use emulate()")
        if self._device is None:
            from hobbit.runtime.cuda import CudaModel
            self._device = CudaModel(self)
        return self._device.run(feeds, device_outputs)

    def close(self) -> None:
        """Free the model's GPU memory and module now rather than when it is collected;
        a later run sets them up again."""
        if self._device is not None:
            self._device.close()
            self._device = None

    def emulate(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs computed by the GPU kernels built for this CPU and run over their grids."""
        arrays = validate_feeds(feeds, self.inputs)
        if self._emulator is None:
            from hobbit.runtime.emulate import GridEmulator
            self._emulator = GridEmulator(self.host_module(), self.launches, self.weights, self.arena_bytes)
        outputs = [np.empty(s.shape, s.dtype) for s in self.outputs]
        self._emulator.run(arrays, outputs)
        return outputs

    def check_inputs(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return validate_feeds(feeds, self.inputs)

    def export(self, directory: str | os.PathLike) -> list[Path]:
        """Write the device code, the weights and a manifest of the launches: what a device
        runtime needs to run the model with no Python (the launch list is plain JSON)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        files = []
        if self.target.vendor == "cuda":
            files.append(out / "model.ptx")
            files[-1].write_text(self.device_code)
            if self.cubin is not None:
                files.append(out / "model.cubin")
                files[-1].write_bytes(self.cubin)
        else:
            files.append(out / "model.hsaco")
            files[-1].write_bytes(self.device_code)
        files.append(out / "weights.bin")
        files[-1].write_bytes(self.weights.tobytes())
        manifest = {"target": {"vendor": self.target.vendor, "arch": self.target.arch},
                    "arena_bytes": self.arena_bytes, "weights_bytes": int(self.weights.nbytes),
                    "inputs": [_spec_json(s) for s in self.inputs], "outputs": [_spec_json(s) for s in self.outputs],
                    "launches": [launch.to_json() for launch in self.launches]}
        files.append(out / MANIFEST)
        files[-1].write_text(json.dumps(manifest, indent=1))
        return files

    def __repr__(self) -> str:
        return (f"GpuModel({self.target.vendor}:{self.target.arch}, {len(self.launches)} kernels, "
                f"inputs={self.inputs}, outputs={self.outputs})")


def _spec_json(spec: TensorSpec) -> dict:
    return {"name": spec.name, "shape": list(spec.shape), "dtype": np.dtype(spec.dtype).str}
