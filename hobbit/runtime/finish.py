"""The last step of compile()'s one path: a backend's native code (hobbit.backend.base) and
the report of what was built -> the model the user holds.

- InProcess (a CPU this process runs): a CompiledModel, its module mapped by MCJIT, the
  weights shared with any other variant of the same bytes (hobbit.runtime.weights), and the
  machine code kept in the compile cache when compile() looked there (`key`);
- ObjectCode (a CPU it cannot run): an ExportOnlyModel, which exports a library for it;
- DeviceCode (a GPU): a GpuModel, which runs on the device, exports and emulates."""

from __future__ import annotations

import time

import numpy as np

from hobbit.backend.base import DeviceCode, InProcess, Native, ObjectCode
from hobbit.backend.cpu.module import status_records, view_constants
from hobbit.runtime import cache as compile_cache
from hobbit.runtime import weights as shared_weights
from hobbit.runtime.export import NativeModel
from hobbit.runtime.export_only import ExportOnlyModel
from hobbit.runtime.gpu_model import GpuModel
from hobbit.runtime.jit import CompiledModel, ModelTensors, TensorSpec
from hobbit.runtime.memory import release_garbage
from hobbit.runtime.progress import Progress


def tensor_specs(graph) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The graph's inputs and outputs as the model declares them."""
    inputs = [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs]
    outputs = [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype)) for name, v in zip(graph.output_names, graph.outputs)]
    return inputs, outputs


def finished_model(native: Native, report, started: float, show: Progress, key: str | None = None,
                   lookup_seconds: float = 0.0, extra: dict | None = None) -> ModelTensors:
    """The model of `native`; `started` is when the finish began (for report.seconds); `key`
    and `extra`: the compile-cache entry it is stored as, and what is stored beside it."""
    if isinstance(native, InProcess):
        return _in_process(native, report, started, show, key, lookup_seconds, extra)
    if isinstance(native, ObjectCode):
        return _export_only(native, report, started, show)
    return _on_device(native, report, started, show)


def _in_process(native: InProcess, report, started: float, show: Progress, key: str | None,
                lookup_seconds: float, extra: dict | None) -> CompiledModel:
    name = shared_weights.digest(report.weights)
    weights = report.weights = shared_weights.share(report.weights, name)
    view_constants(report.graph, report.plan, weights)  # the shared blob may be another variant's
    graph = report.graph
    inputs, outputs = tensor_specs(graph)
    objects: list[bytes] = []
    model = CompiledModel(native.optimized, report.target, weights, report.plan.arena_bytes, inputs, outputs,
                          report, on_object=objects.append if key else None, layout=graph.output_layout)
    report.seconds["jit"] = time.perf_counter() - started
    if key and len(objects) == 1:
        show.stage("writing the compile cache")
        t0 = time.perf_counter()
        compile_cache.store(key, objects[0], weights, report.plan.arena_bytes, inputs, outputs, graph.output_layout,
                            extra, weights_name=name)
        report.seconds["cache"] = lookup_seconds + time.perf_counter() - t0
    release_garbage()
    show.finish("compiled")
    return model


def _export_only(native: ObjectCode, report, started: float, show: Progress) -> ExportOnlyModel:
    graph, target = report.graph, report.target
    inputs, outputs = tensor_specs(graph)
    code = NativeModel(native.code, target, report.weights, report.plan.arena_bytes, inputs, outputs,
                       graph.output_layout, status_records(graph, report.plan), report.threads)
    report.seconds["object"] = time.perf_counter() - started
    release_garbage()
    show.finish(f"compiled for {target.triple} '{target.cpu}' (export only)")
    return ExportOnlyModel(code, native.why, report)


def _on_device(native: DeviceCode, report, started: float, show: Progress) -> GpuModel:
    target = report.target
    inputs, outputs = tensor_specs(report.graph)
    report.seconds["device"] = time.perf_counter() - started
    show.finish(f"compiled for {target.vendor} {target.arch}")
    return GpuModel(target, inputs, outputs, list(native.launches), report.weights, report.plan.arena_bytes,
                    native.code, native.cubin, native.resources, native.host_module, report)
