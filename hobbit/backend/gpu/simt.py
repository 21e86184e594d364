"""Simt: the vocabulary a GPU kernel body is written in, for one thread block.

A kernel is written once as *phases*: straight-line code every thread of the block
runs, separated by block barriers, inside loops whose trip counts are the same for the
whole block (uniform). Values that live across a barrier live in `private` arrays (one
per thread) or `shared` arrays (one per block); values computed outside a phase are
uniform (block ids, loop counters) and any phase may read them.

The same body is built three ways (`flavour`):

- "nvptx": a `ptx_kernel`, thread and block ids from the PTX special registers, shared
  arrays in address space 3, `barrier.sync` between phases;
- "amdgpu": an `amdgpu_kernel`, workitem/workgroup ids, LDS arrays, `s_barrier` fenced
  at workgroup scope;
- "host": the CPU emulation of the grid. The block ids are parameters; each phase is a
  loop over the block's threads (in an order the emulator may shuffle), so a barrier is the
  end of that loop: every thread has finished the phase before any starts the next, which
  is what a barrier guarantees. Private arrays are `threads` times as long, indexed by the
  thread. A value a phase computes and a later phase reads without going through memory
  does not dominate its use there, and LLVM's verifier rejects the emulation: the
  discipline is checked. Since the loop would hide a missing barrier, every shared access
  is checked for races and shared memory is poisoned per block (hobbit.backend.gpu.racecheck).

Kernels index tensors in elements through the KernelBuilder (hobbit.emit.builder),
whose scalar expressions and epilogues they share with the CPU backend."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
from llvmlite import ir

from hobbit.backend.gpu.racecheck import RaceChecker, site_name
from hobbit.emit.builder import I1, I8, I32, I64, PTR, KernelBuilder, llvm_type
from hobbit.errors import CodegenError

FLAVOURS = ("nvptx", "amdgpu", "host")
SHARED_SPACE = 3  # NVPTX's shared and AMDGPU's local (LDS) address space: the same number
PRIVATE_SPACE = 5  # AMDGPU's per-thread (scratch) address space


class Simt:
    def __init__(self, kb: KernelBuilder, flavour: str, threads: int, block_ids: list[ir.Value],
                 races: RaceChecker | None = None):
        """`races`: the host module's race finder (required for the "host" flavour)."""
        self.kb = kb
        self.b = kb.b
        self.flavour = flavour
        self.threads = threads
        self.block_ids = block_ids
        self._tid: ir.Value | None = None  # the thread of the phase being emitted
        self._shared_bytes = 0
        self._phase = 0  # phases emitted so far: the race finder's name for one
        self._races = races
        self._watched: dict[int, tuple[ir.Value, ir.Value, int, str]] = {}  # shared arrays, by id
        if flavour == "host":
            if races is None:
                raise CodegenError("the host flavour needs its module's race finder")
            self._epoch = kb.local(ir.Constant(I64, 1))  # barriers passed in this block, plus one
            kb.on_access = self.check_access

    @property
    def shared_bytes(self) -> int:
        return self._shared_bytes

    def block(self, axis: int) -> ir.Value:
        """The block's index along grid axis `axis` (0-2), as i64."""
        return self.block_ids[axis]

    @property
    def tid(self) -> ir.Value:
        """This thread's index in the block, as i64 (only inside a phase)."""
        if self._tid is None:
            raise RuntimeError("the thread index is only defined inside a phase")
        return self._tid

    def shared(self, dtype: np.dtype, count: int, name: str = "tile") -> ir.Value:
        """A block-wide array of `count` elements, as a generic pointer."""
        ty = ir.ArrayType(llvm_type(dtype), count)
        self._shared_bytes += count * np.dtype(dtype).itemsize
        module = self.kb.fn.module
        if self.flavour == "host":  # an element pointer, as loads and stores through it expect
            return self._host_shared(np.dtype(dtype), count, name)
        var = ir.GlobalVariable(module, ty, module.get_unique_name(f"{self.kb.fn.name}.{name}"),
                                addrspace=SHARED_SPACE)
        var.linkage = "internal"
        var.initializer = ir.Constant(ty, ir.Undefined)
        var.align = 16
        return self.b.addrspacecast(var, PTR)

    def private(self, dtype: np.dtype, count: int) -> "Private":
        """`count` elements per thread that live across barriers (accumulators, staged loads)."""
        ty = llvm_type(dtype)
        per_block = count * (self.threads if self.flavour == "host" else 1)
        if self.flavour != "amdgpu":
            return Private(self, self.kb.alloca(ty, size=per_block), np.dtype(dtype), count)
        entry = self.kb._allocas  # beside the kernel's other allocas, which SROA makes registers of
        slot = _PrivateAlloca(entry.block, ty, ir.Constant(I64, per_block))
        entry._insert(slot)
        return Private(self, entry.addrspacecast(slot, PTR), np.dtype(dtype), count)

    def _host_shared(self, dtype: np.dtype, count: int, name: str) -> ir.Value:
        """A shared array of the emulation, poisoned at the block's start (all bits set) beside
        its race shadow (two stamps per element, zero: untouched)."""
        kb, entry = self.kb, self.kb._allocas
        tile = kb.alloca(llvm_type(dtype), size=count)
        shadow = kb.alloca(I64, size=2 * count)
        memset = kb._intrinsic("llvm.memset.p0.i64", ir.VoidType(), [PTR, I8, I64, I1])
        entry.call(memset, [tile, ir.Constant(I8, 0xFF), ir.Constant(I64, count * dtype.itemsize),
                            ir.Constant(I1, 0)])
        entry.call(memset, [shadow, ir.Constant(I8, 0), ir.Constant(I64, 16 * count), ir.Constant(I1, 0)])
        self._watched[id(tile)] = (tile, shadow, count, name)
        return tile

    def check_access(self, ptr: ir.Value, index: int | ir.Value, write: bool, width: int = 1) -> None:
        """KernelBuilder's hook before a load or store (host flavour): one of a shared array is
        checked for races; its `index` is the element."""
        watched = self._watched.get(id(ptr))
        if watched is None:
            return
        _, shadow, count, name = watched
        if width != 1:
            raise CodegenError(f"the race finder checks scalar accesses of shared memory; '{name}' is accessed "
                               f"{width} elements at a time")
        if self._tid is None:
            raise CodegenError(f"shared array '{name}' is accessed outside a phase (no thread does it)")
        kb = self.kb
        site = self._races.site(site_name(kb.fn.name, self._phase, name, write))
        self._races.check(kb, shadow, count, kb.idx(index), self._tid, kb.b.load(self._epoch, typ=I64), write, site)

    @contextmanager
    def phase(self, sync: bool = True) -> Iterator[ir.Value]:
        """Code every thread runs; yields the thread index. With `sync`, a barrier follows:
        no thread starts what comes next before all have finished this."""
        if self._tid is not None:
            raise RuntimeError("phases do not nest")
        self._phase += 1
        if self.flavour == "host":
            yield from self._host_phase(sync)
            return
        self._tid = self._thread_index()
        yield self._tid
        self._tid = None
        if sync:
            self._barrier()

    def _host_phase(self, sync: bool) -> Iterator[ir.Value]:
        """The phase's threads one after another, in the order of the emulator's table; a
        barrier after them starts a new race epoch."""
        kb = self.kb
        order = self._races.order(self.threads)
        with kb.loop(0, self.threads, name="thread") as i:
            self._tid = kb.b.load(kb.b.gep(order, [kb.i64(0), i], inbounds=True), typ=I64, name="tid")
            yield self._tid
        self._tid = None
        if sync:
            epoch = kb.b.load(self._epoch, typ=I64)
            kb.b.store(kb.b.add(epoch, kb.i64(1)), self._epoch)

    def _thread_index(self) -> ir.Value:
        name = "llvm.nvvm.read.ptx.sreg.tid.x" if self.flavour == "nvptx" else "llvm.amdgcn.workitem.id.x"
        return self.b.zext(self.kb.call_intrinsic(name, I32, []), I64)

    def _barrier(self) -> None:
        b = self.b
        if self.flavour == "nvptx":
            self.kb.call_intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [ir.Constant(I32, 0)])
            return
        b.fence("release", "workgroup")
        self.kb.call_intrinsic("llvm.amdgcn.s.barrier", ir.VoidType(), [])
        b.fence("acquire", "workgroup")


