"""Graph + memory plan -> one LLVM module with one C-callable entry point.

    int32_t hobbit_main(void **inputs, void **outputs, char *weights, char *arena, int64_t threads)

`threads` is how many threads may work on this inference: 0 (or anything outside 1..built)
means the count the module was built for; fewer is correct because every piece of work is
claimed by whichever thread gets to it (hobbit.backend.cpu.team).

It returns 0, or k > 0 when the k-th run-time check record (STATUS_TABLE, in
kernel order) found invalid data, e.g. an index out of range (hobbit.emit.status).

Each fused group becomes an internal function named after its graph nodes
(e.g. `Conv+Add+Relu[layer1.0/conv2]`), taking one pointer per tensor it
touches; the entry point computes those pointers from the plan and calls the
kernels in order (with threads > 1, through the team walk of hobbit.backend.cpu.team,
started once per inference by the thread runtime). Internal linkage lets LLVM
inline and optimise across them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial

import numpy as np
from llvmlite import ir

from hobbit.backend.cpu.profile import KernelTimer
from hobbit.backend.cpu.symbols import ENTRY, STATUS_TABLE
from hobbit.backend.module_parts import KernelHandOff
from hobbit.target import Target
from hobbit.backend.cpu.team import KernelCall, Step, emit_team, team_steps
from hobbit.errors import CodegenError
from hobbit.graph.extents import is_dynamic
from hobbit.graph.ir import Graph, Node
from hobbit.ops.registry import get_op
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.emit.table import KernelTable
from hobbit.emit.naming import kernel_name, kernel_nodes, kernel_values, param_name
from hobbit.backend.cpu.table import CPU
from hobbit.backend.cpu.args import KernelArgs
from hobbit.backend.cpu.parallel import Threads, runtime_function
from hobbit.plan.arena import step_bytes
from hobbit.plan.memory import MemoryPlan, Place


def build_module(graph: Graph, plan: MemoryPlan, target: Target, threads: int = 1,
                 profile: bool = False, on_kernel: Callable[[int, int], None] | None = None,
                 hand_off: KernelHandOff | None = None, table: KernelTable = CPU) -> ir.Module:
    """`on_kernel(done, total)` is called after each kernel, for a progress display;
    `table` is the kernel table that emits them (the CPU's, or a child's: hobbit.backend.cpu.naive);
    `hand_off` takes the finished kernels to LLVM's threads while the rest is emitted (the
    module then declares them: hobbit.backend.module_parts).

    With one thread the entry point calls the kernels in order. With several it hands
    the team walk (hobbit.backend.cpu.team) to the thread runtime once per inference: one
    start of the team, not one per kernel, and between kernels waits for work to be done
    rather than barriers."""
    module = ir.Module(name=graph.name)
    module.triple = target.triple
    entry = ir.Function(module, ir.FunctionType(ir.IntType(32), [PTR] * 4 + [I64]), name=ENTRY)
    for arg, name in zip(entry.args, ("inputs", "outputs", "weights", "arena", "threads")):
        arg.name = name
        if name != "threads":
            arg.add_attribute("noalias")
    builder = ir.IRBuilder(entry.append_basic_block("entry"))
    calls = _kernel_calls(module, graph, plan, target, threads, on_kernel, hand_off, table)
    _reset(module, builder, entry.args[3], plan)
    if threads == 1:
        timer = KernelTimer(module, builder, len(calls)) if profile else None
        one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
        for index, call in enumerate(calls):
            start = timer.now() if timer else None
            builder.call(call.fn, call.args(builder, tuple(entry.args[:4])) + [zero, one])
            if timer:
                timer.add(index, start)
    else:
        steps = team_steps(calls, merge_serial=not profile)
        team = emit_team(module, steps, threads, lambda b, tables, step: _step_state(b, tables, plan, step),
                         len(calls) if profile else None,
                         None if hand_off is None or profile else partial(_hand_off_chunk, hand_off))
        ctx_table = builder.alloca(PTR, size=4)
        for i, arg in enumerate(entry.args[:4]):
            builder.store(arg, builder.gep(ctx_table, [ir.Constant(I64, i)], source_etype=PTR))
        asked, built = entry.args[4], ir.Constant(I64, threads)
        fewer = builder.and_(builder.icmp_signed(">", asked, ir.Constant(I64, 0)), builder.icmp_signed("<", asked, built))
        builder.call(runtime_function(module, "hobbit_team_run"), [team, ctx_table, builder.select(fewer, asked, built)])
    builder.ret(_status(module, builder, graph, plan, entry.args[3]))
    if hand_off is not None:
        hand_off.flush()
    return module


def _hand_off_chunk(hand_off: KernelHandOff, chunk: ir.Function, steps: list[Step]) -> None:
    """A function of the team walk goes to LLVM's threads, with the wrappers it calls, where
    every kernel it runs went there (a kernel that calls its subgraph's stays in the module,
    and so must what calls it). Never a timed one: the profile's counters are the module's."""
    calls = [call for step in steps for call in step.calls]
    if not all(hand_off.moved(call.body or call.fn) for call in calls):
        return
    for call in calls:
        if call.body is not None:
            hand_off.add(call.fn)
    hand_off.add(chunk)


def _reset(module: ir.Module, b: ir.IRBuilder, arena: ir.Value, plan: MemoryPlan) -> None:
    """The steps' and kernels' work-claim counters and the check records start every inference
    at zero (before the team starts: no worker holds a reference to this arena then)."""
    if not plan.reset_bytes:
        return
    memset = _declare(module, "llvm.memset.p0.i64", ir.VoidType(), [PTR, ir.IntType(8), I64, ir.IntType(1)])
    at = b.gep(arena, [ir.Constant(I64, plan.reset_offset)], source_etype=ir.IntType(8), inbounds=True)
    b.call(memset, [at, ir.Constant(ir.IntType(8), 0), ir.Constant(I64, plan.reset_bytes), ir.Constant(ir.IntType(1), 0)])


def status_records(graph: Graph, plan: MemoryPlan) -> list[tuple[int, str, str]]:
    """The run-time check records (arena offset, node, op), in kernel order: STATUS_TABLE's rows."""
    return [(plan.status[id(node)].index, node.name, node.op) for node in kernel_nodes(graph)
            if id(node) in plan.status]


