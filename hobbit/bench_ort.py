"""onnxruntime as the benchmark peer: a CPU session configured like hobbit runs.

Its own module so that the benchmark's load conditions (hobbit.bench_load, whose
two-process workers build sessions) and the report (hobbit.bench, which imports
bench_load) both use it without importing each other."""

from __future__ import annotations

import os

import onnx

from hobbit.errors import HobbitError

ModelSource = onnx.ModelProto | str | os.PathLike


def ort_session(model: ModelSource, threads: int):
    """An onnxruntime CPU session configured like hobbit runs: N intra-op threads, sequential."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise HobbitError("bench needs onnxruntime: pip install 'hobbit[bench]'") from exc
    opts = ort.SessionOptions()
    for name, value in ort_options(threads).items():
        if isinstance(value, str):  # "Enum.MEMBER"
            enum, member = value.split(".")
            value = getattr(getattr(ort, enum), member)
        setattr(opts, name, value)
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def ort_options(threads: int) -> dict[str, object]:
    """onnxruntime's SessionOptions for a comparison, enum values as "Enum.MEMBER" strings so
    that the memory measurement's child process, which must not import hobbit, applies the
    same ones (hobbit.bench_memory)."""
    return {"graph_optimization_level": "GraphOptimizationLevel.ORT_ENABLE_ALL",
            "execution_mode": "ExecutionMode.ORT_SEQUENTIAL",
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}
