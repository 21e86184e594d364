"""OpenVINO as a benchmark peer: its CPU runtime configured as its users run it for latency.

OpenVINO is optional (`pip install openvino`, in the `bench` extra): every benchmark that
times it asks `openvino_core()` first and reports the engine as missing, with the reason,
when it is None. Its own module so that the fp32 suite (hobbit.bench.suite) and the int8/bf16
benchmark (hobbit.bench.quant) build the same engine without importing each other."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

Runner = Callable[[dict[str, np.ndarray]], list[np.ndarray]]
NOT_INSTALLED = "OpenVINO not installed (pip install openvino)"
# What the reports say of the configuration (openvino_runner's config, precision aside).
SETTINGS = "CPU, one stream, INFERENCE_NUM_THREADS = N, PERFORMANCE_HINT LATENCY"


def openvino_core() -> Any:
    """OpenVINO's runtime, or None when it is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    return openvino.Core()


def openvino_version() -> str | None:
    """The installed OpenVINO's version (its short form, e.g. 2026.4.1), or None."""
    try:
        import openvino
    except ImportError:
        return None
    return openvino.__version__.split("-")[0]


def openvino_runner(core: Any, model: onnx.ModelProto | str | os.PathLike, threads: int, precision: str | None,
                    names: Sequence[str] | None = None) -> Runner:
    """OpenVINO on the CPU, latency-tuned like the other engines: one stream of `threads`
    threads. `precision` sets INFERENCE_PRECISION_HINT ("f32", "bf16"); None keeps its default,
    which on a CPU with AVX512-BF16 is bf16 for whatever is not int8 (what a user gets).
    The runner returns the outputs `names` in that order (default: the model's outputs)."""
    config: dict[str, Any] = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    if isinstance(model, onnx.ModelProto):
        read = core.read_model(model.SerializeToString(), b"")
    else:
        read = core.read_model(os.fspath(model))
    compiled = core.compile_model(read, "CPU", config)
    request = compiled.create_infer_request()
    outputs = list(compiled.outputs) if names is None else [compiled.output(name) for name in names]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = request.infer(feeds)
        return [np.array(result[port]) for port in outputs]

    return run
