"""The manifest of an exported library (hobbit.runtime.export), checked field by field before use.

hobbit.load trusts the manifest for what it passes to native code: the thread count, the
tensors' shapes and types (the sizes of the buffers the library writes into), the library's
name (which names the files opened). A manifest is JSON that anyone can edit, so every field
is checked for its type and range here, each problem an ArtifactError naming the field and
the value; `threads: -5` loaded before. The library then confirms the sizes itself
(hobbit.runtime.load compares its arena and tensor sizes with the manifest's).

A model with run-time dims adds a "dynamic" section (hobbit.runtime.export_c.RunTimeDims;
older manifests have none, and a static model's is null). Besides its types, what the Python
side sizes from it is checked against the tensors: the last input is the dims vector, each
input's run-time dim is one symbol, every symbol is some input's dim (run() reads its value
there), and every extent is at most the tensor's dim at the bound (the dim itself but for a
cache stored with room for its new rows) and never outside [0, that dim] at any values inside
the ranges, so no buffer sized from it is smaller than the code's view.

A GPU model's manifest (hobbit.runtime.gpu_export) names its device code in place of the
library, and its launch list: each launch's pointers are checked to lie inside the buffers
they name, since its kernels write there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from hobbit.errors import ArtifactError
from hobbit.graph.extents import DIMS_INPUT

KEYS = ("name", "target", "threads", "arena_bytes", "library", "weights", "inputs", "outputs", "layout")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KERNEL = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")  # hobbit.backend.gpu.module.ptx_name
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Element types a tensor of an exported model may have: bool, integers, floats, and 2-byte
# raw values (bfloat16, which numpy spells as void).
_KINDS = "biufV"
# The largest symbol value or bound a manifest may give (the library's C checks are int64).
_MAX_DIM = 2**62


# A GPU model's manifest (hobbit.runtime.gpu_export): the device code in place of the library.
DEVICE_KEYS = ("name", "target", "arena_bytes", "device_code", "cubin", "weights", "inputs", "outputs", "layout",
               "launches")
_CODE_SUFFIX = {"cuda": ".ptx", "rocm": ".hsaco"}
_PLACES = ("input", "output", "const", "arena")


def check_manifest(manifest: Any, path: Path) -> dict:
    """`manifest` as read from `path`, every field checked; the first problem is an ArtifactError."""
    check = _Checker(path)
    name = check.named(manifest, KEYS, "an exported library")
    target = check.object(manifest, "target", ("triple", "cpu", "features"))
    for key in ("triple", "cpu", "features"):
        check.that(isinstance(target[key], str), f"target.{key}", target[key], "a string")
    check.integer(manifest["threads"], "threads", 1)
    check.integer(manifest["arena_bytes"], "arena_bytes", 0)
    check.file(manifest, "library", f"lib{name}.so")
    weights = check.object(manifest, "weights", ("file", "bytes", "crc32"))
    check.that(weights["file"] in (None, f"{name}.weights"), "weights.file", weights["file"],
               f"null or '{name}.weights'")
    check.integer(weights["bytes"], "weights.bytes", 0)
    check.integer(weights["crc32"], "weights.crc32", 0, 2**32 - 1)
    for key in ("inputs", "outputs"):
        check.that(isinstance(manifest[key], list), key, manifest[key], "a list")
        for index, spec in enumerate(manifest[key]):
            check.tensor(spec, f"{key}[{index}]")
    check.layout(manifest["layout"], len(manifest["outputs"]))
    check.dynamic(manifest.get("dynamic"), manifest["inputs"], manifest["outputs"])
    return manifest


def check_device_manifest(manifest: Any, path: Path) -> dict:
    """A GPU export's manifest as read from `path`, every field checked: besides the types,
    each launch's pointers must lie inside the buffers they name (the kernels write there)."""
    check = _Checker(path)
    name = check.named(manifest, DEVICE_KEYS, "an exported GPU model")
    target = check.object(manifest, "target", ("vendor", "arch"))
    check.that(target["vendor"] in _CODE_SUFFIX, "target.vendor", target["vendor"], "'cuda' or 'rocm'")
    check.that(isinstance(target["arch"], str), "target.arch", target["arch"], "a string")
    check.integer(manifest["arena_bytes"], "arena_bytes", 0)
    check.file(manifest, "device_code", f"{name}{_CODE_SUFFIX[target['vendor']]}")
    if manifest["cubin"] is not None:
        check.that(target["vendor"] == "cuda", "cubin", manifest["cubin"], "null for a rocm model")
        check.file(manifest, "cubin", f"{name}.cubin")
    weights = check.object(manifest, "weights", ("file", "bytes", "crc32"))
    check.that(weights["file"] == f"{name}.weights", "weights.file", weights["file"], f"'{name}.weights'")
    check.integer(weights["bytes"], "weights.bytes", 0)
    check.integer(weights["crc32"], "weights.crc32", 0, 2**32 - 1)
    sizes = {}
    for key in ("inputs", "outputs"):
        check.that(isinstance(manifest[key], list), key, manifest[key], "a list")
        for index, spec in enumerate(manifest[key]):
            check.tensor(spec, f"{key}[{index}]")
        sizes[key[:-1]] = [int(np.prod(s[1], dtype=np.int64)) * np.dtype(s[2]).itemsize for s in manifest[key]]
    check.layout(manifest["layout"], len(manifest["outputs"]))
    check.that(isinstance(manifest["launches"], list), "launches", manifest["launches"], "a list")
    for index, launch in enumerate(manifest["launches"]):
        check.launch(launch, f"launches[{index}]", sizes, weights["bytes"], manifest["arena_bytes"])
    return manifest


