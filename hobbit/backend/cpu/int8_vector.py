"""The vector steps every int8 kernel shares: the dot-product instruction and the
epilogues (QConv's requantization, QConvInteger's int32 result)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.emit.epilogue import scalar_expr
from hobbit.emit.scalar import Emit
from hobbit.plan.int8 import DotProduct

Index = int | ir.Value
I8, I32 = ir.IntType(8), ir.IntType(32)
F32 = ir.FloatType()
U8 = np.dtype(np.uint8)


def requantize(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value,
               residual: ir.Value | None = None) -> ir.Value:
    """clip(rint((acc + offset) * multiplier) + y_zero, lo, hi) as bytes, on vectors (the int8
    kernels' epilogue); with a residual (bytes), that plus the residual as QAdd computes it
    (QConv's sum_* attributes).

    Computed as rint(clip(real, lo - y_zero, hi - y_zero)) + y_zero, which is the same value:
    rint is monotonic and the bounds are integers, and the sum is exact in int32. The clamp
    keeps the conversion in range, and a conversion that rounds (vcvtps2dq, round to nearest
    even) replaces rint, a float add and a truncating conversion: at K = 64 (ResNet-50's
    1x1 convolutions with a fused residual) the epilogue took 45% of the kernel's time.

    A QConv's `then` (a fused QRequantize) then moves the bytes to its parameters with
    QRequantize's own element-wise expression, so they are what the separate kernel wrote."""
    b, lanes = kb.b, acc.type.count
    vf = ir.VectorType(F32, lanes)
    real = b.fmul(b.sitofp(b.add(acc, offset), vf), multiplier)
    y_zero = attrs["y_zero"]
    if residual is None:
        q = _to_bytes(kb, real, y_zero, attrs["lo"], attrs["hi"])
    else:
        centred = _rint(kb, _clamped(kb, real, attrs["lo"] - y_zero, attrs["hi"] - y_zero))
        q = _add_residual(kb, attrs, centred, residual)
    then = attrs.get("then")
    if not then:
        return q
    return scalar_expr("QRequantize")(Emit(kb, np.dtype(then["to"]), lanes), [q], then)


def _to_bytes(kb: KernelBuilder, x: ir.Value, zero: int, lo: int, hi: int) -> ir.Value:
    """clip(rint(x) + zero, lo, hi) as bytes, by the equivalent rint(clip(x, lo - zero, hi - zero)) + zero."""
    b, lanes = kb.b, x.type.count
    vi = ir.VectorType(I32, lanes)
    rounded = kb.call_intrinsic(f"llvm.lrint.v{lanes}i32.v{lanes}f32", vi, [_clamped(kb, x, lo - zero, hi - zero)])
    return b.trunc(b.add(rounded, ir.Constant(vi, [int(zero)] * lanes)), ir.VectorType(I8, lanes))


def _add_residual(kb: KernelBuilder, attrs: dict, centred: ir.Value, residual: ir.Value) -> ir.Value:
    """QAdd of q = centred + y_zero (centred integral float32, q within the conv's bounds)
    and the residual bytes, in the order of its scalar expression (hobbit/emit/scalar_ops.py),
    so the fused result is bit-identical: q - a_zero is the exact integer centred + (y_zero - a_zero)."""
    b, lanes = kb.b, centred.type.count
    vf, vi = centred.type, ir.VectorType(I32, lanes)
    signed = np.dtype(attrs["to"]).kind == "i"
    r = b.sext(residual, vi) if signed else b.zext(residual, vi)
    shift = attrs["y_zero"] - attrs["sum_a_zero"]
    own = b.fmul(b.fadd(centred, _splat(vf, shift)) if shift else centred, _splat(vf, attrs["sum_a_scale"]))
    other = b.fmul(b.sitofp(b.sub(r, ir.Constant(vi, [int(attrs["sum_b_zero"])] * lanes)), vf),
                   _splat(vf, attrs["sum_b_scale"]))
    total = b.fdiv(b.fadd(own, other), _splat(vf, attrs["sum_y_scale"]))
    return _to_bytes(kb, total, attrs["sum_y_zero"], attrs["sum_lo"], attrs["sum_hi"])


def _splat(vf: ir.VectorType, value: float) -> ir.Constant:
    return ir.Constant(vf, [float(np.float32(value))] * vf.count)


def _rint(kb: KernelBuilder, x: ir.Value) -> ir.Value:
    return kb.call_intrinsic(f"llvm.rint.v{x.type.count}f32", x.type, [x])


def _clamped(kb: KernelBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    n = x.type.count
    x = kb.call_intrinsic(f"llvm.maxnum.v{n}f32", x.type, [x, _splat(x.type, lo)])
    return kb.call_intrinsic(f"llvm.minnum.v{n}f32", x.type, [x, _splat(x.type, hi)])


def requantize_channel(kb: KernelBuilder, attrs: dict, acc: ir.Value, offset: ir.Value, multiplier: ir.Value,
                       channel: int | ir.Value, residual: ir.Value | None = None) -> ir.Value:
    """requantize with one output channel's offset and multiplier for every lane."""
    lanes = acc.type.count
    return requantize(kb, attrs, acc, kb.splat(kb.load(offset, np.dtype(np.int32), channel), lanes),
                      kb.splat(kb.load(multiplier, np.dtype(np.float32), channel), lanes), residual)


def zero_byte(kb: KernelBuilder, zero: ir.Value) -> ir.Value:
    """QConvInteger's / QMatMulInteger's run-time zero point (input 3), its byte as stored."""
    return kb.load(zero, U8, 0)


def zero_read(kb: KernelBuilder, node, byte: ir.Value) -> ir.Value:
    """The zero point's byte as an int32, as the kernels read activations (int8 + 128)."""
    if np.dtype(node.inputs[3].dtype) == np.int8:
        return kb.b.add(kb.b.sext(byte, I32), ir.Constant(I32, 128))
    return kb.b.zext(byte, I32)


class ConvEpilogue:
    """What a conv kernel does with a channel's int32 sums: QConv requantizes them (with
    the fused residual, if any) to bytes; QConvInteger subtracts the run-time zero point
    times the channel's weight sum and stores int32."""

    def __init__(self, kb: KernelBuilder, node, inputs: list, y: ir.Value):
        self.kb, self.node, self.y = kb, node, y
        self.integer = node.op == "QConvInteger"
        if self.integer:
            self.sums, self.zero_byte = inputs[2], zero_byte(kb, inputs[3])
            self.zero = zero_read(kb, node, self.zero_byte)
        else:
            self.offset, self.multiplier = inputs[2], inputs[3]
            self.residual = inputs[4] if len(inputs) > 4 else None

    def fill(self) -> int | ir.Value:
        """The byte the padding holds: the activations' zero point as stored."""
        if self.integer:
            return self.zero_byte
        return self.node.attrs["x_zero"] & 0xFF

    @property
    def dtype(self) -> np.dtype:
        """What y holds: int32 sums (QConvInteger) or bytes."""
        return np.dtype(np.int32) if self.integer else U8

    def convert(self, acc: ir.Value, channel: Index, at: Index, mask: ir.Value | None) -> ir.Value:
        """Channel `channel`'s sums in `acc` as y[at ...] is to hold them (of self.dtype)."""
        kb, lanes = self.kb, acc.type.count
        if self.integer:
            correction = kb.b.mul(self.zero, kb.load(self.sums, np.dtype(np.int32), channel))
            return kb.b.sub(acc, kb.splat(correction, lanes))
        residual = None if self.residual is None else kb.vload(self.residual, U8, at, lanes, mask)
        return requantize_channel(kb, self.node.attrs, acc, self.offset, self.multiplier, channel, residual)

    def store(self, acc: ir.Value, channel: Index, at: Index, mask: ir.Value | None) -> None:
        """Channel `channel`'s sums in `acc` to y[at ...] (masked lanes untouched)."""
        self.kb.vstore(self.convert(acc, channel, at, mask), self.y, self.dtype, at, mask)


def dot_step(kb: KernelBuilder, dot: DotProduct, acc: ir.Value, activations: ir.Value, weights: ir.Value) -> ir.Value:
    """acc + the lane-wise dot products of `group` activations and weights (vpdpbusd at the
    width of acc, which may be narrower than dot.lanes)."""
    if dot.name == "vpdpbusd":
        return kb.call_intrinsic(f"llvm.x86.avx512.vpdpbusd.{32 * acc.type.count}", acc.type,
                                 [acc, activations, weights])
    pairs = kb.call_intrinsic("llvm.x86.avx2.pmadd.wd", acc.type, [activations, weights])
    return kb.b.add(acc, pairs)
