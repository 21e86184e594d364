"""`hobbit bench --sweep SYMBOL=V1,V2,...`: one compile of a model with symbolic dims, timed at
each value of one dim (or each point of several dims moved together, `height,width=224x224,
160x240`: an image's two sides) beside a static compile of that shape and onnxruntime, in one run.

Why: a model served with inputs of any length (text, audio) is compiled once and then meets
shapes it has not seen; issue 28 asks that a new shape cost no compile (its first run close
to its second), that the one compile run each shape about as fast as a compile for exactly
that shape and no slower than onnxruntime, and that memory not grow with the shapes seen.
Each of those is a column here. It measures whatever hobbit.compile returns for the model:
a SpecializingModel (one variant compiled per shape, so its first run at a shape includes
that compile) or a model whose dims are run-time values of one module.

For each thread count: the one compile is built once (cache off, `dynamic_shapes=` bounds
when given and hobbit.compile takes them). First it alone runs each value twice, the first
and second run timed and the process's resident memory read after each value, so the
memory column shows the one compile and nothing else. Then, per value, onnxruntime's outputs
check the one compile's and a static compile's (hobbit.compile with input_shapes= that shape),
and the three engines are timed in alternating rounds as the rest of the benchmark times
them (hobbit.bench.load), once per load condition asked for (`--load none,busy-core`: a busy
core beside them too; the conditions that run in the benchmark's own process). Other symbolic dims (a batch) are fixed, 1 unless given, by
writing their sizes into the model's declarations, so the one compile's run-time dims are the
swept ones."""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx

import hobbit
from hobbit.bench.load import BLOCK, COOLDOWN_S, BuildOptions, describe_mode, run_in_process
from hobbit.bench.ort import ModelSource, ort_session
from hobbit.bench.report import describe_machine, format_ms, format_span
from hobbit.bench.result import ATOL, RTOL, TOLERANCE, Timing, megabytes
from hobbit.bench.suite import compare_outputs, require_runnable
from hobbit.errors import ConfigError, HobbitError, InputError
from hobbit.frontend.common.source import DeclaredInput
from hobbit.frontend.onnx.importer import load_model
from hobbit.frontend.onnx.source import OnnxSource
from hobbit.runtime.memory import release_garbage, rss_bytes

ENGINES = ("one compile", "static", "onnxruntime")
# The load conditions a sweep times under: those hobbit.bench.load runs in this process.
SWEEP_LOADS = ("none", "busy-core", "blas", "alternate")
ID_HIGH = 100  # token ids are drawn below this, and below the rows of the table they index


