"""Property-based tests (hypothesis): random small valid graphs built from element-wise,
convolution, pooling, matmul and shape ops give onnxruntime's answers, and any
(op, dtype) pair either gives the reference's answer or is refused at compile time.

Examples are derandomized so CI sees the same graphs on every run, and bounded in
number and size so the file runs in well under a minute."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import hobbit
from hobbit.errors import HobbitError
from tests.helpers import make_model, run_ort

# Conv and MatMul sums of a few dozen float32 products: both engines round differently.
RTOL, ATOL = 1e-3, 1e-4

_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class _GraphBuilder:
    """Grows a graph one drawn op at a time; every tensor it holds is float32 with a known shape."""

    def __init__(self, draw, shape: tuple[int, ...]):
        self.draw = draw
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple[int, ...]] = {"x": shape}
        self.rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))

    def weight(self, shape: tuple[int, ...], positive: bool = False) -> str:
        name = f"w{len(self.inits)}"
        data = self.rng.standard_normal(shape).astype(np.float32)
        self.inits[name] = np.abs(data) + 0.5 if positive else data
        return name

    def add(self, op: str, inputs: list[str], shape: tuple[int, ...], **attrs) -> str:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{len(self.nodes)}", **attrs))
        self.shapes[out] = shape
        return out

    def step(self, src: str) -> str:
        shape = self.shapes[src]
        choices = ["unary", "binary", "transpose", "slice", "concat"]
        if len(shape) == 4:
            choices += ["conv", "conv", "pool", "global_pool", "flatten"]
        if len(shape) == 2:
            choices += ["matmul", "matmul", "gemm", "softmax"]
        return getattr(self, "_" + self.draw(st.sampled_from(choices)))(src, shape)

    def _unary(self, src: str, shape: tuple[int, ...]) -> str:
        op = self.draw(st.sampled_from(["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "LeakyRelu", "Elu",
                                        "HardSigmoid", "Softplus", "Clip"]))
        if op == "Clip":
            self.inits.setdefault("lo", np.float32(-0.5))
            self.inits.setdefault("hi", np.float32(0.7))
            return self.add(op, [src, "lo", "hi"], shape)
        return self.add(op, [src], shape)

    def _binary(self, src: str, shape: tuple[int, ...]) -> str:
        op = self.draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min"]))
        same = [name for name, s in self.shapes.items() if s == shape and name != src]
        kinds = ["full", "scalar", "last"] + (["channel"] if len(shape) == 4 else []) + (["tensor"] if same else [])
        kind = self.draw(st.sampled_from(kinds))
        if kind == "tensor" and op != "Div":
            other = self.draw(st.sampled_from(same))
        else:
            operand = {"full": shape, "scalar": (), "last": shape[-1:], "tensor": shape,
                       "channel": (shape[1], 1, 1)}[kind]
            other = self.weight(operand, positive=op == "Div")
        inputs = [other, src] if self.draw(st.booleans()) and op != "Div" else [src, other]
        return self.add(op, inputs, shape)

    def _transpose(self, src: str, shape: tuple[int, ...]) -> str:
        perm = self.draw(st.permutations(range(len(shape))))
        return self.add("Transpose", [src], tuple(shape[p] for p in perm), perm=list(perm))

    def _slice(self, src: str, shape: tuple[int, ...]) -> str:
        axis = self.draw(st.integers(0, len(shape) - 1))
        start = self.draw(st.integers(0, shape[axis] - 1))
        end = self.draw(st.integers(start + 1, shape[axis]))
        self.inits[f"s{len(self.nodes)}"] = np.array([start], np.int64)
        self.inits[f"e{len(self.nodes)}"] = np.array([end], np.int64)
        self.inits[f"a{len(self.nodes)}"] = np.array([axis], np.int64)
        n = len(self.nodes)
        out_shape = tuple(end - start if i == axis else d for i, d in enumerate(shape))
        return self.add("Slice", [src, f"s{n}", f"e{n}", f"a{n}"], out_shape)

    def _concat(self, src: str, shape: tuple[int, ...]) -> str:
        axis = self.draw(st.integers(0, len(shape) - 1))
        same = [name for name, s in self.shapes.items() if s == shape]
        other = self.draw(st.sampled_from(same))
        out_shape = tuple(2 * d if i == axis else d for i, d in enumerate(shape))
        return self.add("Concat", [src, other], out_shape, axis=axis)

    def _conv(self, src: str, shape: tuple[int, ...]) -> str:
        n, c, h, w = shape
        k = self.draw(st.integers(1, min(3, h, w)))
        stride = self.draw(st.integers(1, 2))
        pad = self.draw(st.integers(0, k - 1))
        depthwise = c > 1 and self.draw(st.booleans())
        out_c = c if depthwise else self.draw(st.integers(1, 5))
        group = c if depthwise else 1
        inputs = [src, self.weight((out_c, c // group, k, k))]
        if self.draw(st.booleans()):
            inputs.append(self.weight((out_c,)))
        oh, ow = ((d + 2 * pad - k) // stride + 1 for d in (h, w))
        return self.add("Conv", inputs, (n, out_c, oh, ow), kernel_shape=[k, k], strides=[stride, stride],
                        pads=[pad] * 4, group=group)

    def _pool(self, src: str, shape: tuple[int, ...]) -> str:
        n, c, h, w = shape
        op = self.draw(st.sampled_from(["MaxPool", "AveragePool"]))
        k = self.draw(st.integers(1, min(3, h, w)))
        stride = self.draw(st.integers(1, 2))
        pad = self.draw(st.integers(0, k - 1)) if op == "MaxPool" else 0
        oh, ow = ((d + 2 * pad - k) // stride + 1 for d in (h, w))
        return self.add(op, [src], (n, c, oh, ow), kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def _global_pool(self, src: str, shape: tuple[int, ...]) -> str:
        op = self.draw(st.sampled_from(["GlobalAveragePool", "GlobalMaxPool"]))
        return self.add(op, [src], shape[:2] + (1, 1))

    def _flatten(self, src: str, shape: tuple[int, ...]) -> str:
        return self.add("Flatten", [src], (shape[0], int(np.prod(shape[1:]))), axis=1)

    def _matmul(self, src: str, shape: tuple[int, ...]) -> str:
        m = self.draw(st.integers(1, 6))
        if self.draw(st.booleans()):
            return self.add("MatMul", [src, self.weight((shape[1], m))], (shape[0], m))
        return self.add("MatMul", [self.weight((m, shape[0])), src], (m, shape[1]))

    def _gemm(self, src: str, shape: tuple[int, ...]) -> str:
        m = self.draw(st.integers(1, 6))
        trans_b = self.draw(st.integers(0, 1))
        b = self.weight((m, shape[1]) if trans_b else (shape[1], m))
        return self.add("Gemm", [src, b, self.weight((m,))], (shape[0], m), transB=trans_b,
                        alpha=self.draw(st.sampled_from([1.0, 0.5])))

    def _softmax(self, src: str, shape: tuple[int, ...]) -> str:
        return self.add("Softmax", [src], shape, axis=self.draw(st.sampled_from([-1, 0])))


@st.composite
def small_graphs(draw) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(3, 7)), draw(st.integers(3, 7)))
    builder = _GraphBuilder(draw, shape)
    last = "x"
    for _ in range(draw(st.integers(1, 5))):
        last = builder.step(last)
    outputs = [last]
    earlier = [n.output[0] for n in builder.nodes if n.output[0] != last]
    if earlier and draw(st.booleans()):
        outputs.append(draw(st.sampled_from(earlier)))
    x = builder.rng.standard_normal(shape).astype(np.float32)
    return make_model(builder.nodes, {"x": x}, outputs, builder.inits), {"x": x}


@_SETTINGS
@given(small_graphs())
def test_random_graphs_match_onnxruntime(case) -> None:
    model, feeds = case
    note(onnx.printer.to_text(model.graph))
    expected = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


# -- every (op, dtype): the reference's answer, or a compile-time refusal ------------------------

_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
           np.uint32, np.uint64, np.bool_]
_ONNX_TYPE = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in _DTYPES}

# op -> (number of same-typed runtime inputs, attributes, shape of the first input, constant extra inputs)
_OPS = {
    "Relu": (1, {}, (2, 5), {}), "Neg": (1, {}, (2, 5), {}), "Abs": (1, {}, (2, 5), {}),
    "Sigmoid": (1, {}, (2, 5), {}), "Exp": (1, {}, (2, 5), {}), "Sqrt": (1, {}, (2, 5), {}),
    "Floor": (1, {}, (2, 5), {}), "Sign": (1, {}, (2, 5), {}), "Not": (1, {}, (2, 5), {}),
    "Clip": (1, {}, (3, 4), {}), "LeakyRelu": (1, {}, (3, 4), {}),
    "Add": (2, {}, (2, 5), {}), "Sub": (2, {}, (2, 5), {}), "Mul": (2, {}, (2, 5), {}),
    "Div": (2, {}, (2, 5), {}), "Max": (2, {}, (2, 5), {}), "Min": (2, {}, (2, 5), {}),
    "Pow": (2, {}, (2, 5), {}), "Equal": (2, {}, (2, 5), {}), "Less": (2, {}, (2, 5), {}),
    "And": (2, {}, (2, 5), {}), "Mod": (2, {}, (3, 4), {}),
    "MatMul": (2, {}, (4, 4), {}), "Gemm": (2, {}, (4, 4), {}),
    "MaxPool": (1, {"kernel_shape": [2, 2]}, (1, 2, 5, 5), {}),
    "AveragePool": (1, {"kernel_shape": [2, 2]}, (1, 2, 5, 5), {}),
    "GlobalAveragePool": (1, {}, (1, 2, 5, 5), {}),
    "ReduceSum": (1, {"keepdims": 0}, (3, 4), {}), "ReduceMax": (1, {"axes": [1]}, (3, 4), {}),
    "ReduceMean": (1, {"axes": [1]}, (3, 4), {}), "ArgMax": (1, {"axis": 1}, (3, 4), {}),
    "Softmax": (1, {}, (3, 4), {}), "Transpose": (1, {}, (3, 4), {}), "Flatten": (1, {}, (2, 3, 4), {}),
    "Concat": (2, {"axis": 0}, (3, 4), {}), "Cast": (1, {"to": TensorProto.FLOAT}, (3, 4), {}),
    "Gather": (1, {}, (3, 4), {"i": np.array([2, 0], np.int64)}),
    "Slice": (1, {}, (3, 4), {"s": np.array([1], np.int64), "e": np.array([3], np.int64)}),
    "Pad": (1, {}, (3, 4), {"p": np.array([1, 0, 0, 1], np.int64)}),
    "Tile": (1, {}, (3, 4), {"r": np.array([2, 1], np.int64)}),
    "Expand": (1, {}, (3, 4), {"r": np.array([2, 3, 4], np.int64)}),
    "CumSum": (1, {}, (3, 4), {"a": np.array(1, np.int64)}),
    "TopK": (1, {}, (3, 4), {"k": np.array([2], np.int64)}),
    "Where": (2, {}, (2, 5), {}),
}


def _data(shape: tuple[int, ...], dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):  # never zero: Div and Mod by zero are undefined for integers
        values = rng.integers(1, 10, shape)
        if np.issubdtype(dtype, np.signedinteger):
            values *= rng.choice([-1, 1], shape)
        return values.astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _op_model(op: str, dtype) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    count, attrs, shape, extra = _OPS[op]
    rng = np.random.default_rng(0)
    feeds = {name: _data(shape, dtype, rng) for name in ["a", "b"][:count]}
    if op == "Where":
        feeds = {"c": _data(shape, np.bool_, rng), **feeds}
    outputs = ["y", "i"] if op == "TopK" else ["y"]
    attrs = {**attrs, "fmod": int(np.dtype(dtype).kind == "f")} if op == "Mod" else attrs
    node = helper.make_node(op, list(feeds) + list(extra), outputs, name=f"{op.lower()}_node", **attrs)
    graph = helper.make_graph(
        [node], "sweep",
        [helper.make_tensor_value_info(n, _ONNX_TYPE[np.dtype(a.dtype)], a.shape) for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [onnx.numpy_helper.from_array(a, n) for n, a in extra.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's answer; the ONNX reference evaluator's where onnxruntime has no kernel."""
    for engine in (run_ort, _run_onnx_reference):
        try:
            return engine(model, feeds)
        except Exception:  # noqa: BLE001, S112 - NotImplemented / InvalidGraph / TypeError: no kernel for this dtype
            continue
    return None


def _run_onnx_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, feeds)


@_SETTINGS
@given(st.sampled_from(sorted(_OPS)), st.sampled_from(_DTYPES))
def test_any_op_and_dtype_is_right_or_refused_at_compile_time(op: str, dtype) -> None:
    model, feeds = _op_model(op, dtype)
    try:
        compiled = hobbit.compile(model)
    except HobbitError:
        return  # a clear refusal at compile time
    got = compiled.run(feeds)
    expected = _reference(model, feeds)
    if expected is None:
        note(f"neither onnxruntime nor the ONNX reference runs {op} on {np.dtype(dtype).name}")
        return
    tolerance = 1e-2 if dtype == np.float16 else 1e-5
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g.astype(np.float64), np.asarray(e).astype(np.float64),
                                   rtol=tolerance, atol=tolerance)
