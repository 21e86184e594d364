"""Fingerprints of the code hobbit generates for its zoo: one sha256 per (model, precision,
target) of the LLVM IR before LLVM optimises it, and one of the packed weights.

Why this exists: restructurings that move code between modules (issue 27's "pure moves")
must not change what users get. The module hobbit hands to LLVM carries what hobbit decides
about a compiled model (kernels, their schedules, the memory plan's offsets; LLVM then only
optimises and assembles it), and the weight blob beside it the constants as the kernels
read them, so the same hashes before and after a move prove the move changed nothing. The
hashes of the current tree are committed beside this script (ir_fingerprints.json); after a
move, `--check` recomputes them and names every case that differs, and `--dump` writes the
IR texts to diff against a dump made before the move. A change that is meant to alter the
generated code rewrites the file with `--write` in the same commit.

What is fixed so that a hash belongs to the source tree, not to the machine it runs on:
- CPU targets are named CPUs (hobbit.target's tables give their vector width, caches and
  cores), never "host", and the thread count is fixed (2), so that a Zen 4 and a Zen 5 host
  give the same IR; GPU targets are named archs. Checked: every hash stayed the same with
  the host made to look like another (48 KiB L1, 2 MiB L2, 16 cores and CPUs,
  HOBBIT_NUM_THREADS=7), from another working directory and hash seed.
- int8 models are hobbit.quantize's (min-max, per-channel weights) of the float model,
  calibrated on four seeded smooth images (hobbit.zoo.images, CALIBRATION_SEED) with one
  thread and no compile cache. Calibration runs the float model on this host, whose plans
  sum in another order on another CPU; the quantized models came out bit-identical all the
  same when the calibration model was built for x86-64-v3, znver4 and a 48 KiB-L1 znver5
  (ResNet-18), and for a host given a 48 KiB L1, a 2 MiB L2 and 16 cores (all of them).
  Should an int8 case alone differ on another machine, suspect the calibration first.
- OpenBLAS runs its Haswell kernels wherever the CPU has AVX2, on 2 threads (_pin_blas_kernels):
  the zoo's BatchNorm statistics come from numpy matrix products, and each kernel set and thread
  count sums in its own order (ResNet-18's and the YOLO detector's weights differed between a Zen
  3 and a Zen 4, and with OMP_NUM_THREADS=1).
- PTX and machine code are not hashed: they depend on the LLVM inside llvmlite, and the
  same IR through the same LLVM gives the same PTX.

It reads hobbit only through entry points that stay put while internals move:
hobbit.compiler.lower_to_llvm (CPU), hobbit.compile (GPU: the report's IR, taken before the
finish), hobbit.quantize, hobbit.zoo and hobbit.zoo.images. The GPU finish needs ptxas
(nvidia-cuda-nvcc, a test dependency) and ld.lld (lld-22), as the GPU tests do.

The detection models exported from torchvision (hobbit.zoo.detection.DETECTORS) are left
out: each export runs torch (12 s for SSDlite, 20 s for RetinaNet, measured here) and sets
BatchNorm statistics and score thresholds with torch's arithmetic on this host, which would
make their weights the host's. The YOLO-style NMS detector built with onnx.helper
(hobbit.zoo.detection.yolo_nms) is in: it covers the data-dependent (Bounded) kernels.

All 96 cases take about 10 minutes on 2 cores, 6 GB of memory at the peak (VGG-16).

Usage (from the repository root; it imports the hobbit of the tree it lives in):
  python scripts/ir_fingerprints.py                      # print "sha256  case" lines
  python scripts/ir_fingerprints.py --check scripts/ir_fingerprints.json
  python scripts/ir_fingerprints.py --write scripts/ir_fingerprints.json
  python scripts/ir_fingerprints.py --only resnet18/ --dump /tmp/ir-after
  python scripts/ir_fingerprints.py --list                # the case names, nothing computed
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


def _pin_blas_kernels() -> None:
    """The zoo's float models get their BatchNorm statistics from a numpy forward pass
    (hobbit.zoo.builder), whose matrix products are OpenBLAS's, and OpenBLAS picks its kernels
    (and with them the order of each sum) by CPU: the same tree gave ResNet-18 other weights
    on a Zen 3 than on a Zen 4, and other ones again with OPENBLAS_CORETYPE=Sandybridge. One
    kernel set on every x86-64 CPU with AVX2 makes the weights the tree's. Set before numpy
    is imported, as OpenBLAS reads it when loaded."""
    try:
        with open("/proc/cpuinfo") as f:
            avx2 = " avx2 " in f.read()
    except OSError:
        avx2 = False
    if avx2:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    # Its thread count splits each product's sums too: OMP_NUM_THREADS=1, which Dask's and
    # Ray's workers set and a test process can inherit, gave ResNet-18 other weights than the
    # default 2 threads of the machine these fingerprints were written on. Pinned, whatever
    # the host's cores or the environment say.
    os.environ["OPENBLAS_NUM_THREADS"] = "2"


_pin_blas_kernels()

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fingerprint this tree's hobbit, not whichever one is installed

import onnx  # noqa: E402

import hobbit  # noqa: E402
from hobbit import zoo  # noqa: E402
from hobbit.compiler import lower_to_llvm  # noqa: E402
from hobbit.zoo.detection import yolo_nms  # noqa: E402
from hobbit.zoo.images import CALIBRATION_SEED, smooth_images  # noqa: E402

THREADS = 2  # the CPU thread count the code is built for
CALIBRATION_IMAGES = 4

# label -> hobbit target spec
CPU_TARGETS = {"znver4": "x86_64-linux-gnu:znver4",            # AVX-512, VNNI, BF16
               "x86-64-v3": "x86_64-linux-gnu:x86-64-v3",      # AVX2, no VNNI
               "neoverse-v1": "aarch64-linux-gnu:neoverse-v1"}  # SVE-256
GPU_TARGETS = {"sm_90": "cuda:sm_90", "gfx942": "rocm:gfx942"}
# label -> the precisions built for it ("int8": the quantized model, built as fp32)
PRECISIONS = {"znver4": ("fp32", "bf16", "int8"), "x86-64-v3": ("fp32", "int8"), "neoverse-v1": ("fp32", "int8"),
              "sm_90": ("fp32", "tf32", "bf16", "int8"), "gfx942": ("fp32", "int8")}
# Cases that hobbit does not build: the NMS detector's ops have no GPU kernels yet.
NOT_BUILT = {("yolo_nms", "sm_90"), ("yolo_nms", "gfx942")}

MODELS: dict[str, Callable[[], onnx.ModelProto]] = {**zoo.MODELS, "yolo_nms": yolo_nms}


@dataclass(frozen=True)
class Case:
    model: str
    precision: str
    target: str  # a label of CPU_TARGETS or GPU_TARGETS

    @property
    def name(self) -> str:
        return f"{self.model}/{self.precision}/{self.target}"


@dataclass(frozen=True)
class Fingerprint:
    ir: str  # the LLVM IR text before optimisation
    weights: np.ndarray  # the packed weight blob


def image_input(model: onnx.ModelProto) -> onnx.ValueInfoProto:
    """The model's one graph input (each zoo model has one image input)."""
    weights = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in weights]
    if len(inputs) != 1:
        raise SystemExit(f"{model.graph.name}: expected one input, found {[v.name for v in inputs]}")
    return inputs[0]


