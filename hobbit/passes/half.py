"""float16 and bfloat16 models computed in float32, stored in 16 bits only at their interface.

A 16-bit float model arrives as its ops in float32 between widening and narrowing Casts (the
frontend's rule: each op rounds once), or as 16-bit ops the kernels widen element by element.
Either way every 16-bit tensor inside the graph is stored and re-read, and every op rounds.
This pass gives each 16-bit value a float32 stand-in that its readers use instead:

- a Cast to a 16-bit type from float32 stands in with its own input (the rounding goes);
- a Cast from a 16-bit value to float32 is its input's stand-in, so the pair disappears;
- any other op whose types re-infer to float32 where they were 16-bit (element-wise ops,
  Conv, pools, Concat, reshapes, reductions...) reads the stand-ins of its inputs (constants
  are widened at compile time, exactly) and writes float32 stand-ins of its outputs.

The 16-bit value itself is still produced, by a narrowing Cast after its stand-in, wherever
something needs those bits: a graph output, an op the rule does not cover (BitCast, Range's
count, a fused group), an op that is not widened because its types would not re-infer.
Dead-code elimination drops the narrowing Casts nobody reads. The result rounds to 16 bits
only at the graph's outputs, as onnxruntime's CPU provider computes 16-bit models on x86
(its cast insertion runs every op without a 16-bit kernel in float32 and then removes the
float32 -> 16-bit -> float32 pairs between them); switching the pass off gives the per-op
rounding the ONNX standard describes. A Cast pair with no op between, written in a float32
model, loses its rounding here, while onnxruntime keeps it."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hobbit.errors import HobbitError
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import get_op
from hobbit.passes.dce import eliminate_dead_code

HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
FLOAT32 = np.dtype(np.float32)
_HALF_NAMES = {d.name for d in HALF}
# Ops whose 16-bit values are bits (BitCast) or decide an output shape (Range's element count).
_KEEP_HALF = {"BitCast", "Range"}


def is_half(dtype: np.dtype) -> bool:
    return np.dtype(dtype) in HALF


def widen_half(graph: Graph) -> Graph:
    """The graph with float32 stand-ins for its 16-bit values (see the module docstring)."""
    rewrite = _Rewrite()
    for node in graph.nodes:
        rewrite.node(node)
    graph.nodes = rewrite.nodes
    graph.outputs = [rewrite.alias.get(id(v), v) for v in graph.outputs]
    graph.relink()
    return eliminate_dead_code(graph)


class _Rewrite:
    """One walk over the nodes in order: each node's inputs are known (stand-ins or not) when
    it is reached, so the rewrite decides node by node and never revisits one."""

    def __init__(self):
        self.nodes: list[Node] = []
        self.wide: dict[int, Value] = {}    # id(16-bit value) -> its float32 stand-in
        self.alias: dict[int, Value] = {}   # id(dropped Cast's output) -> the value that replaces it

    def node(self, node: Node) -> None:
        node.inputs = [None if v is None else self.alias.get(id(v), v) for v in node.inputs]
        for step in node.epilogue:
            if step.operand is not None:
                step.operand = self.alias.get(id(step.operand), step.operand)
        if node.op == "Cast" and not node.epilogue:
            self._cast(node)
        elif node.op in _KEEP_HALF or node.epilogue or not self._touches_half(node) or not self._widen(node):
            self.nodes.append(node)

    def _cast(self, node: Node) -> None:
        src, out = node.inputs[0], node.outputs[0]
        if is_half(out.dtype) and not is_half(src.dtype):
            self.nodes.append(node)
            self.wide[id(out)] = src if src.dtype == FLOAT32 else self._emit_cast(src, FLOAT32, f"{out.name}/float32")
        elif is_half(src.dtype) and not is_half(out.dtype):
            wide = self._stand_in(src)
            if out.dtype == FLOAT32:
                self.alias[id(out)] = wide
            else:
                node.inputs = [wide]
                self.nodes.append(node)
        else:
            self.nodes.append(node)

    def _touches_half(self, node: Node) -> bool:
        return any(is_half(v.dtype) for v in node.inputs + node.outputs if v is not None)

    def _widen(self, node: Node) -> bool:
        """Run `node` on float32 stand-ins, if its types re-infer to float32 in place of 16 bits."""
        inputs = [v if v is None or not is_half(v.dtype) else self._stand_in(v) for v in node.inputs]
        attrs = {k: "float32" if isinstance(a, str) and a in _HALF_NAMES else a for k, a in node.attrs.items()}
        types = _infer(Node(node.op, node.name, inputs, [], attrs))
        if types is None or not all(_widened(o.type, t) for o, t in zip(node.outputs, types)):
            return False
        outputs = [Value(f"{o.name}/float32", t) if is_half(o.dtype) else o for o, t in zip(node.outputs, types)]
        self.nodes.append(Node(node.op, node.name, inputs, outputs, attrs))
        for old, new in zip(node.outputs, outputs):
            if new is not old:
                self.wide[id(old)] = new
                self._emit_cast(new, old.dtype, old.name, into=old)
        return True

    def _stand_in(self, v: Value) -> Value:
        """The float32 stand-in of a 16-bit value: known, a widened constant, or a new widening Cast."""
        if id(v) not in self.wide:
            if v.const is not None:
                self.wide[id(v)] = Value(f"{v.name}/float32", const=v.const.astype(FLOAT32))
            else:
                self.wide[id(v)] = self._emit_cast(v, FLOAT32, f"{v.name}/float32")
        return self.wide[id(v)]

    def _emit_cast(self, src: Value, dtype: np.dtype, name: str, into: Value | None = None) -> Value:
        out = into if into is not None else Value(name, TensorType(np.dtype(dtype), src.shape))
        self.nodes.append(Node("Cast", f"{name}/cast", [src], [out], {"to": np.dtype(dtype).name}))
        return out


def _infer(node: Node) -> list[TensorType] | None:
    """The node's output types, or None when the op refuses these inputs."""
    try:
        return get_op(node.op).infer(node)
    except HobbitError:
        return None


def _widened(old: TensorType, new: TensorType) -> bool:
    """`new` is `old` with float32 in place of a 16-bit dtype (other dtypes unchanged)."""
    want = FLOAT32 if is_half(old.dtype) else np.dtype(old.dtype)
    return np.dtype(new.dtype) == want and tuple(new.shape) == tuple(old.shape)
