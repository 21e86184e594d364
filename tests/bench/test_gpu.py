"""The GPU benchmark's parts that need no GPU: the PyTorch interpreter against onnxruntime,
the dry run, and the whole bench loop with PyTorch on the CPU and hobbit's CUDA runtime on
the fake driver (tests/runtime/fake_cuda.py), on small models rather than the zoo."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hobbit.bench.gpu import Row, compare, dry_markdown, dry_run, gpu_missing, main, markdown, run_bench
from hobbit.bench.torch import TorchGraph
from hobbit.errors import UnsupportedModelError
from tests.helpers import make_model, rand, run_ort
from tests.runtime import fake_cuda, fake_hip

torch = pytest.importorskip("torch")


def small_cnn(batch: int = 1):
    """Every op the zoo uses (and a few more), with the variants: asymmetric pads, groups,
    dilation, ceil_mode, uncounted pads, Clip bounds as inputs, Reshape with 0 and -1."""
    c = lambda *shape: rand(*shape, seed=sum(shape))  # noqa: E731
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Conv", ["mp", "w2"], ["c2"], group=2, kernel_shape=[1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["cl"]),
        helper.make_node("Add", ["cl", "mp"], ["a"]),
        helper.make_node("AveragePool", ["a"], ["ap"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Concat", ["ap", "ap"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1, alpha=0.5),
        helper.make_node("Reshape", ["logits", "shape"], ["rs"]),
        helper.make_node("ReduceMean", ["rs"], ["rm"], axes=[2], keepdims=0),
        helper.make_node("MatMul", ["rm", "wm"], ["y"]),
    ]
    weights = {"w1": c(8, 3, 3, 3), "b1": c(8), "g": np.abs(c(8)) + 0.5, "beta": c(8), "mean": c(8),
               "var": np.abs(c(8)) + 0.5, "w2": c(8, 4, 1, 1), "lo": np.array(-0.5, np.float32),
               "hi": np.array(0.75, np.float32), "wf": c(6, 16), "bf": c(6), "shape": np.array([0, 2, -1]),
               "wm": c(2, 5)}
    return make_model(nodes, {"x": rand(batch, 3, 11, 13)}, ["y"], weights)


def elementwise_model():
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Mul", ["r", "x"], ["y"])]
    return make_model(nodes, {"x": rand(1, 40)}, ["y"], {"b": rand(40, seed=1)})


def test_torch_interpreter_matches_onnxruntime() -> None:
    model, x = small_cnn(2), rand(2, 3, 11, 13, seed=3)
    with torch.inference_mode():
        got = TorchGraph(model)(torch.from_numpy(x))[0].numpy()
    want = run_ort(model, {"x": x})[0]
    assert got.shape == want.shape == (2, 5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_torch_interpreter_names_what_it_lacks() -> None:
    model = make_model([helper.make_node("LRN", ["x"], ["y"], size=3)], {"x": rand(1, 4, 5, 5)}, ["y"])
    with pytest.raises(UnsupportedModelError, match="LRN.*torch baseline"):
        TorchGraph(model)


def test_bench_loop_on_the_fake_driver(monkeypatch) -> None:
    driver = fake_cuda.install(monkeypatch)
    lines = []
    rows = run_bench({"ew": elementwise_model, "cnn": small_cnn}, [1, 3], device="cpu", runs=4, warmup=1,
                     seconds=0.5, show=lines.append)
    assert [(r.model, r.batch) for r in rows] == [("ew", 1), ("cnn", 1), ("ew", 3), ("cnn", 3)]
    for row in rows:
        assert len(row.torch_ms) >= 3 and row.torch_ok, row
        if row.model == "ew":
            assert row.ok and row.error < 1e-6 and len(row.hobbit_ms) >= 3 and row.kernels == 1
        else:  # hobbit compiles it for cuda once its kernels exist; till then the row says why not
            assert row.ok or "unsupported" in row.note, row
    assert "cuGraphLaunch" in driver.names() and not driver.memory  # every model closed
    table = markdown(rows)
    assert table.count("\n| ew |") == 2 and "hobbit/eager" in table and len(lines) == 4


def test_bench_for_rocm_on_the_fake_hip_driver(monkeypatch) -> None:
    """--target rocm:<arch>: hobbit's rows compiled for AMD and run through the HIP runtime,
    checked against the CPU reference like CUDA's; a GPU is found through HIP's driver."""
    driver = fake_hip.install(monkeypatch)
    rows = run_bench({"ew": elementwise_model}, [2], device="cpu", runs=3, warmup=1, seconds=0.2,
                     target="rocm:gfx942")
    [row] = rows
    assert row.ok and row.error < 1e-6 and len(row.hobbit_ms) >= 3 and row.kernels == 1
    assert "hipModuleLaunchKernel" in driver.names() or "hipGraphLaunch" in driver.names()
    assert gpu_missing("rocm:gfx942") == "" and dry_run({"ew": elementwise_model}, target="rocm:gfx942")[0][0].kernels == 1


def test_bench_budget_and_failures_are_rows(monkeypatch) -> None:
    fake_cuda.install(monkeypatch)

    def broken():
        raise ValueError("no such model file")
    rows = run_bench({"broken": broken, "ew": elementwise_model}, [1], device="cpu", runs=3, warmup=0,
                     seconds=0.1, budget=0.0)
    assert rows[0].note == "skipped: the 0 s budget was spent"
    rows = run_bench({"broken": broken}, [1], device="cpu")
    assert rows[0].note == "ValueError: no such model file" and "no such model file" in markdown(rows)


def test_dry_run() -> None:
    rows, check = dry_run({"ew": elementwise_model, "cnn": small_cnn})
    assert rows[0].kernels == 1 and rows[0].max_registers > 0 and rows[0].spills == 0
    assert check[0] == "ew" and check[2]
    assert "| ew | 1 |" in dry_markdown(rows)


def test_compare() -> None:
    a = np.ones((2, 3), np.float32)
    assert compare([a], [a + 5e-5]) == pytest.approx((5e-5, True), rel=1e-2)
    assert not compare([a], [a + 1e-2])[1]
    assert compare([a], [a[:1]]) == (float("inf"), False)


def test_without_a_gpu_main_points_to_the_dry_run(capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert main(["--models", "resnet18"]) == 2
    assert "--dry-run" in capsys.readouterr().err
    assert markdown([Row("m", 1, note="x|y")]).endswith("| x\\|y |")


def test_compare_in_tf32() -> None:
    a = np.linspace(-2, 2, 50).astype(np.float32)
    assert compare([a], [a + 9e-3], "tf32")[1] and not compare([a], [a + 2e-2], "tf32")[1]


def test_tf32_bench_on_the_fake_driver(monkeypatch) -> None:
    """precision="tf32": hobbit's tensor-core kernels (the fake driver runs their emulation)
    within TF32's tolerance of hobbit's float32 CPU outputs."""
    fake_cuda.install(monkeypatch)

    def dense():
        nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
        return make_model(nodes, {"x": rand(64, 48)}, ["y"], {"w": rand(48, 96, seed=1)})
    rows = run_bench({"dense": dense}, [1], device="cpu", runs=3, warmup=0, seconds=0.1, precision="tf32")
    assert rows[0].ok and rows[0].torch_ok and 0 < rows[0].error, rows[0]
