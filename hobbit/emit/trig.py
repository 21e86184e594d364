"""Trigonometric and hyperbolic functions as scalar expressions over `Emit`.

float32 (and float16/bfloat16, which compute in float32) use polynomials on a
reduced range, so element-wise loops vectorise; their relative error is a few
float32 ulps over the whole domain. sin/cos/tan reduce the argument by pi/2 in
float64 with a three-part pi/2, exact enough for |x| < 2**50; the rare vector
holding a larger (or non-finite) lane takes a libm call on a side branch.
float64 calls LLVM's intrinsics (libm) for the functions that have one; the
inverse hyperbolics are identities over log/log1p in both precisions."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import overload_suffix
from hobbit.emit.scalar import Emit

_PI = Fraction(Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899"))


def _split_half_pi() -> tuple[float, float, float]:
    """pi/2 as three doubles whose exact sum carries ~160 bits."""
    rest, parts = _PI / 2, []
    for _ in range(3):
        parts.append(float(rest))
        rest -= Fraction(parts[-1])
    return parts[0], parts[1], parts[2]


_HALF_PI = _split_half_pi()
_REDUCTION_LIMIT = 2.0 ** 50
_TAN_PI_8 = math.tan(math.pi / 8)


def sin(e: Emit, x):
    return _sin_cos(e, x, "sin", quadrant_shift=0)


def cos(e: Emit, x):
    return _sin_cos(e, x, "cos", quadrant_shift=1)


def tan(e: Emit, x):
    if e.dtype != np.float32:
        return _libm(e, "tan", x)
    r, odd, _ = _reduce(e, x)
    s, c = _sin_poly(e, r), _cos_poly(e, r)
    fast = e.select(odd, e.neg(e.div(c, s)), e.div(s, c))
    return _fix_huge_lanes(e, x, fast, "tan")


def atan(e: Emit, x):
    """atan on |x| folded into [0, tan(pi/8)] by atan(x) = pi/2 - atan(1/x) and
    atan(t) = pi/4 + atan((t-1)/(t+1)), then its Taylor series."""
    if e.dtype != np.float32:
        return _libm(e, "atan", x)
    ax = e.abs(x)
    big = e.gt(ax, e.c(1.0))
    t = e.select(big, e.div(e.c(1.0), ax), ax)
    mid = e.gt(t, e.c(_TAN_PI_8))
    u = e.select(mid, e.div(e.sub(t, e.c(1.0)), e.add(t, e.c(1.0))), t)
    z = e.mul(u, u)
    series = e.c(-1.0 / 19)
    for k in range(8, 0, -1):
        series = e.fma(series, z, e.c((-1.0) ** k / (2 * k + 1)))
    y = e.fma(e.mul(u, z), series, u)
    y = e.add(y, e.select(mid, e.c(math.pi / 4), e.c(0.0)))
    y = e.select(big, e.sub(e.c(math.pi / 2), y), y)
    return e.copysign(y, x)


def asin(e: Emit, x):
    """asin(x) = atan(x / sqrt((1-x)(1+x))); |x| > 1 gives NaN through the sqrt."""
    if e.dtype != np.float32:
        return _libm(e, "asin", x)
    return atan(e, e.div(x, e.sqrt(e.mul(e.sub(e.c(1.0), x), e.add(e.c(1.0), x)))))


def acos(e: Emit, x):
    """acos(x) = 2 atan(sqrt((1-x)/(1+x))), accurate near x = 1 where acos is small."""
    if e.dtype != np.float32:
        return _libm(e, "acos", x)
    return e.mul(e.c(2.0), atan(e, e.sqrt(e.div(e.sub(e.c(1.0), x), e.add(e.c(1.0), x)))))


def sinh(e: Emit, x):
    """sinh: a Taylor polynomial below |x| = 1/2 (no cancellation), else h - 1/(4h) with
    h = e**|x| / 2, which stays finite as far as sinh does."""
    if e.dtype != np.float32:
        return _libm(e, "sinh", x)
    ax = e.abs(x)
    z = e.mul(ax, ax)
    series = e.c(1.0 / math.factorial(9))
    for k in (7, 5, 3):
        series = e.fma(series, z, e.c(1.0 / math.factorial(k)))
    small = e.fma(e.mul(ax, z), series, ax)
    h = _half_exp(e, ax)
    large = e.sub(h, e.div(e.c(0.25), h))
    return e.copysign(e.select(e.lt(ax, e.c(0.5)), small, large), x)


def cosh(e: Emit, x):
    if e.dtype != np.float32:
        return _libm(e, "cosh", x)
    h = _half_exp(e, e.abs(x))
    return e.add(h, e.div(e.c(0.25), h))


def asinh(e: Emit, x):
    """asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(2|x|) once x^2 would swamp 1."""
    ax = e.abs(x)
    z = e.mul(ax, ax)
    moderate = e.log1p(e.add(ax, e.div(z, e.add(e.c(1.0), e.sqrt(e.add(e.c(1.0), z))))))
    y = e.select(e.gt(ax, e.c(_big(e))), _log_twice(e, ax), moderate)
    return e.copysign(y, x)


def acosh(e: Emit, x):
    """acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1); NaN below 1."""
    t = e.sub(x, e.c(1.0))
    moderate = e.log1p(e.add(t, e.sqrt(e.mul(t, e.add(t, e.c(2.0))))))
    y = e.select(e.gt(x, e.c(_big(e))), _log_twice(e, x), moderate)
    return e.select(e.lt(x, e.c(1.0)), e.c(math.nan), y)


def atanh(e: Emit, x):
    """atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2: inf at 1, NaN beyond."""
    ax = e.abs(x)
    y = e.mul(e.c(0.5), e.log1p(e.div(e.add(ax, ax), e.sub(e.c(1.0), ax))))
    return e.copysign(y, x)


# -- helpers ----------------------------------------------------------------------------

def _sin_cos(e: Emit, x, name: str, quadrant_shift: int):
    if e.dtype != np.float32:
        return _libm(e, name, x)
    r, odd, upper = _reduce(e, x, quadrant_shift)
    s, c = _sin_poly(e, r), _cos_poly(e, r)
    value = e.select(odd, c, s)
    return _fix_huge_lanes(e, x, e.select(upper, e.neg(value), value), name)


def _reduce(e: Emit, x, quadrant_shift: int = 0):
    """x = n pi/2 + r in float64: r (as float32, |r| <= ~pi/4) and n's quadrant bits
    (odd: n+shift is odd; upper: (n+shift) mod 4 >= 2). Decided with float compares, so
    NaN or huge lanes give harmless garbage that `_fix_huge_lanes` replaces."""
    b = e.b
    f64 = Emit(e.kb, np.dtype(np.float64), e.width)
    xd = b.fpext(x, _vec(e, ir.DoubleType()))
    n = f64.round_even(f64.mul(xd, f64.c(2.0 / math.pi)))
    r = xd
    for part in _HALF_PI:
        r = f64.fma(f64.neg(n), f64.c(part), r)
    q = f64.add(n, f64.c(quadrant_shift))
    q = f64.sub(q, f64.mul(f64.c(4.0), f64.floor(f64.mul(q, f64.c(0.25)))))
    odd = b.or_(b.fcmp_ordered("==", q, f64.c(1.0)), b.fcmp_ordered("==", q, f64.c(3.0)))
    upper = b.fcmp_ordered(">=", q, f64.c(2.0))
    return b.fptrunc(r, x.type), odd, upper


def _sin_poly(e: Emit, r):
    """Taylor series of sin to r**9: error < 2e-9 relative on |r| <= pi/4."""
    z = e.mul(r, r)
    series = e.c(1.0 / math.factorial(9))
    for k in (7, 5, 3):
        series = e.fma(series, z, e.c((-1.0) ** (k // 2) / math.factorial(k)))
    return e.fma(e.mul(r, z), series, r)


def _cos_poly(e: Emit, r):
    """Taylor series of cos to r**10: error < 2e-10 on |r| <= pi/4."""
    z = e.mul(r, r)
    series = e.c(-1.0 / math.factorial(10))
    for k in (8, 6, 4, 2, 0):
        series = e.fma(series, z, e.c((-1.0) ** (k // 2) / math.factorial(k)))
    return series


def _fix_huge_lanes(e: Emit, x, fast, name: str):
    """Lanes with |x| >= 2**50, inf or NaN take libm's float64 result, on a branch taken
    only when such a lane exists, so the common path stays vector code."""
    b, kb = e.b, e.kb
    huge = b.fcmp_unordered(">=", e.abs(x), e.c(_REDUCTION_LIMIT))
    any_huge = huge
    if e.width > 1:
        any_huge = kb.call_intrinsic(f"llvm.vector.reduce.or.{overload_suffix(huge.type)}", ir.IntType(1), [huge])
    slot = kb.alloca(fast.type)
    b.store(fast, slot)
    with kb.if_then(any_huge):
        f64 = Emit(kb, np.dtype(np.float64), e.width)
        slow = b.fptrunc(_libm(f64, name, b.fpext(x, _vec(e, ir.DoubleType()))), fast.type)
        b.store(b.select(huge, slow, fast), slot)
    return b.load(slot)


def _half_exp(e: Emit, ax):
    """e**ax / 2 as exp(ax - ln2_hi) * exp(-ln2_lo): finite as long as the result is, and
    ax - ln2_hi (ln2_hi has few bits) is exact."""
    ln2_hi = 0.693145751953125
    return e.mul(e.exp(e.sub(ax, e.c(ln2_hi))), e.c(math.exp(ln2_hi - math.log(2.0))))


def _libm(e: Emit, name: str, x):
    return e.kb.call_intrinsic(f"llvm.{name}.{overload_suffix(x.type)}", x.type, [x])


def _big(e: Emit) -> float:
    """Above this |x|, sqrt(x^2 + 1) equals |x| to the dtype's precision."""
    return 2.0 ** 12 if e.dtype == np.float32 else 2.0 ** 28


def _log_twice(e: Emit, ax):
    return e.add(e.log(ax), e.c(math.log(2.0)))


def _vec(e: Emit, element: ir.Type) -> ir.Type:
    return element if e.width == 1 else ir.VectorType(element, e.width)
