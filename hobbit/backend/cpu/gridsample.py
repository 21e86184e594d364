"""The GridSample kernel.

Per output position the kernel reads the grid's coordinates once and turns
each spatial dim into a few (input index, weight) taps: denormalise, bring an
out-of-range coordinate back by the padding mode (clamp for 'border', mirror
for 'reflection'), then 1 (nearest), 2 (linear) or 4 (cubic) taps whose
indices are clamped or mirrored again ('zeros' gives an outside tap weight 0
and a clamped, harmless index). The tap products are combined once; the loop
over channels then only loads and multiplies, and never leaves X."""

from __future__ import annotations

import itertools

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.emit.scalar import Emit

CUBIC_A = -0.75


def _borders(size: int, align_corners: bool) -> tuple[float, float]:
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def _reflect(e: Emit, x, lo: float, hi: float):
    """Mirror x at lo and hi until it lies in [lo, hi] (identity inside)."""
    span = hi - lo
    if span <= 0:
        return e.c(lo)
    b = e.b
    below = e.lt(x, e.c(lo))
    dx = e.select(below, e.sub(e.c(lo), x), e.sub(x, e.c(hi)))
    folds = e.floor(e.div(dx, e.c(span)))
    rest = e.sub(dx, e.mul(folds, e.c(span)))
    half = e.mul(folds, e.c(0.5))
    even = b.fcmp_ordered("==", e.floor(half), half)
    from_low, from_high = e.add(e.c(lo), rest), e.sub(e.c(hi), rest)
    outside = e.select(below, e.select(even, from_low, from_high), e.select(even, from_high, from_low))
    inside = b.and_(b.not_(below), b.not_(e.gt(x, e.c(hi))))
    return e.select(inside, x, outside)


def _cubic_weights(e: Emit, t) -> list:
    """Keys' cubic weights of the taps at distances t+1, t, 1-t, 2-t."""
    a = CUBIC_A

    def near(d):
        return e.add(e.mul(e.mul(e.sub(e.mul(e.c(a + 2), d), e.c(a + 3)), d), d), e.c(1.0))

    def far(d):
        return e.sub(e.mul(e.add(e.mul(e.sub(e.mul(e.c(a), d), e.c(5 * a)), d), e.c(8 * a)), d), e.c(4 * a))

    one = e.c(1.0)
    return [far(e.add(t, one)), near(t), near(e.sub(one, t)), far(e.sub(e.c(2.0), t))]


def _axis_taps(e: Emit, x, size: int, a: dict) -> list[tuple[ir.Value, ir.Value]]:
    """(index, weight) taps of one spatial dim for the denormalised coordinate x."""
    kb, b = e.kb, e.b
    lo, hi = _borders(size, a["align_corners"])
    mode, padding = a["mode"], a["padding_mode"]
    if mode == "nearest":
        x = e.round_even(x)
    out_of_range = b.or_(e.lt(x, e.c(lo)), e.gt(x, e.c(hi)))
    if padding == "border":
        x = e.select(out_of_range, e.clamp(x, 0.0, size - 1.0), x)
    elif padding == "reflection":
        x = _reflect(e, x, lo, hi)
    if mode == "nearest":
        first, weights = _index(e, x), [e.c(1.0)]
    else:
        base = e.floor(x)
        t = e.sub(x, base)
        first = _index(e, base)
        if mode == "linear":
            weights = [e.sub(e.c(1.0), t), t]
        else:
            weights = _cubic_weights(e, t)
            first = b.sub(first, kb.i64(1))
    taps = []
    for k, w in enumerate(weights):
        i = b.add(first, kb.i64(k))
        if padding == "reflection":
            mirrored = _reflect(e, b.sitofp(i, e.c(0.0).type), lo, hi)
            i = _index(e, mirrored)
        elif padding == "zeros":
            inside = b.icmp_unsigned("<", i, kb.i64(size))
            w = e.select(inside, w, e.c(0.0))
        taps.append((_clamp_index(kb, i, size), w))
    return taps


def _index(e: Emit, x) -> ir.Value:
    """An integral float as int64; NaN and infinities saturate (never poison)."""
    return e.convert(x, np.dtype(np.int64))


def _clamp_index(kb: KernelBuilder, i: ir.Value, size: int) -> ir.Value:
    b = kb.b
    i = b.select(b.icmp_signed("<", i, kb.i64(0)), kb.i64(0), i)
    return b.select(b.icmp_signed(">", i, kb.i64(size - 1)), kb.i64(size - 1), i)


def _denormalize(e: Emit, v, size: int, align_corners: bool):
    if align_corners:
        return e.mul(e.add(v, e.c(1.0)), e.c((size - 1) / 2.0))
    return e.div(e.sub(e.mul(e.add(v, e.c(1.0)), e.c(float(size))), e.c(1.0)), e.c(2.0))


def lower_gridsample(k: KernelArgs) -> None:
    kb, node, a = k.kb, k.node, k.node.attrs
    b = kb.b
    xv, gv = node.inputs
    dtype, gdtype = np.dtype(xv.dtype), np.dtype(gv.dtype)
    cd = compute_dtype(dtype)
    e, gload = Emit(kb, cd, 1), Emit(kb, compute_dtype(gdtype), 1)
    n, c = xv.shape[:2]
    sizes = tuple(xv.shape[2:])
    rank = len(sizes)
    positions = int(np.prod(gv.shape[1:-1], dtype=np.int64))
    plane = int(np.prod(sizes, dtype=np.int64))
    strides = contiguous_strides(tuple(sizes))

    lo, hi = k.threads.split(n * positions)
    with kb.loop(lo, hi, name="point") as point:
        image = b.udiv(point, kb.i64(positions))
        pos = b.urem(point, kb.i64(positions))
        per_dim = []
        for d in range(rank):
            # The grid lists coordinates innermost dim first (x, y[, z]).
            raw = kb.load(k.inputs[1], gdtype, kb.add(kb.mul(point, rank), rank - 1 - d))
            coordinate = _denormalize(e, gload.convert(widen(b, raw, gdtype), cd), sizes[d], a["align_corners"])
            per_dim.append(_axis_taps(e, coordinate, sizes[d], a))
        combos = []
        for taps in itertools.product(*per_dim):
            weight = taps[0][1]
            for _, w in taps[1:]:
                weight = e.mul(weight, w)
            combos.append((kb.affine([(i, s) for (i, _), s in zip(taps, strides)]), weight))
        x_image = kb.mul(image, c * plane)
        y_image = kb.add(kb.mul(image, c * positions), pos)
        with kb.loop(0, c, name="c") as ch:
            x_plane = kb.add(x_image, kb.mul(ch, plane))
            acc = e.c(0.0)
            for offset, weight in combos:
                value = widen(b, kb.load(k.inputs[0], dtype, kb.add(x_plane, offset)), dtype)
                acc = e.fma(value, weight, acc)
            kb.store(narrow(b, acc, dtype), k.outputs[0], dtype, kb.add(y_image, kb.mul(ch, positions)))


CPU.register("GridSample", lower=lower_gridsample)
