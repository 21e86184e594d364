"""One small model per GPU kernel family, for the checks that need the real device: the
device tests (tests/runtime/test_cuda_device.py) and one sanitized launch of each family
(compute-sanitizer, scripts/gpu_check.sh through hobbit.bench.gpu_sanitize).

The models are the kernel tests' own builders (tests/backend/gpu/*) at one case each, with
those tests' tolerances, so a family that passes in the grid emulation there is checked
here on the device against the same reference: onnxruntime on the host, on operands rounded
to TF32 / bf16 for the tensor-core families (a product of two rounded values is exact in
float32, so only the order of the sums differs). Each model is chosen to reach the family's
interesting code: shared-memory tiles (GEMM, tensor cores, tiled depthwise), warp and block
reductions (reduce, norm), ragged edges.

    python -m tests.runtime.device_families --list
    python -m tests.runtime.device_families FAMILY    # compile, run once, check; exit 1 if off

The second form is what the sanitizer runs: HOBBIT_CUDA_GRAPH=0 (set here unless given),
so every kernel is its own cuLaunchKernel that compute-sanitizer instruments and reports by
name, rather than one replayed graph. HOBBIT_TEST_FAKE_CUDA=1 runs it on the fake driver
(tests/runtime/fake_cuda.py) so that the CPU-only tests can drive this entry end to end."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from hobbit.errors import ConfigError, HobbitError
from tests.helpers import make_model, rand, run_ort

Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]


@dataclass(frozen=True)
class Family:
    name: str
    build: Callable[[], Case]
    rtol: float
    atol: float
    precision: str = "fp32"
    rounded: frozenset[str] = field(default_factory=frozenset)  # GEMM operands rounded to `precision`
    marker: str = ""  # text the device code must hold (the tensor-core instruction)


def _conv() -> Case:
    from tests.backend.gpu.test_gemm import CONVS, conv_case
    return conv_case(**CONVS["deep_k"])  # several K steps, the last ragged; two row tiles


def _matmul() -> Case:
    from tests.backend.gpu.test_gemm import matmul_case
    return matmul_case(a_shape=(70, 20), b_shape=(20, 130), bias_shape=(70, 1))  # ragged in M and N


def _mma_conv() -> Case:
    from tests.backend.gpu.test_gemm import conv_case
    from tests.backend.gpu.test_mma import MMA_CONVS
    return conv_case(**MMA_CONVS["3x3_pad1_relu"])


def _mma_matmul() -> Case:
    from tests.backend.gpu.test_mma import MATMULS, matmul_case
    return matmul_case(*MATMULS["ragged"], "Relu")


def _depthwise(shape: tuple[int, ...], epilogue: str | None) -> Callable[[], Case]:
    def build() -> Case:
        from tests.backend.gpu.test_depthwise import _model
        return _model(shape, 3, epilogue=epilogue)
    return build


def _pool() -> Case:
    """MaxPool and AveragePool (counting pads, ceil_mode) of one input: two kernels."""
    x = rand(2, 4, 9, 10, seed=1)
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1, ceil_mode=1)]
    return make_model(nodes, {"x": x}, ["m", "a"]), {"x": x}


def _reduce() -> Case:
    """Rows (a long last axis), columns wider than a warp, and an ArgMax with ties."""
    from tests.backend.gpu.test_reduce import reduce_model
    rows, cols = rand(3, 1000, seed=1), rand(2, 300, 1, 70, seed=2)
    ties = np.round(rand(3, 130, 5, seed=5) * 2).astype(np.float32)
    model = reduce_model("ReduceSum", rows, [1], 0)
    nodes = list(model.graph.node) + [
        helper.make_node("ReduceMean", ["c", "axis1"], ["yc"], keepdims=1),
        helper.make_node("ArgMax", ["t"], ["yt"], axis=1, keepdims=0)]
    inits = {"axes": np.array([1], np.int64), "axis1": np.array([1], np.int64)}
    feeds = {"x": rows, "c": cols, "t": ties}
    return make_model(nodes, feeds, ["y", "yc", "yt"], inits, opset=18), feeds


def _norm() -> Case:
    x, r = rand(2, 1000, seed=1) * 4, rand(4, 7, 768, seed=3) + 0.5
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1),
             helper.make_node("LayerNormalization", ["r", "s", "b"], ["z"], axis=-1, epsilon=1e-3)]
    inits = {"s": rand(768, seed=4), "b": rand(768, seed=5)}
    return make_model(nodes, {"x": x, "r": r}, ["y", "z"], inits), {"x": x, "r": r}


def _elementwise() -> Case:
    x = rand(2, 3, 50, 70)
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Tanh", ["r"], ["t"]), helper.make_node("Erf", ["x"], ["e"]),
             helper.make_node("Mul", ["t", "e"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], {"b": rand(3, 1, 1, seed=1)}), {"x": x}


def _tensor() -> Case:
    """Concat of three kernels' outputs and a Transpose: the copy kernels."""
    shapes = [(2, 3, 5, 7), (2, 1, 5, 7), (2, 6, 5, 7)]
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(3)]
    nodes += [helper.make_node("Concat", ["r0", "r1", "r2"], ["y"], axis=1),
              helper.make_node("Transpose", ["y"], ["z"], perm=[0, 2, 3, 1])]
    return make_model(nodes, feeds, ["y", "z"]), feeds


