"""Run-time checks in generated code: invalid data is reported, never answered.

A kernel whose op reads positions from data (Gather's indices, ReverseSequence's
lengths, ...) has a status record in the arena, zeroed at the start of every
inference. The first thread that meets an out-of-range value claims the record
(compare-and-swap on its first word) and writes what it found; every thread then
goes on with a clamped value, so the code never reads or writes outside its
buffers and needs no early exit. The entry point returns the number of the first
kernel whose record is set; the runtime turns that into a RunError naming the node
(see hobbit.runtime.status). The check is one compare and a branch LLVM keeps off
the hot path.

Record layout, i64 words: kind (0 = nothing found, else an index into CHECK_KINDS
plus one), the value found, the valid range [lo, hi], the axis it indexes."""

from __future__ import annotations

from llvmlite import ir

from hobbit.errors import CodegenError
from hobbit.emit.builder import I64, KernelBuilder

STATUS_WORDS = ("kind", "value", "lo", "hi", "axis")
CHECK_KINDS = ("index", "sequence length", "write position", "data-dependent length",
               "IoU threshold in millionths", "Loop iteration", "divisor")


def check_range(kb: KernelBuilder, value: ir.Value, lo: int | ir.Value, hi: int | ir.Value, kind: str,
                axis: int = 0) -> None:
    """Report the i64 `value` in the kernel's status record when it lies outside [lo, hi]."""
    if kb.status is None:
        raise CodegenError(f"{kb.fn.name}: a run-time {kind} check needs a status record; "
                           f"register the op with checks_data=True")
    b = kb.b
    outside = b.or_(b.icmp_signed("<", value, kb.idx(lo)), b.icmp_signed(">", value, kb.idx(hi)))
    with b.if_then(outside, likely=False):
        claim = b.cmpxchg(kb.status, kb.i64(0), kb.i64(CHECK_KINDS.index(kind) + 1), "monotonic", "monotonic")
        with b.if_then(b.extract_value(claim, 1)):
            for word, v in enumerate((value, kb.idx(lo), kb.idx(hi), kb.i64(axis)), start=1):
                b.store(v, b.gep(kb.status, [kb.i64(word)], source_etype=I64))
