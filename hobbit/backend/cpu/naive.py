"""schedule="naive": convolution, matrix products, pooling and reductions as the plain loop
nests their math is, with no tiling, packing, vectors or microkernel.

Why it exists: hobbit's founding question was whether LLVM's passes and Polly, its polyhedral
loop optimiser, find good schedules by themselves. These kernels are the input for that
experiment (`loops="polly"`, hobbit.backend.polly): the textbook nests, affine in their loop
counters, accumulating into the output array as the formulas are written

    C[i, j] = 0;  for i, j, k: C[i, j] += A[i, k] * B[k, j]

so that Polly sees one perfect nest per product (the form its matrix-multiplication
pattern matches), and the fused epilogue (bias, activation, residual) runs as a nest of its
own afterwards. They are a child table of the CPU's (hobbit.emit.table: override a few, inherit
the rest): every other kernel, the int8 ones included, is hobbit's usual one.

Threads: each kernel gives every thread of the team a contiguous share of its outermost
independent loop (output channels, rows of a product, planes of a pool), the bounds of which
are parameters of the nest that Polly keeps symbolic. Reductions run on one thread.

They compile for static shapes only (no `dynamic` entry): a model with run-time dims compiles
one variant per shape in this mode (hobbit.runtime.specialize)."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from hobbit.backend.cpu.args import KernelArgs
from hobbit.backend.cpu.table import CPU
from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import Epilogue
from hobbit.emit.reduce import REDUCERS, apply_post, apply_pre, combine
from hobbit.emit.scalar import Emit
from hobbit.emit.table import KernelTable
from hobbit.graph.shapes import broadcast_strides
from hobbit.ops.reduce import identity
from hobbit.plan.conv import conv_shape

NAIVE = KernelTable("cpu-naive", parent=CPU)

# The kernels this table replaces; memory planning makes no plan for them (naive_plan).
NAIVE_KERNELS = ("Conv", "MatMul", "MaxPool", "AveragePool", *REDUCERS)


def _nest(kb: KernelBuilder, stack: ExitStack, loops: list[tuple[int | ir.Value, int | ir.Value, str]]) -> list:
    """Counted loops nested in order, entered on `stack`; their counters."""
    return [stack.enter_context(kb.loop(lo, hi, name=name)) for lo, hi, name in loops]


def _inside(kb: KernelBuilder, index: ir.Value, size: int) -> ir.Value:
    """0 <= index < size, as two signed comparisons (affine conditions Polly can model)."""
    b = kb.b
    return b.and_(b.icmp_signed(">=", index, kb.i64(0)), b.icmp_signed("<", index, kb.i64(size)))


def _accumulate(kb: KernelBuilder, e: Emit, ptr: ir.Value, dtype: np.dtype, offset, value: ir.Value) -> None:
    """ptr[offset] += value, read and written in memory, as the formula is."""
    kb.store(e.add(kb.load(ptr, dtype, offset), value), ptr, dtype, offset)


def _epilogue_nest(kb: KernelBuilder, e: Emit, epilogue: Epilogue, y: ir.Value, dtype: np.dtype,
                   loops: list[tuple[int | ir.Value, int | ir.Value, str]], offset, index) -> None:
    """The fused steps over the output, one element at a time: `offset(counters)` is an
    element's place in y, `index(counters)` its index in the epilogue's view."""
    if not epilogue.steps:
        return
    with ExitStack() as stack:
        counters = _nest(kb, stack, loops)
        at = offset(counters)
        kb.store(epilogue.apply(e, kb.load(y, dtype, at), index(counters)), y, dtype, at)


def lower_naive_conv(k: KernelArgs) -> None:
    """y[n, oc, oh, ow] = bias[oc] + sum over (ic, kh, kw) of x[n, g*cg + ic, ih, iw] * w[oc, ic, kh, kw],
    taps outside the input skipped (its padding is zeros). Threads share the output channels."""
    kb, node, s = k.kb, k.node, conv_shape(k.node)
    dtype = np.dtype(node.inputs[0].dtype)
    e = Emit(kb, dtype, 1)
    x, w, y = k.inputs[0], k.inputs[1], k.outputs[0]
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = s.stride, s.dilation, s.pad
    padded = any((pt, pl, pb, pr))
    lo, hi = k.threads.split(s.oc)
    plane = s.oh * s.ow

    def y_at(n, oc, oh, ow):
        return kb.affine([(n, s.oc * plane), (oc, plane), (oh, s.ow), (ow, 1)])

    outputs = [(0, s.n, "n"), (lo, hi, "oc"), (0, s.oh, "oh"), (0, s.ow, "ow")]
    with ExitStack() as stack:
        n, oc, oh, ow = _nest(kb, stack, outputs)
        kb.store(kb.load(bias, dtype, oc) if bias is not None else e.c(0.0), y, dtype, y_at(n, oc, oh, ow))
    with ExitStack() as stack:
        n, oc, oh, ow, ic, i, j = _nest(kb, stack, outputs + [(0, s.cg, "ic"), (0, s.kh, "kh"), (0, s.kw, "kw")])
        ih = kb.add(kb.affine([(oh, sh), (i, dh)]), -pt)
        iw = kb.add(kb.affine([(ow, sw), (j, dw)]), -pl)
        channel = kb.add(ic, 0 if s.group == 1 else kb.mul(kb.udiv(oc, s.ocg), s.cg))
        if padded:
            stack.enter_context(kb.if_then(kb.b.and_(_inside(kb, kb.idx(ih), s.h), _inside(kb, kb.idx(iw), s.w))))
        xv = kb.load(x, dtype, kb.affine([(n, s.c * s.h * s.w), (channel, s.h * s.w), (ih, s.w), (iw, 1)]))
        wv = kb.load(w, dtype, kb.affine([(oc, s.cg * s.kh * s.kw), (ic, s.kh * s.kw), (i, s.kw), (j, 1)]))
        _accumulate(kb, e, y, dtype, y_at(n, oc, oh, ow), e.mul(xv, wv))
    epilogue = Epilogue(kb, node, k.epilogue, (s.n, s.oc, plane))
    _epilogue_nest(kb, e, epilogue, y, dtype, outputs, lambda c: y_at(*c),
                   lambda c: [c[0], c[1], kb.add(kb.mul(c[2], s.ow), c[3])])


def lower_naive_matmul(k: KernelArgs) -> None:
    """C[..., i, j] = sum over k of A[..., i, k] * B[..., k, j], batch dims broadcast as numpy's.
    Threads share the rows, or the columns of a one-row product (a fully-connected layer at
    batch 1)."""
    kb, node = k.kb, k.node
    a_val, b_val = node.inputs
    dtype = np.dtype(a_val.dtype)
    e = Emit(kb, dtype, 1)
    shape = tuple(node.outputs[0].shape)
    M, K = a_val.shape[-2:]
    N = shape[-1]
    batch = shape[:-2]
    strides = [broadcast_strides(tuple(v.shape[:-2]), batch) for v in (a_val, b_val)] + [
        broadcast_strides(batch, batch)]
    if M > 1:
        (lo, hi), (n_lo, n_hi) = k.threads.split(M), (0, N)
    else:
        (lo, hi), (n_lo, n_hi) = (0, M), k.threads.split(N)
    outer = [(0, size, f"b{d}") for d, size in enumerate(batch)]
    rows = outer + [(lo, hi, "i"), (n_lo, n_hi, "j")]

    def at(counters, which: int, rows_of: int, cols: int, row, col):
        terms = list(zip(counters[:len(batch)], [s * rows_of * cols for s in strides[which]]))
        return kb.affine(terms + [(row, cols), (col, 1)])

    a, b, c = k.inputs[0], k.inputs[1], k.outputs[0]
    with ExitStack() as stack:
        counters = _nest(kb, stack, rows)
        kb.store(e.c(0.0), c, dtype, at(counters, 2, M, N, counters[-2], counters[-1]))
    with ExitStack() as stack:
        counters = _nest(kb, stack, rows + [(0, K, "k")])
        i, j, kk = counters[-3:]
        product = e.mul(kb.load(a, dtype, at(counters, 0, M, K, i, kk)), kb.load(b, dtype, at(counters, 1, K, N, kk, j)))
        _accumulate(kb, e, c, dtype, at(counters, 2, M, N, i, j), product)
    epilogue = Epilogue(kb, node, k.epilogue, shape)
    _epilogue_nest(kb, e, epilogue, c, dtype, rows, lambda cs: at(cs, 2, M, N, cs[-2], cs[-1]), list)


def lower_naive_pool(k: KernelArgs) -> None:
    """Max or average over each window of a 2-D pool, taps outside the input skipped; an
    average divides by the taps inside the input, or with count_include_pad by those inside
    the padded input (a window that ceil_mode lets run past the padding counts fewer).
    Threads share the planes."""
    kb, node = k.kb, k.node
    dtype = np.dtype(node.inputs[0].dtype)
    e = Emit(kb, dtype, 1)
    n, c, h, w = node.inputs[0].shape
    _, _, oh_n, ow_n = node.outputs[0].shape
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    average = node.op == "AveragePool"
    include_pad = average and bool(a["count_include_pad"])
    x, y = k.inputs[0], k.outputs[0]
    acc, count = kb.alloca(e.c(0.0).type), kb.alloca(e.c(0.0).type)
    lo, hi = k.threads.split(n * c)
    with ExitStack() as stack:
        p, oh, ow = _nest(kb, stack, [(lo, hi, "plane"), (0, oh_n, "oh"), (0, ow_n, "ow")])
        kb.b.store(e.c(0.0 if average else -np.inf), acc)
        kb.b.store(e.c(0.0), count)
        with ExitStack() as taps:
            i, j = _nest(kb, taps, [(0, kh, "kh"), (0, kw, "kw")])
            ih = kb.add(kb.affine([(oh, sh), (i, dh)]), -pt)
            iw = kb.add(kb.affine([(ow, sw), (j, dw)]), -pl)
            inside = kb.b.and_(_inside(kb, kb.idx(ih), h), _inside(kb, kb.idx(iw), w))
            if include_pad:
                in_pad = kb.b.and_(_inside(kb, kb.add(kb.idx(ih), pt), h + pt + pb),
                                   _inside(kb, kb.add(kb.idx(iw), pl), w + pl + pr))
                with kb.if_then(in_pad):
                    kb.b.store(e.add(kb.b.load(count), e.c(1.0)), count)
            with kb.if_then(inside):
                v = kb.load(x, dtype, kb.affine([(p, h * w), (ih, w), (iw, 1)]))
                kb.b.store(combine(e, "add" if average else "max", kb.b.load(acc), v), acc)
                if average and not include_pad:
                    kb.b.store(e.add(kb.b.load(count), e.c(1.0)), count)
        result = kb.b.load(acc)
        if average:
            result = e.div(result, kb.b.load(count))
        kb.store(result, y, dtype, kb.affine([(p, oh_n * ow_n), (oh, ow_n), (ow, 1)]))


def lower_naive_reduce(k: KernelArgs) -> None:
    """For each output element, combine(acc, pre(x)) over the reduced axes in order, then
    post(acc): ReduceSum, ReduceMean, ReduceMax and the rest of hobbit.emit.reduce.REDUCERS."""
    kb, node = k.kb, k.node
    x_val = node.inputs[0]
    dtype = np.dtype(x_val.dtype)
    e = Emit(kb, dtype, 1)
    r = REDUCERS[node.op]
    shape = tuple(int(d) for d in x_val.shape)
    axes = {a % len(shape) for a in node.attrs["axes"]} if shape else set()
    kept = [d for d in range(len(shape)) if d not in axes]
    reduced = sorted(axes)
    x_strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    y_strides = [int(np.prod([shape[q] for q in kept[j + 1:]], dtype=np.int64)) for j in range(len(kept))]
    count = int(np.prod([shape[d] for d in reduced], dtype=np.int64))
    acc = kb.alloca(e.c(0.0).type)
    x, y = k.inputs[0], k.outputs[0]
    with ExitStack() as stack:
        outer = _nest(kb, stack, [(0, shape[d], f"d{d}") for d in kept])
        kb.b.store(e.c(identity(dtype, r.combine)), acc)
        with ExitStack() as inner:
            counters = dict(zip(kept, outer)) | dict(zip(reduced, _nest(kb, inner, [(0, shape[d], f"r{d}")
                                                                                     for d in reduced])))
            v = apply_pre(e, r, kb.load(x, dtype, kb.affine([(counters[d], x_strides[d]) for d in range(len(shape))])))
            kb.b.store(combine(e, r.combine, kb.b.load(acc), v), acc)
        kb.store(apply_post(e, r, kb.b.load(acc), count), y, dtype, kb.affine(list(zip(outer, y_strides))))


NAIVE.register("Conv", lower=lower_naive_conv)
NAIVE.register("MatMul", lower=lower_naive_matmul)
NAIVE.register("MaxPool", lower=lower_naive_pool)
NAIVE.register("AveragePool", lower=lower_naive_pool)
for _name in REDUCERS:
    NAIVE.register(_name, lower=lower_naive_reduce)
