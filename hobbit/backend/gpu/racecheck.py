"""The host emulation's race finder: what makes the grid emulation (hobbit.runtime.emulate)
evidence about barriers, not only about arithmetic.

On the host a phase is a loop over the block's threads, so every thread finishes a phase
before any starts the next whether or not a barrier separates them: deleting a barrier, or
racing inside a phase, would still give the right answer there and the wrong one on a GPU.
So the host build of a kernel (Simt's "host" flavour) also:

- runs each phase's threads in an order read from a table, `hobbit.order.<threads>`, which
  the emulator fills with a seeded shuffle (identity until then), so that an answer that
  depends on thread order shows itself under some order;
- poisons every shared array at each block's start (all bits set: NaN in a float, -1 in an
  integer), as a GPU's shared memory holds whatever the previous block left;
- keeps, per shared element, a shadow of who touched it since the last barrier: a stamp
  (barrier epoch << 32 | thread + 1) of its last writer and of its readers (the low half all
  ones for two or more). A read of an element another thread wrote, or a write of one
  another thread wrote or read, within one epoch is a race: nothing orders the two on a GPU.
  The first race of a run is recorded in `hobbit.race` (count, site, element, threads),
  and `hobbit.race.sites` names each site: kernel, phase, shared array, read or write.

Epochs count the barriers a block has passed (its sync phases), at run time, so a barrier
inside a loop separates iterations as on the device. Only scalar loads and stores through
KernelBuilder.load/store of a shared array's own pointer are checked; a kernel that
touched shared memory another way would be refused at build time (Simt.check_access)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import I1, I64, PTR, KernelBuilder

RACE_RECORD = "hobbit.race"  # [count, site, element, thread, other's stamp, other wrote]
RACE_SITES = "hobbit.race.sites"  # the sites' descriptions, one a line, NUL-terminated
ORDER_PREFIX = "hobbit.order."
_CHECK = "hobbit.race.check"
_MANY = 0xFFFFFFFF  # the low half of a reader stamp: more than one thread read


class RaceChecker:
    """One host module's race-finding globals and check function, shared by its kernels."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.sites: list[str] = []
        ty = ir.ArrayType(I64, 6)
        self.record = ir.GlobalVariable(module, ty, RACE_RECORD)
        self.record.initializer = ir.Constant(ty, None)
        self._orders: dict[int, ir.GlobalVariable] = {}
        self._record = self._record_function()
        self._check = self._check_function()

    def order(self, threads: int) -> ir.GlobalVariable:
        """The table a phase of `threads` threads takes its order from (the emulator shuffles it)."""
        if threads not in self._orders:
            ty = ir.ArrayType(I64, threads)
            table = ir.GlobalVariable(self.module, ty, f"{ORDER_PREFIX}{threads}")
            table.initializer = ir.Constant(ty, list(range(threads)))
            self._orders[threads] = table
        return self._orders[threads]

    def site(self, text: str) -> int:
        self.sites.append(text)
        return len(self.sites) - 1

    def check(self, kb: KernelBuilder, shadow: ir.Value, count: int, element: ir.Value, thread: ir.Value,
              epoch: ir.Value, write: bool, site: int) -> None:
        kb.b.call(self._check, [shadow, kb.i64(count), element, thread, epoch, ir.Constant(I1, int(write)),
                                kb.i64(site)])

    def finish(self) -> None:
        """Write the sites' names where the emulator reads them."""
        data = bytearray("\n".join(self.sites).encode() + b"\0")
        ty = ir.ArrayType(ir.IntType(8), len(data))
        names = ir.GlobalVariable(self.module, ty, RACE_SITES)
        names.initializer = ir.Constant(ty, data)
        names.global_constant = True

    def _check_function(self) -> ir.Function:
        """check(shadow, count, element, thread, epoch, write, site): shadow[element] is the
        writer's stamp, shadow[count + element] the readers'. Out of line: inlined at every
        shared access, LLVM took 41 s over ResNet-50's host build instead of 12 s (runs were
        2x faster, 14 s against 26 s; 2-vCPU Zen 3 VM, loaded), and a build is paid by
        every emulated model, a run only as often as it is run."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, I64, I1, I64]), _CHECK)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        shadow, count, element, thread, epoch, write, site = fn.args
        kb = KernelBuilder(fn)
        b = kb.b
        mine = b.or_(b.shl(epoch, kb.i64(32)), b.add(thread, kb.i64(1)))
        writer_at = kb.gep(shadow, np.int64, element)
        reader_at = kb.gep(shadow, np.int64, b.add(count, element))
        writer, reader = b.load(writer_at, typ=I64), b.load(reader_at, typ=I64)

        def other(stamp: ir.Value) -> ir.Value:
            """Another thread's stamp of this epoch."""
            now = b.icmp_unsigned("==", b.lshr(stamp, kb.i64(32)), epoch)
            return b.and_(now, b.icmp_unsigned("!=", stamp, mine))

        after_write, after_read = other(writer), other(reader)
        race = b.or_(after_write, b.and_(write, after_read))
        with b.if_then(race, likely=False):
            b.call(self._record, [site, element, thread, b.select(after_write, writer, reader),
                                  b.zext(after_write, I64)])
        with b.if_else(write) as (then, otherwise):
            with then:
                b.store(mine, writer_at)
            with otherwise:
                many = b.or_(b.shl(epoch, kb.i64(32)), kb.i64(_MANY))
                b.store(b.select(after_read, many, mine), reader_at)
        kb.finish()
        return fn

    def _record_function(self) -> ir.Function:
        """record(site, element, thread, their stamp, they wrote): count the race, keep the
        first one's fields (cold: a race ends the run with an error)."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I64] * 5), "hobbit.race.record")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("cold")
        kb = KernelBuilder(fn)
        b = kb.b

        def slot(i: int) -> ir.Value:
            return b.gep(self.record, [kb.i64(0), kb.i64(i)], inbounds=True)
        count = b.load(slot(0), typ=I64)
        b.store(b.add(count, kb.i64(1)), slot(0))
        with b.if_then(b.icmp_unsigned("==", count, kb.i64(0))):
            for i, value in enumerate(fn.args, 1):
                b.store(value, slot(i))
        kb.finish()
        return fn


def site_name(kernel: str, phase: int, array: str, write: bool) -> str:
    return "\t".join([kernel, str(phase), array, "write" if write else "read"])


def describe_race(record: np.ndarray, sites: list[str]) -> str:
    """The first race of a run, in words, from the record the check function kept."""
    count, site, element, thread, stamp, wrote = (int(v) for v in record)
    kernel, phase, array, access = sites[site].split("\t")
    theirs = stamp & _MANY
    other = "two or more other threads" if theirs == _MANY else f"thread {theirs - 1}"
    return (f"a race in kernel '{kernel}', phase {phase}: thread {thread} {access}s element {element} of shared "
            f"array '{array}', which {other} {'wrote' if wrote else 'read'} with no barrier between; {count} racing "
            f"access{'es' if count > 1 else ''} in this run")
