"""Any batch size from one compiled variant, for models that keep samples independent.

When hobbit/ops/separable.py finds a model sample-independent along dim 0, running
batch N equals running the variant compiled for batch b over consecutive chunks of b
samples. A full chunk runs in place: inputs are C-contiguous, so its rows are one block
of the caller's array, and the native call writes its outputs straight into the rows of
the full-size results. The last, partial chunk is copied into zero-filled buffers of b
samples; padding rows cannot reach real rows in a separable graph, and only the real
rows are copied out. No batch size after the first compiles anything."""

from __future__ import annotations

import numpy as np

from hobbit.runtime.allocation import allocating, check_run_bytes, copy_bytes
from hobbit.runtime.jit import CompiledModel, TensorSpec
from hobbit.runtime.runargs import check_out, pick_outputs, split_run_args


class ChunkedModel:
    """Runs a batch-b CompiledModel over batches of any size (see the module docstring).

    `rows[i]` is how many rows of output i one sample fills (separable.Separation.rows)."""

    def __init__(self, model: CompiledModel, batch: int, rows: tuple[int, ...]):
        self.model = model
        self.batch = batch
        self.rows = rows
        self.report = model.report

    def __reduce__(self) -> tuple:
        """Pickled as its variant (which travels as machine code: hobbit.runtime.shipped)."""
        return ChunkedModel, (self.model, self.batch, self.rows)

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.model.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.model.outputs

    @property
    def output_names(self) -> list[str]:
        return [spec.name for spec in self.model.outputs]

    def run(self, output_names: dict[str, np.ndarray] | list[str] | None = None,
            feeds: dict[str, np.ndarray] | None = None, *, out: list[np.ndarray] | None = None) -> list:
        """As CompiledModel.run, for feeds already checked against the model's declarations
        (every input has dim 0 = N): `out=` arrays of N samples' rows are written in place."""
        names, feeds = split_run_args(output_names, feeds)
        values = [feeds[spec.name] for spec in self.model.inputs]
        samples = values[0].shape[0]
        outputs = sum(rows * samples * int(np.prod(spec.shape[1:], dtype=object)) * np.dtype(spec.dtype).itemsize
                      for spec, rows in zip(self.model.outputs, self.rows))
        check_run_bytes(outputs + copy_bytes(values), ((spec.name, v.shape) for spec, v in zip(self.model.inputs, values)))
        picked = None if names is None else pick_outputs(names, self.output_names)
        with allocating("its inputs' contiguous copies and its outputs"):
            arrays = [np.require(value, requirements=["C_CONTIGUOUS", "ALIGNED"]) for value in values]
            results = self._results(samples, picked, out, arrays)
        self._run_chunks(arrays, results)
        return results if picked is None else [results[i] for i in picked]

    def _results(self, samples: int, picked: list[int] | None, out: object,
                 arrays: list[np.ndarray]) -> list[np.ndarray]:
        """One array per output for `samples` samples: the caller's where out= gives one."""
        specs = [TensorSpec(spec.name, (rows * samples,) + tuple(spec.shape[1:]), spec.dtype)
                 for spec, rows in zip(self.model.outputs, self.rows)]
        results = [np.empty(spec.shape, spec.dtype) for spec in specs]
        if out is None:
            return results
        chosen = list(range(len(specs))) if picked is None else picked
        given = check_out(out, [specs[i] for i in chosen], [specs[i].name for i in chosen], arrays)
        for i, array in zip(chosen, given):
            results[i] = array
        return results

    def _run_chunks(self, arrays: list[np.ndarray], results: list[np.ndarray]) -> None:
        """Full chunks straight from the inputs' rows into the results' rows, then the rest padded."""
        samples = arrays[0].shape[0]
        full = samples - samples % self.batch
        for start in range(0, full, self.batch):
            stop = start + self.batch
            self.model._call_native([a[start:stop] for a in arrays],
                                    [r[start * k:stop * k] for r, k in zip(results, self.rows)])
        if full < samples:
            self._run_padded(arrays, results, full)

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