def _status(module: ir.Module, b: ir.IRBuilder, graph: Graph, plan: MemoryPlan, arena: ir.Value) -> ir.Value:
    """The entry point's result: 1 + the position of the first check record that is set, else 0.
    Also records the table of check records in the module (STATUS_TABLE)."""
    records = status_records(graph, plan)
    text = bytearray(json.dumps(records).encode()) + b"\0"
    table = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(text)), name=STATUS_TABLE)
    table.global_constant = True
    table.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(text)), text)
    result: ir.Value = ir.Constant(ir.IntType(32), 0)
    for position, (offset, _, _) in reversed(list(enumerate(records))):
        kind = b.load(b.gep(arena, [ir.Constant(I64, offset)], source_etype=ir.IntType(8), inbounds=True), typ=I64)
        found = b.icmp_unsigned("!=", kind, ir.Constant(I64, 0))
        result = b.select(found, ir.Constant(ir.IntType(32), position + 1), result)
    return result


def _step_state(b: ir.IRBuilder, tables: tuple, plan: MemoryPlan, step: Step) -> ir.Value:
    """A step's state: the start of its first kernel's claim counters."""
    return _pointer(b, tables, plan.claims[id(step.calls[0].node)])


def _kernel_calls(module: ir.Module, graph: Graph, plan: MemoryPlan, target: Target, threads: int,
                  on_kernel: Callable[[int, int], None] | None,
                  hand_off: KernelHandOff | None = None, table: KernelTable = CPU) -> list[KernelCall]:
    """Every kernel's function (bodies shared between equal signatures) and its pointers:
    the values it touches, its scratch, and its claimed loops' counters (past its step's
    state). A new body goes to `hand_off` unless it calls a subgraph's kernels."""
    bodies: dict[tuple, tuple[ir.Function, bool]] = {}
    kernels = kernel_nodes(graph)
    calls = []
    for index, node in enumerate(kernels):
        key = _signature(node, id(node) in plan.scratch, id(node) in plan.status)
        body = None
        if key in bodies:
            body, parallel = bodies[key]
            fn = _wrapper(module, node, body)
        else:
            fn, parallel = bodies[key] = _emit_kernel(module, node, target, plan, threads, table)
            if hand_off is not None and not isinstance(node.attrs.get("body"), Graph):
                hand_off.add(fn)
        calls.append(KernelCall(node, fn, parallel, lambda b, tables, node=node: _kernel_args(b, tables, plan, node, threads),
                                body))
        if on_kernel is not None:
            on_kernel(index + 1, len(kernels))
    return calls