MMA = {"tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
       "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}
FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("gemm_conv", _conv, 1e-4, 1e-4),
    Family("gemm_matmul", _matmul, 1e-4, 1e-4),
    Family("mma_tf32_conv", _mma_conv, 1e-4, 1e-4, "tf32", frozenset({"x", "w"}), MMA["tf32"]),
    Family("mma_bf16_matmul", _mma_matmul, 1e-4, 1e-4, "bf16", frozenset({"a", "b"}), MMA["bf16"]),
    Family("depthwise_tiled", _depthwise((1, 8, 40, 40), "clip"), 1e-5, 1e-5),
    Family("depthwise_direct", _depthwise((2, 6, 7, 7), "clip"), 1e-5, 1e-5),
    Family("pool", _pool, 1e-5, 1e-6),
    Family("reduce", _reduce, 2e-5, 1e-5),
    Family("norm", _norm, 1e-4, 1e-5),
    Family("elementwise", _elementwise, 1e-5, 1e-6),
    Family("tensor", _tensor, 0.0, 0.0),
]}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ConfigError(f"no kernel family {name!r}; there are: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def reference(fam: Family, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs; for a tensor-core family on its GEMM operands rounded as the
    tensor cores read them (tests/backend/gpu/test_mma.py)."""
    if not fam.rounded:
        return run_ort(model, feeds)
    from tests.backend.gpu.test_mma import ROUND, rounded_model
    round_ = ROUND[fam.precision]
    return run_ort(rounded_model(model, set(fam.rounded), fam.precision),
                   {k: round_(v) if k in fam.rounded else v for k, v in feeds.items()})


def mismatches(fam: Family, got: list, want: list[np.ndarray]) -> list[str]:
    """What differs beyond the family's tolerance, one line per output (empty: all agree)."""
    if len(got) != len(want):
        return [f"{len(got)} outputs, expected {len(want)}"]
    out = []
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            out.append(f"output {i}: {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        elif not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=fam.rtol, atol=fam.atol):
            error = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            out.append(f"output {i}: max abs error {error:.3e} (rtol {fam.rtol}, atol {fam.atol})")
    return out


def run_once(name: str, compile_options: dict | None = None) -> list[str]:
    """The family's model compiled for cuda, run once on the device, checked: its mismatches."""
    import hobbit
    fam = family(name)
    model, feeds = fam.build()
    gm = hobbit.compile(model, target="cuda", precision=fam.precision, **(compile_options or {}))
    try:
        if fam.marker and fam.marker not in gm.device_code:
            return [f"no {fam.marker} in the device code"]
        return mismatches(fam, gm.run(feeds), reference(fam, model, feeds))
    finally:
        gm.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--list"]:
        print("\n".join(FAMILIES))
        return 0
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("HOBBIT_CUDA_GRAPH", "0")
    patch = None
    if os.environ.get("HOBBIT_TEST_FAKE_CUDA") == "1":
        import pytest
        from tests.runtime import fake_cuda
        patch = pytest.MonkeyPatch()
        fake_cuda.install(patch)
    try:
        problems = run_once(args[0])
    except HobbitError as exc:  # no device, no driver, a failed launch: this family's run failed
        print(f"{args[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    finally:
        if patch is not None:
            patch.undo()
    for line in problems:
        print(f"{args[0]}: {line}", file=sys.stderr)
    print(f"{args[0]}: {'ok' if not problems else 'MISMATCH'}", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())


def close_to(got, want) -> None:
    """Device outputs against the emulation's (the same kernels): float32 sums in another order."""
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def torch_tensors_in_and_out(compiled, x: np.ndarray) -> None:
    """A GPU model fed a PyTorch device tensor written on a side stream (the run must wait for
    it), its outputs left on the device and read back through __cuda_array_interface__ and
    numpy, then fed through DLPack alone; every answer the emulation's."""
    import torch
    want = compiled.emulate({"x": x})
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        tensor = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
        got = compiled.run({"x": tensor}, device_outputs=True)
    close_to([torch.as_tensor(g, device="cuda").cpu().numpy() for g in got], want)
    close_to([g.numpy() for g in got], want)

    class OnlyDlpack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()
    close_to(compiled.run({"x": OnlyDlpack(torch.from_numpy(x).cuda())}), want)
    compiled.close()
