"""Any batch size from one compiled variant, for models that keep samples independent.

When hobbit/graph/separable.py finds a model sample-independent along dim 0, running
batch N equals running the variant compiled for batch b over consecutive chunks of b
samples. A full chunk runs in place: inputs are C-contiguous, so its rows are one block
of the caller's array, and the native call writes its outputs straight into the rows of
the full-size results. The last, partial chunk is copied into zero-filled buffers of b
samples; padding rows cannot reach real rows in a separable graph, and only the real
rows are copied out. No batch size after the first compiles anything."""

from __future__ import annotations

import numpy as np

from hobbit.runtime.jit import CompiledModel, TensorSpec


class ChunkedModel:
    """Runs a batch-b CompiledModel over batches of any size (see the module docstring).

    `rows[i]` is how many rows of output i one sample fills (separable.Separation.rows)."""

    def __init__(self, model: CompiledModel, batch: int, rows: tuple[int, ...]):
        self.model = model
        self.batch = batch
        self.rows = rows
        self.report = model.report

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.model.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.model.outputs

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Feeds already checked against the model's declarations; every input has dim 0 = N."""
        arrays = [np.require(feeds[spec.name], requirements=["C_CONTIGUOUS", "ALIGNED"])
                  for spec in self.model.inputs]
        samples = arrays[0].shape[0]
        if samples == self.batch:
            return self.model.run(dict(zip((s.name for s in self.model.inputs), arrays)))
        results = [np.empty((rows * samples,) + tuple(spec.shape[1:]), spec.dtype)
                   for spec, rows in zip(self.model.outputs, self.rows)]
        full = samples - samples % self.batch
        for start in range(0, full, self.batch):
            self.model._call_native([a[start:start + self.batch] for a in arrays],
                                    [r[start * k:(start + self.batch) * k] for r, k in zip(results, self.rows)])
        if full < samples:
            self._run_padded(arrays, results, full)
        return results

    def _run_padded(self, arrays: list[np.ndarray], results: list[np.ndarray], start: int) -> None:
        """The last samples, fewer than a chunk, through zero-filled chunk-sized buffers."""
        count = arrays[0].shape[0] - start
        padded = []
        for spec, a in zip(self.model.inputs, arrays):
            chunk = np.zeros(spec.shape, spec.dtype)
            chunk[:count] = a[start:]
            padded.append(chunk)
        outs = [np.empty(spec.shape, spec.dtype) for spec in self.model.outputs]
        self.model._call_native(padded, outs)
        for result, out, k in zip(results, outs, self.rows):
            result[start * k:] = out[:count * k]
