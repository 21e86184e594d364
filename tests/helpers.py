"""Shared test helpers: build small ONNX models and compare hobbit with onnxruntime."""

from __future__ import annotations

import copy
import threading

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import hobbit
from hobbit.target import host_target


def save_dense_relu(path, rows: int, k: int, n: int) -> str:
    """A [rows, k] @ [k, n] MatMul and a Relu, saved at `path`: the model of the scripts' tests."""
    rng = np.random.default_rng(0)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                       {"x": rng.standard_normal((rows, k)).astype(np.float32)}, ["z"],
                       {"w": rng.standard_normal((k, n)).astype(np.float32)})
    onnx.save(model, path)
    return str(path)


def make_model(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
               initializers: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A model whose inputs take the shapes/dtypes (any, bfloat16 included) of the example arrays;
    output shapes are inferred."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def needs_host_feature(feature: str) -> pytest.MarkDecorator:
    """Skip a test that runs code using the CPU feature `feature` (LLVM's name: "avx512bf16")
    where this host lacks it: the code would not compile for the host (precision="bf16" is a
    TargetError without AVX512-BF16) or would die on the instruction. Only the hardware
    decides; on a host with the feature the test runs. What does not need the code to run is
    tested on every host with an explicit target instead (target="znver4")."""
    host = host_target()
    return pytest.mark.skipif(feature not in host.enabled,
                              reason=f"runs code that needs the CPU feature {feature}, which this host "
                                     f"('{host.cpu}') lacks")


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs, with uint8 x int8 products computed exactly on every CPU: its x86
    kernels for those sum pairs of products in int16 (vpmaddubsw) where the CPU lacks VNNI,
    saturating at 32767 (255 * 127 * 2 = 64770: a 1x1 QLinearConv of two such pairs gives 33
    for the exact 65 with y_scale 1000 on AVX2), while its uint8 x uint8 kernels widen to
    int16 first and are exact everywhere. So int8 weights of uint8 activations run as the
    same values in uint8 (w + 128, zero point + 128): (x - xz)(w - wz) is unchanged, and on
    a VNNI CPU, where both kernels are exact, so is the result (exact_u8s8)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    model, feeds = exact_u8s8(model, feeds)
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# op -> (weight input, its zero point, the activation's zero point) of onnxruntime's int8 products
_INT8_PRODUCTS = {"QLinearConv": (3, 5, 2), "QLinearMatMul": (3, 5, 2), "QGemm": (3, 5, 2),
                  "ConvInteger": (1, 3, 2), "MatMulInteger": (1, 3, 2)}
_FLOAT_PRODUCTS = {"Conv", "MatMul", "Gemm"}  # their weight input 1 behind a DequantizeLinear: QDQ


def exact_u8s8(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
               ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """`model` and `feeds` with every int8 weight of a uint8 activation (an initializer or a
    fed input, with its zero point) stored as uint8 (see run_ort), in the QOperator and
    integer ops and behind the DequantizeLinear of QDQ convs and matmuls; the arguments
    themselves when there is none."""
    graph = model.graph
    values = {t.name: t for t in graph.initializer}
    elem = {t.name: t.data_type for t in graph.initializer}
    elem.update((v.name, v.type.tensor_type.elem_type) for v in graph.input)
    for node in graph.node:  # what quantizes at run time: uint8 from DynamicQuantizeLinear, a QuantizeLinear's zero's type
        if node.op_type == "DynamicQuantizeLinear":
            elem[node.output[0]] = elem[node.output[2]] = onnx.TensorProto.UINT8
        elif node.op_type == "QuantizeLinear":
            elem[node.output[0]] = elem.get(node.input[2]) if len(node.input) > 2 else onnx.TensorProto.UINT8
    producer = {out: node for node in graph.node for out in node.output}

    def is_uint8(node: onnx.NodeProto, zero: int, activation: int) -> bool:
        name = node.input[zero] if len(node.input) > zero and node.input[zero] else node.input[activation]
        return elem.get(name) == onnx.TensorProto.UINT8

    def int8_weight(name: str) -> bool:
        return (name in values or name in feeds) and elem.get(name) == onnx.TensorProto.INT8

    # (node index, weight input, zero point input) to store in uint8
    targets = [(i, w, z) for i, node in enumerate(graph.node) if node.op_type in _INT8_PRODUCTS
               for w, z, a in [_INT8_PRODUCTS[node.op_type]]
               if int8_weight(node.input[w]) and is_uint8(node, a, 0)]
    index = {id(node): i for i, node in enumerate(graph.node)}
    for node in graph.node:
        if node.op_type in _FLOAT_PRODUCTS and len(node.input) > 1:
            dq_w, dq_x = producer.get(node.input[1]), producer.get(node.input[0])
            if (dq_w is not None and dq_x is not None and dq_w.op_type == dq_x.op_type == "DequantizeLinear"
                    and int8_weight(dq_w.input[0]) and is_uint8(dq_x, 2, 0)):
                targets.append((index[id(dq_w)], 0, 2))
    if not targets:
        return model, feeds
    model, feeds = copy.deepcopy(model), dict(feeds)
    for i, w, z in targets:
        node = model.graph.node[i]
        while len(node.input) <= z:
            node.input.append("")
        for slot in (w, z):
            old = node.input[slot]
            new = f"{node.input[w]}_as_uint8_{slot}_{i}"
            if old in feeds:
                feeds[new] = (feeds[old].astype(np.int16) + 128).astype(np.uint8)
                model.graph.input.append(helper.make_tensor_value_info(new, onnx.TensorProto.UINT8,
                                                                       feeds[new].shape))
            else:
                array = numpy_helper.to_array(values[old]) if old else np.zeros((), np.int8)
                model.graph.initializer.append(numpy_helper.from_array(
                    (array.astype(np.int16) + 128).astype(np.uint8), new))
            node.input[slot] = new
    used = {name for node in model.graph.node for name in node.input}
    kept = [t for t in model.graph.initializer if t.name in used or t.name not in values]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model, feeds


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                       rtol: float = 1e-4, atol: float = 1e-5) -> list[np.ndarray]:
    """Compile with hobbit, run both, and compare every output (shape, dtype, values)."""
    expected = run_ort(model, feeds)
    got = hobbit.compile(model).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, (g.shape, e.shape)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got


def rand(*shape: int, seed: int = 0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def sample(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    """Small integer-valued data of any dtype (exact in every float format; bools alternate)."""
    values = np.random.default_rng(seed).integers(-60, 60, size=shape)
    if np.dtype(dtype) == np.bool_:
        return values % 2 == 0
    if np.dtype(dtype).kind == "u":
        values = np.abs(values)
    return values.astype(dtype)


def run_hobbit(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
               initializers: dict[str, np.ndarray] | None = None, opset: int = 17) -> list[np.ndarray]:
    """Compile the model of `nodes` with hobbit and run it on `inputs`."""
    return hobbit.compile(make_model(nodes, inputs, outputs, initializers, opset)).run(inputs)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and bits (16-bit floats compare as their bit patterns, bfloat16 included)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.itemsize == 2 and got.dtype.kind not in "iu":
        got, want = got.view(np.uint16), want.view(np.uint16)
    np.testing.assert_array_equal(got, want)


def run_in_four_threads(compiled, model: onnx.ModelProto, feeds: list[np.ndarray], runs: int) -> None:
    """Run `compiled` from 4 threads at once, each on its own input `x`, against onnxruntime."""
    expected = [run_ort(model, {"x": x})[0] for x in feeds]
    failures: list[str] = []
    barrier = threading.Barrier(4)

    def worker(i: int) -> None:
        barrier.wait()
        for _ in range(runs):
            got = compiled.run({"x": feeds[i]})[0]
            if got.shape != expected[i].shape or not np.allclose(got, expected[i], rtol=1e-4, atol=1e-6):
                failures.append(f"thread {i}: {got.shape} vs {expected[i].shape}")
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


# The dtypes data-movement ops (gather, scatter, pad, ...) are checked in: 16-bit floats, wide ints, bool.
BF16 = np.dtype(ml_dtypes.bfloat16)
DATA_DTYPES = [np.float16, BF16, np.float64, np.int8, np.uint16, np.int32, np.uint64, np.bool_]


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def assert_ort_exact(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
                     initializers: dict[str, np.ndarray] | None = None, opset: int = 18, **tol) -> list[np.ndarray]:
    """assert_matches_ort on the model of `nodes`, bit-exact unless a tolerance is given."""
    return assert_matches_ort(make_model(nodes, inputs, outputs, initializers, opset=opset), inputs,
                              **(tol or {"rtol": 0, "atol": 0}))


def bound_inputs(build, feeds: dict[str, np.ndarray], dims: list[int]) -> list[np.ndarray]:
    """A DynamicModel module's inputs (hobbit.runtime.dynamic.Build) with NaN past the extents of
    each bound-shaped buffer, and the dims vector: a kernel that reads past an extent shows."""
    arrays = []
    for spec in build.model.inputs[:-1]:
        padded = np.full(spec.shape, np.nan, np.float32)
        value = feeds[spec.name]
        padded[tuple(slice(0, n) for n in value.shape)] = value
        arrays.append(padded)
    return arrays + [np.array(dims, np.int64)]


def assert_inside_extents(build, model, feeds: dict[str, np.ndarray], dims: list[int], rtol: float,
                          atol: float) -> None:
    """Run a DynamicModel module (hobbit.runtime.dynamic.Build) on bound-shaped inputs with NaN
    past their extents (bound_inputs) and outputs holding a sentinel: inside the extents the
    outputs must be onnxruntime's (garbage read past an input's extent would show), and past
    them the sentinel must survive (nothing written where the caller's array may end)."""
    arrays = bound_inputs(build, feeds, dims)
    outs = [np.full(spec.shape, -7, spec.dtype) for spec in build.model.outputs]
    build.model._call_native(arrays, outs)
    for out, want in zip(outs, run_ort(model, feeds)):
        inside = tuple(slice(0, n) for n in want.shape)
        np.testing.assert_allclose(out[inside], want, rtol=rtol, atol=atol)
        outside = np.ones(out.shape, bool)
        outside[inside] = False
        assert (out[outside] == -7).all()
