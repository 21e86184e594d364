"""Where the external-data weights of an ONNX model given as bytes or a ModelProto come from.

A tensor stored outside the model names a file (`location`) relative to the model's
folder. A model read from a path has that folder, and onnx reads the files from it. Bytes
and ModelProtos have none: onnx's reader then resolves the name against the process's
current directory, so a server compiling user-submitted bytes handed out any file of its
working directory as "weights" (location="secret.bin"). Here such a model is refused,
naming the tensor, unless the caller names the folder (compile(external_data_dir=...)).
The files are then read with onnx's own loader, whose rule keeps every file inside that
folder: no absolute locations, no '..' out of it, no symbolic links, only regular files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import onnx
from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

from hobbit.errors import ModelFormatError


def external_tensors(model: onnx.ModelProto) -> list[tuple[str, onnx.TensorProto]]:
    """Every tensor of the model whose data is in an external file, with a name for errors."""
    found = [(what, tensor) for what, tensor in _tensors_of_graph(model.graph) if uses_external_data(tensor)]
    for function in model.functions:
        found += [(f"{what} in function '{function.name}'", tensor) for what, tensor in _tensors_of_nodes(function.node)
                  if uses_external_data(tensor)]
    return found


def location(tensor: onnx.TensorProto) -> str:
    """The file an external tensor names ('' when it names none)."""
    return next((entry.value for entry in tensor.external_data if entry.key == "location"), "")


def with_external_data(model: onnx.ModelProto, folder: str | os.PathLike | None, given_as: str,
                       copy: bool) -> onnx.ModelProto:
    """`model` with its external tensors' data read from `folder`; without external tensors,
    `model` itself. `copy`: `model` is the caller's, to be left as it is (a copy is filled
    in). Without a folder, external data is a ModelFormatError naming the first such tensor;
    `given_as` says what the caller passed ("bytes", "an onnx.ModelProto") for that message."""
    external = external_tensors(model)
    if not external:
        return model
    if folder is None:
        what, tensor = external[0]
        more = f" (and {len(external) - 1} more tensor(s))" if len(external) > 1 else ""
        raise ModelFormatError(f"{what} keeps its data in the external file '{location(tensor)}'{more}, but the "
                               f"model was given as {given_as}, which has no folder to read it from: pass "
                               "external_data_dir= naming the folder that holds the file, or give the model's path")
    base = os.fspath(folder)
    if not os.path.isdir(base):
        raise ModelFormatError(f"external_data_dir={base!r} is not a folder")
    if copy:
        filled = onnx.ModelProto()
        filled.CopyFrom(model)
        model = filled
    for what, tensor in external_tensors(model):
        try:
            load_external_data_for_tensor(tensor, base)
        except Exception as exc:  # onnx raises ValidationError, OSError or ValueError, by cause
            raise ModelFormatError(f"{what}: its external data '{location(tensor)}' cannot be read from "
                                   f"external_data_dir {base!r}: {exc}") from exc
    return model


def _tensors_of_graph(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    for tensor in graph.initializer:
        yield f"initializer '{tensor.name}'", tensor
    for sparse in graph.sparse_initializer:
        yield f"sparse initializer '{sparse.values.name}'", sparse.values
        yield f"indices of sparse initializer '{sparse.values.name}'", sparse.indices
    yield from _tensors_of_nodes(graph.node)


def _tensors_of_nodes(nodes) -> Iterator[tuple[str, onnx.TensorProto]]:
    for node in nodes:
        for attr in node.attribute:
            what = f"tensor attribute '{attr.name}' of node '{node.name or node.op_type}'"
            if attr.HasField("t"):
                yield what, attr.t
            for tensor in attr.tensors:
                yield what, tensor
            for sparse in ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(attr.sparse_tensors):
                yield what, sparse.values
                yield what, sparse.indices
            for graph in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _tensors_of_graph(graph)
