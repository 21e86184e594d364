"""Ops the standard defines as functions import through their body when hobbit has no
converter of its own (or its converter declines an attribute value)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from hobbit.frontend.onnx.importer import import_onnx
from hobbit.frontend.supported import function_ops
from tests.helpers import assert_matches_ort, make_model, rand


def test_selu_has_no_converter_and_imports_through_its_body() -> None:
    assert "Selu" in function_ops()
    x = rand(4, 7)
    model = make_model([helper.make_node("Selu", ["x"], ["y"], alpha=1.5, name="selu")], {"x": x}, ["y"])
    graph = import_onnx(model)
    assert all(node.name.startswith("selu/") for node in graph.nodes), [n.name for n in graph.nodes]
    assert_matches_ort(model, {"x": x})


def test_schema_default_attributes_fill_the_body() -> None:
    """Celu without alpha: the body's reference to alpha takes the schema default (1.0)."""
    x = rand(3, 5) * 3
    assert_matches_ort(make_model([helper.make_node("Celu", ["x"], ["y"])], {"x": x}, ["y"]), {"x": x})


def test_context_dependent_body_with_optional_outputs() -> None:
    """SoftmaxCrossEntropyLoss builds its body from the node's inputs and attributes."""
    scores = rand(4, 5)
    labels = np.array([0, 3, 4, 1], np.int64)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss", "log_prob"],
                            reduction="mean")
    model = make_model([node], {"scores": scores, "labels": labels}, ["loss", "log_prob"], opset=13)
    assert_matches_ort(model, {"scores": scores, "labels": labels})
