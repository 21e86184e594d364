"""A GPU model as one LLVM module of kernels and the launch sequence that runs it.

Each fused group of the graph becomes one kernel, named after its node like the CPU's,
whose parameters are the pointers of the values it touches (inputs, epilogue operands,
outputs). The host side is data, not code: a list of Launches, each naming its kernel,
its grid and block and the places (input, output, weights, arena offset) of its
pointers, which the device runtime (hobbit.runtime.cuda) turns into one launch
sequence on one stream, and the grid emulation (hobbit.runtime.emulate) into calls.

The same emitters build the module for NVPTX, AMDGPU or the host (`flavour`, see
hobbit.backend.gpu.simt); on the host each kernel also gets `<name>.grid`, a loop over every
block of the grid it is called with, so that one call runs the whole launch."""

from __future__ import annotations

import re

from llvmlite import ir

from hobbit.errors import CodegenError, UnsupportedItem, UnsupportedModelError
from hobbit.backend.gpu.table import GPU
from hobbit.backend.gpu.args import GpuArgs
from hobbit.backend.gpu.launch import Launch
from hobbit.backend.gpu.racecheck import RaceChecker
from hobbit.backend.gpu.simt import Simt, block_id_values
from hobbit.graph.ir import Graph, Node
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.emit.naming import kernel_name, kernel_nodes, kernel_values, param_name
from hobbit.ops.registry import get_op
from hobbit.plan.memory import MemoryPlan
from hobbit.target import GpuTarget


def ptx_name(name: str) -> str:
    """A kernel name PTX and ELF symbol tables accept: 'Conv+Relu[layer1.0]' ->
    'Conv_Relu__layer1_0_' (letters, digits, '_' and '$'; not starting with a digit)."""
    text = "".join(c if c.isalnum() or c in "_$" else "_" for c in name)
    return text if text[:1].isalpha() or text[:1] == "_" else "_" + text


def unsupported(graph: Graph, plan: MemoryPlan, target: GpuTarget) -> list[UnsupportedItem]:
    """The kernels of the graph that have no GPU kernel (or plan) for this target."""
    items = []
    for node in kernel_nodes(graph):
        kernel = get_op(node.op).kernel
        if id(node) not in plan.kernels or kernel is None or kernel not in GPU.names():
            items.append(UnsupportedItem(node.op, "", 0, node.name,
                                         f"no {target.vendor} GPU kernel for this op yet"))
    return items


def build_gpu_module(graph: Graph, plan: MemoryPlan, target: GpuTarget, flavour: str) -> tuple[str, list[Launch]]:
    """The IR text of the module of every kernel of `graph`, built for `flavour`, and the
    launches in order."""
    missing = unsupported(graph, plan, target)
    if missing:
        raise UnsupportedModelError(missing)
    module = ir.Module(name=graph.name)
    module.triple = target.triple if flavour != "host" else ""
    launches, min_blocks = [], {}
    races = RaceChecker(module) if flavour == "host" else None
    for node in kernel_nodes(graph):
        launches.append(_emit_kernel(module, node, plan, target, flavour, races))
        min_blocks[launches[-1].kernel] = plan.kernels[id(node)].min_blocks
    if races is not None:
        races.finish()
    return with_block_size(str(module), launches, flavour, min_blocks), launches


_BLOCK_ATTRIBUTE = {"nvptx": '"nvvm.maxntid"="{}"', "amdgpu": '"amdgpu-flat-work-group-size"="1,{}"'}


