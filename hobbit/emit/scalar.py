"""Scalar expressions for element-wise ops, written once for scalars and vectors.

An element-wise op's registration is a few lines over this vocabulary; the same
expression serves the standalone loop, fused epilogues of Conv/Gemm, and any
vector width. Transcendentals are polynomial so they vectorise (no libm calls
in hot loops)."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.emit.builder import KernelBuilder, is_float, llvm_type, overload_suffix
from hobbit.emit.half import BFLOAT16, compute_dtype, is_half, narrow, widen

_FLOAT_FLAGS = ("contract",)


class Emit:
    def __init__(self, kb: KernelBuilder, dtype: np.dtype, width: int):
        if np.dtype(dtype) == BFLOAT16:
            raise CodegenError("bfloat16 values compute in float32: widen them first (hobbit.emit.half)")
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

    def log(self, x):
        """Natural log; float32 splits x = m * 2**k with m in [sqrt(1/2), sqrt(2)) and sums
        2*atanh((m-1)/(m+1)) as a series (rel. error ~1e-7). 0 -> -inf, x < 0 -> NaN."""
        if self.dtype != np.float32:
            return self._intrinsic("llvm.log", x)
        b = self.b
        ity = ir.IntType(32) if self.width == 1 else ir.VectorType(ir.IntType(32), self.width)
        subnormal = self.lt(x, self.c(2.0 ** -126))
        scaled = self.select(subnormal, self.mul(x, self.c(2.0 ** 23)), x)
        bits = b.bitcast(scaled, ity)
        k = b.ashr(b.sub(bits, _ivec(ity, 0x3F3504F3)), _ivec(ity, 23))
        m = b.bitcast(b.sub(bits, b.shl(k, _ivec(ity, 23))), scaled.type)
        exponent = self.sub(b.sitofp(k, scaled.type), self.select(subnormal, self.c(23.0), self.c(0.0)))
        s = self.div(self.sub(m, self.c(1.0)), self.add(m, self.c(1.0)))
        z = self.mul(s, s)
        series = self.c(2.0 / 11)
        for odd in (9, 7, 5, 3):
            series = self.fma(series, z, self.c(2.0 / odd))
        log_m = self.fma(self.mul(s, z), series, self.add(s, s))
        y = self.fma(exponent, self.c(0.693145751953125), self.fma(exponent, self.c(1.428606765330187e-06), log_m))
        y = self.select(self.b.fcmp_ordered("==", x, self.c(math.inf)), x, y)
        y = self.select(self.b.fcmp_ordered("==", x, self.c(0.0)), self.c(-math.inf), y)
        return self.select(self.b.fcmp_unordered("<", x, self.c(0.0)), self.c(math.nan), y)

    def log1p(self, u):
        """log(1 + u), accurate for small u: log(w) * u / (w - 1) with w = 1 + u rounded."""
        w = self.add(u, self.c(1.0))
        y = self.mul(self.log(w), self.div(u, self.sub(w, self.c(1.0))))
        y = self.select(self.b.fcmp_ordered("==", u, self.c(math.inf)), u, y)
        return self.select(self.b.fcmp_ordered("==", w, self.c(1.0)), u, y)

    def pow(self, a, b):
        """a ** b for floats; float32 as exp(b * log|a|) with C99's special cases, so it vectorises."""
        if self.dtype != np.float32:
            return self.kb.call_intrinsic(f"llvm.pow.{overload_suffix(a.type)}", a.type, [a, b])
        magnitude = self.exp(self.mul(b, self.log(self.abs(a))))
        integral = self.b.fcmp_ordered("==", b, self.floor(b))
        half = self.mul(b, self.c(0.5))
        odd = self.b.and_(integral, self.b.fcmp_ordered("!=", half, self.floor(half)))
        y = self.select(odd, self.copysign(magnitude, a), magnitude)
        finite_negative = self.b.and_(self.lt(a, self.c(0)), self.gt(a, self.c(-math.inf)))
        y = self.select(self.b.and_(finite_negative, self.b.not_(integral)), self.c(math.nan), y)
        minus_one_to_inf = self.b.and_(self.b.fcmp_ordered("==", a, self.c(-1.0)), self.is_inf(b))
        one = self.b.or_(self.b.fcmp_ordered("==", a, self.c(1.0)), minus_one_to_inf)
        y = self.select(self.b.or_(one, self.b.fcmp_ordered("==", b, self.c(0))), self.c(1.0), y)
        return y

    def ipow(self, base, exponent):
        """Integer power by squaring over all the exponent's bits (wrapping like C integers);
        a negative exponent gives 0 except for bases 1 and -1 (C's pow, truncated)."""
        b = self.b
        one, result, square = self.c(1), self.c(1), base
        e = exponent
        for _ in range(self.dtype.itemsize * 8):
            bit = b.icmp_unsigned("!=", b.and_(e, _ivec(e.type, 1)), _ivec(e.type, 0))
            result = self.select(bit, self.mul(result, square), result)
            square = self.mul(square, square)
            e = b.lshr(e, _ivec(e.type, 1))
        negative = b.icmp_signed("<", exponent, _ivec(exponent.type, 0))
        odd = b.icmp_unsigned("!=", b.and_(exponent, _ivec(exponent.type, 1)), _ivec(exponent.type, 0))
        unit = self.select(b.icmp_signed("==", base, one), one,
                           self.select(b.icmp_signed("==", base, self.c(-1)),
                                       self.select(odd, self.c(-1), one), self.c(0)))
        return self.select(negative, unit, result)

    def is_nan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def as_bool(self, flag):
        """An i1 (vector) flag as numpy's bool: a 0/1 byte."""
        ty = llvm_type(np.dtype(np.bool_))
        return self.b.zext(flag, ir.VectorType(ty, self.width) if self.width > 1 else ty)

    def is_inf(self, a, positive: bool = True, negative: bool = True):
        if positive and negative:
            return self.b.fcmp_ordered("==", self.abs(a), self.c(math.inf))
        if positive:
            return self.b.fcmp_ordered("==", a, self.c(math.inf))
        if negative:
            return self.b.fcmp_ordered("==", a, self.c(-math.inf))
        return self.b.fcmp_ordered("!=", a, a)  # detects nothing: always false

    def sign(self, a):
        """-1, 0 or 1 (floats keep ±0 and NaN)."""
        zero = self.c(0)
        return self.select(self.gt(a, zero), self.c(1), self.select(self.lt(a, zero), self.c(-1), a))

    def mod(self, a, b, fmod: bool):
        """a mod b: with `fmod` the remainder of truncated division (sign of a), else of floored
        division (sign of b). Integer x mod 0 is 0 rather than a trap."""
        if self.float:
            r = self.b.frem(a, b)
            if fmod:
                return r
            zero = self.c(0)
            differ = self.b.xor(self.lt(r, zero), self.lt(b, zero))
            shifted = self.select(self.b.and_(self.b.fcmp_ordered("!=", r, zero), differ), self.add(r, b), r)
            return self.select(self.b.fcmp_ordered("==", shifted, zero), self.copysign(shifted, b), shifted)
        zero = self.b.icmp_unsigned("==", b, self.c(0))
        if self.dtype.kind == "u":
            return self.select(zero, self.c(0), self.b.urem(a, self.select(zero, self.c(1), b)))
        trivial = self.b.or_(zero, self.b.icmp_signed("==", b, self.c(-1)))
        r = self.select(trivial, self.c(0), self.b.srem(a, self.select(trivial, self.c(1), b)))
        if fmod:
            return r
        differ = self.b.xor(self.lt(r, self.c(0)), self.lt(b, self.c(0)))
        return self.select(self.b.and_(self.b.icmp_signed("!=", r, self.c(0)), differ), self.add(r, b), r)

    def shift(self, a, amount, left: bool):
        """a << amount or a >> amount (arithmetic for signed dtypes); an amount outside
        [0, bits) shifts everything out: 0, or -1 for a right shift of a negative signed a."""
        bits = self.dtype.itemsize * 8
        in_range = self.b.icmp_unsigned("<", amount, self.c(bits))
        safe = self.select(in_range, amount, self.c(0))
        if left:
            return self.select(in_range, self.b.shl(a, safe), self.c(0))
        if self.dtype.kind == "i":
            return self.select(in_range, self.b.ashr(a, safe), self.b.ashr(a, self.c(bits - 1)))
        return self.select(in_range, self.b.lshr(a, safe), self.c(0))

    # -- conversions --------------------------------------------------------------
    def convert(self, x, to_dtype: np.dtype):
        """`x` (of this emitter's dtype) as `to_dtype`, numpy astype semantics; float16 and
        bfloat16 results are rounded to nearest even and handed on in float32.

        To bool is `x != 0` stored as 0/1; bool reads as an unsigned 0/1 byte.
        Float -> int saturates (llvm.fpto[su]i.sat, NaN -> 0) so out-of-range
        values give a defined result instead of LLVM poison."""
        src, dst = self.dtype, np.dtype(to_dtype)
        if is_half(dst):
            # Rounded once into the 16-bit dtype, then carried on in its compute dtype.
            wide = x if self.float else self.convert(x, compute_dtype(dst))
            return widen(self.b, narrow(self.b, wide, dst), dst)
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
        if self.float and dst.itemsize < 4:
            return self._narrow_saturated(x, dst, dst_ty)
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

    def _narrow_saturated(self, x, dst: np.dtype, dst_ty: ir.Type):
        """Float -> 8/16-bit int, saturating, NaN -> 0: clamped in float, then an exact int32
        conversion and a truncation. LLVM scalarises llvm.fpto[su]i.sat to <N x i8> (a
        float32 -> uint8 QuantizeLinear of a 224x224 image took 137 us)."""
        info = np.iinfo(dst)
        clamped = self.select(self.b.fcmp_unordered("uno", x, x), self.c(0), self.clamp(x, info.min, info.max))
        wide = ir.VectorType(ir.IntType(32), self.width) if self.width > 1 else ir.IntType(32)
        return self.b.trunc(self.b.fptosi(clamped, wide), dst_ty)

    # -- transcendentals ----------------------------------------------------------
    def exp(self, x):
        """exp by range reduction to [-ln2/2, ln2/2] and a degree-7 polynomial.

        Rel. error ~2e-7 in float32 up to the overflow threshold; the scale 2**n is applied
        as two halves so results near FLT_MAX and subnormal results both come out right.
        Overflow gives +inf, underflow 0, NaN stays NaN."""
        if self.dtype != np.float32:
            return self._intrinsic("llvm.exp", x)
        b = self.b
        hi, lo = 88.72284, -103.98
        xc = self.clamp(x, lo, hi)
        n = self.round_even(self.mul(xc, self.c(1.0 / math.log(2.0))))
        r = self.fma(n, self.c(-0.693145751953125), xc)
        r = self.fma(n, self.c(-1.428606765330187e-06), r)
        p = self.c(1.0 / 5040)
        for k in (720, 120, 24, 6, 2, 1, 1):
            p = self.fma(p, r, self.c(1.0 / k))
        ity = ir.IntType(32) if self.width == 1 else ir.VectorType(ir.IntType(32), self.width)
        ni = b.fptosi(n, ity)
        half = b.ashr(ni, _ivec(ity, 1))
        for part in (half, b.sub(ni, half)):
            bits = b.shl(b.add(part, _ivec(ity, 127)), _ivec(ity, 23))
            p = self.mul(p, b.bitcast(bits, p.type))
        y = self.select(self.gt(x, self.c(hi)), self.c(math.inf), p)
        y = self.select(self.lt(x, self.c(lo)), self.c(0.0), y)
        return self.select(self.is_nan(x), x, y)

    def sigmoid(self, x):
        return self.div(self.c(1.0), self.add(self.c(1.0), self.exp(self.neg(x))))

    def tanh(self, x):
        """tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); a cubic near 0 keeps relative accuracy."""
        ax = self.abs(x)
        t = self.sub(self.c(1.0), self.div(self.c(2.0), self.add(self.exp(self.mul(ax, self.c(2.0))), self.c(1.0))))
        small = self.mul(ax, self.sub(self.c(1.0), self.mul(self.mul(ax, ax), self.c(1.0 / 3.0))))
        t = self.select(self.lt(ax, self.c(0.004)), small, t)
        return self.copysign(t, x)

    def erf(self, x):
        """erf by Abramowitz & Stegun 7.1.26 (abs. error < 1.5e-7)."""
        ax = self.abs(x)
        t = self.div(self.c(1.0), self.fma(ax, self.c(0.3275911), self.c(1.0)))
        poly = self.c(1.061405429)
        for coef in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly = self.fma(poly, t, self.c(coef))
        poly = self.mul(poly, t)
        y = self.sub(self.c(1.0), self.mul(poly, self.exp(self.neg(self.mul(ax, ax)))))
        return self.copysign(y, x)

    def copysign(self, mag, sign):
        return self.kb.call_intrinsic(f"llvm.copysign.{overload_suffix(mag.type)}", mag.type, [mag, sign])

    def _intrinsic(self, name: str, a):
        return self.kb.call_intrinsic(f"{name}.{overload_suffix(a.type)}", a.type, [a])


def _ivec(ty: ir.Type, v: int) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)
