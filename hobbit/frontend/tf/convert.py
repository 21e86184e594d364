"""TFGraph -> Graph: the TensorFlow importer every TF reader (GraphDef, SavedModel, Keras,
TFLite) ends in.

Only the nodes the outputs depend on are imported: a GraphDef carries its saver, its
initialisers and unused branches, none of which hobbit runs. Those nodes are put in
order first (a cycle or a reference to a missing node is a GraphStructureError naming
the node), then checked against the converter table so that every unsupported op (and
every dtype hobbit has no type for) is reported at once, and then converted one by one
through the ConvertContext every importer shares (hobbit.frontend.common.context): each
graph op is type-checked by the op registry, and ops whose inputs are all constant are
evaluated on the spot, so the shape arithmetic of TF graphs (Shape, StridedSlice, Pack,
Fill ...) never reaches the runtime graph."""

from __future__ import annotations

import numpy as np

import hobbit.frontend.tf.tf_ops  # noqa: F401  (its converters fill the converter table)
from hobbit.errors import (GraphStructureError, InputError, ModelFormatError, NeedsInputValues, ShapeError,
                           SymbolicInputShape, Unsupported, UnsupportedItem, UnsupportedModelError)
from hobbit.frontend.common.context import ConvertContext, raise_problems
from hobbit.frontend.tf.converters import lookup
from hobbit.frontend.tf.graph import TensorRef, TFDType, TFGraph, TFNode, TFTensor
from hobbit.graph.ir import Graph, TensorType, Value


def import_tf(graph: TFGraph, input_shapes: dict[str, tuple[int, ...]] | None = None,
              input_values: dict[str, np.ndarray] | None = None) -> Graph:
    """Import a TensorFlow model. `input_shapes` fixes unknown input dims (by input name);
    `input_values` turns those inputs into constants (for inputs that decide shapes)."""
    if not graph.outputs:
        raise ModelFormatError(f"{graph.source}: the model declares no outputs")
    input_refs = {tensor.ref for tensor in graph.inputs}
    order = ordered_nodes(graph, input_refs)
    check_supported(graph, order)
    importer = _Importer(graph)
    inputs = _graph_inputs(graph, importer.env, input_shapes or {}, input_values or {})
    importer.ctx.graph_inputs = {v.name: v for v in inputs}
    importer.convert(order)
    importer.raise_problems()
    outputs = [importer.read_output(tensor) for tensor in graph.outputs]
    _check_declared_outputs(graph, outputs)
    result = Graph(graph.source or "model", inputs, outputs, importer.ctx.nodes)
    _name_outputs(result, [tensor.name for tensor in graph.outputs])
    return result


def domain_of(op: str) -> str:
    """TFLite builtins a reader could not translate keep their own name, "TFLite:<NAME>"."""
    return "tflite" if op.startswith("TFLite:") else "tf"


def ordered_nodes(graph: TFGraph, input_refs: set[TensorRef]) -> list[TFNode]:
    """The nodes the graph outputs depend on, each after the nodes it reads; a tensor that
    is a graph input is a leaf (a PlaceholderWithDefault's default is not imported)."""
    done: set[str] = set()
    on_path: list[str] = []
    order: list[TFNode] = []
    for tensor in graph.outputs:
        if tensor.ref in input_refs:
            continue
        if tensor.ref.node not in graph.nodes:
            raise GraphStructureError(f"{graph.source}: output '{tensor.name}' is tensor '{tensor.ref}', "
                                      f"but the graph has no node '{tensor.ref.node}'")
        _visit(graph, tensor.ref.node, input_refs, done, on_path, order)
    return order


def _visit(graph: TFGraph, root: str, input_refs: set[TensorRef], done: set[str], on_path: list[str],
           order: list[TFNode]) -> None:
    """Depth-first post-order from `root`, with an explicit stack (graphs are deep)."""
    if root in done:
        return
    stack = [(root, 0)]
    on_path.append(root)
    while stack:
        name, next_input = stack[-1]
        node = graph.nodes[name]
        if next_input == len(node.inputs):
            stack.pop()
            on_path.pop()
            done.add(name)
            order.append(node)
            continue
        stack[-1] = (name, next_input + 1)
        ref = node.inputs[next_input]
        if ref in input_refs or ref.node in done:
            continue
        if ref.node not in graph.nodes:
            raise GraphStructureError(f"{graph.source}: node '{name}' ({node.op}) reads '{ref}', "
                                      f"but the graph has no node '{ref.node}'")
        if ref.node in on_path:
            cycle = on_path[on_path.index(ref.node):] + [ref.node]
            raise GraphStructureError(f"{graph.source}: node '{ref.node}' ({graph.nodes[ref.node].op}) is on a "
                                      f"cycle: {' -> '.join(reversed(cycle))}")
        on_path.append(ref.node)
        stack.append((ref.node, 0))


