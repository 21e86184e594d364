"""Polly on the loop nests hobbit lowers generically, and hobbit's tiled transposes against it:
the figures behind BENCHMARKS.md's "one long-tail kernel Polly did beat" (issue 31).

    python scripts/polly_long_tail.py --runs 30 --threads 1,2

Two tables, each A/B in one process (every variant of a case built first, then timed in
alternating runs; medians):
- long tail: one-op models of ops without a tuned kernel (reductions off the last axis, a 3-D
  conv, CumSum, Softmax over a middle axis, Resize, InstanceNormalization, ConvTranspose, a
  transpose) compiled as usual, and with loops="polly" / "polly-early" (hobbit.backend.polly);
- transposes: the copy untiled (the plain nest hobbit had before), tiled (hobbit.backend.cpu.copy
  now), and untiled through Polly. Every output is checked (numpy for the transposes, the usual
  build for the long tail)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from unittest import mock

import numpy as np
import onnx
from onnx import helper, numpy_helper

import hobbit
from hobbit.backend.cpu import copy

LOOPS = ("llvm", "polly", "polly-early")
TRANSPOSES = [((1024, 1024), (1, 0)), ((256, 4096), (1, 0)), ((1, 56, 56, 64), (0, 3, 1, 2)),
              ((1, 28, 28, 256), (0, 3, 1, 2)), ((64, 128, 64), (2, 0, 1)), ((8, 64, 64, 64), (0, 3, 2, 1)),
              ((1, 64, 56, 56), (0, 2, 3, 1)), ((1, 12, 128, 64), (0, 1, 3, 2))]


def one_op(op: str, x_shape: tuple[int, ...], constants: dict[str, np.ndarray], inputs: list[str],
           **attrs: object) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model of one `op` on input x (N(0, 1) floats) and `constants`, `inputs` in the op's order."""
    x = np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], **attrs)], op,
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), {"x": x}


def long_tail() -> dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(1)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    axes = lambda *a: np.array(a, np.int64)  # noqa: E731
    return {
        "ReduceSum axis 0 of 512x1024": one_op("ReduceSum", (512, 1024), {"a": axes(0)}, ["x", "a"], keepdims=0),
        "ReduceMax axis 1 of 64x256x64": one_op("ReduceMax", (64, 256, 64), {"a": axes(1)}, ["x", "a"], keepdims=0),
        "Conv 3-D 1x8x16x32x32, 16 3x3x3": one_op("Conv", (1, 8, 16, 32, 32), {"w": w(16, 8, 3, 3, 3)}, ["x", "w"],
                                                 pads=[1] * 6),
        "CumSum axis 1 of 256x1024": one_op("CumSum", (256, 1024), {"a": np.array(1, np.int64)}, ["x", "a"]),
        "Softmax axis 1 of 32x512x64": one_op("Softmax", (32, 512, 64), {}, ["x"], axis=1),
        "Resize linear 1x16x64x64 x2": one_op("Resize", (1, 16, 64, 64), {"s": np.array([1, 1, 2, 2], np.float32)},
                                              ["x", "", "s"], mode="linear"),
        "InstanceNorm 4x32x64x64": one_op("InstanceNormalization", (4, 32, 64, 64), {"g": w(32), "b": w(32)},
                                          ["x", "g", "b"]),
        "ConvTranspose 1x16x32x32 s2": one_op("ConvTranspose", (1, 16, 32, 32), {"w": w(16, 8, 3, 3)}, ["x", "w"],
                                              strides=[2, 2]),
        "Transpose 64x128x64 (2,0,1)": one_op("Transpose", (64, 128, 64), {}, ["x"], perm=[2, 0, 1]),
    }


def medians(engines: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median milliseconds of each engine over `runs` alternating runs (one untimed run first)."""
    times: dict[str, list[float]] = {name: [] for name in engines}
    for run in engines.values():
        run()
    for _ in range(runs):
        for name, run in engines.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) * 1e3 for name, t in times.items()}


def long_tail_table(threads: list[int], runs: int) -> str:
    lines = ["| op | threads | hobbit ms | / with Polly | / with Polly early |", "|---|---|---|---|---|"]
    for name, (model, feeds) in long_tail().items():
        for n in threads:
            built = {loops: hobbit.compile(model, threads=n, loops=loops, cache=False) for loops in LOOPS}
            want = built["llvm"].run(feeds)[0]
            for loops, m in built.items():
                np.testing.assert_allclose(m.run(feeds)[0], want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {loops}")
            ms = medians({loops: (lambda m=m: m.run(feeds)) for loops, m in built.items()}, runs)
            lines.append(f"| {name} | {n} | {ms['llvm']:.3f} | {ms['llvm'] / ms['polly']:.2f} | "
                         f"{ms['llvm'] / ms['polly-early']:.2f} |")
    return "\n".join(lines) + "\n"


def transposes_table(threads: list[int], runs: int) -> str:
    lines = ["| shape | perm | threads | untiled ms | tiled ms | untiled + Polly ms | tiled / untiled | tiled / Polly |",
             "|---|---|---|---|---|---|---|---|"]
    for shape, perm in TRANSPOSES:
        model, feeds = one_op("Transpose", shape, {}, ["x"], perm=list(perm))
        want = np.transpose(feeds["x"], perm)
        for n in threads:
            with mock.patch.object(copy, "_tiled_dim", lambda *args: None):
                untiled = hobbit.compile(model, threads=n, cache=False)
                polly = hobbit.compile(model, threads=n, loops="polly", cache=False)
            tiled = hobbit.compile(model, threads=n, cache=False)
            built = {"untiled": untiled, "tiled": tiled, "polly": polly}
            for m in built.values():
                np.testing.assert_array_equal(m.run(feeds)[0], want)
            ms = medians({k: (lambda m=m: m.run(feeds)) for k, m in built.items()}, runs)
            lines.append(f"| {'x'.join(map(str, shape))} | {','.join(map(str, perm))} | {n} | {ms['untiled']:.3f} | "
                         f"{ms['tiled']:.3f} | {ms['polly']:.3f} | {ms['tiled'] / ms['untiled']:.2f} | "
                         f"{ms['tiled'] / ms['polly']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", default="1", help="thread counts, e.g. 1,2")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(long_tail_table(threads, args.runs))
    print(transposes_table(threads, args.runs))


if __name__ == "__main__":
    main()
