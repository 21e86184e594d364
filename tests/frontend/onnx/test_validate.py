"""Malformed models of issue 26 that used to compile, or to fail with a foreign exception,
are refused by hobbit/frontend/onnx/validate.py and the ONNX importer with a ModelFormatError or
UnsupportedModelError (onnxruntime refuses each one too); compile() of something that is not
a model is a ConfigError."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import ConfigError, ModelFormatError, UnsupportedModelError
from tests.helpers import make_model, rand


def _relu() -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], {"x": rand(2)}, ["y"])


def _no_opset() -> onnx.ModelProto:
    model = _relu()
    del model.opset_import[:]
    return model


def _future_ir() -> onnx.ModelProto:
    model = _relu()
    model.ir_version = onnx.IR_VERSION + 1
    return model


def _op_type_not_utf8() -> bytes:
    return _relu().SerializeToString().replace(b"Relu", b"R\xfflu")


def _constant_without_data() -> onnx.ModelProto:
    value = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=[2 ** 30, 2 ** 30])
    return make_model([helper.make_node("Constant", [], ["y"], name="huge", value=value)], {}, ["y"])


MALFORMED = {
    "no opset_import": (_no_opset, ModelFormatError, "opset_import"),
    "ir_version newer than onnx knows": (_future_ir, UnsupportedModelError, f"IR version {onnx.IR_VERSION + 1}"),
    "op_type not UTF-8": (_op_type_not_utf8, ModelFormatError, "not valid UTF-8: b'R\\xfflu'"),
    "constant 2^30 x 2^30 without data": (_constant_without_data, ModelFormatError, "node 'huge' cannot be read"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_model_is_refused(case: str) -> None:
    build, error, words = MALFORMED[case]
    model = build()
    data = model if isinstance(model, bytes) else model.SerializeToString()
    with pytest.raises(Exception):  # the reference refuses it too  # noqa: B017
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    with pytest.raises(error) as info:
        hobbit.compile(model)
    assert words in str(info.value)


@pytest.mark.parametrize("model", [12345, None, [np.zeros(2)]], ids=["int", "None", "list"])
def test_compile_of_something_not_a_model_is_a_config_error(model: object) -> None:
    with pytest.raises(ConfigError, match="must be a path, bytes or an onnx.ModelProto"):
        hobbit.compile(model)
