"""Integer Div and Mod by zero (hobbit/backend/cpu/divisor.py): onnxruntime refuses such a run, so
hobbit raises a RunError naming the node instead of answering 0; a constant divisor holding 0
is refused at compile time. Divisors without a 0 still give onnxruntime's answers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ModelFormatError, RunError
from tests.helpers import assert_matches_ort, make_model

CASES = [("Div", {}), ("Mod", {}), ("Mod", {"fmod": 1})]
DTYPES = [np.int32, np.int64, np.uint8, np.int8]


def _model(op: str, attrs: dict, a: np.ndarray, b: np.ndarray, constant_divisor: bool = False):
    node = helper.make_node(op, ["a", "b"], ["y"], name="divide", **attrs)
    if constant_divisor:
        return make_model([node], {"a": a}, ["y"], {"b": b})
    return make_model([node], {"a": a, "b": b}, ["y"])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op, attrs", CASES, ids=["Div", "Mod", "Mod-fmod"])
def test_a_zero_divisor_at_run_time_is_a_run_error_naming_the_node(op: str, attrs: dict, dtype) -> None:
    a = np.array([7, 9, 4, 5, 100, 3], dtype)
    model = hobbit.compile(_model(op, attrs, a, a))
    with pytest.raises(RunError, match="node 'divide'.*division by zero"):
        model.run({"a": a, "b": np.array([1, 2, 0, 3, 1, 1], dtype)})
    feeds = {"a": a, "b": np.array([1, 2, 3, 3, 7, 2], dtype)}
    assert_matches_ort(_model(op, attrs, a, a), feeds)


@pytest.mark.parametrize("op, attrs", CASES, ids=["Div", "Mod", "Mod-fmod"])
def test_a_constant_zero_divisor_is_refused_at_compile_time(op: str, attrs: dict) -> None:
    a = np.arange(3, dtype=np.int32)
    with pytest.raises(ModelFormatError, match="node 'divide'.*divisor 'b' holds 0"):
        hobbit.compile(_model(op, attrs, a, np.array([1, 0, 2], np.int32), constant_divisor=True))


def test_float_division_by_zero_is_still_infinity() -> None:
    a = np.array([1.0, -1.0], np.float32)
    assert_matches_ort(_model("Div", {}, a, a), {"a": a, "b": np.zeros(2, np.float32)})
