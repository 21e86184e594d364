"""The element-type table is written out (hobbit.frontend.common.dtypes): each entry must be
what the onnx package says of that ONNX number, and each name onnxruntime's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from hobbit.frontend.common.dtypes import ELEMENT_TYPES, tensor_type
from hobbit.frontend.onnx.types import ONNX_DTYPES


@pytest.mark.parametrize("number", sorted(ELEMENT_TYPES))
def test_every_entry_is_onnx_s_own(number: int) -> None:
    name, shown = ELEMENT_TYPES[number]
    assert onnx.TensorProto.DataType.Name(number).lower() == shown
    assert helper.tensor_dtype_to_np_dtype(number) == ONNX_DTYPES[number]
    assert ONNX_DTYPES[number].name == name


def test_bfloat16_is_ml_dtypes_type() -> None:
    assert ONNX_DTYPES[onnx.TensorProto.BFLOAT16] == np.dtype(ml_dtypes.bfloat16)
    assert tensor_type(ml_dtypes.bfloat16) == "tensor(bfloat16)"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.uint8, np.float16])
def test_tensor_type_is_onnxruntime_s_spelling(dtype: type) -> None:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [1])],
                              [helper.make_tensor_value_info("y", elem, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert tensor_type(dtype) == session.get_inputs()[0].type
