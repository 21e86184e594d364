"""`hobbit quantize`: an ONNX model to an int8 QDQ model (hobbit.quantize), calibrated on the
user's data: .npy/.npz files or a folder of them (hobbit.quantize.files), checked against the
model's inputs before anything compiles."""

from __future__ import annotations

import argparse
import sys

import onnx

import hobbit
from hobbit.cli.args import add_command, positive_int
from hobbit.cli.model import load_model
from hobbit.cli.output import writing
from hobbit.errors import ConfigError
from hobbit.frontend.onnx.importer import load_model as read_onnx
from hobbit.frontend.formats import detect_format
from hobbit.quantize.calibrate import declared_inputs
from hobbit.quantize.files import CalibrationFiles

DESCRIPTION = """Fold BatchNorm into the convolutions, run MODEL in hobbit over the calibration
batches to measure each activation's range, and write an ONNX QDQ model: int8 weights (symmetric,
per output channel unless --per-tensor), int32 biases, uint8 activations. onnxruntime and
`hobbit run` read it. Progress (stage, batches done) goes to stderr."""

EXAMPLES = """examples:
  hobbit quantize model.onnx --calibration images.npy -o model-int8.onnx
                                               samples stacked on axis 0 of one .npy
  hobbit quantize resnet18 --calibration calib/ -o resnet18-int8.onnx --method entropy
                                               one .npy (or .npz per input name) per batch in calib/
  hobbit run model-int8.onnx                   the quantized model runs like any other
calibration data: FILE.npy (one-input models): samples stacked on axis 0; an array of the
  input's rank gives batches of one, one of rank+1 gives x[i] as batches. FILE.npz: the same,
  one array per input name. DIR: one batch per .npy file (a leading batch axis of 1 is added
  when the array is one rank short) or per .npz file (arrays named after the inputs)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit quantize` to the subcommands."""
    p = add_command(sub, "quantize", cmd_quantize, description=DESCRIPTION, examples=EXAMPLES,
                    summary="quantize an ONNX model to int8 (QDQ) from calibration data")
    p.add_argument("model", metavar="MODEL", help="an .onnx file or a zoo model name (see `hobbit zoo`)")
    p.add_argument("--calibration", required=True, metavar="DIR|FILE.npy|FILE.npz",
                   help="calibration data, e.g. a few hundred representative inputs (see below)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="where to write the quantized model")
    p.add_argument("--method", choices=["minmax", "percentile", "entropy"], default="minmax",
                   help="how each activation's range is chosen (default minmax): the whole range seen; "
                        "percentile: |x| clipped at --percentile; entropy: the clipping of least KL "
                        "divergence (TensorRT's method)")
    p.add_argument("--percentile", type=float, default=99.999, metavar="P",
                   help="with --method percentile: the percentile of |x| kept (default 99.999)")
    p.add_argument("--per-tensor", action="store_true",
                   help="one scale per weight tensor instead of one per output channel")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="threads for the calibration runs (default: as `hobbit run`)")


def cmd_quantize(args: argparse.Namespace) -> int:
    """The calibration files are checked against the model's inputs before anything compiles."""
    model = load_model(args.model)
    if detect_format(model) != "onnx":
        raise ConfigError(f"`hobbit quantize` reads ONNX models; {args.model!r} is {detect_format(model)}")
    proto = read_onnx(model)
    batches = CalibrationFiles(args.calibration, declared_inputs(proto))
    quantized = hobbit.quantize(proto, calibration=batches, method=args.method, per_channel=not args.per_tensor,
                                percentile=args.percentile, threads=args.threads, progress=True)
    with writing(args.output):
        onnx.save(quantized, args.output)
    print(f"wrote {args.output} ({len(batches)} calibration batches, {args.method}, "
          f"{'per-tensor' if args.per_tensor else 'per-channel'} weights)", file=sys.stderr)
    return 0