def with_block_size(text: str, launches: list[Launch], flavour: str, min_blocks: dict[str, int] | None = None) -> str:
    """Each kernel's definition says the block size it is launched with, so the back end
    allocates registers for that many threads (AMDGPU assumes 1024 otherwise and caps
    each thread's registers to fit them), and on NVPTX the blocks per SM its plan wants
    resident (`min_blocks`, GpuPlan.min_blocks: nvvm.minctasm), which is the register
    budget ptxas then allocates to; without it, a block size alone made ptxas cap a
    tensor-core conv at 80 registers and spill (sm_90). llvmlite's IR builder has no
    string attributes, so they are added to each definition's line here."""
    if flavour not in _BLOCK_ATTRIBUTE:
        return text
    threads = {launch.kernel: launch.threads for launch in launches}
    min_blocks = min_blocks or {}

    def attribute(match: re.Match) -> str:
        name = match.group(2)
        if name not in threads:
            return match.group(0)
        attributes = [_BLOCK_ATTRIBUTE[flavour].format(threads[name])]
        if flavour == "nvptx" and min_blocks.get(name):
            attributes.append(f'"nvvm.minctasm"="{min_blocks[name]}"')
        return match.group(0) + " " + " ".join(attributes)
    return re.sub(r'^(define [^\n]*?@"?([^"(]+)"?\([^\n]*\))', attribute, text, flags=re.MULTILINE)


def _emit_kernel(module: ir.Module, node: Node, plan: MemoryPlan, target: GpuTarget, flavour: str,
                 races: RaceChecker | None) -> Launch:
    values = kernel_values(node)
    gpu_plan = plan.kernels[id(node)]
    host = flavour == "host"
    params = [PTR] * len(values) + ([I64] * 3 if host else [])
    name = ptx_name(kernel_name(node))
    name = module.get_unique_name(name) if name in module.globals else name
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    for p, v in zip(fn.args, values):
        p.name = param_name(v.name)
        p.add_attribute("noalias")
    if flavour == "nvptx":
        fn.calling_convention = "ptx_kernel"
    elif flavour == "amdgpu":
        fn.calling_convention = "amdgpu_kernel"
    else:
        fn.linkage = "internal"
        for p, axis in zip(fn.args[len(values):], "xyz"):
            p.name = f"block.{axis}"
    kb = KernelBuilder(fn)
    simt = Simt(kb, flavour, gpu_plan.threads, block_id_values(kb.b, kb, flavour, list(fn.args[len(values):])),
                races)
    it = iter(fn.args)
    inputs = [next(it) if v is not None else None for v in node.inputs]
    epilogue = [next(it) if s.operand is not None else None for s in node.epilogue]
    outputs = [next(it) for _ in node.outputs]
    try:
        GPU.lookup(get_op(node.op).kernel).lower(GpuArgs(kb, node, target, inputs, outputs, epilogue, simt, gpu_plan))
    except Exception as exc:
        shapes = ", ".join(str(v.type) for v in node.inputs if v is not None)
        detail = str(exc) if isinstance(exc, CodegenError) else f"{type(exc).__name__}: {exc}"
        raise CodegenError(f"no {target.vendor} kernel could be generated for node '{node.name}' ({node.op} of "
                           f"{shapes}): {detail}") from exc
    kb.finish()
    if simt.shared_bytes > target.shared_bytes:
        raise CodegenError(f"kernel for node '{node.name}' uses {simt.shared_bytes} bytes of shared memory; "
                           f"{target.arch} blocks hold {target.shared_bytes}")
    if host:
        _grid_function(module, fn, len(values))
    return Launch(fn.name, node.name, node.op, gpu_plan.grid, gpu_plan.threads, simt.shared_bytes,
                  tuple(plan.place(v) for v in values))


def _grid_function(module: ir.Module, body: ir.Function, n_pointers: int) -> None:
    """`<kernel>.grid(pointers..., grid.x, grid.y, grid.z)`: the kernel's body for every block
    of the grid it is given, in order. The grid is an argument, not the plan's, so that a
    launch runs the grid it names (the fake CUDA driver passes cuLaunchKernel's)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * n_pointers + [I64] * 3), name=f"{body.name}.grid")
    for p, axis in zip(fn.args[n_pointers:], "xyz"):
        p.name = f"grid.{axis}"
    pointers, (gx, gy, gz) = list(fn.args[:n_pointers]), fn.args[n_pointers:]
    kb = KernelBuilder(fn)
    with kb.loop(0, gz, name="block.z") as z, kb.loop(0, gy, name="block.y") as y, \
            kb.loop(0, gx, name="block.x") as x:
        kb.b.call(body, pointers + [x, y, z])
    kb.finish()
