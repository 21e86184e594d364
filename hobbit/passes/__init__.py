"""The graph pass pipeline: a named, ordered list you can print, reorder and
switch off (API: `compile(..., passes=[...])`, CLI: `--passes` / `--disable`).
Zero-size folding (passes/empty.py) runs before it and
legalisation after it, unconditionally."""

from __future__ import annotations

from typing import Callable

from hobbit.target import Target, host_target, is_gpu
from hobbit.errors import HobbitError
from hobbit.graph.ir import Graph
from hobbit.passes.batchnorm import fold_batchnorm
from hobbit.passes.bf16 import bf16_tile, use_bf16
from hobbit.passes.concat import concat_in_place
from hobbit.passes.dce import eliminate_dead_code
from hobbit.passes.empty import fold_empty
from hobbit.passes.expand_depthwise import fuse_expand_depthwise
from hobbit.passes.fold import fold_constants
from hobbit.passes.fuse import fuse_epilogues
from hobbit.passes.half import widen_half
from hobbit.passes.int8 import lower_int8
from hobbit.passes.layout import choose_layouts
from hobbit.passes.legalize import legalize
from hobbit.passes.loop import run_bodies
from hobbit.passes.pool import fuse_pool
from hobbit.passes.tensor_cores import tensor_cores
from hobbit.passes.transpose import sink_transposes
from hobbit.passes.winograd import use_winograd

Pass = Callable[[Graph, Target], Graph]


def _graph_only(fn: Callable[[Graph], Graph]) -> Pass:
    """Most passes do not depend on the target."""
    return lambda graph, target: fn(graph)


PASSES: dict[str, Pass] = {
    "int8": lower_int8,
    "widen-half": _graph_only(widen_half),
    "dce": _graph_only(eliminate_dead_code),
    "fold": _graph_only(fold_constants),
    "sink-transposes": _graph_only(sink_transposes),
    "fold-batchnorm": _graph_only(fold_batchnorm),
    "winograd": use_winograd,
    "layout": choose_layouts,
    "fuse": _graph_only(fuse_epilogues),
    "fuse-pool": _graph_only(fuse_pool),
    "fuse-depthwise": fuse_expand_depthwise,
    "concat-in-place": _graph_only(concat_in_place),
    "bf16": use_bf16,
    "tf32": tensor_cores("tf32"),
    "gpu-bf16": tensor_cores("bf16"),
    "winograd-bf16": lambda graph, target: use_winograd(graph, target, bf16_tile),
}

DEFAULT_PIPELINE: list[str] = ["int8", "widen-half", "dce", "fold", "sink-transposes", "fold-batchnorm", "winograd",
                               "layout", "fuse", "fuse-pool", "fuse-depthwise", "dce", "concat-in-place"]

# precision="bf16": the GEMM-shaped kernels in bf16 (passes/bf16.py, after the fusions), F(2x2)
# Winograd convs among them; F(4x4) ones stay float32 (hobbit.passes.bf16.bf16_tile).
BF16_PIPELINE: list[str] = ["winograd-bf16" if p == "winograd" else p for p in DEFAULT_PIPELINE]
BF16_PIPELINE.insert(BF16_PIPELINE.index("fuse-depthwise") + 1, "bf16")

# A GPU target: the target-independent graph passes. Winograd, the blocked layouts and the
# pool/depthwise fusions are the CPU's kernels' choices, not the GPU's; in-place Concat
# would hand producers strided slices the GPU kernels do not write.
GPU_PIPELINE: list[str] = ["widen-half", "dce", "fold", "sink-transposes", "fold-batchnorm", "fuse", "dce"]
# schedule="naive" (hobbit.backend.cpu.naive): the CPU pipeline without the choices hobbit's own
# schedules make (Winograd, blocked weight layouts, fused pools and depthwise pairs, in-place
# Concat), so that Conv and MatMul reach the plain loop nests as the model wrote them; int8
# models keep their kernels.
NAIVE_PIPELINE: list[str] = ["int8", "widen-half", "dce", "fold", "sink-transposes", "fold-batchnorm", "fuse", "dce"]
# precision="tf32" or "bf16" (NVIDIA): Conv and MatMul on tensor cores where they pay
# (passes/tensor_cores.py); the pass that marks them, by precision.
TENSOR_CORE_PASS = {"tf32": "tf32", "bf16": "gpu-bf16"}

PRECISIONS = ("fp32", "bf16")
GPU_PRECISIONS = ("fp32", "tf32", "bf16")


def default_pipeline(precision: str = "fp32", target: Target | None = None) -> list[str]:
    """The pipeline `passes=None` means at this precision, for a CPU or (`target`) a GPU."""
    if target is not None and is_gpu(target):
        return GPU_PIPELINE + ([TENSOR_CORE_PASS[precision]] if precision in TENSOR_CORE_PASS else [])
    return list(BF16_PIPELINE if precision == "bf16" else DEFAULT_PIPELINE)


def run_pipeline(graph: Graph, pipeline: list[str] | None = None, target: Target | None = None) -> Graph:
    target = target or host_target()
    graph = fold_empty(graph)
    for name in DEFAULT_PIPELINE if pipeline is None else pipeline:
        if name not in PASSES:
            raise HobbitError(f"unknown pass {name!r}; known passes: {', '.join(PASSES)}")
        graph = PASSES[name](graph, target)
    graph = run_bodies(graph, lambda body: run_pipeline(body, pipeline, target))
    return legalize(eliminate_dead_code(graph))