def cases() -> list[Case]:
    """Every case, in a fixed order. int8 is built from the float32 models: the zoo's -fp16
    variants are float16 throughout (hobbit.zoo.float16), with nothing hobbit.quantize takes."""
    result = []
    for model in MODELS:
        for target, precisions in PRECISIONS.items():
            if (model, target) in NOT_BUILT:
                continue
            for precision in precisions:
                if precision == "int8" and model.endswith("-fp16"):
                    continue
                result.append(Case(model, precision, target))
    return result


def quantize(model: onnx.ModelProto) -> onnx.ModelProto:
    """The int8 QDQ model: hobbit.quantize on seeded smooth images of the input's shape."""
    spec = image_input(model)
    shape = tuple(d.dim_value for d in spec.type.tensor_type.shape.dim)
    images = smooth_images(CALIBRATION_IMAGES, CALIBRATION_SEED, shape=shape[1:])
    return hobbit.quantize(model, calibration=[{spec.name: image[None]} for image in images],
                           method="minmax", per_channel=True, threads=1, cache=False, progress=False)


def generate(case: Case, model: onnx.ModelProto) -> Fingerprint:
    """The IR and weights hobbit generates for `case` from `model` (the int8 model for int8)."""
    precision = "fp32" if case.precision == "int8" else case.precision
    if case.target in CPU_TARGETS:
        report = lower_to_llvm(model, CPU_TARGETS[case.target], threads=THREADS, opt_level=0, precision=precision)
        return Fingerprint(report.llvm_ir, report.weights)
    compiled = hobbit.compile(model, target=GPU_TARGETS[case.target], precision=precision, opt_level=0,
                              cache=False, progress=False)
    return Fingerprint(compiled.report.llvm_ir, compiled.weights)


