"""A read-mostly view of an ONNX graph for the quantizer: who produces and who consumes each
tensor, which tensors are constants (initializers and Constant nodes) and their values."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


class OnnxGraph:
    """Indexes of one onnx.GraphProto, rebuilt by `refresh` after the node list changes."""

    def __init__(self, graph: onnx.GraphProto):
        self.proto = graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.refresh()

    def refresh(self) -> None:
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        self.constant_nodes: dict[str, onnx.NodeProto] = {}
        for node in self.proto.node:
            for name in node.output:
                self.producer[name] = node
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)
            if node.op_type == "Constant" and not node.domain:
                self.constant_nodes[node.output[0]] = node
        self.outputs = {v.name for v in self.proto.output}
        self.inputs = [v for v in self.proto.input if v.name not in self.initializers]

    def is_constant(self, name: str) -> bool:
        return name in self.initializers or name in self.constant_nodes

    def value(self, name: str) -> np.ndarray | None:
        """A constant's value, or None when `name` is computed (or a Constant we cannot read)."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.constant_nodes.get(name)
        if node is None:
            return None
        for attr in node.attribute:
            if attr.name == "value":
                return numpy_helper.to_array(attr.t)
        return None

    def set_initializer(self, name: str, value: np.ndarray) -> None:
        """Add or replace initializer `name`."""
        tensor = numpy_helper.from_array(value, name)
        if name in self.initializers:
            self.initializers[name].CopyFrom(tensor)
        else:
            self.proto.initializer.append(tensor)
            self.initializers[name] = self.proto.initializer[-1]

    def only_consumer(self, name: str) -> onnx.NodeProto | None:
        """The single node reading `name`, when there is one and `name` is not a graph output."""
        readers = self.consumers.get(name, [])
        return readers[0] if len(readers) == 1 and name not in self.outputs else None

    def drop_unused_constants(self) -> None:
        """Remove initializers and Constant nodes nothing reads (a dropped Clip's bounds, a
        folded BatchNorm's parameters)."""
        used = {name for node in self.proto.node for name in node.input} | self.outputs
        nodes = [n for n in self.proto.node if n.op_type != "Constant" or n.domain or n.output[0] in used]
        del self.proto.node[:]
        self.proto.node.extend(nodes)
        kept = [t for t in self.proto.initializer if t.name in used]
        del self.proto.initializer[:]
        self.proto.initializer.extend(kept)
        dropped = set(self.initializers) - {t.name for t in kept}
        self.initializers = {t.name: t for t in self.proto.initializer}
        listed = [v for v in self.proto.input if v.name not in dropped]  # old models list weights as inputs
        del self.proto.input[:]
        self.proto.input.extend(listed)
        self.refresh()
