"""Run-time dims: which dims of which values follow the model's symbolic input dims, and how.

A model compiled for run-time dims is compiled once, for the *bound* of each symbol
(hobbit.runtime.dynamic). Every tensor is stored in its bound shape (a decoder's cache
input in its present's, one step longer: FIRST_IN_PLACE), so every stride stays a
compile-time constant; along a run-time dim only indices [0, extent) hold data,
and the extent is an `Extent`: an affine function of the symbols' values, which the
generated code reads from the entry point's dims vector. What lies past an extent is
unspecified, so a kernel must compute and read only inside the extents (the kernel
table says which kernels do: hobbit.emit.table.Kernel.dynamic).

The extents are found by comparing imports of the model at several sizes
(`find_extents`): the graph at the bounds and the graphs at probe sizes inside the bounds,
after the same passes, must have the same nodes and attributes; a dim that differs is a
run-time dim, and its values at the probes must fit one affine function of the symbols (a
second probe per symbol and one probe moving all symbols at once check the fit, which
catches the products of two symbols). Where no affine function fits, the dim may be a
strided window's output (a conv's, a pool's: OpDef.windows), whose length is its input's
extent through the window's floor division, or a length an operand of its node already has
(plus a constant): those candidates are exact by construction, and the probes check them.
Last come the floor divisions found anywhere earlier in the graph (plus a constant): a
positional table folded to the conv output's length (Whisper's encoder) has no operand to
carry it, and a false fit would have to agree with a window's length at every probe. A
constant that differs must be, at each probe, the prefix of the bound graph's constant
along its run-time dims (a causal mask, positions 0..n-1): computing inside the extents
then reads exactly what the probe's graph would. So must an op's index tables (TABLE_ATTRS:
a resize's source positions), clamped to the input where the kernel clamps them. Anything
else (an attribute that depends on the size, a constant that is not a prefix, a node one
graph has and the other not) is a `NotDynamic` naming the node, and the model is compiled
per shape instead."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hobbit.errors import HobbitError
from hobbit.graph.compare import same_value
from hobbit.graph.ir import Graph, Node, Value
from hobbit.graph.shapes import Window


# The input a model with run-time dims gets last: the symbols' values of this inference, int64[n].
DIMS_INPUT = "hobbit.dims"

# The attribute of a Concat along a run-time axis whose first part, a graph input, may already
# lie where the output has it (the same buffer: a key/value cache kept in place between steps,
# hobbit.dynamic_compile.keep_caches_in_place): its kernel copies that part only where it does not.
FIRST_IN_PLACE = "first_in_place"


class NotDynamic(HobbitError):
    """The model cannot run its symbolic dims as run-time values of one module (the reason)."""


@dataclass(frozen=True)
class Extent:
    """(const + sum(coeff * dims[slot])) // div: a run-time dim's length, from the symbols'
    values. div is 1 for an affine length; a strided window makes it its stride (floor
    division, the numerator never negative inside the bounds: a length is at least 1)."""

    terms: tuple[tuple[int, int], ...]  # (slot in the dims vector, coefficient), coefficients non-zero
    const: int
    div: int = 1

    def value(self, dims: list[int] | tuple[int, ...]) -> int:
        return (self.const + sum(coeff * dims[slot] for slot, coeff in self.terms)) // self.div

    def plus(self, n: int) -> Extent:
        """This length plus n."""
        return Extent(self.terms, self.const + n * self.div, self.div)

    def window(self, w: Window) -> Extent | None:
        """The output length of window `w` sliding along this length (pool_out_size), or None
        where ceil_mode's rule that the last window starts inside the input could drop a
        window at some sizes and not others (not a floor division then).

        floor((floor(x / d) + q) / s) = floor((x + q*d) / (d*s)) for integers, so a window
        after a window stays one Extent."""
        span = w.pad_begin + w.pad_end - w.dilation * (w.k - 1) - 1
        if w.ceil_mode:
            if w.pad_end + w.stride >= w.dilation * (w.k - 1) + 2:
                return None
            span += w.stride - 1
        div = self.div * w.stride
        return _reduced(Extent(self.terms, self.const + (span + w.stride) * self.div, div))

    def describe(self, symbols: list[str]) -> str:
        parts = [f"{'' if c == 1 else f'{c}*'}{symbols[s]}" for s, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        sum_ = " + ".join(parts).replace("+ -", "- ")
        return sum_ if self.div == 1 else f"({sum_}) // {self.div}"


def _reduced(e: Extent) -> Extent:
    """The same length with the division cancelled where every coefficient allows."""
    g = math.gcd(e.div, e.const, *(c for _, c in e.terms))
    return e if g == 1 else Extent(tuple((s, c // g) for s, c in e.terms), e.const // g, e.div // g)


Extents = tuple[Extent | None, ...]


def extents_to_json(extents: Extents) -> list:
    """Per dim null or {"terms": [[slot, coeff], ...], "const": c[, "div": d]}: an export's
    manifest and a compile-cache entry record a module's input and output extents so."""
    return [None if e is None else {"terms": [list(t) for t in e.terms], "const": e.const,
                                    **({"div": e.div} if e.div != 1 else {})} for e in extents]