class _PrivateAlloca(ir.instructions.AllocaInstr):
    """An alloca in AMDGPU's private address space, where its allocas must be (llvmlite
    writes allocas in the default one)."""

    def __init__(self, parent: ir.Block, typ: ir.Type, count: ir.Value):
        super().__init__(parent, typ, count, "")
        self.type = ir.PointerType(addrspace=PRIVATE_SPACE)

    def descr(self, buf: list[str]) -> None:
        super().descr(buf)
        buf.append(f", addrspace({PRIVATE_SPACE})")


class Private:
    """A per-thread array: `at(i)` is element i of the current phase's thread."""

    def __init__(self, simt: Simt, base: ir.Value, dtype: np.dtype, count: int):
        self.simt, self.base, self.dtype, self.count = simt, base, dtype, count

    def _index(self, i: int | ir.Value) -> int | ir.Value:
        kb = self.simt.kb
        if self.simt.flavour != "host":
            return i
        return kb.add(kb.mul(self.simt.tid, self.count), i)

    def load(self, i: int | ir.Value) -> ir.Value:
        return self.simt.kb.load(self.base, self.dtype, self._index(i))

    def store(self, value: ir.Value, i: int | ir.Value) -> None:
        self.simt.kb.store(value, self.base, self.dtype, self._index(i))

    def load_of(self, thread: ir.Value, i: int) -> ir.Value:
        """Element i of another thread's array: only the host emulation, whose threads'
        arrays are all in memory, can read one (a warp-wide instruction's operands)."""
        if self.simt.flavour != "host":
            raise RuntimeError("a thread reads another's private array only in the host emulation")
        kb = self.simt.kb
        return kb.load(self.base, self.dtype, kb.add(kb.mul(thread, self.count), i))


def block_id_values(b: ir.IRBuilder, kb: KernelBuilder, flavour: str, host_params: list[ir.Value]) -> list[ir.Value]:
    """The block's grid coordinates: the special registers on a GPU, parameters on the host."""
    if flavour == "host":
        return list(host_params)
    names = ([f"llvm.nvvm.read.ptx.sreg.ctaid.{a}" for a in "xyz"] if flavour == "nvptx"
             else [f"llvm.amdgcn.workgroup.id.{a}" for a in "xyz"])
    return [b.zext(kb.call_intrinsic(name, I32, []), I64) for name in names]
