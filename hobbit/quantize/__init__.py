"""Post-training int8 quantization: hobbit.quantize(model, calibration=...) -> an ONNX QDQ model.

The pipeline, one module each: load and copy the model, fold BatchNorm into its Conv
(fold), decide what becomes int8 (plan), run the float model over the calibration batches
in hobbit's compiled engine keeping streaming statistics (calibrate, statistics), turn the
ranges into scales and zero points (params) and write the QuantizeLinear/DequantizeLinear
graph (qdq). The result is a standard ONNX model: onnxruntime runs it, hobbit.compile takes it."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable

import onnx
from onnx import shape_inference

from hobbit.errors import ConfigError, QuantizeError
from hobbit.frontend.onnx.importer import load_model
from hobbit.quantize.calibrate import Feed, collect_statistics
from hobbit.quantize.fold import fold_batchnorm
from hobbit.quantize.graph import OnnxGraph
from hobbit.quantize.plan import QUANTIZED_OPS, plan_quantization
from hobbit.quantize.qdq import write_qdq
from hobbit.quantize.statistics import METHODS
from hobbit.runtime.progress import Progress

MIN_OPSET = 13  # per-axis DequantizeLinear (per-channel weights) arrived in opset 13

__all__ = ["quantize", "METHODS"]


def quantize(model: str | os.PathLike | bytes | onnx.ModelProto, calibration: Iterable[Feed],
             method: str = "minmax", per_channel: bool = True, percentile: float = 99.999,
             threads: int | None = None, cache: bool | None = None, progress: bool | None = None
             ) -> onnx.ModelProto:
    """Quantize an ONNX float model to int8 and return it as an ONNX QDQ model.

    `calibration` yields batches, each a dict {input name: numpy array} like
    CompiledModel.run takes (a list, or a generator: it is read once). `method` picks each
    activation's range from what calibration saw: "minmax" (the whole range), "percentile"
    (|x| clipped at `percentile` %, saturating rare outliers) or "entropy" (the clipping
    threshold of least KL divergence, TensorRT's method). Weights are int8 symmetric, per
    output channel unless `per_channel=False`; activations uint8 asymmetric. `threads` and
    `cache` are hobbit.compile's for the calibration run; `progress` shows the stages and
    batches on stderr (default: on a terminal, once it has taken a second). The input model
    is not modified."""
    if method not in METHODS:
        raise ConfigError(f"method= must be one of {', '.join(METHODS)}; got {method!r}")
    if not 0 < percentile <= 100:
        raise ConfigError(f"percentile= must be in (0, 100]; got {percentile!r}")
    label = os.fspath(model) if isinstance(model, (str, os.PathLike)) else "the model"
    proto = onnx.ModelProto()
    proto.CopyFrom(load_model(model))
    _check_opset(proto, label)
    _name_nodes(proto)
    with Progress.for_compile(progress) as show:
        show.stage("folding BatchNorm")
        fold_batchnorm(OnnxGraph(proto.graph))
        planned = onnx.ModelProto()
        planned.CopyFrom(proto)
        inferred = shape_inference.infer_shapes(proto)
        _type_outputs(planned, inferred)
        plan = plan_quantization(OnnxGraph(planned.graph), _float_tensors(inferred), per_channel)
        if not plan.calibrated:
            found = sorted({n.op_type for n in proto.graph.node})
            raise QuantizeError(f"{label} has nothing to quantize: none of its operators ({', '.join(found)}) "
                                f"reads or writes a float32 activation hobbit quantizes "
                                f"({', '.join(QUANTIZED_OPS)})")
        stats = collect_statistics(proto, plan.calibrated, calibration, method != "minmax", show, threads, cache)
        ranges = {}
        for done, name in enumerate(plan.calibrated):
            if method != "minmax":
                show.stage(f"{method} thresholds: {done}/{len(plan.calibrated)} tensors")
            ranges[name] = stats[name].range(method, percentile)
        show.stage("writing the QDQ model")
        quantized = write_qdq(planned, plan, ranges)
        show.finish(f"quantized {len(plan.weights)} weights and {len(plan.activations())} activations")
    return quantized


def _check_opset(model: onnx.ModelProto, label: str) -> None:
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        raise QuantizeError(f"{label} uses opset {opset}; quantizing needs opset {MIN_OPSET} or later (per-axis "
                            f"DequantizeLinear): convert it first with onnx.version_converter.convert_version("
                            f"model, {MIN_OPSET})")


def _name_nodes(model: onnx.ModelProto) -> None:
    """Give unnamed (or repeated) node names unique ones: the plan refers to nodes by name."""
    taken = {n.name for n in model.graph.node}
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
        seen.add(node.name)


def _float_tensors(inferred: onnx.ModelProto) -> set[str]:
    """Names of the float32 tensors of a shape-inferred model (graph inputs and outputs, node
    outputs inference could type)."""
    values = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    return {v.name for v in values if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}


def _type_outputs(model: onnx.ModelProto, inferred: onnx.ModelProto) -> None:
    """Graph outputs declared without a type get the inferred one: the checker requires it."""
    for output, typed in zip(model.graph.output, inferred.graph.output):
        if not output.type.HasField("tensor_type") and typed.type.HasField("tensor_type"):
            output.type.CopyFrom(typed.type)


class _CallableModule(types.ModuleType):
    """`hobbit.quantize` is both this package and the function: importing any submodule
    (hobbit.quantize.statistics) binds the name on `hobbit` to the package, whatever
    hobbit/__init__ exported, so the package itself forwards calls to quantize()."""

    def __call__(self, *args: object, **kwargs: object) -> onnx.ModelProto:
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
