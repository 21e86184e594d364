"""A TensorFlow SavedModel directory read into a TFGraph, without TensorFlow.

The graph is saved_model.pb's MetaGraph (chosen by its tags) seen through one of its
signatures: the signature's inputs are Placeholders of the main graph, its outputs the
outputs of a StatefulPartitionedCall of the signature's function, which the reader
inlines. Variables are resources there: VarHandleOp nodes passed into the call as
captured arguments and read by ReadVariableOp inside it. The reader turns each variable
into a Const holding the checkpoint's value (variables/variables.*), its reads into
Identity, so the converters see a frozen graph.

Why the object graphs: TF2 checkpoint keys ("layer/kernel/.ATTRIBUTES/VARIABLE_VALUE")
are not variable names. The SavedObjectGraph lists, for each concrete function, the
saved objects bound to its captured arguments (`bound_inputs`); each object's path of
child names from the root leads to the same object in the checkpoint's
TrackableObjectGraph, whose VARIABLE_VALUE attribute holds the key. Following the path
rather than trusting that both graphs number their nodes alike matches what TF's own
loader does. TF1-style SavedModels (VariableV2, or VarHandleOp without object graph) key
variables by their node or shared name."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping

import numpy as np
from google.protobuf.message import DecodeError

from hobbit.errors import CorruptModelError, GraphStructureError, SignatureError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.tf.attrs import dtype_of, shape_of
from hobbit.frontend.tf.checkpoint import Checkpoint, read_checkpoint
from hobbit.frontend.tf.functions import CALL_OPS
from hobbit.frontend.tf.graph import TensorRef, TFGraph, TFTensor
from hobbit.frontend.tf.graphdef import flat_graph
from hobbit.frontend.tf.protos import SavedModel
from hobbit.frontend.tf.rawgraph import RawNode, parse_ref, raw_nodes, to_tfgraph

_VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_INT32 = np.dtype(np.int32)


def _type_attr(node: RawNode, name: str) -> np.dtype:
    """A type attr of a variable-reading op; int32, TF's default, where it is unset."""
    return dtype_of(node.proto_attrs[name].type) if name in node.proto_attrs else _INT32


def _saved_model(directory: str):
    path = os.path.join(directory, "saved_model.pb")
    if not os.path.isdir(directory):
        raise CorruptModelError(f"{directory}: not a SavedModel directory")
    try:
        with open(path, "rb") as f:
            saved = SavedModel.FromString(f.read())
    except FileNotFoundError:
        raise CorruptModelError(f"{directory}: a SavedModel directory without saved_model.pb") from None
    except OSError as e:
        raise CorruptModelError(f"{path}: cannot be read as a TensorFlow SavedModel: {e.strerror}") from None
    except DecodeError:
        raise CorruptModelError(
            f"{path}: not a TensorFlow SavedModel (the protobuf does not decode; truncated?)"
        ) from None
    if not saved.meta_graphs or not any(meta.graph_def.node for meta in saved.meta_graphs):
        raise CorruptModelError(f"{path}: not a TensorFlow SavedModel (it has no MetaGraph with a graph)")
    return saved, path


def _meta_graph(saved, tags: tuple[str, ...], path: str):
    for meta in saved.meta_graphs:
        if set(meta.meta_info_def.tags) == set(tags):
            return meta
    available = ", ".join(str(sorted(meta.meta_info_def.tags)) for meta in saved.meta_graphs)
    raise SignatureError(f"{path}: no MetaGraph tagged {sorted(tags)}; the SavedModel has: {available}")


def _signature(meta, name: str, path: str):
    if name not in meta.signature_def:
        available = ", ".join(sorted(key for key in meta.signature_def if not key.startswith("__"))) or "none"
        raise SignatureError(f"{path}: no signature '{name}'; the SavedModel has: {available}")
    return meta.signature_def[name]


def _tensors(infos: Mapping, path: str, signature: str) -> list[TFTensor]:
    tensors = []
    for name in sorted(infos):
        info = infos[name]
        if info.WhichOneof("encoding") != "name":
            item = UnsupportedItem("sparse or composite tensor", "tf", 0, name, f"in signature '{signature}' of {path}")
            raise UnsupportedModelError([item])
        where = f"{path}: tensor '{name}' of signature '{signature}'"
        shape = shape_of(info.tensor_shape, where) if info.HasField("tensor_shape") else None
        tensors.append(TFTensor(name, parse_ref(info.name), dtype_of(info.dtype), shape))
    return tensors


def _object_paths(saved_graph) -> dict[int, tuple[str, ...]]:
    """Each saved object's first path of child names from the root (breadth first)."""
    paths: dict[int, tuple[str, ...]] = {0: ()}
    queue = deque([0])
    while queue:
        node_id = queue.popleft()
        if node_id >= len(saved_graph.nodes):
            continue
        for child in saved_graph.nodes[node_id].children:
            if child.node_id not in paths:
                paths[child.node_id] = paths[node_id] + (child.local_name,)
                queue.append(child.node_id)
    return paths


def _checkpoint_key(trackable, children: list[dict[str, int]], path: tuple[str, ...]) -> str | None:
    """The VARIABLE_VALUE key of the checkpoint object at `path` (child names from the
    root); `children` is each object's child name -> node id."""
    node_id = 0
    for name in path:
        node_id = children[node_id].get(name, len(children))
        if node_id >= len(children):
            return None
    for attribute in trackable.nodes[node_id].attributes:
        if attribute.name == "VARIABLE_VALUE":
            return attribute.checkpoint_key
    return None


