"""Helpers for the TensorFlow converter tests: freeze a tf.function to a GraphDef, turn it
into a TFGraph, compile the imported Graph with hobbit's pipeline and compare with
TensorFlow on the same inputs.

The GraphDef -> TFGraph adapter here reads TensorFlow's own parsed proto (through
tensorflow's tensor_util); it stands in for hobbit's GraphDef reader until that lands."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import tensor_util  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from hobbit.codegen.llvm import optimize  # noqa: E402
from hobbit.codegen.module import build_module, pack_weights  # noqa: E402
from hobbit.frontend.tf.convert import import_tf  # noqa: E402
from hobbit.frontend.tf.graph import TensorRef, TFDType, TFGraph, TFNode, TFTensor  # noqa: E402
from hobbit.graph.ir import Graph  # noqa: E402
from hobbit.passes import run_pipeline  # noqa: E402
from hobbit.passes.memory import plan_memory  # noqa: E402
from hobbit.runtime.jit import CompiledModel, TensorSpec  # noqa: E402
from hobbit.target import host_target  # noqa: E402


def _numpy_dtype(enum: int) -> np.dtype | TFDType:
    dtype = tf.dtypes.as_dtype(enum)
    if dtype.is_quantized or dtype.is_complex or dtype in (tf.string, tf.resource, tf.variant):
        return TFDType(enum, dtype.name)
    return np.dtype(dtype.as_numpy_dtype)


def _shape(proto) -> tuple[int | None, ...] | None:
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def _text(data: bytes) -> str | bytes:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def _attr(value):
    kind = value.WhichOneof("value")
    if kind == "list":
        lst = value.list
        for field, convert in (("s", _text), ("i", int), ("f", float), ("b", bool), ("type", _numpy_dtype),
                               ("shape", _shape), ("tensor", tensor_util.MakeNdarray)):
            items = getattr(lst, field)
            if len(items):
                return [convert(v) for v in items]
        return []
    if kind == "s":
        return _text(value.s)
    if kind == "type":
        return _numpy_dtype(value.type)
    if kind == "shape":
        return _shape(value.shape)
    if kind == "tensor":
        if _numpy_dtype(value.tensor.dtype).__class__ is TFDType:
            return None
        return tensor_util.MakeNdarray(value.tensor)
    if kind == "func":
        return value.func.name
    return {"i": int, "f": float, "b": bool}[kind](getattr(value, kind))


def _ref(text: str) -> TensorRef:
    node, _, index = text.partition(":")
    return TensorRef(node, int(index) if index else 0)


def tfgraph_from_graphdef(graph_def, input_names: list[str], output_refs: list[str]) -> TFGraph:
    """A TFGraph of a parsed GraphDef; inputs are Placeholders named by their node, outputs
    are "node:index" tensors named by their node."""
    nodes = {}
    for proto in graph_def.node:
        inputs = [_ref(name) for name in proto.input if not name.startswith("^")]
        nodes[proto.name] = TFNode(proto.name, proto.op, inputs, {k: _attr(v) for k, v in proto.attr.items()})
    inputs = [TFTensor(name, TensorRef(name), nodes[name].attrs.get("dtype"), nodes[name].attrs.get("shape"))
              for name in input_names]
    outputs = [TFTensor(_ref(ref).node, _ref(ref)) for ref in output_refs]
    return TFGraph(nodes, inputs, outputs, "graphdef", "test.pb")


def freeze(fn, *specs: tf.TensorSpec):
    """The frozen GraphDef of tf.function `fn` over inputs `specs`, as a TFGraph, and the
    frozen function (TensorFlow's reference)."""
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    graph_def = frozen.graph.as_graph_def()
    placeholders = [n.name for n in graph_def.node if n.op == "Placeholder"]
    return tfgraph_from_graphdef(graph_def, placeholders, [t.name for t in frozen.outputs]), frozen


def compile_graph(graph: Graph) -> CompiledModel:
    """compile()'s pipeline from an imported Graph: passes, memory plan, LLVM, JIT."""
    target = host_target()
    graph = run_pipeline(graph, None, target)
    plan = plan_memory(graph, target, 1)
    weights = pack_weights(graph, plan)
    optimized = optimize(str(build_module(graph, plan, target, 1, False)), target, 3)
    inputs = [TensorSpec(v.name, tuple(v.shape), np.dtype(v.dtype)) for v in graph.inputs]
    outputs = [TensorSpec(name, tuple(v.shape), np.dtype(v.dtype))
               for name, v in zip(graph.output_names, graph.outputs)]
    return CompiledModel(optimized, target, weights, plan.arena_bytes, inputs, outputs, layout=graph.output_layout)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    """Same shape and dtype; values within rtol, plus an atol scaled to the output's size so
    near-zero entries of a large output cannot fail on rounding (nor pass by accident on an
    all-zero output: the scale is taken from the reference)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5 * max(scale, 1e-3))
    else:
        np.testing.assert_array_equal(got, want)


def check_against_tf(fn, *inputs: np.ndarray, op: str | None = None, rtol: float = 1e-4) -> Graph:
    """Freeze `fn` for the inputs' shapes, check that its GraphDef has a node of `op` (the
    converter under test), compile it with hobbit and compare every output with
    TensorFlow's on the same inputs; returns the imported graph."""
    specs = [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"x{i}") for i, x in enumerate(inputs)]
    graph, frozen = freeze(fn, *specs)
    if op is not None:
        assert op in {node.op for node in graph.nodes.values()}, sorted({n.op for n in graph.nodes.values()})
    want = [np.asarray(w) for w in frozen(*[tf.constant(x) for x in inputs])]
    imported = import_tf(graph)
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    got = compile_graph(imported).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, rtol)
    return imported
