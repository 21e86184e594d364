"""Memory per compile: compiling and dropping models again and again must not grow the process.

Each compile used to keep its LLVM O3 pass pipeline (llvmlite never freed a ModulePassManager,
see hobbit.backend.llvm.free_pass_manager), so a service that compiles models it is sent grew
without bound. The test runs in a fresh interpreter, so what other tests left behind is not
counted and the numbers are the compiler's alone."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref

import numpy as np
import onnxruntime as ort
from onnx import helper

import hobbit
from tests.helpers import make_model

MiB = 1 << 20

_COMPILE_MANY = r"""
import json, sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import hobbit
from hobbit.runtime.memory import release_garbage, rss_bytes

def conv_relu(seed):
    w = np.random.default_rng(seed).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

compiles, warm_up = int(sys.argv[1]), int(sys.argv[2])
x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
rss = []
for i in range(compiles):
    model = hobbit.compile(conv_relu(i), threads=1, cache=False)  # new constants each time: a new model
    y = model.run({"x": x})[0]
    del model
    if i + 1 >= warm_up and (i + 1 - warm_up) % 25 == 0:
        release_garbage()
        rss.append(rss_bytes())
print(json.dumps({"rss": rss, "last": conv_relu(compiles - 1).hex(), "y": y.tolist()}))
"""


def test_compiling_and_dropping_models_does_not_grow_the_process():
    """300 compiles of a one-conv model, each with new weights, dropped after one run: from
    the 50th on, resident memory (read every 25 compiles) may grow by at most 3 MiB.
    Measured: 0.3 MiB; 45 MiB (about 180 KiB per compile, no plateau) while the pass
    pipelines were kept. The last model's answer is checked against onnxruntime, so the loop
    compiled real models. About 45 s of CPU time."""
    out = subprocess.run([sys.executable, "-c", _COMPILE_MANY, "300", "50"], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    rss = got["rss"]
    assert None not in rss, "no /proc/self/status on this system"
    assert max(rss) - rss[0] <= 3 * MiB, f"grew {(max(rss) - rss[0]) / MiB:.1f} MiB after warm-up"
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    session = ort.InferenceSession(bytes.fromhex(got["last"]), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(np.array(got["y"], np.float32), session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_dropped_model_frees_its_native_code_at_once():
    """The JIT engine (and the code it mapped) goes with the last reference to the model,
    without waiting for the cyclic collector: the engine's object-cache callback used to
    refer back to the model."""
    x = np.ones((1, 8), np.float32)
    model = hobbit.compile(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"]), threads=1,
                           cache=False)
    np.testing.assert_array_equal(model.run({"x": x})[0], x)
    engine = weakref.ref(model._engine)
    gc.disable()
    try:
        del model
        assert engine() is None
    finally:
        gc.enable()