def extents_from_json(items: list) -> Extents:
    """extents_to_json's list back (checked by whoever read it)."""
    return tuple(None if d is None else Extent(tuple((int(s), int(c)) for s, c in d["terms"]), int(d["const"]),
                                               int(d.get("div", 1)))
                 for d in items)


def is_dynamic(node: Node) -> bool:
    """Whether a node reads or writes a value with a run-time dim."""
    return any(v.extents is not None for v in node.operands() + list(node.outputs))


@dataclass(frozen=True)
class Probe:
    """One import of the model: the symbols' values it was imported at, and its graph after the passes."""

    dims: tuple[int, ...]
    graph: Graph


Windows = Callable[[Node], dict[int, Window]]


def find_extents(bound: Probe, probes: list[Probe], symbols: list[str], windows: Windows) -> None:
    """Set `extents` on every value of `bound.graph` that has a run-time dim (see the module
    docstring), or raise NotDynamic. `probes` must include, for each symbol, two that move only
    that symbol, and one that moves them all when there are several; `windows(node)` is the
    node's op's windows (OpDef.windows: the op layer sits above this one)."""
    for probe in probes:
        _same_structure(bound.graph, probe.graph)
    others = [_values(probe.graph) for probe in probes]
    strided: dict[Extent, None] = {}  # the floor divisions found so far, in order
    for index, (value, node) in enumerate(_values(bound.graph)):
        seen = [(probe.dims, values[index][0]) for probe, values in zip(probes, others)]
        value.extents = _fit(value, node, bound.dims, seen, symbols, windows, list(strided))
        strided.update((e, None) for e in value.extents or () if e is not None and e.div != 1)
        if value.const is not None:
            for _, other in seen:
                _check_prefix(value, other, symbols)


def _values(graph: Graph) -> list[tuple[Value, Node | None]]:
    """Every value the nodes read or write, with the node that writes it (None for inputs and
    constants), in one order that equal structures share."""
    out: list[tuple[Value, Node | None]] = [(v, None) for v in graph.inputs]
    for node in graph.nodes:
        out.extend((v, None) for v in node.operands() if v.const is not None)
        out.extend((v, node) for v in node.outputs)
    return out


