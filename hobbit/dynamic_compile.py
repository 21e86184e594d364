"""The compiler's side of run-time dims: which symbols, their bounds, and the graph at the bounds
with every run-time extent found (hobbit.graph.extents) and every kernel checked to follow them.

compile() asks for this when a model declares symbolic input dims that are more than one
batch dim (that one runs in chunks of one variant: hobbit.runtime.batching, which stays
the faster path for CNNs whose kernels are specialised for their shapes). Anything that
cannot follow run-time extents raises NotDynamic with the node and the reason, and
compile() falls back to one variant per shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hobbit.backend.base import Backend
from hobbit.errors import ConfigError, HobbitError, InputError, InputValuesNeeded
from hobbit.frontend.common.source import DeclaredInput, Source
from hobbit.graph.extents import DIMS_INPUT, FIRST_IN_PLACE, NotDynamic, Probe, find_extents, is_dynamic
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.graph.shapes import Window
from hobbit.ops.registry import get_op
from hobbit.ops.separable import separation
from hobbit.passes import run_pipeline
from hobbit.passes.choices import recording, replaying
from hobbit.passes.memory import is_view
from hobbit.runtime.dynamic import DEFAULT_BOUND
from hobbit.target import Target

# Probe sizes: small (an import at them is quick) and odd primes, so a floor division by a
# stride, which two even sizes could hide, breaks the affine fit; the first two inside a
# symbol's range and not its bound are used.
PROBES = (5, 7, 11)


def run_time_symbols(declared: list[DeclaredInput], dynamic_shapes: dict[str, tuple[int, int]] | bool | None
                     ) -> tuple[list[str], list[tuple[int, int | None]]]:
    """The symbols that become run-time dims, in order of first appearance, and their
    (low, high) bounds (high None: grows); raises NotDynamic when there are none to run so."""
    if dynamic_shapes is False:
        raise NotDynamic("run-time dims are off (dynamic_shapes=False)")
    symbols: list[str] = []
    for d in declared:
        if d.sequence:
            raise NotDynamic(f"input '{d.name}' is a sequence")
        for size, symbol in zip(d.shape, d.symbols):
            if size is None and symbol is None:
                raise NotDynamic(f"input '{d.name}' has a dim with no name")
            if size is None and symbol not in symbols:
                symbols.append(symbol)
    given = dynamic_shapes if isinstance(dynamic_shapes, dict) else {}
    unknown = [name for name in given if name not in symbols]
    if unknown:
        raise ConfigError(f"dynamic_shapes names {unknown}, which are not symbolic dims of the model's inputs; "
                          f"its symbolic dims are {symbols}")
    ranges = [_range(name, given.get(name)) for name in symbols]
    batch_only = len(symbols) == 1 and all(d.symbols[0] == symbols[0] and d.shape[1:].count(None) == 0
                                           for d in declared)
    if batch_only and not given:
        raise NotDynamic("its only symbolic dim is a batch dim, which runs in chunks of one variant")
    return symbols, ranges


@dataclass(frozen=True)
class InputRanges:
    """`input_shapes=` with (low, high) dims, resolved against the model's declarations."""

    shapes: dict[str, tuple[int, ...]] | None  # the inputs imported at a whole shape (every dim a size)
    declared: list[DeclaredInput] | None  # the declarations with every size given filled in (None: no ranges)
    dynamic_shapes: dict[str, tuple[int, int]] | bool | None  # dynamic_shapes= with the ranges' symbols added


