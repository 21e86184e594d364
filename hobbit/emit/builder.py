"""KernelBuilder: the small vocabulary every kernel is written in.

It wraps an llvmlite IRBuilder with counted loops (phi-based, so LLVM sees
canonical loops it can unroll and vectorise), typed pointer arithmetic, vector
loads/stores with masks for ragged edges, and constants. Kernels index tensors
in elements, never bytes."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
from llvmlite import ir

from hobbit.errors import CodegenError

I64 = ir.IntType(64)
I32 = ir.IntType(32)
I8 = ir.IntType(8)
I1 = ir.IntType(1)
PTR = ir.PointerType()

# By numpy's dtype name, so that this module (which the thread runtime's IR is built with
# when a pickled model is unpickled) need not import ml_dtypes for its bfloat16: 0.8-1.1 s
# of a fresh worker's start on the Zen 3 VM of BENCHMARKS.md's issue-30 section.
_LLVM_TYPES = {
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "float16": ir.HalfType(),
    "int8": ir.IntType(8),
    "uint8": ir.IntType(8),
    "int16": ir.IntType(16),
    "uint16": ir.IntType(16),
    "int32": ir.IntType(32),
    "uint32": ir.IntType(32),
    "int64": ir.IntType(64),
    "uint64": ir.IntType(64),
    "bool": ir.IntType(8),
    # bfloat16 is only stored (as its 16 bits); hobbit.emit.half converts it for arithmetic.
    "bfloat16": ir.IntType(16),
}


def llvm_type(dtype: np.dtype) -> ir.Type:
    try:
        return _LLVM_TYPES[np.dtype(dtype).name]
    except KeyError:
        raise CodegenError(f"no code generation for dtype {np.dtype(dtype).name}") from None


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


class KernelBuilder:
    def __init__(self, fn: ir.Function):
        self.fn = fn
        # Allocas go in their own entry block so LLVM promotes them to registers.
        self._allocas = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = ir.IRBuilder(fn.append_basic_block("body"))
        # The kernel's status record, for ops that check run-time data (hobbit.emit.status).
        self.status: ir.Value | None = None
        # Called before each load or store as on_access(ptr, index, write, width): the GPU
        # host emulation checks shared memory for races there (hobbit.backend.gpu.racecheck).
        self.on_access: Callable[[ir.Value, int | ir.Value, bool, int], None] | None = None

    def alloca(self, ty: ir.Type, size: int | None = None) -> ir.Value:
        """A variable of type `ty` (an array of `size` of them), for the whole function."""
        return self._allocas.alloca(ty, size=None if size is None else ir.Constant(I64, size))

    def local(self, value: ir.Constant) -> ir.Value:
        """A variable set to `value` when the function starts (not where this is called)."""
        ptr = self._allocas.alloca(value.type)
        self._allocas.store(value, ptr)
        return ptr

    def finish(self) -> None:
        """Close the function: return from the body, enter the body from the alloca block."""
        self.b.ret_void()
        self.seal()

    def seal(self) -> None:
        """Enter the body from the alloca block (for a function whose blocks all return)."""
        self._allocas.branch(self.fn.basic_blocks[1])

    # -- constants -------------------------------------------------------------
    @staticmethod
    def i64(v: int) -> ir.Constant:
        return ir.Constant(I64, int(v))

    @staticmethod
    def const(dtype: np.dtype, v: float, width: int = 1) -> ir.Constant:
        ty = llvm_type(dtype)
        if np.dtype(dtype).name == "bfloat16":
            v = int(np.asarray(v, dtype).view(np.uint16))  # stored as its 16 bits
        c = ir.Constant(ty, float(v) if is_float(dtype) else int(v))
        if width == 1:
            return c
        return ir.Constant(ir.VectorType(ty, width), [c] * width)

    def idx(self, v: int | ir.Value) -> ir.Value:
        return self.i64(v) if isinstance(v, (int, np.integer)) else v

    # -- integer index arithmetic that folds python ints -------------------------
    def add(self, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
        return self.b.add(self.idx(a), self.idx(b))

    def mul(self, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(a, int) and a == 1:
            return b
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        return self.b.mul(self.idx(a), self.idx(b))

    def udiv(self, a: int | ir.Value, b: int) -> int | ir.Value:
        if isinstance(a, int):
            return a // b
        return a if b == 1 else self.b.udiv(a, self.i64(b))

    def imin(self, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b)
        a, b = self.idx(a), self.idx(b)
        return self.b.select(self.b.icmp_signed("<", a, b), a, b)

    @contextmanager
    def when_greater(self, a: int | ir.Value, b: int) -> Iterator[bool]:
        """Emit the block only where a > b: statically when a is known, else under a branch.
        Yields False when the block is statically dead (the caller then emits nothing)."""
        if isinstance(a, int):
            yield a > b
            return
        with self.b.if_then(self.b.icmp_signed(">", a, self.i64(b))):
            yield True

    def affine(self, terms: list[tuple[int | ir.Value, int]], base: int = 0) -> int | ir.Value:
        """base + sum(index * stride), skipping zero strides."""
        acc: int | ir.Value = base
        for index, stride in terms:
            if stride:
                acc = self.add(acc, self.mul(index, stride))
        return acc

    # -- blocks and loops ------------------------------------------------------
    def blocks(self, prefix: str, *names: str) -> list[ir.Block]:
        """New basic blocks named `prefix.name`, appended to the function in the order given."""
        return [self.fn.append_basic_block(f"{prefix}.{name}") for name in names]

    def enter(self, block: ir.Block) -> None:
        """End the current block with a jump to `block` and go on emitting there."""
        self.b.branch(block)
        self.b.position_at_end(block)

    @contextmanager
    def loop(self, start: int | ir.Value, stop: int | ir.Value, step: int = 1,
             name: str = "i") -> Iterator[ir.Value]:
        """A counted loop `for i in range(start, stop, step)`; body emitted in the with-block."""
        b = self.b
        pre = b.block
        header, body, exit_ = self.blocks(name, "head", "body", "end")
        start_v, stop_v = self.idx(start), self.idx(stop)
        self.enter(header)
        i = b.phi(I64, name=name)
        i.add_incoming(start_v, pre)
        b.cbranch(b.icmp_signed("<", i, stop_v), body, exit_)
        b.position_at_end(body)
        yield i
        nxt = b.add(i, self.i64(step), name=f"{name}.next", flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(exit_)

    @contextmanager
    def loop_while(self, condition: Callable[[], ir.Value], name: str) -> Iterator[None]:
        """A loop that runs the with-block while condition() (emitted at its head) holds."""
        b = self.b
        head, body, end = self.blocks(name, "head", "body", "end")
        self.enter(head)
        b.cbranch(condition(), body, end)
        b.position_at_end(body)
        yield
        b.branch(head)
        b.position_at_end(end)

    @contextmanager
    def if_then(self, cond: ir.Value) -> Iterator[None]:
        with self.b.if_then(cond):
            yield

    # -- memory ----------------------------------------------------------------
    def gep(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value, inbounds: bool = True) -> ir.Value:
        if isinstance(index, int) and index == 0:
            return ptr
        return self.b.gep(ptr, [self.idx(index)], source_etype=llvm_type(dtype), inbounds=inbounds)

    def load(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value = 0) -> ir.Value:
        self._touch(ptr, index, False)
        return self.b.load(self.gep(ptr, dtype, index), typ=llvm_type(dtype))

    def store(self, value: ir.Value, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value = 0) -> None:
        self._touch(ptr, index, True)
        self.b.store(value, self.gep(ptr, dtype, index))

    def _touch(self, ptr: ir.Value, index: int | ir.Value, write: bool, width: int = 1) -> None:
        if self.on_access is not None:
            self.on_access(ptr, index, write, width)

    def vload(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value, width: int,
              mask: ir.Value | None = None, inbounds: bool = True) -> ir.Value:
        """Load `width` contiguous elements; lanes where `mask` is false read as zero (and are
        never touched: with inbounds=False the vector may start outside the buffer)."""
        if width == 1 and mask is None:
            return self.load(ptr, dtype, index)
        self._touch(ptr, index, False, width)
        vty = ir.VectorType(llvm_type(dtype), width)
        addr = self.gep(ptr, dtype, index, inbounds)
        align = np.dtype(dtype).itemsize
        if mask is None:
            inst = self.b.load(addr, typ=vty)
            inst.align = align
            return inst
        fn = self._intrinsic(f"llvm.masked.load.{overload_suffix(vty)}.p0", vty,
                             [PTR, I32, ir.VectorType(I1, width), vty])
        zero = ir.Constant(vty, None)
        return self.b.call(fn, [addr, ir.Constant(I32, align), mask, zero])

    def vstore(self, value: ir.Value, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value,
               mask: ir.Value | None = None) -> None:
        width = value.type.count if isinstance(value.type, ir.VectorType) else 1
        if width == 1 and mask is None:
            self.store(value, ptr, dtype, index)
            return
        on = [i for i, c in enumerate(mask.constant) if int(c.constant)] if isinstance(mask, ir.Constant) else None
        if on is not None and len(on) == 1:
            # LLVM 22's x86 back end stores 4 bytes for a one-lane masked store of a truncated
            # <16 x i8> (movl instead of movb), clobbering the next 3 bytes: store the lane itself.
            lane = self.b.extract_element(value, ir.Constant(I32, on[0]))
            self.store(lane, ptr, dtype, self.add(index, on[0]))
            return
        self._touch(ptr, index, True, width)
        addr = self.gep(ptr, dtype, index)
        align = np.dtype(dtype).itemsize
        if mask is None:
            inst = self.b.store(value, addr)
            inst.align = align
            return
        vty = value.type
        fn = self._intrinsic(f"llvm.masked.store.{overload_suffix(vty)}.p0", ir.VoidType(),
                             [vty, PTR, I32, ir.VectorType(I1, width)])
        self.b.call(fn, [value, addr, ir.Constant(I32, align), mask])

    def prefetch(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value) -> None:
        """Hint that ptr[index] will be read soon: fetch its line into L2 (not L1, which
        the GEMM's B stream would flush first). A hint never faults, so the address may
        lie past the buffer and is not marked inbounds."""
        at = self.b.gep(ptr, [self.idx(index)], source_etype=llvm_type(dtype))
        self.call_intrinsic("llvm.prefetch.p0", ir.VoidType(),
                            [at, ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])

    def splat(self, scalar: ir.Value, width: int) -> ir.Value:
        if width == 1:
            return scalar
        vty = ir.VectorType(scalar.type, width)
        v = self.b.insert_element(ir.Constant(vty, None), scalar, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, ir.Constant(vty, None), ir.Constant(ir.VectorType(I32, width), [0] * width))

    @staticmethod
    def prefix_mask(width: int, count: int) -> ir.Constant:
        """A constant mask with the first `count` lanes on (for a static ragged edge)."""
        return ir.Constant(ir.VectorType(I1, width), [1 if i < count else 0 for i in range(width)])

    def runtime_prefix_mask(self, width: int, count: ir.Value) -> ir.Value:
        """A mask with the first `count` lanes on, `count` known at run time (below `width`)."""
        lanes = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        return self.b.icmp_unsigned("<", lanes, self.splat(count, width))

    def vload_strided(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value, stride: int, width: int,
                      mask: ir.Value | None = None) -> ir.Value:
        """Lanes i = ptr[index + i*stride]: a vector load when stride is 1, else a gather (lanes
        outside `mask` are zero and never read)."""
        if stride == 1:
            return self.vload(ptr, dtype, index, width, mask)
        self._touch(ptr, index, False, width)
        vty = ir.VectorType(llvm_type(dtype), width)
        lanes = self._strided(ptr, dtype, index, stride, width)
        fn = self._intrinsic(f"llvm.masked.gather.{overload_suffix(vty)}.v{width}p0", vty,
                             [lanes.type, I32, ir.VectorType(I1, width), vty])
        return self.b.call(fn, [lanes, ir.Constant(I32, np.dtype(dtype).itemsize), self._all_or(mask, width),
                                ir.Constant(vty, None)])

    def vstore_strided(self, value: ir.Value, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value,
                       stride: int, mask: ir.Value | None = None) -> None:
        """ptr[index + i*stride] = lane i of `value` where `mask` is on: a vector store when
        stride is 1, else a scatter."""
        if stride == 1:
            self.vstore(value, ptr, dtype, index, mask)
            return
        vty = value.type
        self._touch(ptr, index, True, vty.count)
        lanes = self._strided(ptr, dtype, index, stride, vty.count)
        fn = self._intrinsic(f"llvm.masked.scatter.{overload_suffix(vty)}.v{vty.count}p0", ir.VoidType(),
                             [vty, lanes.type, I32, ir.VectorType(I1, vty.count)])
        self.b.call(fn, [value, lanes, ir.Constant(I32, np.dtype(dtype).itemsize), self._all_or(mask, vty.count)])

    def _strided(self, ptr: ir.Value, dtype: np.dtype, index: int | ir.Value, stride: int, width: int) -> ir.Value:
        """The pointers to ptr[index + i*stride], lane by lane (one GEP with a vector index).

        Why gathers and scatters rather than an element load or store per lane: a GEMM that
        stores C transposed (ResNet's 7x7 layers, the Winograd output) wrote each vector as 16
        extracts and stores, a third of ResNet-18's IR, where LLVM's SLP vectoriser and dead
        store elimination spent most of their time. The back end makes the same element
        stores where the target has no scatter worth using."""
        base = self.gep(ptr, dtype, index)
        offsets = [lane * stride for lane in range(width)]
        ity = I32 if max(map(abs, offsets)) < 1 << 31 else I64
        lanes = self.b.gep(base, [ir.Constant(ir.VectorType(ity, width), offsets)], source_etype=llvm_type(dtype),
                           inbounds=True)
        lanes.type = ir.VectorType(PTR, width)  # llvmlite types a GEP as one pointer; a vector index makes a vector
        return lanes

    @staticmethod
    def _all_or(mask: ir.Value | None, width: int) -> ir.Value:
        return ir.Constant(ir.VectorType(I1, width), [1] * width) if mask is None else mask

    def call_intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        fn = self._intrinsic(name, ret, [a.type for a in args])
        return self.b.call(fn, args)

    def _intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        module = self.fn.module
        existing = module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(module, ir.FunctionType(ret, args), name=name)


def overload_suffix(ty: ir.Type) -> str:
    """LLVM's overload suffix for a type: v16f32, f32, i64, ..."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{overload_suffix(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.HalfType):
        return "f16"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    raise CodegenError(f"no intrinsic suffix for {ty}")
