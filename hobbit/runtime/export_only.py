"""A model compiled for a CPU this process cannot run: exportable, inspectable, not runnable.

compile(target=...) for another architecture (AArch64 from x86-64), or for a CPU with
features this host lacks, gives one of these instead of a CompiledModel: the code is
made by LLVM for that target (hobbit.backend.llvm.emit_object) and never mapped into
this process, which would die on the first unknown instruction. `export()` writes the
same library a CompiledModel writes (hobbit.runtime.export), for the machine it is for;
`run()` is one clear TargetError."""

from __future__ import annotations

import os

import numpy as np

from hobbit.errors import TargetError
from hobbit.runtime.export import ArtifactFiles, NativeModel, export_library
from hobbit.runtime.jit import ModelTensors, TensorSpec
from hobbit.runtime.layout import grouped_layout


class ExportOnlyModel(ModelTensors):
    # Set by hobbit.compile, as on a CompiledModel.
    recipe = None

    def __init__(self, native: NativeModel, why: str, report: object = None):
        self.native = native
        self.report = report
        self.inputs: list[TensorSpec] = native.inputs
        self.outputs: list[TensorSpec] = native.outputs
        self.layout = grouped_layout(native.layout)
        self._why = why

    @property
    def target(self):
        return self.native.target

    @property
    def object_code(self) -> bytes:
        """The model's ELF object for its target (what --emit obj writes)."""
        return self.native.code

    def export(self, directory: str | os.PathLike, name: str | None = None, weights: str = "auto") -> ArtifactFiles:
        """Write the library, header, weights and manifest for the target (see
        CompiledModel.export); linking uses the target's C toolchain (hobbit.runtime.export)."""
        return export_library(self.native, directory, name, weights)

    def run(self, *args: object, **kwargs: object) -> list[np.ndarray]:
        target = self.native.target
        raise TargetError(f"this model was compiled for {target.triple} '{target.cpu}' and cannot run in this "
                          f"process: {self._why}; export it (model.export(DIR)) and run the library there, "
                          f"or compile with target='host'")

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.run()
