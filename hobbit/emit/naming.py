"""Kernel naming: which nodes become kernels, what each kernel function is called, and
the values it takes, in parameter order.

Every backend's module builder (hobbit/backend/cpu/module.py, hobbit/backend/gpu/module.py)
names a fused group's function after its graph nodes (e.g. `Conv+Add+Relu[layer1.0/conv2]`)
and passes one pointer per value it touches, in the same order, so the IR of any backend
reads the same."""

from __future__ import annotations

from hobbit.graph.ir import Graph, Node
from hobbit.passes.memory import needs_code


def kernel_name(node: Node) -> str:
    """A fused group's function name: its ops joined by '+', then its node's name in brackets."""
    ops = "+".join([node.op] + [s.op for s in node.epilogue])
    return f"{ops}[{node.name}]"


def kernel_nodes(graph: Graph) -> list[Node]:
    """The nodes that become kernel calls, in call order (views need no code)."""
    return [node for node in graph.nodes if needs_code(node)]


def kernel_values(node: Node) -> list:
    """Values a kernel function takes, in parameter order: inputs, epilogue operands, outputs."""
    return [v for v in node.inputs if v is not None] + \
        [s.operand for s in node.epilogue if s.operand is not None] + list(node.outputs)


def param_name(name: str) -> str:
    """A value's name as an LLVM parameter name: letters, digits, '.' and '_', at most 48."""
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)[:48] or "t"
