"""`hobbit compile`: one stage of a model compiled for --target, written to a file or
standard output: the LLVM IR hobbit generates (text or bitcode), LLVM's optimised code
(assembly or an object), the graph after the passes, or an exported library folder
(hobbit.runtime.export). A GPU target goes to hobbit.cli.gpu."""

from __future__ import annotations

import argparse
import sys

import hobbit
from hobbit.cli.args import add_command, model_flags
from hobbit.cli.inputs import declared, input_shapes
from hobbit.cli.model import compile_report, model_source, pipeline
from hobbit.cli.output import write_bytes, write_text, writing
from hobbit.backend.llvm import emit_assembly, emit_object
from hobbit.errors import ConfigError
from hobbit.target import is_gpu

DESCRIPTION = """Compile MODEL for --target (default: this machine) and write one stage of the
result: the LLVM IR hobbit generates (before LLVM's optimiser) as text or bitcode, the optimised
machine code as assembly or an object, the graph after the passes (fused groups), or an exported
library."""

EXAMPLES = """examples:
  hobbit compile model.onnx -o model.ll        the LLVM IR hobbit generates
  hobbit compile model.onnx --emit asm --threads 1
  hobbit compile dynamic.onnx --input-shape input=1x3x224x224 --emit graph
  hobbit compile squeezenet1_1 --emit lib -o build/squeezenet
                                               libsqueezenet.so + squeezenet.h + weights
  hobbit compile squeezenet1_1 --emit lib --target aarch64-linux-gnu:neoverse-v1 -o build/arm
                                               the same for an AArch64 (SVE) machine
  hobbit compile encoder.onnx --emit lib --input-shape tokens=1x1..512x32 -o build/encoder
                                               one library for every sequence length from 1 to 512
  hobbit compile model.onnx --emit asm --target x86-64-v3
                                               AVX2 code for machines without AVX-512"""

# What each --emit stage is made from: the IR stages are the module as hobbit generates it (the
# input of LLVM's optimiser, what `opt` and `llc` would be given), the machine stages LLVM's -O3
# code for the target.
_EMIT_OPT_LEVEL = {"llvm": 0, "bc": 0, "graph": 0, "asm": 3, "obj": 3}


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit compile` to the subcommands."""
    p = add_command(sub, "compile", cmd_compile, description=DESCRIPTION, examples=EXAMPLES,
                    summary="print the LLVM IR, assembly or optimised graph of a model")
    model_flags(p)
    p.add_argument("--emit", choices=["llvm", "bc", "asm", "obj", "graph", "lib"], default="llvm",
                   help="what to write (default llvm): the LLVM IR hobbit generates as text (llvm) or bitcode "
                        "(bc), LLVM's -O3 code for the target as assembly (asm) or an ELF object (obj), the "
                        "graph after the passes (graph); 'lib' writes a shared library with a C header, its "
                        "weights and a manifest into the folder -o DIR (hobbit.load(DIR) runs it again)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--name", help="with --emit lib: the C prefix of the library's functions "
                                  "(default: the folder's name)")
    p.add_argument("--weights", choices=["auto", "embed", "file"], default="auto",
                   help="with --emit lib: the weights inside the library (embed), in NAME.weights beside it "
                        "(file), or inside up to 16 MiB and beside it above (auto, the default)")


def cmd_compile(args: argparse.Namespace) -> int:
    if is_gpu(args.target):
        from hobbit.cli import gpu  # the GPU runtime's modules load only for a GPU target
        return gpu.emit(args, gpu.gpu_model(args))
    if args.emit == "lib":
        return _export(args)
    if args.emit in ("bc", "obj") and args.output is None and sys.stdout.isatty():
        raise ConfigError(f"--emit {args.emit} is binary: write it to a file with -o FILE (or redirect stdout)")
    # With --polly the IR stages are what Polly and LLVM's optimiser made of it: the loops to read.
    polly = args.loops != "llvm"
    report = compile_report(args, opt_level=3 if polly else _EMIT_OPT_LEVEL[args.emit])
    if args.emit == "llvm":
        write_text(str(report.optimized) if polly else report.llvm_ir, args.output)
    elif args.emit == "asm":
        write_text(emit_assembly(report.optimized, report.target), args.output)
    elif args.emit == "graph":
        write_text(str(report.graph), args.output)
    elif args.emit == "bc":
        write_bytes(report.optimized.as_bitcode(), args.output)
    else:
        write_bytes(emit_object(report.optimized, report.target), args.output)
    return 0


def _export(args: argparse.Namespace) -> int:
    """`--emit lib -o DIR`: the model as a library with a C API (hobbit.runtime.export)."""
    if not args.output:
        raise ConfigError("--emit lib writes a folder (library, header, weights, manifest): give it with -o DIR")
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape, ranges=True)
    model = hobbit.compile(source.model, target=args.target, threads=args.threads, precision=args.precision,
                           passes=pipeline(args), input_shapes=shapes or None, signature=args.signature,
                           schedule=args.schedule, loops=args.loops)
    with writing(args.output):
        files = model.export(args.output, name=args.name, weights=args.weights)
    for path in files.written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
