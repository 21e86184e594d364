"""GpuModel: what compile(model, target="cuda" | "rocm") returns, and hobbit.load gives back
for the folder its export() wrote.

It holds the device code (PTX and, where ptxas is installed, the cubin it assembles to;
or an AMDGPU code object), the launch sequence, the packed weights and the arena size.
`run` runs it on the GPU through the CUDA driver (hobbit.runtime.cuda) or HIP
(hobbit.runtime.hip), opened on first use (hobbit.load opens it at once: `open`); without a
GPU, driver or the vendor's Python bindings it raises a DeviceError, and everything else
(export, inspect, `emulate`) still works. `emulate` runs the same kernels built for the
host over their grids (hobbit.runtime.emulate): the CPU check of the GPU kernels. Like
the CPU's models it is a ModelTensors: inputs, outputs, output_names, get_inputs/get_outputs,
and `export(DIR)` writes the same shape of folder (hobbit.runtime.gpu_export): the device
code, <name>.weights and the manifest <name>.json."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hobbit.backend.gpu.device_code import KernelResources
from hobbit.backend.gpu.launch import Launch
from hobbit.errors import DeviceError, HobbitError
from hobbit.runtime.gpu_export import DeviceFiles, export_device
from hobbit.runtime.jit import ModelTensors, TensorSpec, call_positionally, validate_feeds
from hobbit.runtime.layout import Layout
from hobbit.target import GpuTarget


@dataclass(repr=False)
class GpuModel(ModelTensors):
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
    layout: Layout | None = None  # GPU outputs are flat tensors (no sequences)
    _device: object = field(default=None, repr=False)
    _emulator: object = field(default=None, repr=False)

    def run(self, feeds: dict[str, np.ndarray], device_outputs: bool = False) -> list:
        """Inputs as numpy arrays (or objects with __cuda_array_interface__ / DLPack on the
        GPU) -> the outputs as numpy arrays, in graph-output order; with device_outputs=True
        as hobbit.runtime.device_arrays.DeviceArrays left on the GPU (valid until the next run)."""
        return self.open().run(feeds, device_outputs)

    def open(self) -> object:
        """The model on its GPU (its memory, module and launches: hobbit.runtime.cuda.CudaModel
        for NVIDIA, hobbit.runtime.hip.HipModel for AMD), set up now if it is not yet; a
        DeviceError where it cannot run."""
        if self._device is None:
            self._device = device_runtime(self.target.vendor)(self)
        return self._device

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        return call_positionally(self, arrays)

    def close(self) -> None:
        """Free the model's GPU memory and module now rather than when it is collected;
        a later run sets them up again."""
        if self._device is not None:
            self._device.close()
            self._device = None

    def emulate(self, feeds: dict[str, np.ndarray], order: int | None = None) -> list[np.ndarray]:
        """The outputs computed by the GPU kernels built for this CPU and run over their grids.
        `order` seeds a shuffle of the threads within each phase (None: in index order); a
        data race in shared memory raises hobbit.errors.RaceError (hobbit.runtime.emulate)."""
        arrays = validate_feeds(feeds, self.inputs)
        if self.host_module is None:
            raise HobbitError("this GPU model was loaded from an export or a pickle, which hold no host build of its "
                              "kernels: emulate() the model hobbit.compile returns")
        if self._emulator is None:
            from hobbit.runtime.emulate import GridEmulator
            self._emulator = GridEmulator(self.host_module(), self.launches, self.weights, self.arena_bytes)
        outputs = [np.empty(s.shape, s.dtype) for s in self.outputs]
        self._emulator.run(arrays, outputs, order)
        return outputs

    def check_inputs(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return validate_feeds(feeds, self.inputs)

    def export(self, directory: str | os.PathLike, name: str | None = None, weights: str = "auto") -> DeviceFiles:
        """Write <name>.ptx and <name>.cubin (or <name>.hsaco), <name>.weights and the manifest
        <name>.json into `directory`: what a device runtime needs to run the model with no
        Python (the launch list is plain JSON), and what hobbit.load(directory) runs again.
        `name` (a C identifier) defaults to the folder's name; the weights are always a file
        beside the code ("auto" or "file")."""
        return export_device(self, directory, name, weights)

    def __reduce__(self) -> tuple:
        """Pickled as its device code, launches and weights (hobbit.runtime.shipped)."""
        from hobbit.runtime.shipped import reduce_gpu
        return reduce_gpu(self)

    def __repr__(self) -> str:
        return (f"GpuModel({self.target.vendor}:{self.target.arch}, {len(self.launches)} kernels, "
                f"inputs={self.inputs}, outputs={self.outputs})")


def device_runtime(vendor: str) -> Callable[["GpuModel"], object]:
    """The runtime class for a target vendor: imported only when a model is opened, so that
    compiling and exporting import neither cuda-python nor hip-python."""
    if vendor == "cuda":
        from hobbit.runtime import cuda
        return cuda.CudaModel
    if vendor == "rocm":
        from hobbit.runtime import hip
        return hip.HipModel
    raise DeviceError(f"no GPU runtime for vendor {vendor!r} (hobbit runs 'cuda' and 'rocm' models)")