def _kernel_args(b: ir.IRBuilder, tables: tuple, plan: MemoryPlan, node: Node, threads: int) -> list[ir.Value]:
    args = [_pointer(b, tables, plan.place(v)) for v in kernel_values(node)]
    if id(node) in plan.scratch:
        args.append(_pointer(b, tables, plan.scratch[id(node)]))
    if id(node) in plan.claims:
        claims = plan.claims[id(node)]
        args.append(_pointer(b, tables, Place(claims.kind, claims.index + step_bytes(threads), claims.offset)))
    if id(node) in plan.status:
        args.append(_pointer(b, tables, plan.status[id(node)]))
    if is_dynamic(node):
        args.append(_pointer(b, tables, Place("input", plan.dims_input, 0)))
    return args


def _signature(node: Node, has_scratch: bool, has_status: bool) -> tuple:
    """Everything a kernel's code depends on. Nodes with equal signatures (the repeated
    blocks of a ResNet) share one generated body: LLVM optimises each shape once."""
    def ty(v):
        return None if v is None else (str(v.type),)
    steps = tuple((s.op, _freeze(s.attrs), ty(s.operand), s.swap) for s in node.epilogue)
    baked = tuple(_freeze(v.const) for v in node.inputs if v is not None and v.const is not None) \
        if get_op(node.op).bakes_constants else ()
    extents = tuple(None if v is None else v.extents for v in node.operands() + list(node.outputs))
    return (node.op, _freeze(node.attrs), tuple(ty(v) for v in node.inputs),
            tuple(ty(v) for v in node.outputs), steps, has_scratch, has_status, baked, extents)


def _freeze(value) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype), hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest())
    return (type(value).__name__, repr(value))


def _wrapper(module: ir.Module, node: Node, body: ir.Function) -> ir.Function:
    """A per-node function that forwards to a shared body, so the IR still names every node."""
    fn = ir.Function(module, body.function_type, name=_unique(module, kernel_name(node)))
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(body, list(fn.args))
    b.ret_void()
    return fn


def _unique(module: ir.Module, name: str) -> str:
    """ONNX does not require unique node names."""
    return module.get_unique_name(name) if name in module.globals else name


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(ret, args), name=name)


def _pointer(b: ir.IRBuilder, tables: tuple, place: Place) -> ir.Value:
    inputs, outputs, weights, arena = tables
    if place.kind in ("input", "output"):
        table = inputs if place.kind == "input" else outputs
        slot = b.gep(table, [ir.Constant(I64, place.index)], source_etype=PTR)
        base = b.load(slot, typ=PTR)
        if not place.offset:
            return base
        return b.gep(base, [ir.Constant(I64, place.offset)], source_etype=ir.IntType(8), inbounds=True)
    base = weights if place.kind == "const" else arena
    return b.gep(base, [ir.Constant(I64, place.index + place.offset)], source_etype=ir.IntType(8), inbounds=True)