@dataclass
class SweepPoint:
    """One point of the sweep (a value of the swept dim, or of each swept dim) at one thread
    count: every engine's numbers."""

    model: str
    symbols: tuple[str, ...]  # the swept dims, e.g. ("sequence",) or ("height", "width")
    sizes: tuple[int, ...]  # their sizes at this point, in the same order
    threads: int
    runs: int
    inputs: str  # e.g. "input_ids: int64[1x16], attention_mask: int64[1x16]"
    one_compile: str  # the class hobbit.compile returned, and why it is not one module if it says
    one_compile_seconds: float
    first_ms: float  # the one compile's first run at this value, then its second
    second_ms: float
    rss_base: int | None  # the process's VmRSS right after the one compile, bytes
    rss: int | None  # and after the one compile's runs up to this value (values in sweep order)
    max_abs_error: float
    mismatch: str | None  # why an engine's outputs disagree with onnxruntime's, or None
    static_compile_seconds: float | None = None
    one: Timing | None = None
    static: Timing | None = None
    onnxruntime: Timing | None = None
    load: str = "none"  # the load condition the three engines were timed under (hobbit.bench.load.LOADS)

    @property
    def symbol(self) -> str:
        """The swept dims as written on the command line: "sequence" or "height,width"."""
        return ",".join(self.symbols)

    @property
    def value(self) -> int | str:
        """The point: the size of the one swept dim (16), or the sizes joined by 'x' ("224x224")."""
        return self.sizes[0] if len(self.sizes) == 1 else "x".join(map(str, self.sizes))

    @property
    def first_extra_ms(self) -> float:
        """What the first run at this point costs beyond the second (a compile, if any)."""
        return self.first_ms - self.second_ms

    @property
    def static_ratio(self) -> float | None:
        """One compile's median over the static compile's (issue 28 asks at most 1.15)."""
        return None if self.one is None or self.static is None else self.one.median / self.static.median

    @property
    def ort_ratio(self) -> float | None:
        """One compile's median over onnxruntime's (below 1: hobbit is faster)."""
        return None if self.one is None or self.onnxruntime is None else self.one.median / self.onnxruntime.median

    def format(self) -> str:
        """The point in two lines, as the sweep goes."""
        load = "" if self.load == "none" else f"  load {self.load}"
        head = (f"{self.model}  threads {self.threads}{load}  {self.symbol}={self.value}: first run {self.first_ms:.1f} ms, "
                f"second {self.second_ms:.1f} ms, RSS {_mb(self.rss)} MB")
        if self.mismatch is not None:
            return f"{head}\n  OUTPUTS DISAGREE ({TOLERANCE}): {self.mismatch}"
        return (f"{head}\n  median ms: one compile {format_ms(self.one.median)}, static {format_ms(self.static.median)} "
                f"(compiled in {self.static_compile_seconds:.1f} s), onnxruntime {format_ms(self.onnxruntime.median)}; "
                f"one/static {self.static_ratio:.2f}, one/onnxruntime {self.ort_ratio:.2f}")

    def to_dict(self) -> dict[str, Any]:
        timings = {f"{key}_ms": None if t is None else {"median": t.median, "p10": t.p10, "p90": t.p90}
                   for key, t in (("one_compile", self.one), ("static", self.static), ("onnxruntime", self.onnxruntime))}
        return {"model": self.model, "symbol": self.symbol, "value": self.value,
                "sizes": dict(zip(self.symbols, self.sizes)), "threads": self.threads, "load": self.load,
                "runs": self.runs, "inputs": self.inputs, "one_compile": self.one_compile,
                "one_compile_seconds": self.one_compile_seconds, "first_run_ms": self.first_ms,
                "second_run_ms": self.second_ms, "first_minus_second_ms": self.first_extra_ms,
                "rss_after_compile_bytes": self.rss_base, "rss_bytes": self.rss,
                "outputs_agree": self.mismatch is None, "mismatch": self.mismatch,
                "max_abs_error": self.max_abs_error if np.isfinite(self.max_abs_error) else None,
                "static_compile_seconds": self.static_compile_seconds, **timings,
                "one_compile_over_static": self.static_ratio, "one_compile_over_onnxruntime": self.ort_ratio}


def symbols_of(declared: list[DeclaredInput]) -> dict[str, list[str]]:
    """{symbol: ["input_ids dim 1", ...]} of the model's symbolic input dims, in order; an
    unnamed symbolic dim cannot be swept or fixed by name, so it is an InputError."""
    found: dict[str, list[str]] = {}
    for d in declared:
        for axis, (size, symbol) in enumerate(zip(d.shape, d.symbols)):
            if size is None and symbol is None:
                raise InputError(f"input '{d.name}' has a symbolic dim with no name (dim {axis}): a sweep sets dims "
                                 f"by their names")
            if size is None:
                found.setdefault(symbol, []).append(f"{d.name} dim {axis}")
    return found


def sweep_points(symbol: str | Sequence[str], values: Sequence[int] | Sequence[Sequence[int]]
                 ) -> tuple[tuple[str, ...], list[tuple[int, ...]]]:
    """The swept dims and the points, each a size per dim: "sequence", [16, 64] -> (("sequence",),
    [(16,), (64,)]); ("height", "width") or "height,width" with [(224, 224), (160, 240)] as they are."""
    symbols = tuple(part.strip() for part in symbol.split(",")) if isinstance(symbol, str) else tuple(symbol)
    points = [tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),)
              for value in values]
    return symbols, points


def _point(sizes: tuple[int, ...]) -> str:
    return "x".join(map(str, sizes))