def input_ranges(source: Source, input_shapes: dict | None, dynamic_shapes: object) -> InputRanges:
    """Split `input_shapes` into the whole shapes the importer takes and the run-time dims its
    (low, high) dims ask for. A range makes its dim a run-time dim with those bounds: for a
    dim the model names, the same as dynamic_shapes={name: (low, high)}; a dim with no name
    (or an input with no declared shape) gets the one the frontends give it, 'input:axis'.
    An int in an input with ranges fixes its dim, and that symbol wherever the model uses it.
    Without any range, `input_shapes` is as it was (the import checks it). ConfigError for a
    range on a static dim, a size or range that is not one, and disagreements (two ranges or
    sizes for one symbol, a range that dynamic_shapes= gives otherwise)."""
    ranged = {name: tuple(shape) for name, shape in (input_shapes or {}).items()
              if isinstance(shape, (tuple, list)) and any(isinstance(d, (tuple, list)) for d in shape)}
    if not ranged:
        return InputRanges(input_shapes, None, dynamic_shapes)
    whole = {name: shape for name, shape in input_shapes.items() if name not in ranged}
    shapeless = set(source.shapeless_inputs())
    stand_ins = {name: (1,) * len(shape) for name, shape in ranged.items() if name in shapeless}
    model = source.declared_inputs({**{n: s for n, s in whole.items() if n in shapeless}, **stand_ins})
    by_name = {d.name: d for d in model}
    unknown = [name for name in input_shapes if name not in by_name]
    if unknown:
        raise InputError(f"input_shapes names {unknown}, which are not model inputs; the model takes {list(by_name)}")
    sizes: dict[str, tuple[int, str, int]] = {}  # symbol -> (size, input, axis) where an int fixes it
    ranges: dict[str, tuple[tuple[int, int], str, int]] = {}
    fixed: dict[str, DeclaredInput] = {}
    for name, shape in ranged.items():
        d = by_name[name]
        if d.sequence:
            raise ConfigError(f"input_shapes gives input '{name}' a range, but it is a sequence of tensors")
        if len(shape) != len(d.shape):
            raise ConfigError(f"input_shapes gives input '{name}' {len(shape)} dims, but the model declares rank "
                              f"{len(d.shape)}")
        dims, symbols = [], []
        for axis, (given, size, symbol) in enumerate(zip(shape, d.shape, d.symbols)):
            if name in stand_ins:  # no declaration: every int is a size, every range a run-time dim
                size, symbol = None, f"{name}:{axis}"
            where = f"input_shapes['{name}'] dim {axis}"
            if isinstance(given, (tuple, list)):
                span = _bounds(given, where)
                if size is not None:
                    raise ConfigError(f"{where} is a range {span}, but the model declares that dim static "
                                      f"({size}): only a symbolic dim can be a run-time dim")
                _agree(ranges, symbol, span, name, axis, "the range")
                dims.append(None)
                symbols.append(symbol)
                continue
            if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < 0:
                raise ConfigError(f"{where} must be a size (an int >= 0) or a range (low, high); got {given!r}")
            if size is not None and given != size:
                raise ConfigError(f"{where} is {given}, but the model declares that dim static ({size})")
            if size is None:
                _agree(sizes, symbol, int(given), name, axis, "the size")
            dims.append(int(given))
            symbols.append(None)
        fixed[name] = DeclaredInput(name, tuple(dims), tuple(symbols), d.dtype)
    for name, shape in whole.items():  # a whole shape fixes the symbols it sizes
        d = by_name[name]
        if d.sequence or not isinstance(shape, (tuple, list)) or len(shape) != len(d.shape):
            continue  # the import says what is wrong with it
        for axis, (given, symbol) in enumerate(zip(shape, d.symbols)):
            if symbol is not None and isinstance(given, (int, np.integer)) and not isinstance(given, bool):
                _agree(sizes, symbol, int(given), name, axis, "the size")
    for symbol, (size, name, axis) in sizes.items():
        if symbol in ranges:
            span, other, other_axis = ranges[symbol]
            raise ConfigError(f"input_shapes gives dim '{symbol}' the size {size} in input '{name}' (dim {axis}) "
                              f"but the range {span} in input '{other}' (dim {other_axis})")
    if dynamic_shapes is False:
        raise ConfigError(f"input_shapes gives ranges (run-time dims {sorted(ranges)}), but dynamic_shapes=False "
                          f"turns run-time dims off")
    merged = dict(dynamic_shapes) if isinstance(dynamic_shapes, dict) else {}
    for symbol, (span, name, axis) in ranges.items():
        if symbol in merged and _range(symbol, merged[symbol]) != span:
            raise ConfigError(f"dynamic_shapes['{symbol}'] is {tuple(merged[symbol])}, but input_shapes gives that "
                              f"dim the range {span} in input '{name}' (dim {axis})")
        merged[symbol] = span
    for symbol, (size, name, axis) in sizes.items():
        if symbol in merged:
            raise ConfigError(f"dynamic_shapes gives dim '{symbol}' a range, but input_shapes fixes it at {size} "
                              f"in input '{name}' (dim {axis})")
    fixed.update((d.name, d) for d in source.declared_inputs({**whole, **stand_ins}) if d.name in whole)
    declared, shapes = [], dict(whole)
    for d in model:
        if d.name in fixed:
            d = fixed[d.name]
        elif any(s in sizes for s in d.symbols):
            d = DeclaredInput(d.name, tuple(sizes[s][0] if s in sizes else n for n, s in zip(d.shape, d.symbols)),
                              tuple(None if s in sizes else s for s in d.symbols), d.dtype, d.sequence)
            if None not in d.shape:
                shapes[d.name] = d.shape
        declared.append(d)
    return InputRanges(shapes or None, declared, merged)