def _same_structure(a: Graph, b: Graph) -> None:
    if [v.name for v in a.inputs] != [v.name for v in b.inputs]:
        raise NotDynamic("the graph's inputs change with the input sizes")
    for x, y in zip(a.nodes, b.nodes):
        if (x.op, x.name) != (y.op, y.name):
            raise NotDynamic(f"node '{x.name}' ({x.op}) at the bounds is '{y.name}' ({y.op}) at other input sizes "
                             f"(a pass rewrites the graph differently at other sizes)")
        if (len(x.inputs), len(x.outputs)) != (len(y.inputs), len(y.outputs)):
            raise NotDynamic(f"node '{x.name}' ({x.op}) is built differently at other input sizes")
        if [(s.op, s.origin) for s in x.epilogue] != [(s.op, s.origin) for s in y.epilogue]:
            raise NotDynamic(f"node '{x.name}' ({x.op}) fuses other steps at other input sizes")
        if [v is None for v in x.inputs] != [v is None for v in y.inputs]:
            raise NotDynamic(f"node '{x.name}' ({x.op}) takes other inputs at other input sizes")
        if [v.const is None for v in x.operands()] != [v.const is None for v in y.operands()]:
            raise NotDynamic(f"node '{x.name}' ({x.op}) has other constant operands at other input sizes")
        if not _same_attrs(x, y):
            raise NotDynamic(f"node '{x.name}' ({x.op}) has attributes that depend on the input sizes")
        if x.op in TABLE_ATTRS:
            reason = TABLE_ATTRS[x.op][1](x, y)
            if reason:
                raise NotDynamic(f"node '{x.name}' ({x.op}): {reason}")
        if x.outputs[0].bounded is not None:
            raise NotDynamic(f"node '{x.name}' ({x.op}) has a data-dependent output size")
    if len(a.nodes) != len(b.nodes):
        raise NotDynamic(f"the graph has {len(a.nodes)} nodes at the bounds and {len(b.nodes)} at other input sizes")


# The attribute in which an op records its output's shape: it may differ between the imports
# (checked through the dims; whether the kernel follows them is its dynamic predicate's call).
OUTPUT_SHAPE_ATTRS = {"Reshape": "shape", "Expand": "shape", "Slice": "sizes"}


def _nearest_tables(x: Node, y: Node) -> str | None:
    """ResizeNearest: each dim's source table at one size is the other's cut to its length."""
    a, b = x.attrs["sources"], y.attrs["sources"]
    if len(a) != len(b) or any(not _is_prefix(p, q) for p, q in zip(a, b)):
        return "its source index tables at other input sizes are not a prefix of the bound's"
    return None


def _is_prefix(p: tuple, q: tuple) -> bool:
    short, long = (p, q) if len(p) <= len(q) else (q, p)
    return tuple(long[:len(short)]) == tuple(short)


def _resample_tables(x: Node, y: Node) -> str | None:
    """ResampleAxis: at the probe (y), the bound's taps (x) cut to its output length, their
    indices clamped to the last position of its input along the axis (the kernel clamps them
    to the run-time length); no extrapolated positions."""
    a, b = x.attrs, y.attrs
    if a["outside"] or b["outside"]:
        return "it extrapolates outside a cropped region, which depends on the input sizes"
    count = len(b["indices"])
    last = int(y.inputs[0].shape[a["axis"]]) - 1
    if count > len(a["indices"]) or tuple(b["weights"]) != tuple(a["weights"][:count]) \
            or tuple(b["indices"]) != tuple(min(int(i), last) for i in a["indices"][:count]):
        return "its taps at other input sizes are not the bound's, cut and clamped to the input"
    return None


# Attributes that hold an op's index tables, built for the import's sizes: the tables at the
# bound serve every size when, at each probe, they are the bound's cut to the probe's lengths
# (and, for ResampleAxis, clamped to its input: the kernel clamps at run time). op ->
# (the attributes, the check of the bound's node against a probe's: a reason, or None).
TABLE_ATTRS = {"ResizeNearest": (("sources",), _nearest_tables),
               "ResampleAxis": (("indices", "weights"), _resample_tables)}


def _same_attrs(x: Node, y: Node) -> bool:
    """Equal attributes, except the output shape an op records (OUTPUT_SHAPE_ATTRS) and
    the index tables of TABLE_ATTRS (checked by _same_structure)."""
    keys = set(x.attrs) | set(y.attrs)
    tables = TABLE_ATTRS.get(x.op, ((), None))[0]
    for key in keys:
        if key == OUTPUT_SHAPE_ATTRS.get(x.op) or key in tables:
            continue
        a, b = x.attrs.get(key), y.attrs.get(key)
        if isinstance(a, Graph) or isinstance(b, Graph) or not same_value(a, b):
            return False
    return all(same_value(a.attrs, b.attrs) and a.swap == b.swap for a, b in zip(x.epilogue, y.epilogue))