def _bound_variable_keys(nodes: Mapping[str, RawNode], meta, checkpoint: Checkpoint) -> dict[str, str]:
    """Variable node -> checkpoint key, through the calls' captured arguments (TF2)."""
    trackable = checkpoint.object_graph()
    saved_graph = meta.object_graph_def
    if trackable is None or not trackable.nodes:
        return {}
    paths = _object_paths(saved_graph)
    children = [{child.local_name: child.node_id for child in node.children} for node in trackable.nodes]
    keys: dict[str, str] = {}
    for node in nodes.values():
        if node.op not in CALL_OPS or "f" not in node.proto_attrs:
            continue
        function = saved_graph.concrete_functions.get(node.proto_attrs["f"].func.name)
        if function is None or not function.bound_inputs:
            continue
        captured = node.inputs[len(node.inputs) - len(function.bound_inputs) :]
        for ref, object_id in zip(captured, function.bound_inputs):
            key = _checkpoint_key(trackable, children, paths[object_id]) if object_id in paths else None
            if key is not None:
                keys.setdefault(ref.node, key)
    return keys


class _Variables:
    """Replaces variables, and the ops reading them, in a flat graph."""

    def __init__(self, checkpoint: Checkpoint, keys: dict[str, str], source: str):
        self.checkpoint, self.keys, self.source = checkpoint, keys, source
        self.known = set(checkpoint.keys())

    def _key(self, node: RawNode) -> str:
        if node.name in self.keys:
            return self.keys[node.name]
        shared = node.proto_attrs["shared_name"].s.decode() if "shared_name" in node.proto_attrs else ""
        for candidate in (node.name, shared):
            if candidate in self.known:
                return candidate
        raise CorruptModelError(
            f"{self.checkpoint.prefix}: no checkpoint value for variable node '{node.name}' of {self.source}"
        )

    def __call__(self, nodes: dict[str, RawNode]) -> None:
        frozen: dict[str, np.ndarray] = {}
        for name, node in list(nodes.items()):
            if node.op in _VARIABLE_OPS:
                value = self.checkpoint.tensor(self._key(node))
                if not isinstance(value, np.ndarray):
                    item = UnsupportedItem(node.op, "tf", 0, name, f"a variable of dtype {value.name}")
                    raise UnsupportedModelError([item])
                nodes[name] = RawNode(name, "Const", [], {}, {"dtype": value.dtype, "value": value})
                frozen[name] = value
        for name, node in list(nodes.items()):
            if node.inputs and node.inputs[0].node in frozen:
                self._read(nodes, node, frozen[node.inputs[0].node])

    @staticmethod
    def _read(nodes: dict[str, RawNode], node: RawNode, value: np.ndarray) -> None:
        """A read of a frozen variable as the plain op on its value."""
        if node.op == "ReadVariableOp":
            nodes[node.name] = RawNode(node.name, "Identity", node.inputs, {}, {"T": value.dtype})
        elif node.op == "VariableShape":
            out_type = _type_attr(node, "out_type")
            nodes[node.name] = RawNode(node.name, "Shape", node.inputs, {}, {"T": value.dtype, "out_type": out_type})
        elif node.op == "ResourceGather" and len(node.inputs) == 2:
            axis = RawNode(f"{node.name}/axis", "Const", [], {}, {"dtype": _INT32, "value": np.array(0, np.int32)})
            nodes[axis.name] = axis
            batch_dims = node.proto_attrs["batch_dims"].i if "batch_dims" in node.proto_attrs else 0
            attrs = {"Tparams": value.dtype, "Tindices": _type_attr(node, "Tindices"), "Taxis": _INT32,
                     "batch_dims": batch_dims}
            nodes[node.name] = RawNode(node.name, "GatherV2", [*node.inputs, TensorRef(axis.name)], {}, attrs)


def read_saved_model(
    path: str | os.PathLike, signature: str = "serving_default", tags: tuple[str, ...] = ("serve",)
) -> TFGraph:
    """Read the SavedModel directory `path` through `signature` of the MetaGraph tagged
    `tags`; inputs and outputs carry the signature's names, sorted."""
    directory = os.fspath(path)
    saved, pb_path = _saved_model(directory)
    meta = _meta_graph(saved, tuple(tags), pb_path)
    signature_def = _signature(meta, signature, pb_path)
    if not os.path.isfile(os.path.join(directory, "variables", "variables.index")):
        raise CorruptModelError(
            f"{directory}: a SavedModel without its variables (variables/variables.index is missing)"
        )
    checkpoint = read_checkpoint(os.path.join(directory, "variables", "variables"))
    inputs = _tensors(signature_def.inputs, pb_path, signature)
    outputs = _tensors(signature_def.outputs, pb_path, signature)
    nodes = raw_nodes(meta.graph_def, pb_path)
    library = {function.signature.name: function for function in meta.graph_def.library.function}
    variables = _Variables(checkpoint, _bound_variable_keys(nodes, meta, checkpoint), pb_path)
    flat, refs = flat_graph(nodes, library, [tensor.ref for tensor in outputs], pb_path, variables)
    outputs = [TFTensor(t.name, ref, t.dtype, t.shape) for t, ref in zip(outputs, refs)]
    for tensor in inputs:
        if tensor.ref.node not in nodes:
            raise GraphStructureError(
                f"{pb_path}: signature input '{tensor.name}' names node '{tensor.ref.node}', which does not exist"
            )
        flat.setdefault(tensor.ref.node, nodes[tensor.ref.node])
    return to_tfgraph(flat, inputs, outputs, "savedmodel", pb_path)
