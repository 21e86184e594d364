"""The model inputs a `hobbit` command works with: `--input-shape NAME=DIMS` fixes symbolic
dims (or, with LOW..HIGH for a dim, makes it a run-time dim with those bounds, where the
command keeps the one module: `hobbit compile --emit lib`), `--input NAME=FILE.npy` gives
data. Both are checked against what the model declares (hobbit.frontend.declared) before
anything compiles, so a typo costs a second, not a compile, and a symbolic model without
sizes gets an error that shows the flag to pass."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

import numpy as np
import onnx

from hobbit.errors import InputError
from hobbit.frontend.common.source import DeclaredInput, Source

Shapes = dict[str, tuple[int, ...]]
Dim = int | tuple[int, int]  # a size, or a run-time dim's (low, high)


def _dim(d: Dim) -> str:
    return f"{d[0]}..{d[1]}" if isinstance(d, tuple) else str(d)


@dataclass(frozen=True)
class ShapeFlag:
    """One `--input-shape NAME=DIMS` as typed."""

    name: str
    dims: tuple[Dim, ...]

    def __str__(self) -> str:
        return f"--input-shape {self.name}={'x'.join(map(_dim, self.dims))}"

    @property
    def ranged(self) -> bool:
        return any(isinstance(d, tuple) for d in self.dims)


@dataclass(frozen=True)
class InputFile:
    """One `--input NAME=FILE.npy` as typed (the file is read later, against the model)."""

    name: str
    path: str


def parse_input_shape(text: str) -> ShapeFlag:
    """argparse type of --input-shape: 'x=1x3x224x224' (a scalar input is 'x='), a dim LOW..HIGH
    a range ('input_ids=1x1..512'). Dims are whole numbers >= 1: a 0-sized input gives no work
    to compile or time."""
    name, sep, dims = text.partition("=")
    parts = [part.split("..") for part in dims.split("x")] if dims else []
    if (not sep or not name or not all(len(p) in (1, 2) and all(n.isdigit() and int(n) >= 1 for n in p)
                                       for p in parts)
            or any(len(p) == 2 and int(p[0]) > int(p[1]) for p in parts)):
        raise argparse.ArgumentTypeError(f"expected NAME=DIMS with dims >= 1 joined by 'x', e.g. "
                                         f"input=1x3x224x224, or a dim LOW..HIGH (LOW <= HIGH) for a run-time dim, "
                                         f"e.g. input_ids=1x1..512; got {text!r}")
    return ShapeFlag(name, tuple(int(p[0]) if len(p) == 1 else (int(p[0]), int(p[1])) for p in parts))


def parse_input_file(text: str) -> InputFile:
    """argparse type of --input: 'x=data/x.npy'."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {text!r}")
    return InputFile(name, path)


def declared(source: Source, flags: list[ShapeFlag]) -> list[DeclaredInput]:
    """The model's declared inputs; for an input that declares no shape at all, its
    --input-shape stands in for the declaration (there is nothing to check it against)."""
    shapeless = set(source.shapeless_inputs())
    stand_ins = {flag.name: flag.dims for flag in flags if flag.name in shapeless}
    missing = sorted(shapeless - set(stand_ins))
    if missing:
        raise InputError(f"inputs {missing} declare no shape; give each one with --input-shape NAME=DIMS")
    found = source.declared_inputs({name: tuple(1 if isinstance(d, tuple) else d for d in dims)
                                    for name, dims in stand_ins.items()})
    return [replace(d, shape=tuple(None if isinstance(g, tuple) else n for g, n in zip(stand_ins[d.name], d.shape)),
                    symbols=tuple(f"{d.name}:{axis}" if isinstance(g, tuple) else None
                                  for axis, g in enumerate(stand_ins[d.name])))
            if d.name in stand_ins else d for d in found]


def describe(spec: DeclaredInput) -> str:
    """'float32[N, 3, 8, 8]': the dims as the model names them."""
    dims = [str(d) if d is not None else str(s) for d, s in zip(spec.shape, spec.symbols)]
    return f"{spec.dtype.name}[{', '.join(dims)}]"


def _lookup(declared: list[DeclaredInput], name: str, flag: str) -> DeclaredInput:
    by_name = {d.name: d for d in declared}
    if name not in by_name:
        raise InputError(f"{flag} names '{name}', which is not a model input; the model takes "
                         f"{', '.join(f'{d.name}: {describe(d)}' for d in declared) or 'no inputs'}")
    spec = by_name[name]
    if spec.sequence:
        raise InputError(f"{flag}: input '{name}' is a sequence of tensors; the command line can only "
                         f"give tensor inputs (use the Python API)")
    return spec


def _check_dims(spec: DeclaredInput, dims: tuple[Dim, ...], what: str) -> None:
    """`dims` must have the declared rank and agree with every static dim (a range is for a
    symbolic dim only)."""
    if len(dims) != len(spec.shape):
        raise InputError(f"{what} has rank {len(dims)}, but input '{spec.name}' is declared "
                         f"{describe(spec)} (rank {len(spec.shape)})")
    for axis, (given, fixed) in enumerate(zip(dims, spec.shape)):
        if fixed is not None and given != fixed:
            raise InputError(f"{what} sets axis {axis} to {_dim(given)}, but input '{spec.name}' is declared "
                             f"{describe(spec)}, which fixes it at {fixed}")


