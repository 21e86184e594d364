"""Element-wise ops over every dtype their ONNX schemas allow: float32, float64,
float16, bfloat16, the integer widths and bool.

One hobbit model per dtype holds all the ops (so the test compiles little); each
output is checked against onnxruntime running that op alone, or against numpy
(in float64, rounded to the dtype) where onnxruntime has no kernel for the dtype
(bfloat16, most of uint16, ...). Inputs are runtime values with odd sizes (37 is
no multiple of any vector width) and a broadcast second operand. Tolerances are
about one ulp of the dtype (16-bit floats compute in float32 and round once)."""

from __future__ import annotations

import warnings
from typing import Callable

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
SIGNED = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UNSIGNED = [np.dtype(t) for t in (np.uint8, np.uint16)]
INTS = SIGNED + UNSIGNED
# (rtol, atol) per float dtype: a few ulps of the dtype, and the float32 polynomials' 1e-6.
TOLERANCE = {np.dtype(np.float32): (2e-5, 1e-6), np.dtype(np.float64): (2e-5, 1e-6),
             np.dtype(np.float16): (2e-3, 1e-4), BF16: (1.6e-2, 1e-3)}
SHAPE, BROADCAST = (3, 37), (37,)
OPSET = 22


def _onnx_type(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _model(nodes: list, inputs: dict[str, np.ndarray], outputs: dict[str, np.dtype], opset: int = OPSET):
    graph = helper.make_graph(
        nodes, "dtypes",
        [helper.make_tensor_value_info(n, _onnx_type(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, _onnx_type(d), None) for n, d in outputs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _ort_or_numpy(node, inputs: dict[str, np.ndarray], out_dtype: np.dtype,
                  numpy_ref: Callable[..., np.ndarray]) -> np.ndarray:
    """onnxruntime's answer for one node, or numpy's where onnxruntime has no kernel."""
    feeds = {n: inputs[n] for n in node.input if n}
    try:
        model = _model([node], feeds, {node.output[0]: out_dtype})
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)[0]
    except Exception:  # noqa: BLE001 - NotImplemented / InvalidGraph: no kernel for this dtype
        with np.errstate(all="ignore"):
            wide = [inputs[n].astype(np.float64) if inputs[n].dtype.kind in "fV" else inputs[n]
                    for n in node.input if n]
            return np.asarray(numpy_ref(*wide)).astype(out_dtype)


def _check(cases: list[tuple], inputs: dict[str, np.ndarray]) -> None:
    """cases: (onnx node, output dtype, numpy reference). Compiles them as one model."""
    model = _model([c[0] for c in cases], inputs, {c[0].output[0]: c[1] for c in cases})
    got = hobbit.compile(model).run(inputs)
    for (node, out_dtype, ref), value in zip(cases, got):
        expected = _ort_or_numpy(node, inputs, out_dtype, ref)
        label = f"{node.op_type} {dict((a.name, helper.get_attribute_value(a)) for a in node.attribute)}"
        assert value.dtype == expected.dtype, label
        assert value.shape == expected.shape, label
        if value.dtype.kind in "fV":
            rtol, atol = TOLERANCE[value.dtype]
            np.testing.assert_allclose(value.astype(np.float64), expected.astype(np.float64),
                                       rtol=rtol, atol=atol, err_msg=label)
        else:
            np.testing.assert_array_equal(value, expected, err_msg=label)


def _floats(dtype: np.dtype, shape: tuple[int, ...], lo: float, hi: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _ints(dtype: np.dtype, shape: tuple[int, ...], lo: int, hi: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _node(op: str, inputs: list[str], name: str, **attrs):
    return helper.make_node(op, inputs, [name], **attrs)


FLOAT_UNARY = [  # op, input name, numpy reference (float64)
    ("Relu", "x", lambda x: np.maximum(x, 0)), ("Neg", "x", np.negative), ("Abs", "x", np.abs),
    ("Sign", "unit", np.sign), ("Floor", "x", np.floor), ("Ceil", "x", np.ceil), ("Round", "x", np.round),
    ("Sqrt", "pos", np.sqrt), ("Log", "pos", np.log), ("Exp", "x", np.exp), ("Reciprocal", "pos", np.reciprocal),
    ("Sigmoid", "x", lambda x: 1 / (1 + np.exp(-x))), ("Tanh", "x", np.tanh),
    ("Sin", "x", np.sin), ("Cos", "x", np.cos), ("Tan", "unit", np.tan), ("Atan", "x", np.arctan),
    ("Asin", "unit", np.arcsin), ("Acos", "unit", np.arccos), ("Sinh", "x", np.sinh), ("Cosh", "x", np.cosh),
    ("Asinh", "x", np.arcsinh), ("Acosh", "big", np.arccosh), ("Atanh", "unit", np.arctanh),
]
FLOAT_BINARY = [
    ("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide),
    ("Max", np.maximum), ("Min", np.minimum), ("Pow", None),
]


def _float_inputs(dtype: np.dtype) -> dict[str, np.ndarray]:
    x = _floats(dtype, SHAPE, -4, 4, 1)
    x.reshape(-1)[:3] = [0, np.nan, np.inf]  # special values ride along in every op
    return {"x": x, "pos": _floats(dtype, SHAPE, 0.05, 8, 2), "unit": _floats(dtype, SHAPE, -0.95, 0.95, 3),
            "big": _floats(dtype, SHAPE, 1, 9, 4), "y": _floats(dtype, BROADCAST, 0.5, 3, 5),
            "c": np.random.default_rng(6).random(BROADCAST) < 0.5}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_float_ops_match_reference(dtype):
    inputs = _float_inputs(dtype)
    cases = [(_node(op, [name], f"{op}_out"), dtype, ref) for op, name, ref in FLOAT_UNARY]
    for op, ref in FLOAT_BINARY:
        base = "pos" if op == "Pow" else "x"
        cases.append((_node(op, [base, "y"], f"{op}_out"), dtype, ref or np.power))
    cases += [
        (_node("Mod", ["x", "y"], "fmod_out", fmod=1), dtype, np.fmod),
        (_node("Mod", ["x", "y"], "mod_out", fmod=0), dtype, np.mod),
        (_node("Where", ["c", "x", "y"], "where_out"), dtype, np.where),
        (_node("Equal", ["x", "x"], "eq_out"), np.dtype(bool), np.equal),
        (_node("Less", ["x", "y"], "lt_out"), np.dtype(bool), np.less),
        (_node("Greater", ["x", "y"], "gt_out"), np.dtype(bool), np.greater),
        (_node("IsNaN", ["x"], "isnan_out"), np.dtype(bool), np.isnan),
        (_node("IsInf", ["x"], "isinf_out"), np.dtype(bool), np.isinf),
    ]
    _check(cases, inputs)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_integer_ops_match_reference(dtype):
    lo = 0 if dtype.kind == "u" else -50
    nonzero = _ints(dtype, BROADCAST, 1, 9, 2)
    if dtype.kind == "i":
        nonzero[::2] *= -1
    inputs = {"x": _ints(dtype, SHAPE, lo, 50, 1), "y": nonzero,
              "e": _ints(dtype, BROADCAST, 0, 4, 3), "s": _ints(dtype, BROADCAST, 0, 3, 4),
              "c": np.random.default_rng(5).random(BROADCAST) < 0.5}
    cases = [(_node(op, ["x", "y"], f"{op}_out"), dtype, ref) for op, ref in
             (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Max", np.maximum),
              ("Min", np.minimum), ("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
              ("BitwiseXor", np.bitwise_xor))]
    cases += [
        (_node("Div", ["x", "y"], "div_out"), dtype, lambda a, b: np.trunc(a / b)),
        (_node("Mod", ["x", "y"], "fmod_out", fmod=1), dtype, np.fmod),
        (_node("Mod", ["x", "y"], "mod_out", fmod=0), dtype, np.mod),
        (_node("Abs", ["x"], "abs_out"), dtype, np.abs),
        (_node("Sign", ["x"], "sign_out"), dtype, np.sign),
        (_node("BitwiseNot", ["x"], "not_out"), dtype, np.invert),
        (_node("Clip", ["x", "", "y"], "clip_out"), dtype, np.minimum),
        (_node("Where", ["c", "x", "y"], "where_out"), dtype, np.where),
        (_node("Equal", ["x", "y"], "eq_out"), np.dtype(bool), np.equal),
        (_node("Less", ["x", "y"], "lt_out"), np.dtype(bool), np.less),
    ]
    if dtype.kind == "u":  # signed BitShift needs opset 28: test_signed_bit_shift
        cases += [(_node("BitShift", ["x", "s"], "shl_out", direction="LEFT"), dtype, np.left_shift),
                  (_node("BitShift", ["x", "s"], "shr_out", direction="RIGHT"), dtype, np.right_shift)]
    if dtype.kind == "i":
        cases += [(_node("Neg", ["x"], "neg_out"), dtype, np.negative),
                  (_node("Relu", ["x"], "relu_out"), dtype, lambda a: np.maximum(a, 0))]
    if dtype.itemsize >= 4:
        cases.append((_node("Pow", ["x", "e"], "pow_out"), dtype, np.power))
    _check(cases, inputs)


@pytest.mark.parametrize("dtype", SIGNED, ids=lambda d: d.name)
def test_signed_bit_shift(dtype):
    """Opset 28: arithmetic right shift; amounts < 0 or >= bits shift everything out."""
    bits = dtype.itemsize * 8
    x = np.array([-7, 5, -1, 3, -128, 100, 1, -2, 9], dtype)
    s = np.array([1, 2, bits, bits + 3, -1, 0, bits - 1, 3, -5], dtype)
    left = np.where((s >= 0) & (s < bits), np.left_shift(x, np.clip(s, 0, bits - 1)), 0).astype(dtype)
    right = np.where((s >= 0) & (s < bits), np.right_shift(x, np.clip(s, 0, bits - 1)),
                     np.where(x < 0, -1, 0)).astype(dtype)
    model = _model([_node("BitShift", ["x", "s"], "l", direction="LEFT"),
                    _node("BitShift", ["x", "s"], "r", direction="RIGHT")], {"x": x, "s": s},
                   {"l": dtype, "r": dtype}, opset=28)
    got_left, got_right = hobbit.compile(model).run({"x": x, "s": s})
    np.testing.assert_array_equal(got_left, left)
    np.testing.assert_array_equal(got_right, right)


CAST_DTYPES = FLOATS + INTS + [np.dtype(bool)]


@pytest.mark.parametrize("src", CAST_DTYPES, ids=lambda d: d.name)
def test_cast_between_all_dtypes(src):
    """Values in [0, 120) with fractions fit every target; 16-bit targets round to nearest even."""
    if src.kind in "fV":
        x = _floats(src, SHAPE, 0, 120, 7)
        x.reshape(-1)[:2] = [0.0, 0.5]
    elif src.kind == "b":
        x = np.random.default_rng(7).random(SHAPE) < 0.5
    else:
        x = _ints(src, SHAPE, 0, 120, 7)
    cases = [(_node("Cast", ["x"], f"to_{dst.name}", to=_onnx_type(dst)), dst, lambda a, d=dst: a.astype(d))
             for dst in CAST_DTYPES if dst != src]
    _check(cases, {"x": x})


@pytest.mark.parametrize("dst", [np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.uint8)], ids=lambda d: d.name)
def test_out_of_range_float_to_int_folds_as_it_runs(dst):
    """Float -> int of infinities, NaN and out-of-range values is undefined in ONNX (onnxruntime
    gives x86's INT_MIN): hobbit saturates, NaN -> 0 (llvm.fpto[su]i.sat), and a Cast of a
    constant, folded at compile time, gives what the same Cast of an input gives at run time,
    without numpy's invalid-value warning."""
    x = np.array([np.inf, -np.inf, np.nan, 3.7, -3.7, 1e30, -1e30, 2.0 ** 63], np.float32)
    info = np.iinfo(dst)
    expected = np.array([info.max, info.min, 0, 3, max(-3, info.min), info.max, info.min, info.max], dst)
    nodes = [_node("Cast", ["x"], "run", to=_onnx_type(dst)), _node("Cast", ["c"], "folded", to=_onnx_type(dst))]
    graph = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(n, _onnx_type(dst), None) for n in ("run", "folded")],
                              [numpy_helper.from_array(x, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compiled = hobbit.compile(model)
    assert "Cast" not in [n.op for n in compiled.report.graph.nodes if n.outputs[0].name == "folded"]
    run, folded = compiled.run({"x": x})
    np.testing.assert_array_equal(run, expected)
    np.testing.assert_array_equal(folded, expected)


def test_bfloat16_rounds_to_nearest_even_like_onnxruntime():
    """Halfway float32 values (bit 15 set, bits below clear) round to the even bfloat16."""
    bits = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0xBF808000, 0x7F7FFFFF, 0x00008000,
                     0x7FC00001, 0x7F800000, 0x3F80FFFF], dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), _floats(np.dtype(np.float32), (28,), -1e3, 1e3, 8)])
    node = _node("Cast", ["x"], "y", to=TensorProto.BFLOAT16)
    _check([(node, BF16, lambda a: a.astype(np.float32).astype(BF16))], {"x": x})


def test_float16_and_bfloat16_runtime_inputs_are_validated():
    model = _model([_node("Relu", ["x"], "y")], {"x": np.zeros(5, BF16)}, {"y": BF16})
    compiled = hobbit.compile(model)
    with pytest.raises(hobbit.errors.InputError, match="bfloat16"):
        compiled.run({"x": np.zeros(5, np.float16)})
    np.testing.assert_array_equal(compiled.run({"x": np.array([-1, 2, -3, 4, 0], BF16)})[0],
                                  np.array([0, 2, 0, 4, 0], BF16))


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_fused_chain_in_16_bit_floats(dtype):
    """Cast -> Add(broadcast) -> Relu -> Mul -> Sin fuse into one loop that stays in float32
    and rounds once, at the store; the widen-half pass drops the Cast's rounding too, as
    onnxruntime's CPU provider does (it computes the chain in float32 from x)."""
    x = _floats(np.dtype(np.float32), (5, 19), -3, 3, 9)
    y, z = _floats(dtype, (19,), -1, 1, 10), _floats(dtype, (5, 1), 0.5, 2, 11)
    nodes = [_node("Cast", ["x"], "h", to=_onnx_type(dtype)), _node("Add", ["h", "y"], "s"),
             _node("Relu", ["s"], "r"), _node("Mul", ["r", "z"], "m"), _node("Sin", ["m"], "out")]
    got = hobbit.compile(_model(nodes, {"x": x, "y": y, "z": z}, {"out": dtype})).run({"x": x, "y": y, "z": z})[0]
    h = x.astype(np.float64)
    expected = np.sin(np.maximum(h + y.astype(np.float64), 0) * z.astype(np.float64)).astype(dtype)
    rtol, atol = TOLERANCE[dtype]
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
