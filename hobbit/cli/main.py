"""The `hobbit` command: run, compile, inspect, benchmark and quantize ONNX models.

Every subcommand takes MODEL as a path to an .onnx file or the name of a
built-in zoo model (`hobbit zoo` lists them). Errors hobbit raises on purpose
are printed as one message and exit with status 2, like argparse's usage errors;
Ctrl-C exits with status 130 (128 + SIGINT, what a shell reports for a process
killed by it) and no traceback; see `hobbit COMMAND --help`.

Each subcommand is one module of this package that adds its own parser (register) and
handler; this one builds the top-level parser from them and runs the command."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import TextIO

import hobbit
import hobbit.cli.bench
import hobbit.cli.compile
import hobbit.cli.conformance
import hobbit.cli.inspect
import hobbit.cli.quantize
import hobbit.cli.run
import hobbit.cli.zoo
from hobbit.cli.output import check_outputs
from hobbit.errors import HobbitError
from hobbit.interrupt import interrupted

EXIT_ERROR = 2

_EPILOG = """examples:
  hobbit run resnet18                       compile a zoo model and run it on random input
  hobbit run model.onnx --input input=x.npy run your model on your data
  hobbit run dynamic.onnx --input-shape input=8x3x224x224
                                            fix a symbolic (batch) dim, run on random input
  hobbit inspect model.onnx                 fused kernels, memory plan, weights size
  hobbit compile model.onnx --emit asm -o model.s
  hobbit compile dynamic.onnx --input-shape input=1x3x224x224 --emit llvm
  hobbit bench                              resnet18: hobbit vs onnxruntime, 1 thread
  hobbit bench --model all --threads 1,2 --plot ratios.png
                                            every zoo model at 1 and 2 threads, chart of ratios
  hobbit bench --load none,busy-core,two-procs --streams 2
                                            the same under load, and throughput of 2 threads on one model
  hobbit quantize model.onnx --calibration images.npy -o model-int8.onnx
                                            int8 QDQ model calibrated on your data
  hobbit zoo                                list the built-in models"""

# The subcommands, each a module with register(sub), in the order `hobbit --help` lists them.
COMMANDS = (hobbit.cli.run, hobbit.cli.compile, hobbit.cli.inspect, hobbit.cli.bench, hobbit.cli.quantize,
            hobbit.cli.conformance, hobbit.cli.zoo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hobbit", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="hobbit compiles ONNX models to native code for this CPU (via LLVM) and runs them.")
    parser.add_argument("--version", action="version", version=f"hobbit {hobbit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `hobbit` command (argv: sys.argv[1:] by default); returns the process exit status.
    Warnings it raises print as one line each (show_warning) while it runs."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        try:
            check_outputs(args)
            return args.func(args)
        except HobbitError as exc:
            print(f"hobbit: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            return interrupted()


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """warnings.showwarning for the command: `hobbit: warning: MESSAGE` on one line, without
    Python's file, line number, category and source line, which mean nothing to a user."""
    text = " ".join(str(message).removeprefix("hobbit: ").split())
    print(f"hobbit: warning: {text}", file=sys.stderr if file is None else file)


if __name__ == "__main__":
    sys.exit(main())
