"""Per-sample facts (OpDef.per_sample, hobbit/ops/per_sample.py): which ops have one, and
what the predicates answer for batched and shared operands."""

from __future__ import annotations

import numpy as np

from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.per_sample import broadcasting, matmul_per_sample
from hobbit.ops.registry import _REGISTRY, get_op

# Ops without a fact: a batched operand reaching one makes the model compile per batch size.
# Adding an op to the registry means deciding, here, whether it keeps samples independent.
WITHOUT_FACT = {
    "BoundedCompress", "BoundedNonZero", "BoundedCheck", "BoundedConcat", "BoundedGather", "BoundedGatherND",
    "BoundedPad",
    "BitCast", "Col2Im", "ConstantOfShape", "ConvWinograd", "DequantizeLinear", "Det", "ExpandDepthwise",
    "GatherElements", "GatherND", "GridSample", "NonZero", "OneHot", "QuantizeLinear", "Range", "Recurrence",
    "ResizeNearest", "ReverseSequence", "ScatterElements", "ScatterND", "Shape", "Size", "TensorScatter",
    "Trilu", "Unique",
    "BoundedUnique",  # mixes samples, as Unique does
    "BoundedNonMaxSuppression",  # its rows mix the batch's samples, and its bound counts them all
    "RoiAlign",  # each roi reads the image its batch index names
    "BoundedScatterElements",  # writes rows at positions read from data, as ScatterElements does
    "BoundedLoop",  # its body may mix samples, and its iteration count is one for the whole batch
}


def test_every_op_either_has_a_fact_or_is_listed_without_one():
    without = {name for name, op in _REGISTRY.items() if op.per_sample is None}
    assert without == WITHOUT_FACT
    for name in ("Conv", "MatMul", "Softmax", "Reshape", "Add", "Relu", "Gather", "ReduceMean", "Concat"):
        assert get_op(name).per_sample is not None


def _value(name: str, *shape: int) -> Value:
    return Value(name, TensorType(np.dtype(np.float32), shape))


def _node(op: str, inputs: list[Value], out: tuple[int, ...], **attrs) -> Node:
    return Node(op, op.lower(), inputs, [_value("out", *out)], attrs)


def test_broadcasting_needs_batched_operands_to_span_dim_0():
    x, bias, row = _value("x", 4, 3), _value("b", 3), _value("r", 1, 3)
    assert broadcasting(_node("Add", [x, bias], (4, 3)), [True, False])
    assert broadcasting(_node("Add", [x, row], (4, 3)), [True, False])
    assert broadcasting(_node("Add", [x, x], (4, 3)), [True, True])
    same_rows = _value("c", 4, 3)  # a shared table that happens to have the batch's rows
    assert not broadcasting(_node("Add", [x, same_rows], (4, 3)), [True, False])
    low = _value("v", 3)  # a batched vector broadcast against a matrix moves the batch to dim 1
    assert not broadcasting(_node("Add", [low, _value("m", 5, 3)], (5, 3)), [True, False])


def test_matmul_keeps_rows_of_a_or_batch_broadcast_products():
    a, b = _value("a", 4, 5), _value("b", 5, 6)
    assert matmul_per_sample(_node("MatMul", [a, b], (4, 6)), [True, False])
    assert not matmul_per_sample(_node("MatMul", [a, b], (4, 6)), [False, True])
    assert not matmul_per_sample(_node("MatMul", [a, b], (4, 6)), [True, True])
    q, k = _value("q", 4, 2, 5), _value("k", 4, 5, 3)
    assert matmul_per_sample(_node("MatMul", [q, k], (4, 2, 3)), [True, True])
    shared = _value("w", 1, 5, 3)
    assert matmul_per_sample(_node("MatMul", [q, shared], (4, 2, 3)), [True, False])
    assert not matmul_per_sample(_node("MatMul", [q, _value("w4", 4, 5, 3)], (4, 2, 3)), [True, False])


def test_axis_ops_refuse_dim_0():
    x = _value("x", 4, 3)
    softmax = get_op("Softmax").per_sample
    assert softmax(_node("Softmax", [x], (4, 3), axis=1), [True])
    assert not softmax(_node("Softmax", [x], (4, 3), axis=0), [True])
    reduce = get_op("ReduceSum").per_sample
    assert reduce(_node("ReduceSum", [x], (4, 1), axes=(1,), keepdims=1), [True])
    assert not reduce(_node("ReduceSum", [x], (1, 1), axes=(), keepdims=1), [True])
    conv = get_op("Conv").per_sample
    w = _value("w", 2, 3, 1, 1)
    assert conv(_node("Conv", [_value("x", 4, 3, 5, 5), w], (4, 2, 5, 5)), [True, False])
    assert not conv(_node("Conv", [_value("x", 4, 3, 5, 5), w], (4, 2, 5, 5)), [True, True])
