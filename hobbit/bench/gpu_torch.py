"""PyTorch as the GPU benchmark's baseline: whether it can run here, its precision switches,
and its forward captured in a CUDA graph.

Two PyTorch rows per model: eager (each node one torch.nn.functional call, as a torchvision
module's forward makes them: hobbit.bench.torch) and that same forward captured once with
torch.cuda.CUDAGraph and replayed. The replay is what hobbit does with its own kernels (one
graph launch per run), so it is the baseline without Python's per-op launch overhead, which
at batch 1 is most of eager's time. It is preferred to torch.compile because a capture costs
one extra forward (milliseconds), where torch.compile spends tens of seconds per model and
shape in Dynamo and Triton's autotuning, which the GPU machine's 15 minutes cannot pay for
ten model-batch pairs; torch.compile(mode="reduce-overhead") would itself end in a CUDA graph."""

from __future__ import annotations

from typing import Any, Callable

from hobbit.errors import MissingDependencyError
from hobbit.bench.torch import import_torch


def torch_device() -> tuple[str | None, str]:
    """("cuda", "") where PyTorch can run on a CUDA GPU, else (None, why not): the rows are
    then reported as unavailable rather than failing the benchmark."""
    try:
        torch = import_torch()
    except MissingDependencyError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, f"PyTorch {torch.__version__} sees no CUDA device"
    return "cuda", ""


def set_precision(torch: Any, precision: str) -> None:
    """TF32 in cuDNN's convolutions and in matmuls on for precision "tf32", off for "fp32"
    (so that both engines compute in float32); cuDNN picks its fastest kernel per shape."""
    tf32 = precision == "tf32"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32


def graph_replay(torch: Any, forward: Callable[[], list], warmup: int) -> tuple[Callable[[], list], Any]:
    """`forward` (no synchronisation inside: that is illegal while capturing) captured in a CUDA
    graph: (a step that replays it and synchronises, returning the graph's static outputs; the
    graph, to be dropped once timed). Warm-ups run on a side stream first, as PyTorch asks, so
    that cuDNN's autotuner and the allocator settle before the capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 2)):
            forward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = forward()

    def step() -> list:
        graph.replay()
        torch.cuda.synchronize()
        return outputs
    return step, graph
