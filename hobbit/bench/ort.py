"""onnxruntime as the benchmark peer: a CPU session configured like hobbit runs.

Its own module so that the benchmark's load conditions (hobbit.bench.load, whose
two-process workers build sessions) and the suite (hobbit.bench.suite, which imports
hobbit.bench.load) both use it without importing each other."""

from __future__ import annotations

import os

import onnx

from hobbit.errors import HobbitError, import_optional

ModelSource = onnx.ModelProto | str | os.PathLike

# The session config entry that stops onnxruntime's intra-op threads from spinning while
# they wait for work. By default they spin, which is fastest on idle cores; on a busy
# machine the spinning threads take the cores the work needs (on 2 cores beside a busy
# loop, onnxruntime at 2 threads ran slower than at 1). A user who knows this sets it,
# so the load tables time a session with it beside the default one.
NO_SPIN = {"session.intra_op.allow_spinning": "0"}


def ort_session(model: ModelSource, threads: int, spinning: bool = True):
    """An onnxruntime CPU session configured like hobbit runs: N intra-op threads, sequential;
    with `spinning` False, its intra-op threads sleep instead of spinning while idle (NO_SPIN)."""
    ort = import_optional("onnxruntime",
                          lambda exc: HobbitError("bench needs onnxruntime: pip install 'hobbit[bench]'"))
    opts = ort.SessionOptions()
    for name, value in ort_options(threads).items():
        if isinstance(value, str):  # "Enum.MEMBER"
            enum, member = value.split(".")
            value = getattr(getattr(ort, enum), member)
        setattr(opts, name, value)
    if not spinning:
        for key, value in NO_SPIN.items():
            opts.add_session_config_entry(key, value)
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def ort_options(threads: int) -> dict[str, object]:
    """onnxruntime's SessionOptions for a comparison, enum values as "Enum.MEMBER" strings so
    that the memory measurement's child process, which must not import hobbit, applies the
    same ones (hobbit.bench.memory)."""
    return {"graph_optimization_level": "GraphOptimizationLevel.ORT_ENABLE_ALL",
            "execution_mode": "ExecutionMode.ORT_SEQUENTIAL",
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}
