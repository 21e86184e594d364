"""`hobbit compile` and `hobbit inspect` for a GPU target (--target cuda[:ARCH], rocm[:ARCH]).

--emit llvm is the module of kernels as generated, asm the PTX (or AMDGPU assembly), obj the
cubin ptxas made (or the .hsaco), graph the graph after the GPU passes, lib a folder with
the device code, weights and the launch manifest (GpuModel.export), which hobbit.load runs. `inspect` lists each
kernel's launch: grid, threads, shared memory, and on NVIDIA ptxas's registers and spills."""

from __future__ import annotations

import argparse
import sys

import hobbit
from hobbit.backend.llvm import emit_assembly, optimize
from hobbit.cli.inputs import declared, input_shapes, require_static
from hobbit.cli.model import model_source, pipeline
from hobbit.cli.output import print_listing, write_bytes, write_text
from hobbit.errors import ConfigError, MissingDependencyError
from hobbit.runtime.gpu_model import GpuModel


def gpu_model(args: argparse.Namespace) -> GpuModel:
    """The GpuModel behind `compile`/`inspect --target cuda|rocm`: one fixed-shape build."""
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape)
    require_static(source.declared_inputs(shapes),
                   f"`hobbit {args.command}` builds one fixed-shape variant, so each symbolic dim needs a size")
    return hobbit.compile(source.model, target=args.target, precision=args.precision, passes=pipeline(args),
                          input_shapes=shapes or None, signature=args.signature, cache=False)


def emit(args: argparse.Namespace, model: GpuModel) -> int:
    target = model.target
    if args.emit == "llvm":
        write_text(model.report.llvm_ir, args.output)
    elif args.emit == "graph":
        write_text(str(model.report.graph), args.output)
    elif args.emit == "asm":
        text = model.device_code if target.vendor == "cuda" else emit_assembly(optimize(model.report.llvm_ir, target),
                                                                                 target)
        write_text(text, args.output)
    elif args.emit == "obj":
        code = model.device_code if target.vendor == "rocm" else model.cubin
        if code is None:
            raise MissingDependencyError("--emit obj for cuda is ptxas's cubin and ptxas was not found: "
                                         "pip install nvidia-cuda-nvcc (or use --emit asm for the PTX)")
        write_bytes(code, args.output)
    elif args.emit == "lib":
        if not args.output:
            raise ConfigError("--emit lib writes a folder (device code, weights, manifest): give it with -o DIR")
        for path in model.export(args.output, name=args.name, weights=args.weights).written:
            print(f"wrote {path}", file=sys.stderr)
    else:
        raise ConfigError(f"--emit {args.emit} has no meaning for a GPU target")
    return 0


def inspect(model: GpuModel) -> int:
    target, report = model.target, model.report
    rows = []
    for launch in model.launches:
        res = model.resources.get(launch.kernel)
        rows.append((launch.kernel, "x".join(map(str, launch.grid)), str(launch.threads), str(launch.shared_bytes),
                     str(res.registers) if res else "-",
                     f"{res.spill_stores}/{res.spill_loads}" if res else "-"))
    print_listing(f"model {report.graph.name} for {target.vendor} {target.arch} ({target.sms} SMs, "
                  f"{target.shared_bytes // 1024} KiB shared per block, warp {target.warp})",
                  [(spec.name, f"{spec.dtype.name}{list(spec.shape)}") for spec in model.inputs],
                  [(spec.name, f"{spec.dtype.name}{list(spec.shape)}") for spec in model.outputs],
                  ("kernel", "grid", "threads", "shared", "registers", "spills"), rows)
    print(f"kernels: {len(model.launches)}")
    print(f"arena: {model.arena_bytes / 2**20:.1f} MiB")
    print(f"weights: {model.weights.nbytes / 2**20:.1f} MiB")
    return 0