def declared_ranges(declared: list[DeclaredInput], dynamic_shapes: object) -> dict[str, tuple[int, int]]:
    """The bounds `dynamic_shapes` gives the declared inputs' symbols: what a model compiled per
    shape checks each call against, as a DynamicModel checks its bounds."""
    if not isinstance(dynamic_shapes, dict):
        return {}
    symbols = {s for d in declared for s in d.symbols if s is not None}
    return {name: _range(name, span) for name, span in dynamic_shapes.items() if name in symbols}


def _bounds(given: object, where: str) -> tuple[int, int]:
    """A (low, high) range (of dynamic_shapes= or input_shapes=), checked: two whole numbers,
    1 <= low <= high."""
    if (not isinstance(given, (tuple, list)) or len(given) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in given)
            or not 1 <= given[0] <= given[1]):
        shown = tuple(given) if isinstance(given, (tuple, list)) else given
        raise ConfigError(f"{where} must be (low, high) with 1 <= low <= high; got {shown!r}")
    return int(given[0]), int(given[1])


def _agree(seen: dict, symbol: str, value: object, name: str, axis: int, what: str) -> None:
    """Record `value` for `symbol` (first given by input `name`, dim `axis`), or ConfigError where
    another input gave it another one."""
    first = seen.setdefault(symbol, (value, name, axis))
    if first[0] != value:
        raise ConfigError(f"input_shapes gives dim '{symbol}' {what} {first[0]} in input '{first[1]}' (dim "
                          f"{first[2]}) but {value} in input '{name}' (dim {axis})")


def _range(name: str, given: object) -> tuple[int, int | None]:
    """dynamic_shapes= for one symbol: (low, high), or None for 1 and no high bound (it grows)."""
    return (1, None) if given is None else _bounds(given, f"dynamic_shapes['{name}']")


def per_sample(source: Source, input_shapes: dict[str, tuple[int, ...]] | None, declared: list[DeclaredInput],
               symbols: list[str]) -> tuple[str, list[DeclaredInput]]:
    """The batch symbol of a model whose samples are independent (hobbit.ops.separable), and
    the declarations with that dim fixed at 1: such a model runs each sample on a module
    compiled for one where its batch and another symbol cannot be run-time dims together
    (BERT's attention mask flattened to batch * sequence is no affine function of either);
    NotDynamic otherwise."""
    batch = declared[0].symbols[0] if declared and declared[0].shape and declared[0].shape[0] is None else None
    if batch is None or len(symbols) < 2 or any(not d.shape or d.symbols[0] != batch or batch in d.symbols[1:]
                                                 for d in declared):
        raise NotDynamic("there is no batch dim 0 shared by every input to run per sample")
    def at(size: int) -> Graph:
        sizes = {name: size if name == batch else PROBES[0] for name in symbols}
        return source.import_graph({**(input_shapes or {}), **_shapes(declared, sizes)})
    found = separation(at(1), 1, at(2), 2)
    if not found.separable or any(rows != 1 for rows in found.rows):
        raise NotDynamic(f"its samples are not independent along '{batch}': {found.reason or 'its outputs'}")
    fixed = [DeclaredInput(d.name, (1,) + d.shape[1:], (None,) + d.symbols[1:], d.dtype, d.sequence) for d in declared]
    return batch, fixed


