"""Graph + memory plan -> one LLVM module with one C-callable entry point.

    void hobbit_main(void **inputs, void **outputs, char *weights, char *arena)

Each fused group becomes an internal function named after its graph nodes
(e.g. `Conv+Add+Relu[layer1.0/conv2]`), taking one pointer per tensor it
touches; the entry point computes those pointers from the plan and calls the
kernels in order. Internal linkage lets LLVM inline and optimise across them."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from hobbit.codegen.target import Target
from hobbit.errors import CodegenError
from hobbit.graph.ir import Graph, Node
from hobbit.graph.registry import get_op
from hobbit.lower.builder import I64, PTR, KernelBuilder
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.parallel import Threads
from hobbit.passes.memory import MemoryPlan, Place, is_view

ENTRY = "hobbit_main"


def kernel_name(node: Node) -> str:
    ops = "+".join([node.op] + [s.op for s in node.epilogue])
    return f"{ops}[{node.name}]"


def build_module(graph: Graph, plan: MemoryPlan, target: Target, threads: int = 1) -> ir.Module:
    module = ir.Module(name=graph.name)
    module.triple = target.triple
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * 4), name=ENTRY)
    for arg, name in zip(entry.args, ("inputs", "outputs", "weights", "arena")):
        arg.name = name
        arg.add_attribute("noalias")
    builder = ir.IRBuilder(entry.append_basic_block("entry"))
    for node in graph.nodes:
        if is_view(node):
            continue
        fn, parallel = _emit_kernel(module, node, target, plan, threads)
        args = [_pointer(builder, entry, plan.place(v)) for v in _kernel_values(node)]
        if id(node) in plan.scratch:
            args.append(_pointer(builder, entry, plan.scratch[id(node)]))
        if parallel:
            _call_parallel(module, builder, fn, args, threads)
        else:
            builder.call(fn, args + [ir.Constant(I64, 0), ir.Constant(I64, 1)])
    builder.ret_void()
    return module


def _call_parallel(module: ir.Module, builder: ir.IRBuilder, kernel: ir.Function, args: list[ir.Value],
                   threads: int) -> None:
    """Run `kernel` on an OpenMP team: pointers go through a context array to a trampoline
    that adds the thread id and team size."""
    i32 = ir.IntType(32)
    tramp = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=f"{kernel.name}.omp")
    tramp.linkage = "internal"
    tb = ir.IRBuilder(tramp.append_basic_block("entry"))
    ctx = tramp.args[0]
    loaded = [tb.load(tb.gep(ctx, [ir.Constant(I64, i)], source_etype=PTR), typ=PTR) for i in range(len(args))]
    tid = tb.sext(tb.call(_declare(module, "omp_get_thread_num", i32, []), []), I64)
    count = tb.sext(tb.call(_declare(module, "omp_get_num_threads", i32, []), []), I64)
    tb.call(kernel, loaded + [tid, count])
    tb.ret_void()

    table = builder.alloca(PTR, size=len(args))
    for i, a in enumerate(args):
        builder.store(a, builder.gep(table, [ir.Constant(I64, i)], source_etype=PTR))
    gomp = _declare(module, "GOMP_parallel", ir.VoidType(), [PTR, PTR, i32, i32])
    builder.call(gomp, [tramp, table, ir.Constant(i32, threads), ir.Constant(i32, 0)])


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(ret, args), name=name)


def _kernel_values(node: Node) -> list:
    """Values a kernel function takes, in parameter order: inputs, epilogue operands, outputs."""
    return [v for v in node.inputs if v is not None] + \
        [s.operand for s in node.epilogue if s.operand is not None] + list(node.outputs)


def _pointer(b: ir.IRBuilder, entry: ir.Function, place: Place) -> ir.Value:
    inputs, outputs, weights, arena = entry.args
    if place.kind in ("input", "output"):
        table = inputs if place.kind == "input" else outputs
        slot = b.gep(table, [ir.Constant(I64, place.index)], source_etype=PTR)
        return b.load(slot, typ=PTR)
    base = weights if place.kind == "const" else arena
    return b.gep(base, [ir.Constant(I64, place.index)], source_etype=ir.IntType(8), inbounds=True)


def _emit_kernel(module: ir.Module, node: Node, target: Target, plan: MemoryPlan,
                 threads: int) -> tuple[ir.Function, bool]:
    """The kernel function of one fused group, and whether it splits work across threads."""
    opdef = get_op(node.op)
    if opdef.lower is None:
        raise CodegenError(f"op {node.op} at node '{node.name}' has no lowering and was not folded")
    values = _kernel_values(node)
    n_params = len(values) + (1 if id(node) in plan.scratch else 0)
    name = kernel_name(node)
    if name in module.globals:  # ONNX does not require unique node names
        name = module.get_unique_name(name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * n_params + [I64, I64]), name=name)
    fn.linkage = "internal"
    params = iter(fn.args)
    inputs = [next(params) if v is not None else None for v in node.inputs]
    epilogue = [next(params) if s.operand is not None else None for s in node.epilogue]
    outputs = [next(params) for _ in node.outputs]
    scratch = next(params) if id(node) in plan.scratch else None
    tid, count = next(params), next(params)
    tid.name, count.name = "thread", "threads"
    for p in fn.args[:n_params]:
        p.add_attribute("noalias")
    for p, v in zip([p for p in inputs if p is not None] + [p for p in epilogue if p is not None] + outputs, values):
        p.name = _param_name(v.name)
    if scratch is not None:
        scratch.name = "scratch"
    kb = KernelBuilder(fn)
    team = Threads(kb, tid, count, threads)
    opdef.lower(KernelArgs(kb, node, target, inputs, outputs, epilogue, scratch, team))
    kb.finish()
    return fn, team.used


def _param_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)[:48] or "t"


def pack_weights(graph: Graph, plan: MemoryPlan) -> np.ndarray:
    """All constants in one 64-byte aligned blob, placed once at compile time."""
    raw = np.zeros(plan.weights_bytes + 64, dtype=np.uint8)
    shift = (-raw.ctypes.data) % 64
    blob = raw[shift: shift + plan.weights_bytes]
    for const in graph.constants():
        offset = plan.place(const).index
        data = np.ascontiguousarray(const.const)
        blob[offset: offset + data.nbytes] = data.reshape(-1).view(np.uint8)
    return blob
