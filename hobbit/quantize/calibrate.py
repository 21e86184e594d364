"""Calibration: run the float model over the calibration batches in hobbit's compiled engine
and keep streaming statistics of every tensor that will be quantized.

The model is compiled once (hobbit.compile, compile cache as usual) with each such tensor
added as a graph output, so one native call per batch yields them all; each batch's outputs
are folded into the statistics and dropped before the next, so memory stays at one batch's
activations however many batches there are. Graph inputs are measured from the feeds."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from hobbit.compiler import compile as compile_model
from hobbit.errors import CalibrationError
from hobbit.quantize.statistics import TensorStatistics
from hobbit.runtime.progress import Progress

Feed = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class DeclaredInput:
    """A graph input as the model declares it: dtype, and dims (None where symbolic)."""

    name: str
    dtype: np.dtype
    dims: tuple[int | None, ...] | None  # None: no shape declared


def declared_inputs(model: onnx.ModelProto) -> list[DeclaredInput]:
    initializers = {t.name for t in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims = (tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
                if tensor.HasField("shape") else None)
        found.append(DeclaredInput(value.name, dtype, dims))
    return found


def check_feed(feed: object, index: int, inputs: list[DeclaredInput]) -> dict[str, np.ndarray]:
    """One calibration batch, checked against the model's inputs (CalibrationError if not)."""
    where = f"calibration batch {index}"
    if not isinstance(feed, Mapping):
        raise CalibrationError(f"{where} is a {type(feed).__name__}; each batch must be a dict "
                               f"{{input name: numpy array}} for the inputs {[i.name for i in inputs]}")
    names = [i.name for i in inputs]
    unknown = sorted(set(feed) - set(names))
    if unknown:
        raise CalibrationError(f"{where} has input(s) {unknown} the model does not have; its inputs are {names}")
    checked = {}
    for spec in inputs:
        if spec.name not in feed:
            raise CalibrationError(f"{where} lacks input '{spec.name}' (the model's inputs are {names})")
        array = np.asarray(feed[spec.name])
        if array.dtype != spec.dtype:
            raise CalibrationError(f"{where}, input '{spec.name}': dtype {array.dtype}, but the model takes "
                                   f"{spec.dtype} (convert with .astype(np.{spec.dtype.name}))")
        if spec.dims is not None and not _fits(array.shape, spec.dims):
            declared = "x".join("?" if d is None else str(d) for d in spec.dims)
            raise CalibrationError(f"{where}, input '{spec.name}': shape {'x'.join(map(str, array.shape))}, but "
                                   f"the model declares {declared or 'a scalar'}")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            bad = int(np.count_nonzero(~np.isfinite(array)))
            raise CalibrationError(f"{where}, input '{spec.name}': {bad} NaN or infinite value(s); calibration "
                                   f"ranges would be meaningless")
        checked[spec.name] = array
    return checked


def _fits(shape: tuple[int, ...], dims: tuple[int | None, ...]) -> bool:
    return len(shape) == len(dims) and all(d is None or d == s for s, d in zip(shape, dims))


def calibration_model(model: onnx.ModelProto, tensors: list[str]) -> onnx.ModelProto:
    """A copy of `model` whose graph outputs are its own followed by `tensors` (those not
    already outputs or inputs)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    present = {v.name for v in copy.graph.output} | {v.name for v in copy.graph.input}
    for name in tensors:
        if name not in present:
            copy.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
            present.add(name)
    return copy


def collect_statistics(model: onnx.ModelProto, tensors: list[str], calibration: Iterable[Feed], histogram: bool,
              show: Progress, threads: int | None = None, cache: bool | None = None
              ) -> dict[str, TensorStatistics]:
    """Statistics of each name in `tensors` (float32 tensors of `model`) over `calibration`."""
    inputs = declared_inputs(model)
    total = _length(calibration)
    batches = iter(calibration)
    first = next(batches, None)
    if first is None:
        raise CalibrationError("the calibration set is empty: give at least one batch "
                               "(a dict {input name: numpy array})")
    first = check_feed(first, 0, inputs)
    stats = {name: TensorStatistics(histogram) for name in tensors}
    measured = [name for name in tensors if name not in {i.name for i in inputs}]
    show.stage(f"compiling the calibration model ({len(measured)} tensors as outputs)")
    probe = calibration_model(model, measured)
    compiled = compile_model(probe, threads=threads, cache=cache, progress=False)
    positions = {v.name: i for i, v in enumerate(probe.graph.output)}
    count = 0
    for index, feed in enumerate(_chain(first, batches)):
        checked = feed if index == 0 else check_feed(feed, index, inputs)
        show.stage(f"calibrating: {index}/{total if total is not None else '?'} batches")
        outputs = compiled.run(checked)
        for name in tensors:
            stats[name].add(checked[name] if name in checked else outputs[positions[name]])
        count = index + 1
    show.stage(f"calibrating: {count}/{count} batches")
    return stats


def _chain(first: dict[str, np.ndarray], rest: Iterator[Feed]) -> Iterator[Feed]:
    yield first
    yield from rest


def _length(calibration: Iterable[Feed]) -> int | None:
    try:
        return len(calibration)  # type: ignore[arg-type]
    except TypeError:
        return None
