"""`hobbit run`: compile a model for this machine and run it on data from .npy files or on
seeded random inputs, printing each output's shape and first values, the compile time and
the median latency. The inputs are read and checked against the model first, and their
shapes size the model's symbolic dims, so one compile builds the variant the run needs."""

from __future__ import annotations

import argparse
import time

import numpy as np

import hobbit
from hobbit.bench.suite import random_inputs
from hobbit.cli.args import add_command, model_flags, positive_int
from hobbit.cli.inputs import declared, input_shapes, load_feeds, parse_input_file, require_static
from hobbit.cli.model import model_source, pipeline, runnable_here
from hobbit.errors import InputError

DESCRIPTION = """Compile MODEL, run it, and print each output's shape, first values and the latency.
Inputs not given with --input are filled with seeded random data (N(0,1) for floats); a model with
symbolic dims (a dynamic batch) then needs --input-shape to size them."""

EXAMPLES = """examples:
  hobbit run resnet18                          a zoo model on random input
  hobbit run model.onnx --input input=x.npy    your data (dtype and shape checked before compiling)
  hobbit run dynamic.onnx --input-shape input=8x3x224x224
                                               a model with a dynamic batch, at batch 8"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit run` to the subcommands."""
    p = add_command(sub, "run", cmd_run, description=DESCRIPTION, examples=EXAMPLES,
                    summary="compile a model and run it on given or random inputs")
    model_flags(p)
    p.add_argument("--input", metavar="NAME=FILE.npy", type=parse_input_file, action="append", default=[],
                   help="feed input NAME from a .npy file, checked against the model before compiling; its "
                        "shape sizes NAME's symbolic dims (repeatable)")
    p.add_argument("--runs", type=positive_int, default=10, metavar="N",
                   help="timed runs for the latency figure (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")


def _summary(array: np.ndarray, count: int = 5) -> str:
    flat = array.reshape(-1)
    values = ", ".join(f"{v:.6g}" for v in flat[:count].tolist())
    more = ", ..." if flat.size > count else ""
    stats = f"  (min {flat.min():.4g}, max {flat.max():.4g})" if flat.size and flat.dtype.kind in "fiu" else ""
    return f"[{values}{more}]{stats}"


def cmd_run(args: argparse.Namespace) -> int:
    """Inputs are read and checked first; their shapes and --input-shape fix the symbolic dims,
    so the compile builds the one variant the run needs."""
    runnable_here(args.target, "run")
    source = model_source(args)
    model_inputs = declared(source, args.input_shape)
    shapes = input_shapes(model_inputs, args.input_shape)
    given = load_feeds(model_inputs, args.input, shapes)
    shapes.update({name: array.shape for name, array in given.items()})
    specs = source.declared_inputs(shapes)
    missing = [spec for spec in specs if spec.name not in given]
    require_static(missing, "random inputs need a size for each symbolic dim",
                   " (or give data with --input NAME=FILE.npy)")
    sequences = [spec.name for spec in missing if spec.sequence]
    if sequences:
        raise InputError(f"inputs {sequences} are sequences of tensors; `hobbit run` cannot make them up "
                         f"(use the Python API)")
    t0 = time.perf_counter()
    model = hobbit.compile(source.model, target=args.target, threads=args.threads, precision=args.precision,
                           passes=pipeline(args), input_shapes=shapes or None, signature=args.signature,
                           schedule=args.schedule, loops=args.loops)
    compile_s = time.perf_counter() - t0
    feeds = {**random_inputs(missing, args.seed), **given}
    for spec in specs:
        origin = "from file" if spec.name in given else "random"
        print(f"input  {spec.name}: {spec.dtype.name}{list(spec.shape)} ({origin})")
    outputs = model.run(feeds)
    times = []
    for _ in range(args.runs):
        t1 = time.perf_counter()
        model.run(feeds)
        times.append(time.perf_counter() - t1)
    for spec, out in zip(model.outputs, outputs):
        print(f"output {spec.name}: {out.dtype.name}{list(out.shape)} {_summary(out)}")
    print(f"compile: {compile_s:.2f} s")
    print(f"latency: {np.median(times) * 1e3:.3f} ms (median of {args.runs} runs after one warm-up)")
    return 0
