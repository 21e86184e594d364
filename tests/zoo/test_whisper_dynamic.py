"""A speech encoder with run-time frames (issue 28), shaped as Whisper's: Conv1d, then a
stride-2 Conv1d (frames -> (frames + 1) // 2 positions), the positional table sliced to the
positions the convs give (a Slice whose end is the conv output's length: folded at each
import to a table of that length, which only the window's floor division describes), and
self-attention over the positions. Built with onnx.helper (Whisper's own numbers are in
scripts/export_dynamic_models.py, measured in BENCHMARKS.md); compiled ONCE and compared
with onnxruntime at every kind of length inside the bounds, odd and even."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from tests.helpers import run_ort

MELS, WIDTH, FRAMES = 8, 16, 64


def _encoder() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
    inits = {"conv1": w(WIDTH, MELS, 3), "conv2": w(WIDTH, WIDTH, 3), "positions": w(FRAMES // 2, WIDTH),
             "query": w(WIDTH, WIDTH), "one": np.array([1], np.int64), "zero": np.array([0], np.int64),
             "scale": np.array(WIDTH ** -0.5, np.float32)}
    nodes = [
        helper.make_node("Conv", ["input_features", "conv1"], ["c1"], pads=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "conv2"], ["c2"], pads=[1, 1], strides=[2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Transpose", ["r2"], ["x"], perm=[0, 2, 1]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"]),
        helper.make_node("Slice", ["positions", "zero", "length", "zero"], ["table"]),
        helper.make_node("Add", ["x", "table"], ["h"]),
        helper.make_node("MatMul", ["h", "query"], ["q"]),
        helper.make_node("Transpose", ["h"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "h"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "speech", [helper.make_tensor_value_info("input_features", TensorProto.FLOAT,
                                                                            [1, MELS, "frames"])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, "positions", WIDTH])],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("threads", [1, 2])
def test_one_module_at_every_duration(threads: int) -> None:
    model = _encoder()
    compiled = hobbit.compile(model, cache=False, threads=threads, dynamic_shapes={"frames": (2, FRAMES)})
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    for frames in (FRAMES, 2, 3, 17, 40, 63, 5, FRAMES):
        x = np.random.default_rng(frames).standard_normal((1, MELS, frames)).astype(np.float32)
        got, = compiled.run({"input_features": x})
        want, = run_ort(model, {"input_features": x})
        assert got.shape == want.shape == (1, (frames + 1) // 2, WIDTH)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"at {frames} frames")
    assert compiled.compiles == 1
