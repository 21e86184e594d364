"""The CPU kernel of NonzeroDivisor: an integer divisor copied through, each element
checked (hobbit.emit.status), so a 0 makes run() raise a RunError naming the node while
the division itself, which never traps, gives 0 (hobbit.emit.scalar.Emit.div)."""

from __future__ import annotations

from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.emit.status import check_range


def _lower_nonzero_divisor(k: KernelArgs) -> None:
    kb, x = k.kb, k.node.inputs[0]
    with kb.loop(0, x.type.size, name="i") as i:
        value = kb.load(k.inputs[0], x.dtype, i)
        zero = kb.b.icmp_unsigned("==", value, value.type(0))
        check_range(kb, kb.b.select(zero, kb.i64(0), kb.i64(1)), 1, 1, "divisor")
        kb.store(value, k.outputs[0], x.dtype, i)


CPU.register("NonzeroDivisor", lower=_lower_nonzero_divisor)
