"""`hobbit inspect`: the graph after the passes, one line per fused kernel with the model
nodes it came from, its output type and where that output lives in memory, then the kernel
count, the threads it was built for and the arena and weights sizes. A GPU target goes to
hobbit.cli.gpu (each kernel's launch)."""

from __future__ import annotations

import argparse

from hobbit.cli.args import add_command, model_flags
from hobbit.cli.model import compile_report, pipeline
from hobbit.cli.output import print_listing
from hobbit.emit.naming import kernel_name
from hobbit.passes import default_pipeline
from hobbit.passes.memory import needs_code
from hobbit.target import is_gpu

DESCRIPTION = """List the graph after the passes: one line per fused group (e.g. Conv+Add+Relu) with
the ONNX nodes it came from, its output type and where the output lives (arena offset, graph output,
...), then the arena and weights sizes."""

EXAMPLES = """examples:
  hobbit inspect resnet18
  hobbit inspect model.onnx --disable fuse     the plan without fusion
  hobbit inspect dynamic.onnx --input-shape input=4x3x224x224"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit inspect` to the subcommands."""
    p = add_command(sub, "inspect", cmd_inspect, description=DESCRIPTION, examples=EXAMPLES,
                    summary="show fused kernels, their ONNX nodes, shapes and the memory plan")
    model_flags(p)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB ({nbytes} bytes)"


def cmd_inspect(args: argparse.Namespace) -> int:
    if is_gpu(args.target):
        from hobbit.cli import gpu  # the GPU runtime's modules load only for a GPU target
        return gpu.inspect(gpu.gpu_model(args))
    report = compile_report(args)
    graph, plan = report.graph, report.plan
    passes = pipeline(args)
    passes = default_pipeline(args.precision) if passes is None else passes
    rows = []
    for node in graph.nodes:
        ops = kernel_name(node).split("[", 1)[0] if needs_code(node) else "view:" + node.op
        out = node.outputs[0]
        rows.append((ops, ", ".join(node.fused_names), str(out.type), str(plan.place(out))))
    print_listing(f"model {graph.name}: {len(graph.nodes)} nodes after passes ({', '.join(passes) or 'none'}, "
                  "then legalize)",
                  [(v.name, str(v.type)) for v in graph.inputs], [(v.name, str(v.type)) for v in graph.outputs],
                  ("ops", "onnx nodes", "output", "memory"), rows)
    kernels = sum(1 for n in graph.nodes if needs_code(n))
    print(f"kernels: {kernels}")
    print(f"threads: {report.threads} (scratch and work counters are sized for them)")
    print(f"arena: {_mib(plan.arena_bytes)}")
    print(f"weights: {_mib(plan.weights_bytes)}")
    return 0
