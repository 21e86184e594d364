"""Average pools of quantized tensors, bytes in and bytes out, with onnxruntime's arithmetic
so that the bytes match its QLinearGlobalAveragePool and QLinearAveragePool.

QGlobalAveragePool: each [N, C] plane is contiguous (NCHW): its bytes are widened to int32
lanes and added one vector at a time (the last one masked), the lanes summed exactly, and
the sum requantized on one lane by hobbit/backend/cpu/int8_vector.py's epilogue with the offset
-x_zero * HW and the multiplier the int8 pass computed.

QAveragePool (windows smaller than the plane, which none of the zoo models has): one output
at a time, its window's dequantized taps added in float32 in row order, as onnxruntime does
(an int32 sum would round differently near ties). The columns a window covers are fixed at
compile time per run of output columns with the same clipping, the rows at run time.

Planes are split between threads when the input is big enough to pay for it."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.backend.cpu.int8_vector import F32, I32, requantize
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.scalar import Emit
from hobbit.ops.qlinear import average_window

# Below ~16K input bytes a parallel region costs more than it saves (the element-wise
# kernels' threshold, hobbit/backend/cpu/elementwise.py).
_PARALLEL_BYTES = 16384


def lower_qglobal_average_pool(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    b = kb.b
    x_type = node.inputs[0].dtype
    area = int(np.prod(node.inputs[0].shape[2:]))
    lanes = k.width(np.dtype(np.int32))
    vi = ir.VectorType(I32, lanes)
    full, tail = divmod(area, lanes)
    acc_ptr = kb.local(ir.Constant(vi, None))
    lo, hi = _planes(k)
    with kb.loop(lo, hi, name="plane") as plane:
        start = kb.mul(plane, area)
        b.store(ir.Constant(vi, None), acc_ptr)
        with kb.loop(0, full, name="chunk") as chunk:
            values = _widened(kb, k.inputs[0], x_type, kb.add(start, kb.mul(chunk, lanes)), lanes, None)
            b.store(b.add(b.load(acc_ptr, typ=vi), values), acc_ptr)
        acc = b.load(acc_ptr, typ=vi)
        if tail:
            acc = b.add(acc, _widened(kb, k.inputs[0], x_type, kb.add(start, full * lanes), lanes,
                                      kb.prefix_mask(lanes, tail)))
        total = kb.call_intrinsic(f"llvm.vector.reduce.add.v{lanes}i32", I32, [acc])
        a = node.attrs
        one = ir.VectorType(I32, 1)
        offset = ir.Constant(one, [-a["x_zero"] * area])
        multiplier = ir.Constant(ir.VectorType(F32, 1), [float(np.float32(a["multiplier"]))])
        y = requantize(kb, a, b.insert_element(ir.Constant(one, None), total, ir.Constant(I32, 0)), offset, multiplier)
        kb.store(b.extract_element(y, ir.Constant(I32, 0)), k.outputs[0], np.dtype(a["to"]), plane)


def _planes(k: KernelArgs) -> tuple:
    """This thread's share of the [N, C] planes (all of them for a small input)."""
    planes = int(np.prod(k.node.inputs[0].shape[:2]))
    return k.threads.split(planes) if k.node.inputs[0].type.nbytes >= _PARALLEL_BYTES else (0, planes)


def lower_qaverage_pool(k: KernelArgs) -> None:
    kb, node, a = k.kb, k.node, k.node.attrs
    b = kb.b
    _, _, h, w = node.inputs[0].shape
    _, _, oh_n, ow_n = node.outputs[0].shape
    (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
    x_type, to = np.dtype(node.inputs[0].dtype), np.dtype(a["to"])
    f = Emit(kb, np.dtype(np.float32), 1)
    wide, byte = Emit(kb, np.dtype(np.int32), 1), Emit(kb, x_type, 1)
    acc_ptr = kb.local(f.c(0.0))
    lo, hi = _planes(k)
    with kb.loop(lo, hi, name="plane") as plane:
        with kb.loop(0, oh_n, name="oh") as oh:
            top = kb.add(kb.mul(oh, sh), -a["pads"][0])
            first = _select(kb, ">", top, 0)
            last = _select(kb, "<", kb.add(top, kh), h)
            for start, stop, t0, t1 in _column_runs(ow_n, w, kw, sw, a["pads"][1]):
                with kb.loop(start, stop, name="ow") as ow:
                    b.store(f.c(0.0), acc_ptr)
                    with kb.loop(first, last, name="row") as row:
                        at = kb.add(kb.mul(kb.add(kb.mul(plane, h), row), w), kb.add(kb.mul(ow, sw), -a["pads"][1]))
                        acc = b.load(acc_ptr, typ=F32)
                        for t in range(t0, t1):
                            pixel = byte.convert(kb.load(k.inputs[0], x_type, kb.add(at, t)), np.int32)
                            real = wide.convert(wide.sub(pixel, wide.c(a["x_zero"])), np.float32)
                            acc = f.add(acc, f.mul(f.c(a["x_scale"]), real))
                        b.store(acc, acc_ptr)
                    count = kh * kw if a["count_include_pad"] else b.mul(b.sub(last, first), kb.i64(t1 - t0))
                    mean = f.div(b.load(acc_ptr, typ=F32), b.sitofp(kb.idx(count), F32))
                    q = f.round_even(f.add(f.div(mean, f.c(a["y_scale"])), f.c(a["y_zero"])))
                    y_at = kb.add(kb.mul(kb.add(kb.mul(plane, oh_n), oh), ow_n), ow)
                    kb.store(f.convert(f.clamp(q, a["lo"], a["hi"]), to), k.outputs[0], to, y_at)


def _select(kb, keep: str, a: ir.Value, bound: int) -> ir.Value:
    """max(a, bound) for keep ">", min(a, bound) for keep "<"."""
    bv = kb.i64(bound)
    return kb.b.select(kb.b.icmp_signed(keep, a, bv), a, bv)


def _column_runs(out: int, size: int, k: int, stride: int, pad: int) -> list[tuple[int, int, int, int]]:
    """(first, stop, tap lo, tap hi): runs of output columns whose clipped windows cover the
    same taps, tap t of column o reading input column o * stride - pad + t."""
    runs: list[tuple[int, int, int, int]] = []
    for o in range(out):
        start, stop = average_window(o, size, k, stride, pad)
        taps = (start - (o * stride - pad), stop - (o * stride - pad))
        if runs and runs[-1][2:] == taps:
            runs[-1] = (runs[-1][0], o + 1) + taps
        else:
            runs.append((o, o + 1) + taps)
    return runs


def _widened(kb, x: ir.Value, dtype: np.dtype, at, lanes: int, mask) -> ir.Value:
    """`lanes` bytes of x from `at` as int32 (masked-off lanes read as 0)."""
    vi = ir.VectorType(I32, lanes)
    raw = kb.vload(x, dtype, at, lanes, mask)
    return kb.b.sext(raw, vi) if np.dtype(dtype).kind == "i" else kb.b.zext(raw, vi)


CPU.register("QGlobalAveragePool", lower=lower_qglobal_average_pool)
CPU.register("QAveragePool", lower=lower_qaverage_pool)
