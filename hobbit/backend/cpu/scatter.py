"""The CPU kernels of the ops that read or write at indices given as data
(hobbit/ops/scatter.py): each a call of its emitter in hobbit/backend/cpu/index.py with
the node's sizes."""

from __future__ import annotations

from hobbit.backend.cpu.index import (
    emit_gather_elements,
    emit_gather_nd,
    emit_scatter_elements,
    emit_scatter_nd,
    emit_tensor_scatter,
)
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.ops.scatter import size_of


def _lower_gather_elements(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    emit_gather_elements(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], data.dtype, indices.dtype,
                         tuple(data.shape), tuple(indices.shape), k.node.attrs["axis"], k.threads)


def _lower_scatter_elements(k: KernelArgs) -> None:
    data, indices, _ = k.node.inputs
    emit_scatter_elements(k.kb, k.inputs[0], k.inputs[1], k.inputs[2], k.outputs[0], data.dtype, indices.dtype,
                          tuple(data.shape), tuple(indices.shape), k.node.attrs["axis"], k.node.attrs["reduction"])


def _lower_gather_nd(k: KernelArgs) -> None:
    data, indices = k.node.inputs
    batch, q = k.node.attrs["batch_dims"], indices.shape[-1]
    batches = size_of(tuple(data.shape[:batch]))
    count = size_of(tuple(indices.shape[batch:-1]))
    emit_gather_nd(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], data.dtype, indices.dtype, batches, count,
                   tuple(data.shape[batch:batch + q]), size_of(tuple(data.shape[batch + q:])), batch, k.threads)


def _lower_scatter_nd(k: KernelArgs) -> None:
    data, indices, _ = k.node.inputs
    q = indices.shape[-1]
    emit_scatter_nd(k.kb, k.inputs[0], k.inputs[1], k.inputs[2], k.outputs[0], data.dtype, indices.dtype,
                    size_of(tuple(indices.shape[:-1])), tuple(data.shape[:q]), size_of(tuple(data.shape[q:])),
                    k.node.attrs["reduction"])


def _lower_tensor_scatter(k: KernelArgs) -> None:
    cache, update = k.node.inputs[:2]
    axis = k.node.attrs["axis"]
    starts = k.inputs[2] if len(k.inputs) > 2 else None
    outer, length, inner = size_of(tuple(cache.shape[:axis])), cache.shape[axis], size_of(tuple(cache.shape[axis + 1:]))
    emit_tensor_scatter(k.kb, k.inputs[0], k.inputs[1], starts, k.outputs[0], cache.dtype, cache.shape[0], outer,
                        length, update.shape[axis], inner, k.node.attrs["mode"] == "circular", axis)


CPU.register("GatherElements", lower=_lower_gather_elements)
CPU.register("ScatterElements", lower=_lower_scatter_elements)
CPU.register("GatherND", lower=_lower_gather_nd)
CPU.register("ScatterND", lower=_lower_scatter_nd)
CPU.register("TensorScatter", lower=_lower_tensor_scatter)
