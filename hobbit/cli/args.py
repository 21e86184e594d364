"""The argument types and flags several `hobbit` subcommands share: counts, seconds, a
regular expression, thread lists and --target are checked by argparse, so a bad value is a
usage error (one line, exit 2) before any work; MODEL, --passes/--disable, --threads,
--precision, --input-shape and --target read the same on run, compile and inspect; and the
help formatter prints each command's 'examples:' epilog line by line (add_command)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from hobbit.cli.inputs import parse_input_shape
from hobbit.errors import TargetError
from hobbit.passes import DEFAULT_PIPELINE, GPU_PRECISIONS, PASSES, PRECISIONS
from hobbit.target import CPUS, GpuTarget, Target, parse_target


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions like argparse does, but prints an 'examples:' epilog line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_command(sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int], *,
                summary: str, description: str, examples: str) -> argparse.ArgumentParser:
    """The parser of subcommand NAME, run by func: summary is its line in `hobbit --help`,
    description its paragraph (re-wrapped, so a triple-quoted text reads the same), examples
    its epilog, printed line by line."""
    p = sub.add_parser(name, formatter_class=HelpFormatter, epilog=examples, help=summary,
                       description=description)
    p.set_defaults(func=func)
    return p


def positive_int(text: str) -> int:
    """--threads N, --runs N, ...: refused by argparse (a usage error) unless N >= 1, so 0 cannot
    slip through as "the default" or time nothing."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """--warmup N: 0 is allowed (no warm-up), a negative count is a usage error."""
    return _whole_number(text, 0)


def _whole_number(text: str, least: int) -> int:
    try:
        count = int(text)
    except ValueError:
        count = least - 1
    if count < least:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
    return count


def positive_seconds(text: str) -> float:
    """--timeout SECONDS: a time limit above zero (fractions allowed)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return seconds


def regex(text: str) -> str:
    """--filter REGEX: compiled once here so a bad pattern is a usage error, not a traceback."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a valid regular expression ({exc}): {text!r}") from exc
    return text


def parse_threads(text: str) -> list[int]:
    """--threads 1,2 -> [1, 2] (each at least 1, duplicates dropped, order kept)."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected thread counts >= 1 separated by commas, got {text!r}")
    return list(dict.fromkeys(counts))


def target_arg(text: str) -> Target | GpuTarget:
    """--target T: refused by argparse (a usage error) unless hobbit knows the CPU."""
    try:
        return parse_target(text)
    except TargetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL",
                   help="a model: an .onnx file, a TensorFlow frozen graph (.pb), SavedModel directory, Keras "
                        "file (.keras, needs TensorFlow) or TFLite file (.tflite), or a zoo model name (see `hobbit zoo`)")
    p.add_argument("--signature", metavar="NAME", default=None,
                   help="the SavedModel or Keras signature to compile (default: serving_default)")
    p.add_argument("--passes", metavar="A,B,C",
                   help=f"graph passes to run, in order (default: {','.join(DEFAULT_PIPELINE)}; "
                        f"known: {', '.join(PASSES)}); an empty string runs none")
    p.add_argument("--disable", metavar="NAME", action="append", default=[],
                   help="drop this pass from the pipeline (repeatable)")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="threads per inference to build for (default: $HOBBIT_NUM_THREADS, else the CPUs "
                        "this process may use: its affinity mask, capped by any cgroup CPU quota)")
    p.add_argument("--precision", choices=sorted(set(PRECISIONS + GPU_PRECISIONS)), default="fp32",
                   help="fp32 (default), or bf16: convolutions and fully-connected layers on bf16 weights and "
                        "activations with float32 sums (needs a CPU with AVX512-BF16, e.g. Zen 4, Sapphire Rapids), "
                        "or, for --target cuda, tf32 or bf16: convolutions and matmuls on tensor cores with operands in "
                        "that format")
    input_shape_flag(p)
    target_flag(p)
    codegen_flags(p)


def codegen_flags(p: argparse.ArgumentParser) -> None:
    """--schedule and --polly / --polly-early: how the kernels' loops are made (hobbit.compile's
    `schedule` and `loops`)."""
    p.add_argument("--schedule", choices=("auto", "naive"), default="auto",
                   help="auto (default): hobbit's tiled, packed kernels chosen from shapes and target; naive: "
                        "convolutions, matrix products, pooling and reductions as plain loop nests (for --polly)")
    loops = p.add_mutually_exclusive_group()
    loops.add_argument("--polly", dest="loops", action="store_const", const="polly", default="llvm",
                       help="optimise with LLVM's Polly loop optimiser, at its default place right before the loop "
                            "vectoriser (runs Debian's opt-22: apt-get install llvm-22)")
    loops.add_argument("--polly-early", dest="loops", action="store_const", const="polly-early",
                       help="as --polly, with Polly before LLVM's standard pipeline")


def target_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", type=target_arg, default="host", metavar="T",
                   help="the CPU to generate code for: 'host' (default: this machine), a CPU name "
                        f"({', '.join(CPUS)}), or TRIPLE:CPU[:FEATURES] (e.g. aarch64-linux-gnu:neoverse-v1, "
                        "x86_64-linux-gnu:znver4:-avx512bf16); code this host cannot run is for --emit only; "
                        "or a GPU: cuda[:sm_80|sm_90], rocm[:gfx90a|gfx942]")


def input_shape_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", metavar="NAME=DIMS", type=parse_input_shape, action="append", default=[],
                   help="the shape of input NAME, dims joined by 'x' (e.g. input=8x3x224x224), to size its "
                        "symbolic dims such as a dynamic batch; static dims must match the model (repeatable). "
                        "On `hobbit compile --emit lib` a symbolic dim may be a range LOW..HIGH "
                        "(input_ids=1x1..512): a run-time dim with those bounds, one library for every size in them")
