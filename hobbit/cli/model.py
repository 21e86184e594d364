"""What a `hobbit` command compiles: the MODEL argument (a file in any format hobbit reads,
or a zoo model), the graph passes of --passes and --disable, the one fixed-shape build that
`compile` and `inspect` make, and the check that a command which runs code in this process
was given a target this host can run."""

from __future__ import annotations

import argparse
import os

import onnx

from hobbit import zoo
from hobbit.cli.inputs import declared, input_shapes, require_static
from hobbit.compiler import CompileReport, lower_to_llvm
from hobbit.errors import HobbitError, TargetError
from hobbit.frontend.common.source import Source
from hobbit.frontend.formats import open_source
from hobbit.passes import NAIVE_PIPELINE, PASSES, default_pipeline
from hobbit.target import GpuTarget, Target, host_target, is_gpu


def load_model(spec: str) -> onnx.ModelProto | str:
    """MODEL argument -> something hobbit.compile accepts: an existing file path (compiled from
    the path, so it shares compile-cache entries with hobbit.compile(path)), or a zoo model."""
    if os.path.exists(spec):
        return spec
    if spec in zoo.MODELS:
        return zoo.build(spec)
    raise not_a_model(spec)


def model_source(args: argparse.Namespace) -> Source:
    """MODEL and --signature -> the model's Source (its format read from the path)."""
    return open_source(load_model(args.model), args.signature)


def not_a_model(spec: str) -> HobbitError:
    return HobbitError(f"{spec!r} is neither an existing file nor a zoo model "
                       f"(zoo models: {', '.join(zoo.MODELS)})")


def pipeline(args: argparse.Namespace) -> list[str] | None:
    """--passes / --disable -> the `passes` argument of hobbit.compile (None = default pipeline)."""
    if args.passes is None and not args.disable:
        return None
    default = (list(NAIVE_PIPELINE) if getattr(args, "schedule", "auto") == "naive"
               else default_pipeline(getattr(args, "precision", None) or "fp32", getattr(args, "target", None)))
    names = default if args.passes is None else [p.strip() for p in args.passes.split(",") if p.strip()]
    for name in list(names) + list(args.disable):
        if name not in PASSES:
            raise HobbitError(f"unknown pass {name!r}; known passes: {', '.join(PASSES)}")
    return [p for p in names if p not in args.disable]


def compile_report(args: argparse.Namespace, opt_level: int = 0) -> CompileReport:
    """The compile behind `compile` and `inspect`: one fixed-shape build, so --input-shape must
    size every symbolic dim (checked before compiling)."""
    source = model_source(args)
    shapes = input_shapes(declared(source, args.input_shape), args.input_shape)
    require_static(source.declared_inputs(shapes),
                   f"`hobbit {args.command}` builds one fixed-shape variant, so each symbolic dim needs a size")
    # Polly changes only what LLVM's optimiser makes: the graph and plans an unoptimised build
    # reports (inspect, --emit graph) are the same without it.
    return lower_to_llvm(source, args.target, passes=pipeline(args), input_shapes=shapes or None,
                         opt_level=opt_level, threads=args.threads, precision=args.precision, schedule=args.schedule,
                         loops=args.loops if opt_level else "llvm")


def runnable_here(target: Target | GpuTarget, command: str) -> Target | GpuTarget:
    """The target of a command that runs code in this process: one this host can run, or a GPU
    (whose run says plainly when there is none)."""
    if is_gpu(target):
        return target
    why = target.runs_on(host_target())
    if why:
        raise TargetError(f"`hobbit {command}` runs the model here, and code for {target.triple} '{target.cpu}' "
                          f"cannot run on this host: {why}; use `hobbit compile --emit lib --target ...` to "
                          f"export it for that machine")
    return target