def sha256(data: bytes | np.ndarray) -> str:
    """The hex digest of bytes, or of an array's bytes in C order (no copy when contiguous)."""
    if isinstance(data, np.ndarray):
        data = memoryview(np.ascontiguousarray(data)).cast("B")
    return hashlib.sha256(data).hexdigest()


def fingerprints(selected: list[Case], dump: Path | None, log: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """(key, sha256) for each selected case: key `case` for the IR, `case:weights` for the
    weights. Each model is built (and quantized) once, for all its cases."""
    for name in MODELS:
        mine = [c for c in selected if c.model == name]
        if not mine:
            continue
        t0 = time.perf_counter()
        float_model = MODELS[name]()
        int8_model = quantize(float_model) if any(c.precision == "int8" for c in mine) else None
        log(f"{name}: built{' and quantized' if int8_model is not None else ''} in {time.perf_counter() - t0:.1f} s")
        for case in mine:
            t0 = time.perf_counter()
            made = generate(case, int8_model if case.precision == "int8" else float_model)
            if dump is not None:
                (dump / f"{case.model}.{case.precision}.{case.target}.ll").write_text(made.ir)
            log(f"  {case.name}: {len(made.ir):,} characters of IR in {time.perf_counter() - t0:.1f} s")
            yield case.name, sha256(made.ir.encode())
            yield f"{case.name}:weights", sha256(made.weights)
        del float_model, int8_model


def select(patterns: list[str] | None) -> list[Case]:
    """The cases whose name matches any glob in `patterns` or starts with it; all without."""
    every = cases()
    if not patterns:
        return every
    chosen = [c for c in every if any(c.name.startswith(p) or fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"--only {' '.join(patterns)} matches no case; see --list")
    return chosen


def compare(expected: dict[str, str], got: dict[str, str], complete: bool) -> list[str]:
    """Lines naming each difference; `complete`: every case was computed, so cases in the
    file that this tree no longer makes are differences too."""
    lines = [f"differs: {key}" for key in got if key in expected and expected[key] != got[key]]
    lines += [f"not in the file: {key}" for key in got if key not in expected]
    if complete:
        lines += [f"not produced: {key}" for key in expected if key not in got]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Usage"):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", type=Path, metavar="FILE",
                        help="write {case: sha256} as JSON (with --only, merged into FILE's other entries)")
    action.add_argument("--check", type=Path, metavar="FILE",
                        help="compare with FILE; print the cases that differ and exit 1 if any does")
    action.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--dump", type=Path, metavar="DIR",
                        help="also write each IR text to DIR/MODEL.PRECISION.TARGET.ll")
    parser.add_argument("--only", nargs="+", metavar="PATTERN",
                        help="the cases whose name (model/precision/target) starts with or matches a glob")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    selected = select(args.only)
    if args.list:
        print("\n".join(c.name for c in selected))
        return 0
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
    log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    log(f"{len(selected)} cases of hobbit {os.path.dirname(hobbit.__file__)}")
    t0 = time.perf_counter()
    got: dict[str, str] = {}
    for key, digest in fingerprints(selected, args.dump, log):
        got[key] = digest
        if args.write is None and args.check is None:
            print(f"{digest}  {key}", flush=True)
    log(f"{len(selected)} cases in {time.perf_counter() - t0:.0f} s")

    if args.write is not None:
        merged = json.loads(args.write.read_text()) if args.only and args.write.exists() else {}
        merged.update(got)
        args.write.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
        log(f"wrote {len(merged)} fingerprints to {args.write}")
    if args.check is not None:
        problems = compare(json.loads(args.check.read_text()), got, complete=not args.only)
        for line in problems:
            print(line)
        if problems:
            print(f"{len(problems)} of {len(got)} fingerprints differ from {args.check}")
            return 1
        print(f"all {len(got)} fingerprints match {args.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