def check_supported(graph: TFGraph, order: list[TFNode]) -> None:
    """The first sweep: every op without a converter and every attribute naming a dtype
    hobbit has no type for, all in one UnsupportedModelError."""
    problems = []
    for node in order:
        domain = domain_of(node.op)
        if lookup(node.op) is None:
            problems.append(UnsupportedItem(node.op, domain, 0, node.name, "operator is not supported"))
            continue
        for attr, value in sorted(node.attrs.items()):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, TFDType):
                    problems.append(UnsupportedItem(node.op, domain, 0, node.name,
                                                    f"attribute '{attr}' is dtype {item.name}, which hobbit "
                                                    "does not support"))
                    break
    for tensor in [*graph.inputs, *graph.outputs]:
        if isinstance(tensor.dtype, TFDType):
            problems.append(UnsupportedItem("tensor", "tf", 0, tensor.name,
                                            f"model tensor '{tensor.name}' has dtype {tensor.dtype.name}, which "
                                            "hobbit does not support"))
    if problems:
        raise UnsupportedModelError(problems)


def _graph_inputs(graph: TFGraph, env: dict[TensorRef, Value | None], input_shapes: dict[str, tuple[int, ...]],
                  input_values: dict[str, np.ndarray]) -> list[Value]:
    declared = [tensor.name for tensor in graph.inputs]
    unknown = [name for name in [*input_shapes, *input_values] if name not in declared]
    if unknown:
        raise InputError(f"input_shapes or input_values name {unknown}, which are not model inputs; "
                         f"the model takes {declared}")
    inputs = []
    for tensor in graph.inputs:
        if tensor.name in input_values:
            env[tensor.ref] = Value(tensor.name, const=np.asarray(input_values[tensor.name]))
            continue
        value = Value(tensor.name, _input_type(graph, tensor, input_shapes.get(tensor.name)))
        env[tensor.ref] = value
        inputs.append(value)
    return inputs


def _input_type(graph: TFGraph, tensor: TFTensor, override: tuple[int, ...] | None) -> TensorType:
    node = graph.nodes.get(tensor.ref.node)
    attrs = node.attrs if node is not None else {}
    dtype = tensor.dtype if tensor.dtype is not None else attrs.get("dtype")
    if dtype is None:
        raise ModelFormatError(f"{graph.source}: input '{tensor.name}' declares no dtype")
    shape = tensor.shape if tensor.shape is not None else attrs.get("shape")
    if override is not None:
        dims = tuple(int(d) for d in override)
        if any(d < 0 for d in dims):
            raise InputError(f"input_shapes gives input '{tensor.name}' the shape {dims}; dims must be >= 0")
        if shape is not None and len(shape) != len(dims):
            raise InputError(f"input_shapes gives input '{tensor.name}' the shape {dims}, "
                             f"but the model declares rank {len(shape)}")
        if shape is not None and any(d is not None and d != o for d, o in zip(shape, dims)):
            raise InputError(f"input_shapes gives input '{tensor.name}' the shape {dims}, "
                             f"but the model declares {_shape_text(shape)}")
        return TensorType(np.dtype(dtype), dims)
    if shape is None or any(d is None for d in shape):
        raise SymbolicInputShape(f"input '{tensor.name}' has the shape {_shape_text(shape)}; "
                                 "the size of its unknown dims is needed to compile")
    return TensorType(np.dtype(dtype), tuple(int(d) for d in shape))