def input_shapes(declared: list[DeclaredInput], flags: list[ShapeFlag], ranges: bool = False) -> Shapes:
    """--input-shape flags -> the input_shapes of hobbit.compile, each checked against the model.
    `ranges`: the command keeps the one module of run-time dims (LOW..HIGH dims become
    input_shapes= ranges); elsewhere a range is refused, as the command builds one shape."""
    shapes: Shapes = {}
    for flag in flags:
        spec = _lookup(declared, flag.name, "--input-shape")
        if flag.ranged and not ranges:
            raise InputError(f"{flag}: a dim LOW..HIGH is a run-time dim, which `hobbit compile --emit lib` "
                             f"keeps (one library for every size in the range); this command builds one shape, "
                             f"so give each dim a size")
        if flag.name in shapes and shapes[flag.name] != flag.dims:
            raise InputError(f"--input-shape gives input '{flag.name}' two shapes: "
                             f"{'x'.join(map(_dim, shapes[flag.name]))} and {'x'.join(map(_dim, flag.dims))}")
        _check_dims(spec, flag.dims, str(flag))
        shapes[flag.name] = flag.dims
    return shapes


def load_feeds(declared: list[DeclaredInput], files: list[InputFile], shapes: Shapes) -> dict[str, np.ndarray]:
    """Read every --input file and check it against the model's declared input (dtype, rank,
    static dims) and any --input-shape for it."""
    feeds = {}
    for item in files:
        spec = _lookup(declared, item.name, "--input")
        what = f"--input {item.name}={item.path}"
        if item.name in feeds:
            raise InputError(f"{what}: input '{item.name}' is given by --input more than once")
        array = _read_npy(item, what)
        if array.dtype != spec.dtype:
            raise InputError(f"{what} holds {array.dtype.name} data, but input '{spec.name}' is "
                             f"{describe(spec)}; save it as {spec.dtype.name} (array.astype(np.{spec.dtype.name}))")
        _check_dims(spec, array.shape, f"{what} (shape {'x'.join(map(str, array.shape)) or 'scalar'})")
        if item.name in shapes and shapes[item.name] != array.shape:
            raise InputError(f"{what} has shape {'x'.join(map(str, array.shape))}, but --input-shape "
                             f"gives {item.name}={'x'.join(map(str, shapes[item.name]))}")
        feeds[item.name] = array
    return feeds


def _read_npy(item: InputFile, what: str) -> np.ndarray:
    """One array from a .npy file. The magic bytes are checked first: np.load would otherwise
    read any other file as a pickle and fail with advice about allow_pickle."""
    try:
        with open(item.path, "rb") as f:
            magic = f.read(len(_NPY_MAGIC))
    except OSError as exc:
        raise InputError(f"{what}: cannot open the file ({exc.strerror})") from exc
    if magic.startswith(_NPZ_MAGIC):
        raise InputError(f"{what}: an .npz archive of arrays; give one .npy file (numpy.save) per input")
    if magic != _NPY_MAGIC:
        raise InputError(f"{what}: not a .npy file (write one with numpy.save)")
    try:
        return np.load(item.path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{what}: a broken or unsupported .npy file ({exc})") from exc


_NPY_MAGIC = b"\x93NUMPY"
_NPZ_MAGIC = b"PK\x03\x04"


def require_static(declared: list[DeclaredInput], why: str, hint: str = "", free_axis0: bool = False) -> None:
    """Refuse inputs whose dims are still symbolic, showing the --input-shape flags that fix
    them (1 for each symbolic dim) after `why`; `hint` names another way out.
    `free_axis0`: something else (bench --batch) sets axis 0."""
    open_ = [d for d in declared if not d.sequence
             and any(dim is None for axis, dim in enumerate(d.shape) if axis or not free_axis0)]
    if not open_:
        return
    names = "; ".join(f"input '{d.name}' is {describe(d)}" for d in open_)
    flags = " ".join(str(ShapeFlag(d.name, tuple(1 if dim is None else dim for dim in d.shape)))
                     for d in open_)
    raise InputError(f"{names}; {why}: pass e.g. {flags}{hint}")


def with_input_shapes(proto: onnx.ModelProto, shapes: Shapes) -> onnx.ModelProto:
    """A copy of the model whose declared inputs have these shapes: for tools that take no
    input_shapes argument (onnxruntime, hobbit bench), the model itself is then static."""
    if not shapes:
        return proto
    fixed = onnx.ModelProto()
    fixed.CopyFrom(proto)
    for value in fixed.graph.input:
        if value.name in shapes:
            shape = value.type.tensor_type.shape
            shape.ClearField("dim")
            for size in shapes[value.name]:
                shape.dim.add().dim_value = size
    return fixed
