"""The C text of an exported library: its public header and the private facts its API is built with.

The public `<name>.h` documents every input and output (name, shape, dtype, bytes) and
declares the API that hobbit/runtime/capi.c implements; `hobbit_model.h` (used only while
linking) gives capi.c this model's sizes, weights checksum and run-time check records, so
the library turns a status from the entry point into the same message a JIT'd model's
RunError carries (hobbit.runtime.status)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.emit.status import CHECK_KINDS, STATUS_WORDS

# Status codes of every exported library (the same in all, so two models' headers can be
# included together).
STATUS_CODES = (
    ("HOBBIT_OK", 0, "success"),
    ("HOBBIT_E_ARGUMENT", 1, "a bad argument: threads, the arena's size or alignment, a NULL pointer"),
    ("HOBBIT_E_MEMORY", 2, "the context or its arena could not be allocated"),
    ("HOBBIT_E_WEIGHTS", 3, "the weights (a file, or inside the library) are missing, the wrong size or fail their crc32"),
    ("HOBBIT_E_INVALID_DATA", 4, "the run found invalid data in an input (e.g. an index out of range); "
                                 "the outputs are not valid"),
)


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


def public_header(facts: LibraryFacts) -> str:
    """`<name>.h`: the tensors, the status codes and the API, documented for a C programmer."""
    n = facts.name
    guard = f"HOBBIT_{n.upper()}_H"
    lines = [f"/* {n}: a model compiled ahead of time by hobbit for {facts.threads} thread(s).", " *",
             " * Inputs (the order of the inputs array; C order, no padding):"]
    lines += [f" *   {i}  {_describe(s)}" for i, s in enumerate(facts.inputs)]
    lines += [" * Outputs (the order of the outputs array):"]
    lines += [f" *   {i}  {_describe(s)}" for i, s in enumerate(facts.outputs)]
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
              "  /* 1: pass NULL as weights_path; 0: the path of the weights file */", "",
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
             f"#define HOBBIT_KIND_INDEX {CHECK_KINDS.index('index') + 1}"]
    lines += [f"#define HOBBIT_WORD_{word.upper()} {i}" for i, word in enumerate(STATUS_WORDS)]
    lines += [f"static const size_t hobbit_input_bytes[] = {{{_sizes(facts.inputs)}}};",
              f"static const size_t hobbit_output_bytes[] = {{{_sizes(facts.outputs)}}};",
              "static const char *const hobbit_check_kinds[] = {" + ", ".join(c_string(k) for k in CHECK_KINDS) + "};",
              "static const struct hobbit_check hobbit_checks[] = {"]
    lines += checks or ['    {0u, "", ""},  /* none: C has no empty arrays */']
    lines += ["};", ""]
    return "\n".join(lines)


def c_string(text: str) -> str:
    """A C string literal for any text: printable ASCII as itself, every other byte (and the
    characters C treats specially, including '?' for trigraphs) as an octal escape."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        out.append(char if 32 <= byte < 127 and char not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _describe(spec) -> str:
    dtype = np.dtype(spec.dtype)
    shape = ", ".join(str(d) for d in spec.shape)
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
    name = spec.name.encode("ascii", "backslashreplace").decode().replace("*/", "* /")
    return f'"{name}"  {dtype.name}[{shape}]  ({nbytes} bytes)'


def _sizes(specs: list) -> str:
    sizes = [int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize for s in specs]
    return ", ".join(f"{n}u" for n in sizes) or "0u"