def _shape_text(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "of unknown rank"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


class _Importer:
    """The second sweep: converts the ordered nodes, collecting what it cannot convert."""

    def __init__(self, graph: TFGraph):
        self.graph = graph
        self.ctx = ConvertContext(0)
        self.env: dict[TensorRef, Value | None] = {}
        self.output_counts: dict[str, int] = {}
        self.problems: list[UnsupportedItem] = []
        self.needed_inputs: set[str] = set()
        self.hard_problems = 0
        self.poisoned: set[str] = set()

    def convert(self, order: list[TFNode]) -> None:
        for node in order:
            if any(ref.node in self.poisoned and ref not in self.env for ref in node.inputs):
                self.poisoned.add(node.name)
                continue
            try:
                ins = [self._read(node, ref) for ref in node.inputs]
                outs = self._run_converter(node, ins)
            except (Unsupported, UnsupportedModelError) as exc:
                self._record(node, exc)
                continue
            except ShapeError as exc:
                raise ShapeError(f"node '{node.name}' ({node.op}): {exc}") from exc
            self.output_counts[node.name] = len(outs)
            for index, value in enumerate(outs):
                self.env[TensorRef(node.name, index)] = value

    def _read(self, node: TFNode, ref: TensorRef) -> Value:
        if ref not in self.env:
            producer = self.graph.nodes[ref.node]
            raise GraphStructureError(f"{self.graph.source}: node '{node.name}' ({node.op}) reads '{ref}', but "
                                      f"node '{ref.node}' ({producer.op}) has {self.output_counts[ref.node]} "
                                      "output(s)")
        value = self.env[ref]
        if value is None:
            raise Unsupported(f"it reads output {ref.index} of node '{ref.node}' "
                              f"({self.graph.nodes[ref.node].op}), which hobbit does not compute")
        return value

    def _run_converter(self, node: TFNode, ins: list[Value]) -> list[Value | None]:
        ctx = self.ctx
        ctx.node_name, ctx._counter = node.name, 0
        mark = len(ctx.nodes)
        try:
            return lookup(node.op)(ctx, node, ins)
        except (Unsupported, UnsupportedModelError):
            del ctx.nodes[mark:]  # a declined node leaves nothing behind
            raise
        except MemoryError as exc:  # folding a constant of an absurd shape
            raise ModelFormatError(f"{self.graph.source}: node '{node.name}' ({node.op}) computes a constant "
                                   f"too large for this machine's memory: {exc}") from exc

    def _record(self, node: TFNode, exc: Exception) -> None:
        reason = exc.items[0].reason if isinstance(exc, UnsupportedModelError) else str(exc)
        if isinstance(exc, NeedsInputValues):
            self.needed_inputs.update(exc.inputs)
        else:
            self.hard_problems += 1
        self.problems.append(UnsupportedItem(node.op, domain_of(node.op), 0, node.name, reason))
        self.poisoned.add(node.name)

    def raise_problems(self) -> None:
        raise_problems(self.problems, self.hard_problems, self.needed_inputs)

    def read_output(self, tensor: TFTensor) -> Value:
        if tensor.ref not in self.env:
            raise GraphStructureError(f"{self.graph.source}: output '{tensor.name}' is tensor '{tensor.ref}', but "
                                      f"node '{tensor.ref.node}' has {self.output_counts.get(tensor.ref.node, 0)} "
                                      "output(s)")
        value = self.env[tensor.ref]
        if value is None:
            node = self.graph.nodes[tensor.ref.node]
            raise UnsupportedModelError([UnsupportedItem(node.op, domain_of(node.op), 0, node.name,
                                                         f"output '{tensor.name}' is its output {tensor.ref.index}, "
                                                         "which hobbit does not compute")])
        return value


def _check_declared_outputs(graph: TFGraph, outputs: list[Value]) -> None:
    """What the model declares about an output must be what its graph computes: a mismatch
    means the reader or a converter got the model wrong, which must not pass silently."""
    for tensor, value in zip(graph.outputs, outputs):
        if tensor.dtype is not None and np.dtype(tensor.dtype) != np.dtype(value.dtype):
            raise ModelFormatError(f"{graph.source}: output '{tensor.name}' is declared "
                                   f"{np.dtype(tensor.dtype).name} but its graph computes {value.type}")
        if tensor.shape is not None:
            fits = len(tensor.shape) == len(value.shape) and all(
                d is None or d == v for d, v in zip(tensor.shape, value.shape))
            if not fits:
                raise ModelFormatError(f"{graph.source}: output '{tensor.name}' is declared with the shape "
                                       f"{_shape_text(tensor.shape)} but its graph computes {value.type}")


def _name_outputs(graph: Graph, names: list[str]) -> None:
    """Graph outputs keep the model's names, so m.outputs reads like the model."""
    for name, value in zip(names, graph.outputs):
        if value.const is None and value not in graph.inputs:
            value.name = name
    graph.output_names = list(names)
