"""Reading the per-kernel timings of a model compiled with profile=True."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from hobbit.emit.naming import kernel_name, kernel_nodes
from hobbit.graph.ir import Graph
from hobbit.ops.registry import node_flops


@dataclass(frozen=True)
class KernelTime:
    kernel: str  # generated function, e.g. "Conv+Add+Relu[/layer1/layer1.0/conv2/Conv]"
    nodes: tuple[str, ...]  # the ONNX nodes fused into it
    seconds: float  # median per inference
    flops: int  # a Winograd conv counted as the direct conv it replaces (node_flops)
    executed_flops: int  # what the kernel computes (node_flops(executed=True)): fewer for a Winograd conv

    @property
    def gflops(self) -> float:
        """Direct-conv-equivalent GFLOP/s: comparable across conv algorithms, can pass the FMA peak."""
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def executed_gflops(self) -> float:
        """GFLOP/s of the arithmetic the kernel executes: at most the FMA peak."""
        return self.executed_flops / self.seconds / 1e9 if self.seconds > 0 else 0.0


def kernel_times(graph: Graph, counters_address: int, run, runs: int) -> list[KernelTime]:
    """Call `run()` `runs` times and take each kernel's median time (robust on a busy machine)."""
    kernels = kernel_nodes(graph)
    counters = (ctypes.c_int64 * len(kernels)).from_address(counters_address)
    samples = np.empty((runs, len(kernels)))
    for i in range(runs):
        ctypes.memset(counters, 0, ctypes.sizeof(counters))
        run()
        samples[i] = np.ctypeslib.as_array(counters)
    medians = np.median(samples, axis=0) / 1e9
    return [KernelTime(kernel_name(n), tuple(n.fused_names), float(t), node_flops(n), node_flops(n, executed=True))
            for n, t in zip(kernels, medians)]


PROFILE_HEADER = ("GFLOP/s and %peak count the arithmetic each kernel executes; direct GFLOP/s counts a "
                  "Winograd conv as the direct conv it replaces (comparable across conv algorithms, so it "
                  "can pass the peak; '-' where the two counts are equal)")


def format_profile(times: list[KernelTime], peak_gflops: float | None = None, top: int | None = None) -> str:
    """A table sorted by time: share of the total, ms, executed GFLOP/s, their % of the peak,
    and the direct-conv-equivalent GFLOP/s where it differs (Winograd convs), under a header
    line that says which is which."""
    total = sum(t.seconds for t in times) or 1.0
    rows = sorted(times, key=lambda t: -t.seconds)[:top]
    peak_head = "  %peak" if peak_gflops else ""
    lines = [PROFILE_HEADER, f"{'share':>6} {'ms':>8} {'GFLOP/s':>8}{peak_head} {'direct GFLOP/s':>14}  kernel"]
    for t in rows:
        peak = f"  {100 * t.executed_gflops / peak_gflops:5.1f}" if peak_gflops else ""
        direct = f"{t.gflops:.1f}" if t.flops != t.executed_flops else "-"
        lines.append(f"{100 * t.seconds / total:5.1f}% {t.seconds * 1e3:8.3f} {t.executed_gflops:8.1f}{peak} "
                     f"{direct:>14}  {t.kernel}")
    lines.append(f"total {total * 1e3:.3f} ms in {len(times)} kernels")
    return "\n".join(lines)