def _shapes(declared: list[DeclaredInput], sizes: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Each input's shape with its symbolic dims at `sizes` (symbol -> size)."""
    return {d.name: tuple(sizes[sym] if n is None else n for n, sym in zip(d.shape, d.symbols)) for d in declared}


def first_bound(ranges: list[tuple[int, int | None]]) -> tuple[int, ...]:
    """The sizes the first module is compiled for: each symbol's high bound, or DEFAULT_BOUND."""
    return tuple(high if high is not None else DEFAULT_BOUND for _, high in ranges)


def dynamic_graph(source: Source, backend: Backend, target: Target, precision: str, passes: list[str] | None,
                  input_shapes: dict[str, tuple[int, ...]] | None, declared: list[DeclaredInput],
                  symbols: list[str], ranges: list[tuple[int, int | None]], bound: tuple[int, ...]) -> Graph:
    """The graph after the backend's passes at `bound`, every run-time extent set and the
    dims input last (DIMS_INPUT); NotDynamic where any of it cannot be. The passes' speed
    choices made from sizes (hobbit.passes.choices) are the bound's at the probes too."""
    def at(point: tuple[int, ...]) -> Graph:
        graph = source.import_graph({**(input_shapes or {}), **_shapes(declared, dict(zip(symbols, point)))})
        return run_pipeline(graph, backend.pipeline(precision, target, passes), target)

    def imported(point: tuple[int, ...]) -> Probe:
        try:
            return Probe(point, at(point))
        except InputValuesNeeded:
            raise
        except HobbitError as exc:  # sizes the model cannot take (two symbols tied by the model)
            raise NotDynamic(f"the model does not import at {dict(zip(symbols, point))}: {exc}") from exc

    with recording() as choices:
        at_bound = imported(bound)
    graph = at_bound.graph
    _check_outputs(graph)
    probes = []
    with replaying(choices):
        for point in _probe_points(bound, ranges, symbols):
            probes.append(imported(point))
            _check_moved(graph, probes[-1].graph, backend)
    find_extents(at_bound, probes, symbols, _windows)
    keep_caches_in_place(graph)
    _check_kernels(graph, backend)
    graph.inputs.append(Value(DIMS_INPUT, TensorType(np.dtype(np.int64), (len(symbols),))))
    return graph


def keep_caches_in_place(graph: Graph) -> None:
    """Let a cache that grows along a run-time dim stay in one buffer from step to step: each
    graph input `past` read only by a Concat along its run-time axis, as that Concat's first
    part, whose output `present` is a graph output (a decoder's key/value cache: present =
    Concat(past, new)) gets the storage shape of `present` (its bound plus the other parts'
    lengths along the axis), so that a present is laid out as the next step's past. The Concat
    is marked FIRST_IN_PLACE: where the runtime passes one buffer as both (hobbit.runtime.kvcache),
    the past is already where the present has it and only the new rows are written; a past in a
    buffer of its own is copied as before. Its extents stay the past's: kernels read it only
    inside them, at the strides of its new storage shape. Static graphs never come here;
    `cache_pairs` lists the (input position, output position) pairs made here."""
    readers: dict[int, list[Node]] = {}
    for node in graph.nodes:
        for v in node.operands():
            readers.setdefault(id(v), []).append(node)
    outputs = [id(v) for v in graph.outputs]
    for value in graph.inputs:
        node = (readers.get(id(value)) or [None])[0]
        if (node is None or len(readers[id(value)]) != 1 or node.op != "Concat" or node.attrs.get("in_place")
                or node.inputs[0] is not value or any(v is value for v in node.inputs[1:])
                or node.epilogue or value.extents is None or id(value) in outputs):
            continue
        present, axis = node.outputs[0], node.attrs["axis"] % len(value.shape)
        if outputs.count(id(present)) != 1 or present.extents is None or value.extents[axis] is None:
            continue
        others = node.inputs[1:]
        if any(v.extents is not None and v.extents[axis] is not None for v in others):
            continue
        grown = sum(int(v.shape[axis]) for v in others)
        if present.extents[axis] != value.extents[axis].plus(grown):
            continue
        value.type = TensorType(value.dtype, tuple(present.shape))
        node.attrs = {**node.attrs, FIRST_IN_PLACE: True}


def cache_pairs(graph: Graph) -> list[tuple[int, int]]:
    """(input position, output position) of each cache keep_caches_in_place let stay in place."""
    index = {id(v): i for i, v in enumerate(graph.inputs)}
    outputs = {id(v): i for i, v in enumerate(graph.outputs)}
    return [(index[id(node.inputs[0])], outputs[id(node.outputs[0])]) for node in graph.nodes
            if node.attrs.get(FIRST_IN_PLACE)]


def smallest_sizes(graph: Graph, bound: tuple[int, ...], symbols: list[str]) -> tuple[int, ...]:
    """Each symbol's smallest size at which every run-time dim of the graph that depends on it
    alone is at least 1 (the other symbols at their bounds): a strided window shrinks a small
    image to nothing (a 3x3 stride-2 pool of 2 rows), where onnxruntime refuses the input; the
    model's low bounds are raised to these, so that such an input is an InputError naming the
    range. A property of the module alone, not of the bounds asked for, so the compile cache
    keeps it with the module. NotDynamic where no size up to the bound is valid."""
    extents = {e for node in graph.nodes for v in node.operands() + list(node.outputs)
               for e in v.extents or () if e is not None}
    out = []
    for slot, size in enumerate(bound):
        alone = [e for e in extents if [s for s, _ in e.terms] == [slot]]
        least = next((n for n in range(1, size + 1)
                      if all(e.value(bound[:slot] + (n,) + bound[slot + 1:]) >= 1 for e in alone)), None)
        if least is None:
            raise NotDynamic(f"no size of '{symbols[slot]}' up to {size} leaves every dim of the model at least 1")
        out.append(least)
    return tuple(out)


def _probe_points(bound: tuple[int, ...], ranges: list[tuple[int, int | None]],
                  symbols: list[str]) -> list[tuple[int, ...]]:
    """Two points moving each symbol alone, and one moving all of them (see find_extents)."""
    points, firsts = [], []
    for slot, (size, (low, _)) in enumerate(zip(bound, ranges)):
        if size < 2:  # at 1, a dim broadcasts: the graph at the bound would not be the graph at other sizes
            raise NotDynamic(f"the bound of '{symbols[slot]}' is 1: a run-time dim needs a bound of 2 or more")
        sizes = _probe_sizes(low, size)
        if len(sizes) < 2:
            raise NotDynamic(f"the range of '{symbols[slot]}' ({low} to {size}) leaves too few sizes to probe: "
                             f"a run-time dim needs at least three sizes")
        points += [bound[:slot] + (p,) + bound[slot + 1:] for p in sizes]
        firsts.append(sizes[0])
    if len(bound) > 1:
        points.append(tuple(firsts))
    return points


def _probe_sizes(low: int, bound: int) -> list[int]:
    """Two sizes inside [low, bound) to import the model at: PROBES where they lie inside (small
    imports are quick), else the lowest sizes, two in a row (their difference of one breaks
    an affine fit of a strided length, which two sizes of one parity could satisfy)."""
    inside = [p for p in PROBES if low <= p < bound]
    return (inside + [p for p in range(low, bound) if p not in inside])[:2]


def _windows(node: Node) -> dict[int, Window]:
    """find_extents' view of the op registry (OpDef.windows)."""
    windows = get_op(node.op).windows
    return {} if windows is None else windows(node)


def _check_outputs(graph: Graph) -> None:
    if any(kind is not None for _, kind in graph.output_layout):
        raise NotDynamic("the model has sequence or data-dependent outputs")


def _check_moved(bound: Graph, probe: Graph, backend: Backend) -> None:
    """Fail fast, before the other probes are imported (each costs an import and the passes, about
    a second for BERT-base): a node whose operands or outputs differ in shape between the graph
    at the bound and one probe's touches a run-time dim, so a kernel compiled for static shapes
    only refuses the model already. Only that refusal is checked here: a kernel's predicate reads
    the extents, which take every probe (_check_kernels, after find_extents, checks them all).
    Graphs of other structures are left to find_extents to name."""
    if len(bound.nodes) != len(probe.nodes):
        return
    for x, y in zip(bound.nodes, probe.nodes):
        if (x.op, x.name) != (y.op, y.name) or len(x.operands()) != len(y.operands()):
            return
        if is_view(x) or [v.shape for v in x.operands() + x.outputs] == [v.shape for v in y.operands() + y.outputs]:
            continue
        reason = _static_kernel(x, backend)
        if reason:
            raise NotDynamic(f"node '{x.name}' ({x.op}): {reason}")


def _static_kernel(node, backend: Backend) -> str | None:
    """Why `node`'s kernel cannot follow run-time dims at all (it declares no predicate), else None."""
    name = get_op(node.op).kernel
    if backend.table.lookup(name).dynamic is None:
        return f"its kernel ({name}) is compiled for static shapes only"
    return None


def _check_kernels(graph: Graph, backend: Backend) -> None:
    """Every node that touches a run-time dim has a kernel that computes inside the extents
    (or is a view that keeps them where they were). A part of an in-place Concat writes into
    its block of the output: the Concat's own predicate refuses that along a run-time axis,
    where the blocks' offsets would move."""
    for node in graph.nodes:
        if not is_dynamic(node):
            continue
        if is_view(node):
            reason = _view_reason(node)
        else:
            reason = _static_kernel(node, backend) or backend.table.lookup(get_op(node.op).kernel).dynamic(node)
        if reason:
            raise NotDynamic(f"node '{node.name}' ({node.op}): {reason}")


def _view_reason(node) -> str | None:
    """A view keeps its input's memory: the run-time dims must sit at the same strides."""
    def layout(value: Value) -> list[tuple]:
        shape = value.shape
        return [(int(np.prod(shape[:d])), int(np.prod(shape[d + 1:])), shape[d], e)
                for d, e in enumerate(value.extents or ()) if e is not None]
    if layout(node.inputs[0]) != layout(node.outputs[0]):
        return "it moves a run-time dim to other strides"
    return None
