"""The GPU plan of a depthwise Conv (group == C_in == C_out): each thread computes
`per_thread` outputs next to each other along W of one (n, c) plane, so that the input
columns their windows share are loaded once (4 outputs of a 3x3 stride-1 row read 6
columns, not 12).

Two variants, chosen from the shapes and the target:

- "tiled": a block computes a 2-D tile of one plane's outputs, `row_threads` threads
  across (row_threads * per_thread outputs) by `tile_h` rows. It first stages the
  input tile the windows read, halo and zero padding included, in shared memory, with
  consecutive threads loading consecutive input columns (coalesced); then every tap is
  a shared load with no bounds check. Chosen where an input is read by several windows
  (more taps than the stride skips), the tile fits a quarter of a block's shared memory
  (so that several blocks are resident on an SM) and at least half of the tile's
  threads have an output (planes as small as 7x7 leave most of a tile idle).
- "direct": one group of outputs per thread, flat over [N*C, OH, groups along W],
  taps loaded from global memory with their bounds checked (hobbit.backend.gpu.window); the
  cache catches the windows' overlap. Small planes fill blocks with several channels
  this way, in blocks small enough that there is one for every SM where the layer
  allows."""

from __future__ import annotations

from hobbit.graph.ir import Node
from hobbit.plan.gpu.launch import GpuPlan
from hobbit.target import GpuTarget

OUTPUTS_ALONG_W = 4  # per thread: accumulators + the shared columns stay well inside the register file
MAX_ROW_THREADS = 16  # threads across a tile: 64 outputs wide
BLOCK_THREADS = 256
SHARED_SHARE = 4  # a tile takes at most 1/SHARED_SHARE of a block's shared memory
MIN_TILE_USE = 0.5  # of a tile's outputs, the share inside the plane


def is_depthwise(node: Node) -> bool:
    """A 2-D Conv whose every channel is its own group, with OIHW weights [C, 1, KH, KW]."""
    if node.op != "Conv" or len(node.inputs[0].shape) != 4:
        return False
    c = node.inputs[0].shape[1]
    return (node.attrs["group"] == c == node.outputs[0].shape[1]
            and node.attrs.get("weight_layout", "OIHW") == "OIHW" and len(node.inputs[1].shape) == 4)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _geometry(node: Node) -> tuple[tuple[int, ...], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(output shape, kernel, strides, dilations)."""
    kh, kw = node.inputs[1].shape[2:]
    return tuple(node.outputs[0].shape), (kh, kw), tuple(node.attrs["strides"]), tuple(node.attrs["dilations"])


def input_tile(tile_h: int, tile_w: int, kernel: tuple[int, int], strides: tuple[int, int],
               dilations: tuple[int, int]) -> tuple[int, int]:
    """Rows and columns of the input that a tile of tile_h x tile_w outputs reads."""
    return ((tile_h - 1) * strides[0] + (kernel[0] - 1) * dilations[0] + 1,
            (tile_w - 1) * strides[1] + (kernel[1] - 1) * dilations[1] + 1)


def _tiled(node: Node, target: GpuTarget, per_thread: int) -> GpuPlan | None:
    (n, c, oh, ow), kernel, strides, dilations = _geometry(node)
    if kernel[0] * kernel[1] <= strides[0] * strides[1]:
        return None  # no input is read by two windows: staging it buys nothing
    row_threads = min(MAX_ROW_THREADS, _pow2_at_least(-(-ow // per_thread)))
    tile_h = max(target.warp // row_threads, min(BLOCK_THREADS // row_threads, _pow2_at_least(oh)))
    tile_w = row_threads * per_thread

    def shared_bytes(h: int) -> int:
        rows, cols = input_tile(h, tile_w, kernel, strides, dilations)
        return rows * cols * 4

    budget = target.shared_bytes // SHARED_SHARE
    while shared_bytes(tile_h) > budget and (tile_h // 2) * row_threads >= target.warp:
        tile_h //= 2
    if shared_bytes(tile_h) > budget:
        return None
    tiles_h, tiles_w = -(-oh // tile_h), -(-ow // tile_w)
    if oh * ow < MIN_TILE_USE * tiles_h * tiles_w * tile_h * tile_w:
        return None
    return GpuPlan((n * c * tiles_h * tiles_w, 1, 1), row_threads * tile_h, per_thread,
                   {"variant": "tiled", "tile_h": tile_h, "row_threads": row_threads,
                    "tiles": (tiles_h, tiles_w)})


def depthwise_plan(node: Node, target: GpuTarget) -> GpuPlan:
    """The plan of a depthwise Conv node (is_depthwise) for `target`."""
    (n, c, oh, ow), *_ = _geometry(node)
    per_thread = min(OUTPUTS_ALONG_W, ow)
    tiled = _tiled(node, target, per_thread)
    if tiled is not None:
        return tiled
    groups = n * c * oh * -(-ow // per_thread)
    threads = BLOCK_THREADS
    while threads > target.warp and -(-groups // threads) < target.sms:
        threads //= 2  # smaller blocks, so that a small layer still reaches every SM
    return GpuPlan((-(-groups // threads), 1, 1), threads, per_thread, {"variant": "direct"})