def _emit_kernel(module: ir.Module, node: Node, target: Target, plan: MemoryPlan,
                 threads: int, table: KernelTable) -> tuple[ir.Function, bool]:
    """The kernel function of one fused group, and whether it splits work across threads."""
    opdef = get_op(node.op)
    if opdef.kernel is None:
        raise CodegenError(f"op {node.op} at node '{node.name}' has no lowering and was not folded")
    lower = table.lookup(opdef.kernel).lower
    values = kernel_values(node)
    dynamic = is_dynamic(node)
    n_params = len(values) + (id(node) in plan.scratch) + (id(node) in plan.claims) + (id(node) in plan.status) \
        + dynamic
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * n_params + [I64, I64]),
                     name=_unique(module, kernel_name(node)))
    fn.linkage = "internal"
    fn.attributes.add("noinline")  # bodies may be shared; the entry point stays a list of calls
    params = iter(fn.args)
    inputs = [next(params) if v is not None else None for v in node.inputs]
    epilogue = [next(params) if s.operand is not None else None for s in node.epilogue]
    outputs = [next(params) for _ in node.outputs]
    scratch = next(params) if id(node) in plan.scratch else None
    claims = next(params) if id(node) in plan.claims else None
    status = next(params) if id(node) in plan.status else None
    dims = next(params) if dynamic else None
    tid, count = next(params), next(params)
    tid.name, count.name = "thread", "threads"
    for p in fn.args[:n_params]:
        p.add_attribute("noalias")
    for p, v in zip([p for p in inputs if p is not None] + [p for p in epilogue if p is not None] + outputs, values):
        p.name = param_name(v.name)
    if scratch is not None:
        scratch.name = "scratch"
    if claims is not None:
        claims.name = "claims"
    if dims is not None:
        dims.name = "dims"
    kb = KernelBuilder(fn)
    if status is not None:
        status.name = "status"
        kb.status = status
    team = Threads(kb, tid, count, threads, claims)
    try:
        lower(KernelArgs(kb, node, target, inputs, outputs, epilogue, scratch, team, plan.kernels.get(id(node)),
                         _subgraph(module, node, plan, target, table), dims))
    except Exception as exc:  # a lowering that cannot handle this variant: name the node, never a bare trace
        shapes = ", ".join(str(v.type) for v in node.inputs if v is not None)
        detail = str(exc) if isinstance(exc, CodegenError) else f"{type(exc).__name__}: {exc}"
        raise CodegenError(f"no kernel could be generated for node '{node.name}' ({node.op} of {shapes}): "
                           f"{detail}") from exc
    kb.finish()
    return fn, team.used


def _subgraph(module: ir.Module, node: Node, plan: MemoryPlan, target: Target, table: KernelTable
              ) -> Callable[[ir.IRBuilder, tuple], None] | None:
    """For a node with a body graph: the body's kernels, emitted for one thread (the loop's
    kernel runs on one), and the function that calls them in order."""
    body = node.attrs.get("body")
    if not isinstance(body, Graph):
        return None
    calls = _kernel_calls(module, body, plan.kernels[id(node)].body, target, 1, None, table=table)
    one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)

    def emit(b: ir.IRBuilder, tables: tuple) -> None:
        for call in calls:
            b.call(call.fn, call.args(b, tables) + [zero, one])
    return emit


def pack_weights(graph: Graph, plan: MemoryPlan) -> np.ndarray:
    """All constants in one 64-byte aligned blob, placed once at compile time.

    Each constant of the graph then becomes a read-only view of its bytes in the blob, so the
    graph (report.graph, for `inspect` and profiles) and the running model share one copy of
    the weights: keeping both doubled a compiled ResNet-50's weight memory (126 MB), and
    rebinding them one by one keeps the packing peak at one constant over the blob."""
    raw = np.zeros(plan.weights_bytes + 64, dtype=np.uint8)
    shift = (-raw.ctypes.data) % 64
    blob = raw[shift: shift + plan.weights_bytes]
    for const in graph.constants():
        offset = plan.place(const).index
        data = np.ascontiguousarray(const.const)
        blob[offset: offset + data.nbytes] = data.reshape(-1).view(np.uint8)
        const.const = _constant_view(blob, offset, data)
    return blob


def view_constants(graph: Graph, plan: MemoryPlan, blob: np.ndarray) -> None:
    """Point every constant of the graph at its bytes in `blob`, a blob with the same bytes as
    the one pack_weights made (another variant's, shared by content), so the graph holds no
    second blob alive."""
    for const in graph.constants():
        const.const = _constant_view(blob, plan.place(const).index, const.const)


def _constant_view(blob: np.ndarray, offset: int, like: np.ndarray) -> np.ndarray:
    view = blob[offset: offset + like.nbytes].view(like.dtype).reshape(like.shape)
    view.flags.writeable = False
    return view
