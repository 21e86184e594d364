"""The CPU kernels of the positional ops (hobbit/ops/index.py): OneHot, Trilu,
ReverseSequence, CumSum/CumProd, TopK and BitCast, each a call of its emitter with
the node's sizes."""

from __future__ import annotations

from hobbit.backend.cpu.copy import emit_strided_copy
from hobbit.backend.cpu.index import emit_reverse_sequence
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.mask import emit_one_hot, emit_trilu, load_scalar_index
from hobbit.backend.cpu.scan import emit_cumulative
from hobbit.backend.cpu.topk import emit_top_k
from hobbit.ops.scatter import size_of


def _lower_one_hot(k: KernelArgs) -> None:
    indices, values = k.node.inputs
    axis = k.node.attrs["axis"]
    emit_one_hot(k.kb, k.inputs[0], indices.dtype, k.inputs[1], k.outputs[0], values.dtype,
                 size_of(tuple(indices.shape[:axis])), k.node.attrs["depth"], size_of(tuple(indices.shape[axis:])),
                 k.threads)


def _lower_trilu(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    k_value = k.node.inputs[1] if len(k.node.inputs) > 1 else None
    shift = load_scalar_index(k.kb, k.inputs[1] if k_value is not None else None,
                              None if k_value is None else k_value.dtype, 0)
    rows, cols = x.shape[-2], x.shape[-1]
    emit_trilu(k.kb, k.inputs[0], k.outputs[0], x.dtype, shift, size_of(tuple(x.shape[:-2])), rows, cols,
               bool(k.node.attrs["upper"]), k.threads)


def _lower_reverse_sequence(k: KernelArgs) -> None:
    x, lengths = k.node.inputs
    emit_reverse_sequence(k.kb, k.inputs[0], k.inputs[1], k.outputs[0], x.dtype, lengths.dtype, tuple(x.shape),
                          k.node.attrs["batch_axis"], k.node.attrs["time_axis"], k.threads)


def _axis_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) of `shape` around `axis`."""
    return size_of(shape[:axis]), shape[axis], size_of(shape[axis + 1:])


def _lower_cumulative(how: str):
    def lower(k: KernelArgs) -> None:
        x = k.node.inputs[0]
        a = k.node.attrs
        outer, length, inner = _axis_view(tuple(x.shape), a["axis"])
        emit_cumulative(k.kb, k.inputs[0], k.outputs[0], x.dtype, outer, length, inner, how,
                        bool(a["exclusive"]), bool(a["reverse"]), k.threads)
    return lower


def _lower_top_k(k: KernelArgs) -> None:
    x = k.node.inputs[0]
    a = k.node.attrs
    outer, length, inner = _axis_view(tuple(x.shape), a["axis"])
    emit_top_k(k.kb, k.inputs[0], k.outputs[0], k.outputs[1], x.dtype, outer, length, inner, a["k"],
               bool(a["largest"]), k.threads)


def _lower_bit_cast(k: KernelArgs) -> None:
    """Same-size elements: copying them as the target dtype copies their bits."""
    out = k.node.outputs[0]
    emit_strided_copy(k.kb, k.inputs[0], k.outputs[0], out.dtype, (out.type.size,), [1], 0, threads=k.threads)


CPU.register("OneHot", lower=_lower_one_hot)
CPU.register("Trilu", lower=_lower_trilu)
CPU.register("ReverseSequence", lower=_lower_reverse_sequence)
CPU.register("CumSum", lower=_lower_cumulative("add"))
CPU.register("CumProd", lower=_lower_cumulative("mul"))
CPU.register("TopK", lower=_lower_top_k)
CPU.register("BitCast", lower=_lower_bit_cast)
