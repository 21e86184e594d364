"""The C text of an exported library: its public header and the private facts its API is built with.

The public `<name>.h` documents every input and output (name, shape, dtype, bytes) and
declares the API that hobbit/runtime/capi.c implements; `hobbit_model.h` (used only while
linking) gives capi.c this model's sizes, weights checksum and run-time check records, so
the library turns a status from the entry point into the same message a JIT'd model's
RunError carries (hobbit.runtime.status).

A model with run-time dims (hobbit.runtime.dynamic) is exported as the module compiled at
its bound, its last input the symbols' values (RunTimeDims): the header names each symbol
with its bounds (<NAME>_<SYMBOL>_MIN / _MAX), writes each tensor's shape with the symbols
and says how its elements are laid out (the strides of its bound shape), and capi.c
refuses a dim outside its bounds before anything runs: the code reads and writes only
inside the extents, which past the bound would be past the buffers."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hobbit.emit.status import CHECK_KINDS, STATUS_WORDS
from hobbit.graph.extents import Extents, extents_from_json, extents_to_json

# Status codes of every exported library (the same in all, so two models' headers can be
# included together).
STATUS_CODES = (
    ("HOBBIT_OK", 0, "success"),
    ("HOBBIT_E_ARGUMENT", 1, "a bad argument: threads, the arena's size or alignment, a NULL pointer, "
                             "a run-time dim outside its bounds"),
    ("HOBBIT_E_MEMORY", 2, "the context or its arena could not be allocated"),
    ("HOBBIT_E_WEIGHTS", 3, "the weights (a file, or inside the library) are missing, the wrong size or fail their crc32"),
    ("HOBBIT_E_INVALID_DATA", 4, "the run found invalid data in an input (e.g. an index out of range); "
                                 "the outputs are not valid"),
)


@dataclass(frozen=True)
class RunTimeDims:
    """A library's run-time dims: the symbols in the order of the dims input (its last input),
    each one's (low, high) values it runs, the bound its code is compiled for (every tensor
    has its shape at the bound), and the per-dim Extent of each input (the dims input
    excepted) and output, None for a static dim."""

    symbols: tuple[str, ...]
    ranges: tuple[tuple[int, int], ...]
    bound: tuple[int, ...]
    inputs: tuple[Extents, ...]
    outputs: tuple[Extents, ...]
    # (input, output) of each cache the library keeps in place where the caller passes one
    # buffer as both (hobbit.dynamic_compile.keep_caches_in_place); none in older manifests.
    in_place: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict:
        """The manifest's "dynamic" section (checked by hobbit.runtime.manifest); "in_place" only
        where there is a cache to keep."""
        section = {"symbols": list(self.symbols), "ranges": [list(r) for r in self.ranges], "bound": list(self.bound),
                   "inputs": [extents_to_json(e) for e in self.inputs],
                   "outputs": [extents_to_json(e) for e in self.outputs]}
        return {**section, "in_place": [list(p) for p in self.in_place]} if self.in_place else section

    @staticmethod
    def from_json(section: dict) -> RunTimeDims:
        return RunTimeDims(tuple(str(s) for s in section["symbols"]),
                           tuple((int(lo), int(hi)) for lo, hi in section["ranges"]),
                           tuple(int(b) for b in section["bound"]),
                           tuple(extents_from_json(e) for e in section["inputs"]),
                           tuple(extents_from_json(e) for e in section["outputs"]),
                           tuple((int(i), int(o)) for i, o in section.get("in_place", [])))

    def macros(self, name: str) -> list[str]:
        """Each symbol's prefix in the header's #defines: <NAME>_<SYMBOL>, the symbol upper-cased,
        each run of characters that cannot be in a C identifier made one '_' (none at either
        end; DIM where nothing is left), and its slot added where two symbols would read the same."""
        words = [re.sub(r"\W+", "_", s, flags=re.ASCII).strip("_").upper() or "DIM" for s in self.symbols]
        macros: list[str] = []
        for slot, word in enumerate(words):
            macro = f"{name.upper()}_{word}{f'_{slot}' if words.count(word) > 1 else ''}"
            while macro in macros:
                macro += "_"
            macros.append(macro)
        return macros


@dataclass(frozen=True)
class LibraryFacts:
    """What the C text says about one model."""

    name: str
    inputs: list  # TensorSpec-like: name, shape, dtype
    outputs: list
    arena_bytes: int
    weights_bytes: int
    weights_crc32: int
    threads: int
    checks: list[tuple[int, str, str]]  # (arena offset, node, op) per run-time check record
    embedded: bool = False  # the weights are inside the library, not in <name>.weights
    dynamic: RunTimeDims | None = None  # the run-time dims, the dims input last among `inputs`


def public_header(facts: LibraryFacts) -> str:
    """`<name>.h`: the tensors, the status codes and the API, documented for a C programmer."""
    n = facts.name
    guard = f"HOBBIT_{n.upper()}_H"
    lines = [f"/* {n}: a model compiled ahead of time by hobbit for {facts.threads} thread(s).", " *"]
    if facts.dynamic is None:
        lines += [" * Inputs (the order of the inputs array; C order, no padding):"]
        lines += [f" *   {i}  {_describe(s)}" for i, s in enumerate(facts.inputs)]
        lines += [" * Outputs (the order of the outputs array):"]
        lines += [f" *   {i}  {_describe(s)}" for i, s in enumerate(facts.outputs)]
    else:
        lines += _describe_dynamic(facts)
    lines += [
        " *",
        *([f" * Use: {n}_create(NULL, 0, NULL, 0, &ctx) checks the weights inside this library (their crc32)",
           " * and allocates the arena; on failure it still sets ctx (unless it is out of"] if facts.embedded else
          [f" * Use: {n}_create(\"{n}.weights\", 0, NULL, 0, &ctx) maps the weights file (checking its",
           " * size and crc32) and allocates the arena; on failure it still sets ctx (unless it is out of"]),
        f" * memory) so {n}_error(ctx) says why; call {n}_destroy(ctx) in every case.",
        f" * {n}_run(ctx, inputs, outputs) runs one inference; pointers must be aligned to their dtype.",
        " * A context runs one inference at a time: give each concurrent thread its own context.",
        f" * threads: how many threads work on each inference, 1 to {facts.threads} (the count the library was",
        f" *   built for; 0 means {facts.threads}): the work is cut for {facts.threads}, so fewer is correct, only slower.",
        f" * arena: NULL, or {n}_arena_bytes() bytes aligned to 64 that the caller owns.",
        " */",
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>", "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        "#ifndef HOBBIT_STATUS_CODES", "#define HOBBIT_STATUS_CODES",
    ]
    lines += [f"#define {code} {value}  /* {what} */" for code, value, what in STATUS_CODES]
    lines += ["#endif", "",
              f"#define {n.upper()}_NUM_INPUTS {len(facts.inputs)}",
              f"#define {n.upper()}_NUM_OUTPUTS {len(facts.outputs)}",
              f"#define {n.upper()}_WEIGHTS_EMBEDDED {int(facts.embedded)}"
              "  /* 1: pass NULL as weights_path; 0: the path of the weights file */",
              f"#define {n.upper()}_NUM_SYMBOLS {0 if facts.dynamic is None else len(facts.dynamic.symbols)}"
              "  /* run-time dims: the values the last input holds */"]
    if facts.dynamic is not None:
        dyn = facts.dynamic
        for macro, symbol, (low, high) in zip(dyn.macros(n), dyn.symbols, dyn.ranges):
            lines += [f"#define {macro}_MIN {low}  /* {_comment(symbol)} */", f"#define {macro}_MAX {high}"]
    lines += ["",
              f"typedef struct {n}_ctx {n}_ctx;", "",
              f"int {n}_create(const char *weights_path, int threads, void *arena, size_t arena_bytes, {n}_ctx **ctx);",
              f"int {n}_run({n}_ctx *ctx, const void *const *inputs, void *const *outputs);",
              f"const char *{n}_error(const {n}_ctx *ctx);  /* the last failure's message, or \"\" */",
              f"void {n}_destroy({n}_ctx *ctx);",
              f"size_t {n}_arena_bytes(void);",
              f"size_t {n}_input_bytes(int index);   /* 0 for an index out of range */",
              f"size_t {n}_output_bytes(int index);", "",
              "#ifdef __cplusplus", "}", "#endif", "#endif", ""]
    return "\n".join(lines)


def model_config(facts: LibraryFacts) -> str:
    """`hobbit_model.h`: the facts capi.c is compiled with (never installed)."""
    checks = [f"    {{{offset}u, {c_string(node)}, {c_string(op)}}}," for offset, node, op in facts.checks]
    lines = [f'#include "{facts.name}.h"',
             f"#define HOBBIT_ARENA_BYTES {facts.arena_bytes}u",
             f"#define HOBBIT_WEIGHTS_BYTES {facts.weights_bytes}u",
             f"#define HOBBIT_WEIGHTS_CRC32 0x{facts.weights_crc32:08x}u",
             f"#define HOBBIT_WEIGHTS_EMBEDDED {int(facts.embedded)}",
             f"#define HOBBIT_THREADS {facts.threads}",
             f"#define HOBBIT_NUM_INPUTS {len(facts.inputs)}",
             f"#define HOBBIT_NUM_OUTPUTS {len(facts.outputs)}",
             f"#define HOBBIT_NUM_CHECKS {len(facts.checks)}",
             f"#define HOBBIT_NUM_KINDS {len(CHECK_KINDS)}",
             f"#define HOBBIT_KIND_INDEX {CHECK_KINDS.index('index') + 1}",
             f"#define HOBBIT_NUM_SYMBOLS {0 if facts.dynamic is None else len(facts.dynamic.symbols)}"]
    lines += [f"#define HOBBIT_WORD_{word.upper()} {i}" for i, word in enumerate(STATUS_WORDS)]
    lines += [f"static const size_t hobbit_input_bytes[] = {{{_sizes(facts.inputs)}}};",
              f"static const size_t hobbit_output_bytes[] = {{{_sizes(facts.outputs)}}};",
              "static const char *const hobbit_check_kinds[] = {" + ", ".join(c_string(k) for k in CHECK_KINDS) + "};",
              "static const struct hobbit_check hobbit_checks[] = {"]
    lines += checks or ['    {0u, "", ""},  /* none: C has no empty arrays */']
    lines += ["};"]
    if facts.dynamic is not None:
        dyn = facts.dynamic
        lines += ["static const char *const hobbit_symbols[] = {" + ", ".join(c_string(s) for s in dyn.symbols) + "};",
                  "static const int64_t hobbit_dims_min[] = {" + ", ".join(f"INT64_C({lo})" for lo, _ in dyn.ranges)
                  + "};",
                  "static const int64_t hobbit_dims_max[] = {" + ", ".join(f"INT64_C({hi})" for _, hi in dyn.ranges)
                  + "};"]
    lines += [""]
    return "\n".join(lines)


def c_string(text: str) -> str:
    """A C string literal for any text: printable ASCII as itself, every other byte (and the
    characters C treats specially, including '?' for trigraphs) as an octal escape."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        out.append(char if 32 <= byte < 127 and char not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _describe_dynamic(facts: LibraryFacts) -> list[str]:
    """The header's account of a library with run-time dims: the symbols and their bounds, the
    tensors' shapes written with them, and where each tensor's elements are."""
    dyn = facts.dynamic
    names = [_comment(s) for s in dyn.symbols]
    order = ", ".join(names)
    lines = [" * Run-time dims: one compile runs every value of these symbols inside their bounds. They",
             f" * are the last input, int64[{len(names)}]: the values of the symbols, in this order: {order}.",
             *[f" *   {i}  {s}  {lo} to {hi}  ({m}_MIN, {m}_MAX)"
               for i, (s, (lo, hi), m) in enumerate(zip(names, dyn.ranges, dyn.macros(facts.name)))],
             f" * A value outside its bounds is refused: {facts.name}_run returns HOBBIT_E_ARGUMENT and runs nothing.",
             " *", " * Inputs (the order of the inputs array):"]
    lines += [f" *   {i}  {_describe_shaped(s, e, names)}" for i, (s, e) in enumerate(zip(facts.inputs, dyn.inputs))]
    dims = facts.inputs[-1]
    lines += [f" *   {len(facts.inputs) - 1}  \"{_comment(dims.name)}\"  int64[{len(names)}]  the values of the symbols, "
              f"in this order: {order}"]
    lines += [" * Outputs (the order of the outputs array):"]
    lines += [f" *   {i}  {_describe_shaped(s, e, names)}" for i, (s, e) in enumerate(zip(facts.outputs, dyn.outputs))]
    lines += [" *",
              " * Layout: every tensor keeps the strides of its bound shape (the sizes in brackets above: each",
              " * symbol at its maximum, a cache input with room for its step's new rows), and only the",
              " * elements inside this run's dims are read or written.",
              " * \"C order\": its run-time dims come after dims of size 1 only, so at those strides it is simply",
              " *   its C-order array at this run's dims (e.g. [1, seq, 768] is seq x 768 values, no padding):",
              " *   a buffer of exactly that size will do.",
              " * \"bound strides S\": it is not; element [i0, i1, ...] is at index i0*S[0] + i1*S[1] + ... of a",
              f" *   buffer of the bound shape ({facts.name}_input_bytes(i) / {facts.name}_output_bytes(i) bytes):",
              " *   copy an input's rows into their places there, and read an output's rows from theirs."]
    for i, o in dyn.in_place:
        lines += [f" * A cache kept in place: output {o} (\"{_comment(facts.outputs[o].name)}\") may be the buffer of "
                  f"input {i} (\"{_comment(facts.inputs[i].name)}\"),",
                  " *   laid out alike: the run then writes only the new rows, and the next run reads that",
                  " *   buffer as the input, nothing copied. A buffer of its own for each works too."]
    return lines


