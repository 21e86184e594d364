"""The op registry: the one place that says what a graph op is.

An OpDef carries the op's attribute defaults, its type/shape inference, a
numpy reference (used by constant folding and by tests), and the name of the
kernel that implements it. Which code emits that kernel is a backend's business
(hobbit/emit/table.py), so nothing here knows about LLVM.

The table is complete whenever code outside hobbit/ops can call get_op: importing
this module (or any hobbit.ops module) first runs hobbit/ops/__init__.py, which
imports every definition module, and the definition modules only register."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hobbit.graph.ir import Node, TensorType
from hobbit.graph.shapes import Window

Infer = Callable[[Node], list[TensorType]]
Reference = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]


@dataclass
class OpDef:
    name: str
    infer: Infer
    reference: Reference
    # The kernel that implements the op in a backend's table (hobbit/emit/table.py);
    # "" (the default) means the op's own name, None that the op must be folded away
    # at compile time.
    kernel: str | None = ""
    # "elementwise" ops are scalar expressions run by the shared loop emitter and
    # can be fused as epilogues; "view" ops reinterpret their input's memory.
    kind: str = "kernel"
    # For kernels that accept fused epilogues: the index space the kernel hands to
    # its epilogue (innermost dim contiguous), as a function of the node.
    epilogue_view: Callable[[Node], tuple[int, ...]] | None = None
    # Arithmetic work of one node (multiply-add = 2), for GFLOP/s in profiles and
    # benchmarks; None means one flop per output element. For an op that replaces another
    # by a cheaper algorithm (a Winograd conv) it is the replaced op's count, so that GFLOP/s
    # compare across algorithms, and `executed_flops` counts what the kernel really computes.
    flops: Callable[[Node], int] | None = None
    executed_flops: Callable[[Node], int] | None = None  # None: the same as `flops`
    # The lowering reads constant inputs' data into the code (Gather's index table), so
    # nodes that differ only in those values must not share one generated body.
    bakes_constants: bool = False
    # The kernel validates values read at run time (indices, lengths) and reports the first
    # invalid one through a status record, so run() raises instead of answering.
    checks_data: bool = False
    # per_sample(node, batched) -> whether the node keeps samples independent along dim 0,
    # given which inputs carry the batch; None: unknown, so a model where it touches a
    # batched value is compiled per batch size (hobbit/ops/separable.py).
    per_sample: Callable[[Node, list[bool]], bool] | None = None
    # windows(node) -> {axis: Window}: the output axes whose length is a window sliding along
    # the same axis of the first input (a conv's, a pool's); run-time dims carry the window's
    # floor division through it (hobbit.graph.extents). None, or an axis left out: no window.
    windows: Callable[[Node], dict[int, Window]] | None = None
    # False: the frontend keeps the node even on constant inputs, for a pass that reads
    # them before folding (a DequantizeLinear of int8 weights, for the int8 pass); the
    # fold pass still folds it.
    fold_at_import: bool = True
    attrs: dict[str, Any] = field(default_factory=dict)
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kernel == "":
            self.kernel = self.name


_REGISTRY: dict[str, OpDef] = {}


def register_op(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise ValueError(f"op {opdef.name!r} registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    return _REGISTRY[name]


def with_defaults(node: Node) -> dict[str, Any]:
    """The node's attributes completed with the op's declared defaults."""
    opdef = get_op(node.op)
    merged = dict(opdef.attrs)
    merged.update(node.attrs)
    return merged


def node_flops(node: Node, executed: bool = False) -> int:
    """Flops of a fused group: the op's own count plus one per output element per epilogue step.
    With `executed`, the arithmetic the kernel really does (OpDef.executed_flops): below the
    default count for a Winograd conv, which the default counts as the direct conv."""
    opdef = get_op(node.op)
    size = sum(o.type.size for o in node.outputs)
    count = opdef.executed_flops if executed and opdef.executed_flops is not None else opdef.flops
    own = count(node) if count is not None else size
    return own + size * len(node.epilogue)
