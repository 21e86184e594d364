"""The arguments of `run()`, checked: hobbit's `run(feeds)` and onnxruntime's
`run(output_names, feeds)`, the outputs they select, and caller-provided output arrays.

Every check here runs on each inference, so each is a type test or an attribute read;
the common `run(feeds)` form costs one isinstance on top of the feed checks."""

from __future__ import annotations

import numpy as np

from hobbit.errors import InputError


def split_run_args(first: object, second: object) -> tuple[list[str] | None, dict]:
    """run()'s two positional arguments -> (output names or None for all, feeds).

    A dict first is hobbit's run(feeds) and nothing may follow it; None, a list or a tuple
    first is onnxruntime's run(output_names, feeds) and the feeds must follow."""
    if isinstance(first, dict):
        if second is not None:
            raise InputError(f"run(feeds) takes the feeds dict alone, got a second argument "
                             f"({type(second).__name__}); onnxruntime's order is run(output_names, feeds)")
        return None, first
    if first is None or isinstance(first, (list, tuple)):
        if second is None and first:
            _refuse_missing_feeds(first)
        if not isinstance(second, dict):
            raise InputError(f"run(output_names, feeds) takes a dict of input name -> numpy array as feeds, "
                             f"got {type(second).__name__}")
        return _names(first), second
    raise InputError(f"run() takes a dict of input name -> numpy array, or onnxruntime's "
                     f"(output_names, feeds) with output_names None or a list of str; got {type(first).__name__}")


def _refuse_missing_feeds(first: list | tuple) -> None:
    """run(x) with a list or tuple and nothing after it: arrays are feeds in the wrong form
    (onnxruntime takes a dict too), names are output_names whose feeds were left out."""
    if all(isinstance(item, str) for item in first):
        raise InputError(f"run(output_names, feeds) got output_names {list(first)} and no feeds: pass the "
                         f"dict of input name -> numpy array after them")
    kinds = ", ".join(sorted({type(item).__name__ for item in first}))
    raise InputError(f"run() takes the feeds as a dict of input name -> numpy array, not a {type(first).__name__} "
                     f"of {kinds}: pass {{name: array}} for each of the model's inputs (m.inputs names them)")


def _names(names: list | tuple | None) -> list[str] | None:
    """None or an empty list selects every output, as in onnxruntime."""
    if not names:
        return None
    wrong = [n for n in names if not isinstance(n, str)]
    if wrong:
        raise InputError(f"output_names must be a list of str, got an item {wrong[0]!r} "
                         f"({type(wrong[0]).__name__})")
    return list(names)


def pick_outputs(names: list[str] | None, available: list[str]) -> list[int] | None:
    """Indices into the model's outputs for `names` in their order (None: all of them)."""
    if names is None:
        return None
    position = {name: i for i, name in enumerate(available)}
    unknown = [n for n in names if n not in position]
    if unknown:
        raise InputError(f"unknown output name(s) {unknown}; the model's outputs are {available}")
    return [position[n] for n in names]


def check_out(out: object, specs: list, names: list[str], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Caller-provided result arrays, one per returned output (`specs`/`names`), checked so the
    native code can write straight into them: exact dtype and shape, C-contiguous, aligned
    to the dtype like inputs (generated code indexes elements from a naturally aligned base),
    writeable, and sharing memory with no input and no other output (kernels read inputs
    after writing outputs, and outputs are written independently). An output named twice
    in output_names would need two arrays for one result, so it is refused."""
    twice = [name for i, name in enumerate(names) if name in names[:i]]
    if twice:
        raise InputError(f"output '{twice[0]}' is named twice in output_names; out= takes one array per output")
    if not isinstance(out, (list, tuple)):
        raise InputError(f"out= takes a list of numpy arrays, one per returned output, got {type(out).__name__}")
    if len(out) != len(specs):
        raise InputError(f"out= has {len(out)} array(s), the run returns {len(specs)} output(s) {names}")
    for i, (array, spec, name) in enumerate(zip(out, specs, names)):
        _check_one(i, array, spec, name)
    for i, array in enumerate(out):
        for other, input_array in enumerate(inputs):
            if np.may_share_memory(array, input_array):
                raise InputError(f"out[{i}] (output '{names[i]}') shares memory with input #{other}; "
                                 f"pass a separate array")
        for j in range(i):
            if np.may_share_memory(array, out[j]):
                raise InputError(f"out[{i}] (output '{names[i]}') shares memory with out[{j}] "
                                 f"(output '{names[j]}')")
    return list(out)


def _check_one(i: int, array: object, spec, name: str) -> None:
    where = f"out[{i}] (output '{name}')"
    if spec is None:
        raise InputError(f"{where} is a sequence or has a data-dependent shape; out= takes tensor outputs of static shape only")
    if not isinstance(array, np.ndarray):
        raise InputError(f"{where} must be a numpy array, got {type(array).__name__}")
    if array.dtype != spec.dtype:
        raise InputError(f"{where} has dtype {array.dtype}, the output is {np.dtype(spec.dtype).name}")
    if array.shape != tuple(spec.shape):
        raise InputError(f"{where} has shape {array.shape}, the output is {tuple(spec.shape)}")
    flags = array.flags
    if not flags.c_contiguous:
        raise InputError(f"{where} must be C-contiguous (np.ascontiguousarray makes one)")
    if not flags.aligned:
        raise InputError(f"{where} is not aligned to its dtype ({array.dtype.alignment} bytes)")
    if not flags.writeable:
        raise InputError(f"{where} is read-only")


def check_bounds(name: str, shape: tuple[int, ...], axis: int, symbol: str, span: tuple[int, int | None],
                 bounds_are: str) -> None:
    """InputError where input `name`'s dim `axis` (symbol `symbol`) lies outside `span` (low,
    high; high None: no upper bound), saying what the bounds are (`bounds_are`)."""
    low, high = span
    size = shape[axis]
    if size < low or (high is not None and size > high):
        raise InputError(f"input '{name}' has shape {shape}; dim {axis} ('{symbol}') must be in [{low}, {high}] "
                         f"({bounds_are}), got {size}")