def check_sweep(declared: list[DeclaredInput], name: str, symbols: Sequence[str], points: list[tuple[int, ...]],
                sizes: dict[str, int], bounds: dict[str, tuple[int, int]]) -> dict[str, int]:
    """The sizes every symbol but the swept ones is fixed at (1 unless `sizes` gives one), after
    checking that the names, the points (a size per swept dim) and bounds fit the model: before
    anything compiles."""
    found = symbols_of(declared)
    where = "; ".join(f"'{s}' ({', '.join(places)})" for s, places in found.items()) or "none"
    swept = ",".join(symbols)
    missing = [s for s in symbols if s not in found]
    if missing:
        named = ", ".join(f"'{s}'" for s in missing)
        raise InputError(f"{name} has no symbolic input dim named {named} to sweep; its symbolic dims: {where}")
    if len(set(symbols)) != len(symbols):
        raise ConfigError(f"the sweep names a dim twice: {swept}")
    unknown = [s for s in sizes if s not in found]
    if unknown:
        raise InputError(f"{name} has no symbolic input dim named {unknown}; its symbolic dims: {where}")
    if not points or any(len(p) != len(symbols) or min(p) < 1 for p in points):
        if len(symbols) == 1:
            raise ConfigError(f"the values to sweep '{swept}' over must be whole numbers >= 1, got "
                              f"{[v for p in points for v in p]}")
        raise ConfigError(f"the points to sweep '{swept}' over must each give {len(symbols)} whole numbers >= 1 "
                          f"joined by 'x' (e.g. {_point((224,) * len(symbols))}), got "
                          f"{', '.join(map(_point, points)) or 'none'}")
    others = [s for s in bounds if s not in symbols]
    if others:
        raise ConfigError(f"bounds are for the swept dim{'s' * (len(symbols) > 1)} '{swept}' only (the others are "
                          f"fixed at one size); got bounds for {others}")
    for axis, symbol in enumerate(symbols):
        if symbol in bounds:
            low, high = bounds[symbol]
            outside = [p[axis] for p in points if not low <= p[axis] <= high]
            if outside:
                raise ConfigError(f"the sweep's values {outside} are outside the bounds {low}..{high} of '{symbol}'")
    return {s: sizes.get(s, 1) for s in found if s not in symbols}


def pin(proto: onnx.ModelProto, sizes: dict[str, int]) -> None:
    """Write `sizes` over the named symbolic dims of the model's declarations (in place), so
    that both engines see those dims as static."""
    for value in (*proto.graph.input, *proto.graph.output, *proto.graph.value_info):
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in sizes:
                    dim.dim_value = sizes[dim.dim_param]


def index_bounds(proto: onnx.ModelProto) -> dict[str, int]:
    """{input: rows} of the inputs that index a constant table directly (token ids into an
    embedding): their values must stay below its row count."""
    tables = {t.name: t.dims[0] for t in proto.graph.initializer if t.dims}
    bounds = {}
    for node in proto.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in tables:
            if all(a.name != "axis" or a.i == 0 for a in node.attribute):
                bounds.setdefault(node.input[1], tables[node.input[0]])
    return bounds


