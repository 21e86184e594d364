"""Scalar expressions for element-wise ops, written once for scalars and vectors.

An element-wise op's registration is a few lines over this vocabulary; the same
expression serves the standalone loop, fused epilogues of Conv/Gemm, and any
vector width. Transcendentals are polynomial so they vectorise (no libm calls
in hot loops)."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from hobbit.lower.builder import KernelBuilder, is_float, llvm_type, overload_suffix

_FLOAT_FLAGS = ("contract",)


class Emit:
    def __init__(self, kb: KernelBuilder, dtype: np.dtype, width: int):
        self.kb = kb
        self.b = kb.b
        self.dtype = np.dtype(dtype)
        self.width = width
        self.float = is_float(self.dtype)

    def c(self, v: float) -> ir.Constant:
        return self.kb.const(self.dtype, v, self.width)

    # -- arithmetic -------------------------------------------------------------
    def add(self, a, b):
        return self.b.fadd(a, b, flags=_FLOAT_FLAGS) if self.float else self.b.add(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b, flags=_FLOAT_FLAGS) if self.float else self.b.sub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b, flags=_FLOAT_FLAGS) if self.float else self.b.mul(a, b)

    def div(self, a, b):
        """Integer division never traps: x/0 gives 0 (as numpy does) and MIN/-1 wraps.

        Vector lanes past a ragged edge hold zeros, so a trapping divide would
        crash even on valid data."""
        if self.float:
            return self.b.fdiv(a, b)
        zero = self.b.icmp_unsigned("==", b, self.c(0))
        if self.dtype.kind == "u":
            return self.select(zero, self.c(0), self.b.udiv(a, self.select(zero, self.c(1), b)))
        minus_one = self.b.icmp_signed("==", b, self.c(-1))
        safe = self.select(self.b.or_(zero, minus_one), self.c(1), b)
        quotient = self.b.sdiv(a, safe)
        return self.select(zero, self.c(0), self.select(minus_one, self.neg(a), quotient))

    def fma(self, a, b, c):
        if not self.float:
            return self.add(self.mul(a, b), c)
        return self.kb.call_intrinsic(f"llvm.fma.{overload_suffix(a.type)}", a.type, [a, b, c])

    def neg(self, a):
        return self.b.fneg(a) if self.float else self.b.sub(self.c(0), a)

    def lt(self, a, b):
        if self.float:
            return self.b.fcmp_ordered("<", a, b)
        return self.b.icmp_signed("<", a, b) if self.dtype.kind == "i" else self.b.icmp_unsigned("<", a, b)

    def gt(self, a, b):
        return self.lt(b, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def max(self, a, b):
        """max that keeps a NaN in `a` (as onnxruntime does for Relu/Clip)."""
        return self.select(self.lt(a, b), b, a)

    def min(self, a, b):
        return self.select(self.lt(b, a), b, a)

    def clamp(self, x, lo: float, hi: float):
        return self.min(self.max(x, self.c(lo)), self.c(hi))

    def abs(self, a):
        if self.float:
            return self._intrinsic("llvm.fabs", a)
        return self.select(self.lt(a, self.c(0)), self.neg(a), a)

    def sqrt(self, a):
        return self._intrinsic("llvm.sqrt", a)

    def floor(self, a):
        return self._intrinsic("llvm.floor", a)

    def ceil(self, a):
        return self._intrinsic("llvm.ceil", a)

    def round_even(self, a):
        return self._intrinsic("llvm.roundeven", a)

    def log(self, a):
        return self._intrinsic("llvm.log", a)

    def pow(self, a, b):
        return self.kb.call_intrinsic(f"llvm.pow.{overload_suffix(a.type)}", a.type, [a, b])

    def is_nan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    # -- conversions --------------------------------------------------------------
    def convert(self, x, to_dtype: np.dtype):
        """`x` (of this emitter's dtype) as `to_dtype`, numpy astype semantics.

        To bool is `x != 0` stored as 0/1; bool reads as an unsigned 0/1 byte.
        Float -> int saturates (llvm.fpto[su]i.sat, NaN -> 0) so out-of-range
        values give a defined result instead of LLVM poison."""
        src, dst = self.dtype, np.dtype(to_dtype)
        dst_ty = llvm_type(dst)
        if self.width > 1:
            dst_ty = ir.VectorType(dst_ty, self.width)
        b = self.b
        if dst == src:
            return x
        if dst.kind == "b":
            zero = self.c(0)
            nonzero = b.fcmp_unordered("!=", x, zero) if self.float else b.icmp_unsigned("!=", x, zero)
            return b.zext(nonzero, dst_ty)
        if self.float and is_float(dst):
            return b.fpext(x, dst_ty) if dst.itemsize > src.itemsize else b.fptrunc(x, dst_ty)
        if self.float:
            kind = "fptosi" if dst.kind == "i" else "fptoui"
            name = f"llvm.{kind}.sat.{overload_suffix(dst_ty)}.{overload_suffix(x.type)}"
            return self.kb.call_intrinsic(name, dst_ty, [x])
        signed = src.kind == "i"
        if is_float(dst):
            return b.sitofp(x, dst_ty) if signed else b.uitofp(x, dst_ty)
        if dst.itemsize < src.itemsize:
            return b.trunc(x, dst_ty)
        if dst.itemsize > src.itemsize:
            return b.sext(x, dst_ty) if signed else b.zext(x, dst_ty)
        return x

    # -- transcendentals ----------------------------------------------------------
    def exp(self, x):
        """exp by range reduction to [-ln2/2, ln2/2] and a degree-7 polynomial.

        Rel. error ~2e-7 in float32; overflow gives +inf, underflow 0, NaN stays NaN."""
        if self.dtype != np.float32:
            return self._intrinsic("llvm.exp", x)
        b = self.b
        xc = self.clamp(x, -87.3, 88.7)
        n = self.round_even(self.mul(xc, self.c(1.0 / math.log(2.0))))
        r = self.fma(n, self.c(-0.693145751953125), xc)
        r = self.fma(n, self.c(-1.428606765330187e-06), r)
        p = self.c(1.0 / 5040)
        for k in (720, 120, 24, 6, 2, 1, 1):
            p = self.fma(p, r, self.c(1.0 / k))
        ity = ir.IntType(32) if self.width == 1 else ir.VectorType(ir.IntType(32), self.width)
        ni = b.fptosi(n, ity)
        bits = b.shl(b.add(ni, _ivec(ity, 127)), _ivec(ity, 23))
        scale = b.bitcast(bits, p.type)
        y = self.mul(p, scale)
        y = self.select(self.gt(x, self.c(88.7)), self.c(math.inf), y)
        y = self.select(self.lt(x, self.c(-87.3)), self.c(0.0), y)
        return self.select(self.is_nan(x), x, y)

    def sigmoid(self, x):
        return self.div(self.c(1.0), self.add(self.c(1.0), self.exp(self.neg(x))))

    def tanh(self, x):
        """tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); a cubic near 0 keeps relative accuracy."""
        ax = self.abs(x)
        t = self.sub(self.c(1.0), self.div(self.c(2.0), self.add(self.exp(self.mul(ax, self.c(2.0))), self.c(1.0))))
        small = self.mul(ax, self.sub(self.c(1.0), self.mul(self.mul(ax, ax), self.c(1.0 / 3.0))))
        t = self.select(self.lt(ax, self.c(0.004)), small, t)
        return self._copysign(t, x)

    def erf(self, x):
        """erf by Abramowitz & Stegun 7.1.26 (abs. error < 1.5e-7)."""
        ax = self.abs(x)
        t = self.div(self.c(1.0), self.fma(ax, self.c(0.3275911), self.c(1.0)))
        poly = self.c(1.061405429)
        for coef in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly = self.fma(poly, t, self.c(coef))
        poly = self.mul(poly, t)
        y = self.sub(self.c(1.0), self.mul(poly, self.exp(self.neg(self.mul(ax, ax)))))
        return self._copysign(y, x)

    def _copysign(self, mag, sign):
        return self.kb.call_intrinsic(f"llvm.copysign.{overload_suffix(mag.type)}", mag.type, [mag, sign])

    def _intrinsic(self, name: str, a):
        return self.kb.call_intrinsic(f"{name}.{overload_suffix(a.type)}", a.type, [a])


def _ivec(ty: ir.Type, v: int) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)