def _describe_shaped(spec, extents: Extents, symbols: list[str]) -> str:
    """One tensor of a library with run-time dims: its shape with the symbols, its size at the
    bound and its layout (see _describe_dynamic)."""
    dtype = np.dtype(spec.dtype)
    shape = ", ".join(str(n) if e is None else e.describe(symbols) for n, e in zip(spec.shape, extents))
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
    if all(e is None for e in extents):
        return f'"{_comment(spec.name)}"  {dtype.name}[{shape}]  ({nbytes} bytes)'
    strides = [int(np.prod(spec.shape[k + 1:], dtype=np.int64)) for k in range(len(spec.shape))]
    layout = "C order" if is_c_order(spec.shape, extents) else f"bound strides S = {strides}"
    bound = ", ".join(str(n) for n in spec.shape)
    return f'"{_comment(spec.name)}"  {dtype.name}[{shape}]  (at most {nbytes} bytes: [{bound}])  {layout}'


def is_c_order(shape: tuple[int, ...], extents: Extents) -> bool:
    """Whether a tensor at the strides of its bound `shape` is its C-order array at every run-time
    size: every dim before its last run-time dim is a static 1."""
    last = max((k for k, e in enumerate(extents) if e is not None), default=-1)
    return all(extents[k] is None and shape[k] == 1 for k in range(last))


def _comment(text: str) -> str:
    """Text that is safe inside a C comment."""
    return text.encode("ascii", "backslashreplace").decode().replace("*/", "* /")


def _describe(spec) -> str:
    dtype = np.dtype(spec.dtype)
    shape = ", ".join(str(d) for d in spec.shape)
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
    name = spec.name.encode("ascii", "backslashreplace").decode().replace("*/", "* /")
    return f'"{name}"  {dtype.name}[{shape}]  ({nbytes} bytes)'


def _sizes(specs: list) -> str:
    sizes = [int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize for s in specs]
    return ", ".join(f"{n}u" for n in sizes) or "0u"
