"""Whole Keras applications, random weights, in every TensorFlow format: hobbit == TensorFlow.

Each model is built once per session (tests/frontend/tf/models.py: BatchNorm statistics
calibrated so activations stay near unit scale) and written as a SavedModel, a frozen
GraphDef, a .keras file and a float .tflite. `hobbit.compile(path)` must then match
Keras's own output (TFLite's interpreter's for the .tflite file) at rtol 1e-3, with an
atol of 1e-4 of the output's largest magnitude: the fixture checks that this scale is
far from zero, so a near-zero output cannot pass by accident. And the layout pass must
leave no Transpose inside the network, only the NHWC<->NCHW conversions at its inputs
and outputs."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import hobbit
from hobbit.graph.ir import Graph, Node
from hobbit.passes import DEFAULT_PIPELINE
from tests.frontend.tf import models

pytestmark = pytest.mark.slow

FORMATS = ["savedmodel", "graphdef", "keras", "tflite"]
APPS = list(models.RECIPES)

RTOL = 1e-3
ATOL_OF_SCALE = 1e-4
# TFLite's interpreter (XNNPACK) sums in another order than TensorFlow's kernels; measured
# 1e-6 (ConvNeXtTiny) to 6e-5 (EfficientNetB0) of the output's scale.
TFLITE_OF_SCALE = 1e-4


def _apps_in_test_order(session: pytest.Session) -> list[str]:
    """The applications the selected tests parametrize over, in the order they run."""
    names = [item.callspec.params.get("name") for item in session.items if hasattr(item, "callspec")]
    return list(dict.fromkeys(name for name in names if name in models.RECIPES))


@pytest.fixture(scope="session")
def saved_apps(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], models.SavedApp]]:
    """`name` -> its SavedApp. One worker process builds and writes the models from the start
    of the session, in the order the tests use them: TensorFlow's tracing and conversion (a
    third of this file's time) overlap hobbit's compiles on the other core, and this
    process never holds a Keras model. Spawned, not forked: TensorFlow's threads do not
    survive a fork."""
    root = tmp_path_factory.mktemp("keras-apps")
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        built = {}

        def get(name: str) -> models.SavedApp:
            if name not in built:
                built[name] = pool.submit(models.save_app, name, root / name)
            return built[name].result()

        for name in _apps_in_test_order(request.session):
            built[name] = pool.submit(models.save_app, name, root / name)
        yield get
        pool.shutdown(cancel_futures=True)


def _scale(output: np.ndarray) -> float:
    return float(np.max(np.abs(output)))


def _structural(op: str) -> bool:
    """Whether an op's work depends on the layout (what a Transpose inside the network sits
    between), as opposed to element-wise ops and padding."""
    return op.startswith(("Conv", "ExpandDepthwise", "MatMul", "Gemm", "Reduce", "Concat", "Softmax",
                          "Transpose")) or "Pool" in op


def _inner_transposes(graph: Graph) -> list[str]:
    """The Transposes with a structural op both above and below them. The boundary
    conversions may sit below element-wise ops or a Pad on the raw input (ResNet's
    ZeroPadding2D) or above such ops on an output: still one conversion per tensor."""
    readers: dict[int, list[Node]] = {}
    for node in graph.nodes:
        for value in node.operands():
            readers.setdefault(id(value), []).append(node)

    def reaches(start: Node, step: Callable[[Node], list[Node]]) -> bool:
        seen, todo = set(), step(start)
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if _structural(node.op):
                return True
            todo.extend(step(node))
        return False

    def above(node: Node) -> list[Node]:
        return [v.producer for v in node.operands() if v.producer is not None]

    def below(node: Node) -> list[Node]:
        return [r for v in node.outputs for r in readers.get(id(v), [])]

    return [f"{node.name} {node.attrs.get('perm')} on {node.inputs[0].shape}" for node in graph.nodes
            if node.op == "Transpose" and reaches(node, above) and reaches(node, below)]


def _check_layout(graph: Graph) -> None:
    transposes = [node for node in graph.nodes if node.op == "Transpose"]
    assert len(transposes) <= len(graph.inputs) + len(graph.outputs), [n.name for n in transposes]
    assert _inner_transposes(graph) == []


def _compile_and_run(path: Path, image: np.ndarray, size: int) -> tuple[np.ndarray, Graph]:
    """hobbit's output on `image` and the compiled graph. The model (its JIT'd code) is gone
    before the caller asserts anything: a failing test's traceback would keep it alive for
    the rest of the session."""
    model = hobbit.compile(path)
    (spec,) = model.inputs
    assert tuple(spec.shape)[1:] == (size, size, 3), spec
    got = model.run({spec.name: image})
    assert len(got) == 1
    return got[0], model.report.graph


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", APPS)
def test_matches_tensorflow(saved_apps, name, fmt):
    app = saved_apps(name)
    got, graph = _compile_and_run(app.paths[fmt], app.image, models.RECIPES[name].size)
    want = app.reference(fmt)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL_OF_SCALE * _scale(want))
    _check_layout(graph)


@pytest.mark.parametrize("name", APPS)
def test_model_is_sane(saved_apps, name):
    """The reference itself: finite, near unit scale, and TFLite's conversion faithful (after
    the parity tests, which would wait for the builds here otherwise)."""
    app = saved_apps(name)
    assert np.isfinite(app.expected).all()
    assert 0.1 <= float(app.expected.std()) <= 100, f"{name}: output std {app.expected.std()}"
    assert set(app.paths) == set(FORMATS) and all(path.exists() for path in app.paths.values())
    assert (app.paths["savedmodel"] / "saved_model.pb").is_file()
    np.testing.assert_allclose(app.expected_tflite, app.expected, rtol=1e-4,
                               atol=TFLITE_OF_SCALE * _scale(app.expected))


def test_layout_check_sees_transposes_left_inside(saved_apps):
    """The layout check above can fail: without sink-transposes, the Transposes the
    converters put around each NHWC op stay inside the network."""
    app = saved_apps("small_cnn")
    model = hobbit.compile(app.paths["graphdef"], passes=[p for p in DEFAULT_PIPELINE if p != "sink-transposes"])
    (spec,) = model.inputs
    np.testing.assert_allclose(model.run({spec.name: app.image})[0], app.expected, rtol=RTOL,
                               atol=ATOL_OF_SCALE * _scale(app.expected))
    assert _inner_transposes(model.report.graph)