class _Checker:
    def __init__(self, path: Path):
        self.path = path

    def that(self, ok: bool, field: str, value: Any, expected: str) -> None:
        if not ok:
            where = f"field '{field}'" if field else "the file"
            raise ArtifactError(f"{self.path}: {where} is {value!r:.80}, not {expected}: the manifest was damaged "
                                "or edited; export the model again")

    def named(self, manifest: Any, keys: tuple[str, ...], what: str) -> str:
        """The manifest's name, once it is an object with every key of `keys` and a name that is a C identifier."""
        self.that(isinstance(manifest, dict), "", manifest, "a JSON object")
        missing = [key for key in keys if key not in manifest]
        if missing:
            raise ArtifactError(f"{self.path} is not the manifest of {what}: it lacks {', '.join(missing)}")
        name = manifest["name"]
        self.that(isinstance(name, str) and _IDENTIFIER.fullmatch(name) is not None, "name", name, "a C identifier")
        return name

    def integer(self, value: Any, field: str, low: int, high: int | None = None) -> None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
        self.that(ok, field, value, f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")

    def object(self, manifest: dict, field: str, keys: tuple[str, ...]) -> dict:
        value = manifest[field]
        self.that(isinstance(value, dict) and all(k in value for k in keys), field, value,
                  f"an object with {', '.join(keys)}")
        return value

    def file(self, manifest: dict, field: str, expected: str) -> None:
        entry = self.object(manifest, field, ("file", "sha256"))
        self.that(entry["file"] == expected, f"{field}.file", entry["file"], f"'{expected}'")
        self.that(isinstance(entry["sha256"], str) and _SHA256.fullmatch(entry["sha256"]) is not None,
                  f"{field}.sha256", entry["sha256"], "64 lowercase hex digits")

    def launch(self, launch: Any, field: str, sizes: dict[str, list[int]], weights: int, arena: int) -> None:
        """One launch (hobbit.backend.gpu.module.Launch.to_json); each pointer's place inside
        its buffer: an input or output by index, the weights or the arena by byte offset."""
        keys = ("kernel", "node", "op", "grid", "threads", "shared_bytes", "args")
        self.that(isinstance(launch, dict) and all(k in launch for k in keys), field, launch,
                  f"an object with {', '.join(keys)}")
        for key in ("kernel", "node", "op"):
            self.that(isinstance(launch[key], str), f"{field}.{key}", launch[key], "a string")
        self.that(_KERNEL.fullmatch(launch["kernel"]) is not None, f"{field}.kernel", launch["kernel"],
                  "a kernel name (letters, digits, '_', '$')")
        grid = launch["grid"]
        self.that(isinstance(grid, list) and len(grid) == 3, f"{field}.grid", grid, "[x, y, z]")
        for size in grid:
            self.integer(size, f"{field}.grid", 1, 2**31 - 1)
        self.integer(launch["threads"], f"{field}.threads", 1, 1024)
        self.integer(launch["shared_bytes"], f"{field}.shared_bytes", 0)
        self.that(isinstance(launch["args"], list), f"{field}.args", launch["args"], "a list")
        for place in launch["args"]:
            where = f"{field}.args"
            self.that(isinstance(place, list) and len(place) == 3 and place[0] in _PLACES, where, place,
                      f"[kind, index, offset] with kind one of {', '.join(_PLACES)}")
            kind, index, offset = place
            self.integer(index, where, 0)
            self.integer(offset, where, 0)
            if kind in sizes:
                self.that(index < len(sizes[kind]) and offset <= sizes[kind][index], where, place,
                          f"a place inside one of the model's {len(sizes[kind])} {kind}s")
            else:
                self.that(index + offset <= (weights if kind == "const" else arena), where, place,
                          f"a place inside the {'weights' if kind == 'const' else 'arena'}")

    def tensor(self, spec: Any, field: str) -> None:
        self.that(isinstance(spec, list) and len(spec) == 3, field, spec, "[name, shape, dtype]")
        name, shape, dtype = spec
        self.that(isinstance(name, str), f"{field} name", name, "a string")
        self.that(isinstance(shape, list), f"{field} shape", shape, "a list of sizes")
        for dim in shape:
            self.integer(dim, f"{field} shape", 0)
        self.that(isinstance(dtype, str) and _dtype_ok(dtype), f"{field} dtype", dtype,
                  "a numpy type string of a bool, integer or float type")

    def dynamic(self, section: Any, inputs: list, outputs: list) -> None:
        """None, or a library's run-time dims (RunTimeDims.to_json) that agree with its tensors
        (see the module docstring)."""
        if section is None:
            return
        keys = ("symbols", "ranges", "bound", "inputs", "outputs")
        self.that(isinstance(section, dict) and sorted(set(section) - {"in_place"}) == sorted(keys), "dynamic",
                  section, f"null or an object with exactly {', '.join(keys)} (and in_place)")
        symbols = section["symbols"]
        self.that(isinstance(symbols, list) and len(symbols) > 0 and len(set(map(str, symbols))) == len(symbols)
                  and all(isinstance(s, str) and s for s in symbols), "dynamic.symbols", symbols,
                  "a list of distinct, non-empty names")
        n = len(symbols)
        bound = section["bound"]
        self.that(isinstance(bound, list) and len(bound) == n, "dynamic.bound", bound, f"a list of {n} sizes")
        for size in bound:
            self.integer(size, "dynamic.bound", 1, _MAX_DIM)
        ranges = section["ranges"]
        self.that(isinstance(ranges, list) and len(ranges) == n, "dynamic.ranges", ranges, f"a list of {n} [low, high]")
        for slot, pair in enumerate(ranges):
            field = f"dynamic.ranges[{slot}]"
            self.that(isinstance(pair, list) and len(pair) == 2, field, pair, "[low, high]")
            self.integer(pair[0], field, 1, bound[slot])
            self.integer(pair[1], field, pair[0], bound[slot])
        self.that(len(inputs) > 0 and inputs[-1] == [DIMS_INPUT, [n], np.dtype(np.int64).str], "inputs", inputs,
                  f"inputs whose last is the dims vector {[DIMS_INPUT, [n], np.dtype(np.int64).str]}")
        seen = set()
        for key, specs in (("inputs", inputs[:-1]), ("outputs", outputs)):
            extents = section[key]
            self.that(isinstance(extents, list) and len(extents) == len(specs), f"dynamic.{key}", extents,
                      f"a list of {len(specs)} (one per {'input but the dims vector' if key == 'inputs' else 'output'})")
            for index, (dims, spec) in enumerate(zip(extents, specs)):
                field = f"dynamic.{key}[{index}]"
                shape = spec[1]
                self.that(isinstance(dims, list) and len(dims) == len(shape), field, dims,
                          f"a list of {len(shape)} (one per dim of {spec[0]!r})")
                for axis, (extent, size) in enumerate(zip(dims, shape)):
                    if extent is not None:
                        slots = self.extent(extent, f"{field}[{axis}]", size, ranges, bound)
                        if key == "inputs":
                            self.that(extent["const"] == 0 and len(slots) == 1 and extent["terms"][0][1] == 1,
                                      f"{field}[{axis}]", extent, "one symbol (an input's run-time dim)")
                            seen.update(slots)
        self.that(len(seen) == n, "dynamic.inputs", section["inputs"], "extents that give every symbol's value")
        pairs = section.get("in_place", [])
        self.that(isinstance(pairs, list), "dynamic.in_place", pairs, "a list of [input, output]")
        for pair in pairs:  # one buffer serves both: the same shape and dtype
            self.that(isinstance(pair, list) and len(pair) == 2, "dynamic.in_place", pair, "[input, output]")
            self.integer(pair[0], "dynamic.in_place", 0, len(inputs) - 2)
            self.integer(pair[1], "dynamic.in_place", 0, len(outputs) - 1)
            self.that(inputs[pair[0]][1:] == outputs[pair[1]][1:], "dynamic.in_place", pair,
                      "an input and an output of one shape and dtype")
        self.that(len({p[0] for p in pairs}) == len({p[1] for p in pairs}) == len(pairs), "dynamic.in_place", pairs,
                  "pairs of distinct inputs and distinct outputs")

    def extent(self, extent: Any, field: str, size: int, ranges: list, bound: list) -> list[int]:
        """{"terms": [[slot, coeff], ...], "const": c}: its value at the bound is at most `size`
        (less for a cache input stored with room for its step's new rows:
        hobbit.dynamic_compile.keep_caches_in_place), and at every value inside the ranges it
        lies in [0, size]; the slots it reads."""
        self.that(isinstance(extent, dict) and sorted(extent) == ["const", "terms"], field, extent,
                  "null or an object with exactly terms and const")
        terms = extent["terms"]
        self.that(isinstance(terms, list), f"{field}.terms", terms, "a list of [slot, coeff]")
        slots = []
        for term in terms:
            self.that(isinstance(term, list) and len(term) == 2, f"{field}.terms", term, "[slot, coeff]")
            self.integer(term[0], f"{field}.terms", 0, len(bound) - 1)
            self.integer(term[1], f"{field}.terms", -_MAX_DIM, _MAX_DIM)
            self.that(term[1] != 0 and term[0] not in slots, f"{field}.terms", terms,
                      "terms of distinct slots with non-zero coefficients")
            slots.append(term[0])
        self.integer(extent["const"], f"{field}.const", -_MAX_DIM, _MAX_DIM)
        at_bound = extent["const"] + sum(c * bound[s] for s, c in terms)
        low = extent["const"] + sum(c * ranges[s][0 if c > 0 else 1] for s, c in terms)
        high = extent["const"] + sum(c * ranges[s][1 if c > 0 else 0] for s, c in terms)
        self.that(at_bound <= size and 0 <= low and high <= size, field, extent,
                  f"an extent that is at most {size} at the bound and inside [0, {size}] for every value of the "
                  f"symbols")
        return slots

    def layout(self, layout: Any, outputs: int) -> None:
        """None, or [name, kind] per output run() returns (hobbit.runtime.layout.to_json) covering
        exactly the library's flat outputs."""
        if layout is None:
            return
        self.that(isinstance(layout, list), "layout", layout, "null or a list")
        flat = 0
        for index, entry in enumerate(layout):
            field = f"layout[{index}]"
            self.that(isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str), field, entry,
                      "[name, kind]")
            kind = entry[1]
            if isinstance(kind, dict):
                self.that(set(kind) == {"bounded_axis"}, field, entry, "a bounded output {'bounded_axis': axis}")
                self.integer(kind["bounded_axis"], f"{field} bounded_axis", 0)
                flat += 2
            elif kind is None:
                flat += 1
            else:
                self.integer(kind, f"{field} sequence length", 0)
                flat += kind
        self.that(flat == outputs, "layout", layout, f"a layout of the manifest's {outputs} outputs")


def _dtype_ok(text: str) -> bool:
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        return False
    return dtype.kind in _KINDS and dtype.itemsize > 0 and (dtype.kind != "V" or dtype.itemsize == 2)
