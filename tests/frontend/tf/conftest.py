"""Helpers for the TensorFlow converter tests: freeze a tf.function to a GraphDef, read it
with hobbit's GraphDef reader, compile the imported Graph with hobbit's pipeline and
compare with TensorFlow on the same inputs."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from hobbit.backend.llvm import optimize  # noqa: E402
from hobbit.backend.cpu.module import build_module, pack_weights  # noqa: E402
from hobbit.frontend.tf.convert import import_tf  # noqa: E402
from hobbit.frontend.tf.graphdef import read_graphdef  # noqa: E402
from hobbit.graph.ir import Graph  # noqa: E402
from hobbit.passes import run_pipeline  # noqa: E402
from hobbit.passes.memory import plan_memory  # noqa: E402
from hobbit.runtime.jit import CompiledModel, TensorSpec  # noqa: E402
from hobbit.target import host_target  # noqa: E402


def freeze(fn, *specs: tf.TensorSpec):
    """The frozen GraphDef of tf.function `fn` over inputs `specs`, as a TFGraph, and the
    frozen function (TensorFlow's reference)."""
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    data = frozen.graph.as_graph_def().SerializeToString()
    return read_graphdef(data, outputs=[t.name for t in frozen.outputs]), frozen


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
    """Same shape and dtype; values within rtol, plus an atol scaled to the output's magnitude so
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