def feeds_at(declared: list[DeclaredInput], sizes: dict[str, int], highs: dict[str, int],
             seed: int | list[int] = 0) -> dict[str, np.ndarray]:
    """Seeded inputs at these symbol sizes: N(0, 1) floats (token embeddings, audio features,
    images [N, C, H, W]), masks of ones (an input whose name says mask), integer ids below
    ID_HIGH and below the table they index."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for d in declared:
        shape = tuple(sizes[s] if n is None else n for n, s in zip(d.shape, d.symbols))
        if "mask" in d.name.lower():
            feeds[d.name] = np.ones(shape, d.dtype)
        elif d.dtype.kind == "f":
            feeds[d.name] = rng.standard_normal(shape).astype(d.dtype)
        elif d.dtype.kind == "b":
            feeds[d.name] = rng.random(shape) < 0.5
        else:
            feeds[d.name] = rng.integers(0, min(ID_HIGH, highs.get(d.name, ID_HIGH)), shape).astype(d.dtype)
    return feeds


def _describe(feeds: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{n}: {a.dtype.name}[{'x'.join(map(str, a.shape))}]" for n, a in feeds.items())


def _dynamic_kwargs(bounds: dict[str, tuple[int, int]]) -> dict[str, object]:
    """dynamic_shapes= for hobbit.compile when bounds are given and it takes them (older builds
    compile one variant per shape and have no such argument)."""
    if bounds and "dynamic_shapes" in inspect.signature(hobbit.compile).parameters:
        return {"dynamic_shapes": dict(bounds)}
    return {}


def run_sweep(model: ModelSource, name: str, symbol: str | Sequence[str],
              values: Sequence[int] | Sequence[Sequence[int]], threads: list[int], runs: int = 30, warmup: int = 3,
              build: BuildOptions = BuildOptions(), sizes: dict[str, int] | None = None,
              bounds: dict[str, tuple[int, int]] | None = None,
              report: Callable[[SweepPoint], None] | None = None,
              loads: Sequence[str] = ("none",)) -> list[SweepPoint]:
    """Sweep `symbol` over `values` at each thread count (see the module docstring): one dim
    ("sequence", [16, 64]) or several moved together (("height", "width") or "height,width",
    [(224, 224), (160, 240)]: a size per dim at each point); the other symbolic dims at `sizes`
    (default 1), the one compile bounded by `bounds` ({symbol: (low, high)}) where given, the
    engines timed under each of `loads` (SWEEP_LOADS). Rows come back by thread count, then
    point, then load."""
    if runs < 1 or warmup < 0 or not threads or min(threads) < 1:
        raise HobbitError(f"runs and threads must be at least 1 and warmup at least 0 (got runs={runs}, "
                          f"threads={threads}, warmup={warmup})")
    unknown = [load for load in loads if load not in SWEEP_LOADS]
    if unknown or not loads:
        raise ConfigError(f"a sweep times under the load conditions {', '.join(SWEEP_LOADS)}; got {list(loads)}")
    require_runnable(build)
    bounds = bounds or {}
    symbols, points = sweep_points(symbol, values)
    proto = load_model(model)
    declared = OnnxSource(proto).declared_inputs()
    fixed = check_sweep(declared, name, symbols, points, sizes or {}, bounds)
    highs = index_bounds(proto)
    pin(proto, fixed)
    declared = OnnxSource(proto).declared_inputs()
    # one dim: seeded by its size, as before several dims could be swept; several: by all of them
    feeds = [feeds_at(declared, {**fixed, **dict(zip(symbols, p))}, highs, seed=p[0] if len(p) == 1 else list(p))
             for p in points]
    rows: list[SweepPoint] = []
    with tempfile.TemporaryDirectory(prefix="hobbit-sweep-") as folder:
        path = os.path.join(folder, "model.onnx")
        try:
            onnx.save(proto, path)
        except ValueError as exc:  # protobuf's 2 GB limit
            raise HobbitError(f"cannot write {name} with its fixed dims to a file: {exc}") from exc
        del proto
        for n in threads:
            for row in _sweep_threads(path, name, symbols, points, feeds, n, runs, warmup, build, bounds, loads):
                if report is not None:
                    report(row)
                rows.append(row)
    return rows


def _sweep_threads(path: str, name: str, symbols: tuple[str, ...], points: list[tuple[int, ...]],
                   feeds: list[dict[str, np.ndarray]], threads: int, runs: int, warmup: int, build: BuildOptions,
                   bounds: dict[str, tuple[int, int]], loads: Sequence[str]) -> Iterator[SweepPoint]:
    """One thread count: the one compile alone at every point (first and second run, memory),
    then per point the outputs checked and the three engines timed (each row yielded as soon
    as it is, so a long sweep shows its progress)."""
    t0 = time.perf_counter()
    one = hobbit.compile(path, threads=threads, cache=False, **build.kwargs(), **_dynamic_kwargs(bounds))
    compile_seconds = time.perf_counter() - t0
    reason = getattr(one, "reason", None)
    kind = type(one).__name__ + (f" ({reason})" if reason else "")
    release_garbage()
    base = rss_bytes()
    rows = []
    for sizes, feed in zip(points, feeds):
        t0 = time.perf_counter()
        one.run(feed)
        t1 = time.perf_counter()
        one.run(feed)
        t2 = time.perf_counter()
        release_garbage()
        rows.append(SweepPoint(name, symbols, sizes, threads, runs, _describe(feed), kind, compile_seconds,
                               (t1 - t0) * 1e3, (t2 - t1) * 1e3, base, rss_bytes(), 0.0, None))
    session = ort_session(path, threads)
    names = list(one.output_names)
    for row, feed in zip(rows, feeds):
        expected = session.run(names, feed)
        row.max_abs_error, row.mismatch = compare_outputs(one.run(feed), expected, names)
        shapes = {k: tuple(a.shape) for k, a in feed.items()}
        t0 = time.perf_counter()
        static = hobbit.compile(path, threads=threads, cache=False, input_shapes=shapes, **build.kwargs())
        row.static_compile_seconds = time.perf_counter() - t0
        worst, mismatch = compare_outputs(static.run(feed), expected, names)
        if row.mismatch is None and mismatch is not None:
            row.max_abs_error, row.mismatch = worst, f"the static compile: {mismatch}"
        if row.mismatch is not None:
            yield row
            continue
        engines = {"one compile": lambda: one.run(feed), "static": lambda: static.run(feed),
                   "onnxruntime": lambda: session.run(names, feed)}
        for load in loads:
            measured = run_in_process(load, engines, runs, warmup)
            yield replace(row, load=load, **{key: Timing.of(measured[e].seconds)
                                             for key, e in zip(("one", "static", "onnxruntime"), ENGINES)})
        del static


# -- reports ---------------------------------------------------------------------------------

def _mb(nbytes: int | None) -> str:
    return "—" if nbytes is None else megabytes(nbytes)


def sweep_table(points: list[SweepPoint]) -> str:
    """One row per thread count and point: the one compile's first and second run, the three
    medians (p10–p90), the ratios, the static compile's seconds and the process's memory."""
    symbol = points[0].symbol if points else "value"
    heads = ["model", "threads", "load", symbol, "first run ms", "second run ms", "first − second ms",
             "one compile median (p10–p90) ms", "static median (p10–p90) ms", "onnxruntime median (p10–p90) ms",
             "one / static", "one / onnxruntime", "static compile s", "RSS MB (after one compile)"]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for p in points:
        cells = [p.model, str(p.threads), p.load, str(p.value), f"{p.first_ms:.1f}", f"{p.second_ms:.1f}",
                 f"{p.first_extra_ms:.1f}"]
        if p.mismatch is not None:
            cells += ["outputs disagree", "—", "—", "—", "—"]
        else:
            cells += [format_span(p.one), format_span(p.static), format_span(p.onnxruntime),
                      f"{p.static_ratio:.2f}", f"{p.ort_ratio:.2f}"]
        cells += ["—" if p.static_compile_seconds is None else f"{p.static_compile_seconds:.1f}",
                  f"{_mb(p.rss)} ({_mb(p.rss_base)})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def compiles_line(points: list[SweepPoint]) -> str:
    """What hobbit.compile returned at each thread count and how long it took."""
    seen = {p.threads: p for p in points}
    return "\n".join(f"one compile at {n} thread{'s' * (n > 1)}: {p.one_compile}, {p.one_compile_seconds:.1f} s"
                     for n, p in seen.items()) + "\n"


def markdown_report(points: list[SweepPoint], machine: dict[str, Any], command: str, warmup: int) -> str:
    """The table under how it was made and on what machine."""
    runs = sorted({p.runs for p in points})
    loads = "".join(f"- {load}: {describe_mode(load)}\n" for load in dict.fromkeys(p.load for p in points))
    return (f"# Sweep of `{points[0].symbol}`\n\n"
            f"Generated by `{command}` on {machine['date']}: hobbit {machine['hobbit']} against onnxruntime "
            f"{machine['onnxruntime']} (ORT_ENABLE_ALL, sequential, intra_op_num_threads = N).\n\n"
            f"{describe_machine(machine)}\n\n"
            "For each thread count the model is compiled once (the one compile), then run twice at each value "
            "of the swept dim(s) in turn (first and second run; RSS is the process's VmRSS after that value's runs, "
            "and after the one compile in brackets). Then at each value a static compile of that shape is built "
            "(`input_shapes=`), the outputs of both are checked against onnxruntime's "
            f"({TOLERANCE}; a value whose outputs disagree gets no timings), and the three engines "
            f"are timed alternately, {'/'.join(map(str, runs))} runs each after {warmup} warm-ups, in blocks of "
            f"{BLOCK} with a {COOLDOWN_S * 1e3:.0f} ms pause. Ratios are the one compile's median over the "
            "other's; below 1 means the one compile is faster. Inputs: seeded token ids below 100, masks of "
            f"ones, N(0, 1) floats ({'; '.join(dict.fromkeys(p.inputs for p in points))}).\n\n"
            "Load conditions (hobbit.bench.load):\n" + loads + "\n"
            + compiles_line(points) + "\n" + sweep_table(points))


def write_json(points: list[SweepPoint], machine: dict[str, Any], path: str | os.PathLike) -> None:
    """Every number of every row, with the machine and settings they were measured under."""
    doc = {"machine": machine, "settings": {"rtol": RTOL, "atol": ATOL, "block": BLOCK, "cooldown_s": COOLDOWN_S},
           "results": [p.to_dict() for p in points]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