def _fit(value: Value, node: Node | None, at: tuple[int, ...], seen: list[tuple[tuple[int, ...], Value]],
         symbols: list[str], windows: Windows, strided: list[Extent]) -> Extents | None:
    """Each dim that moves as the first candidate (`_candidates`) that gives its size at the
    bound and at every probe; None for a value whose dims never move."""
    shape = value.shape
    for _, other in seen:
        if len(other.shape) != len(shape):
            raise NotDynamic(f"'{value.name}' changes rank with the input sizes")
    dims: list[Extent | None] = []
    for axis, size in enumerate(shape):
        sizes = [(point, other.shape[axis]) for point, other in seen]
        if all(there == size for _, there in sizes):
            dims.append(None)
            continue
        affine, reason = _affine(value.name, axis, size, at, sizes, symbols)
        candidates = [affine, *_candidates(node, axis, size, at, windows), *(e.plus(size - e.value(at)) for e in strided)]
        fits = [e for e in candidates if e is not None and e.value(at) == size
                and all(e.value(point) == there for point, there in sizes)]
        if not fits:
            raise NotDynamic(reason or f"dim {axis} of '{value.name}' moves with the input sizes in no fitting way")
        dims.append(fits[0])
    return tuple(dims) if any(d is not None for d in dims) else None


def _affine(name: str, axis: int, size: int, at: tuple[int, ...], sizes: list[tuple[tuple[int, ...], int]],
            symbols: list[str]) -> tuple[Extent | None, str | None]:
    """const + sum(coeff * symbol) from the probes that move one symbol, or why there is none
    (the probes the fit does not use check it)."""
    terms = []
    for slot in range(len(at)):
        alone = [(point[slot], there) for point, there in sizes
                 if all(p == a for k, (p, a) in enumerate(zip(point, at)) if k != slot) and point[slot] != at[slot]]
        if not alone:
            continue
        point, size_there = alone[0]
        step, rest = divmod(size - size_there, at[slot] - point)
        if rest:
            return None, (f"dim {axis} of '{name}' is not a whole multiple of {symbols[slot]} "
                          f"({size} at {at[slot]}, {size_there} at {point})")
        if step:
            terms.append((slot, step))
    if not terms:
        return None, None
    extent = Extent(tuple(terms), size - sum(c * at[s] for s, c in terms))
    for point, there in sizes:
        if extent.value(point) != there:
            return None, (f"dim {axis} of '{name}' is not an affine function of the symbols "
                          f"({extent.describe(symbols)} predicts {extent.value(point)} at "
                          f"{dict(zip(symbols, point))}, the model has {there})")
    return extent, None


def _candidates(node: Node | None, axis: int, size: int, at: tuple[int, ...], windows: Windows) -> list[Extent]:
    """Lengths a node's output dim may have where no affine function fits: its window's output
    over its input's extent (OpDef.windows), and any operand's length plus a constant (a
    strided length carried through element-wise ops, pads and channel concats)."""
    if node is None:
        return []
    out = []
    window = windows(node).get(axis)
    source = node.inputs[0].extents if node.inputs and node.inputs[0] is not None else None
    if window is not None and source is not None and source[axis] is not None:
        out.append(source[axis].window(window))
    for operand in node.operands():
        for e in operand.extents or ():
            if e is not None:
                out.append(e.plus(size - e.value(at)))
    return [e for e in out if e is not None]


def _check_prefix(ours: Value, theirs: Value, symbols: list[str]) -> None:
    """Of a constant at the bound and at a probe, the smaller must be the larger cut to its shape."""
    a, b = ours.const, theirs.const
    if a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True):
        return
    if a.ndim != b.ndim or a.dtype != b.dtype:
        raise NotDynamic(f"constant '{ours.name}' depends on the input sizes")
    if any(m < n for m, n in zip(a.shape, b.shape)):
        a, b = b, a
    cut = a[tuple(slice(0, n) for n in b.shape)]
    if cut.shape != b.shape or not np.array_equal(cut, b, equal_nan=True):
        raise NotDynamic(f"constant '{ours.name}' depends on the input sizes, and not as a prefix "
                         f"({', '.join(symbols)})")
