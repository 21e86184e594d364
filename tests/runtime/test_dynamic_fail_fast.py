"""A model whose run-time dims reach a kernel compiled for static shapes only is refused after the
import at the bound and one probe, not after every probe (hobbit.dynamic_compile._check_moved):
each import costs about a second for BERT-sized models. The reason and the per-shape fallback
are the ones the full check gives."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
from hobbit.frontend.onnx.source import OnnxSource
from tests.helpers import run_ort


def _relu_top_k(shape) -> onnx.ModelProto:
    """Relu (follows run-time dims), then TopK over the last axis (its kernel does not)."""
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("TopK", ["r", "k"], ["v", "i"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)], [k])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def imports(monkeypatch) -> list:
    """The input shapes of every import hobbit.compile makes."""
    seen = []
    original = OnnxSource.import_graph

    def counted(self, input_shapes=None, input_values=None):
        seen.append(dict(input_shapes or {}))
        return original(self, input_shapes, input_values)

    monkeypatch.setattr(OnnxSource, "import_graph", counted)
    return seen


@pytest.mark.parametrize("shape, dynamic_shapes, count", [
    # the first try without sizes, the bound, one probe (not 2 per symbol + 1)
    ((1, "seq", 8), {"seq": (1, 32)}, 3),
    # both symbols at once (bound + 1 probe), the batch analysis (2), then per sample (bound + 1 probe)
    (("batch", "seq", 8), {"batch": (1, 4), "seq": (1, 32)}, 7),
])
def test_a_static_kernel_refuses_after_one_probe(imports, shape, dynamic_shapes, count):
    model = _relu_top_k(shape)
    compiled = hobbit.compile(model, cache=False, dynamic_shapes=dynamic_shapes)
    assert type(compiled).__name__ == "SpecializingModel"
    assert compiled.reason.endswith("(TopK): its kernel (TopK) is compiled for static shapes only")
    assert len(imports) == count, imports
    x = np.random.default_rng(0).standard_normal((1, 5, 8)).astype(np.float32)
    for got, want in zip(compiled.run({"x": x}), run_ort(model, {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_a_model_that_runs_its_dims_still_imports_every_probe(imports):
    model = _relu_top_k((1, "seq", 8))
    model.graph.node.pop()
    model.graph.output[0].name = "r"
    model.graph.output.pop()
    compiled = hobbit.compile(model, cache=False, dynamic_shapes={"seq": (1, 32)})
    assert type(compiled).__name__ == "DynamicModel"
    assert len(imports) == 4  # the first try, the bound and two probes
