"""`hobbit bench --engine ray,dask`: batch inference through a distributed engine, beside
onnxruntime in the same harness and beside each runner alone in one process.

Per model, ITEMS rows (images, or sentences: the model's declared inputs filled as
hobbit.bench.suite.random_inputs fills them, 8 distinct rows repeated) are scored four ways
on the same CPUs (CPUS, default every CPU this process may use):

- one process: hobbit compiled for CPUS threads, then onnxruntime with CPUS intra-op
  threads (its users' setting), each running the rows one batch of the model at a time;
- Ray Data: hobbit.ray.map_batches with CPUS actors of one thread (the model compiled once
  here for one thread and shipped as machine code), then an actor pool of the same shape
  whose actors each build an onnxruntime session of one intra-op thread;
- Dask: a LocalCluster of CPUS worker processes of one thread, hobbit.dask.map_blocks (one
  input) or map_partitions (several), the model loaded once per worker; then the same graph
  over a per-process onnxruntime session of one thread.

A figure is rows per second over the wall time of the whole job as its user meets it: for
Ray from the dataset's start to the last row in hand (its actor pool starts inside that time,
and the model's unpickling too); for Dask from submitting the graph on a running cluster
whose workers already hold the model. Throughput per core is rows/s over CPUS."""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import onnx

from hobbit.bench.ort import ort_session
from hobbit.bench.suite import random_inputs
from hobbit.errors import ConfigError
from hobbit.runtime.rows import run_rows

ENGINES = ("ray", "dask")
DISTINCT_ROWS = 8


@dataclass(frozen=True)
class EngineTiming:
    model: str
    engine: str  # "one process", "ray", "dask"
    runner: str  # "hobbit", "onnxruntime"
    rows: int
    seconds: float
    cpus: int

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds


class OrtRows:
    """An onnxruntime session as run_rows drives a model: get_inputs/get_outputs, run(feeds)."""

    def __init__(self, path: str, threads: int):
        self.session = ort_session(path, threads)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def get_inputs(self) -> list:
        return self.session.get_inputs()

    def get_outputs(self) -> list:
        return self.session.get_outputs()

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(None, feeds)


_SESSIONS: dict[tuple[str, int], OrtRows] = {}


def _session_here(path: str, threads: int) -> OrtRows:
    """One onnxruntime session per worker process and model, as its users build them."""
    key = (path, threads)
    if key not in _SESSIONS:
        _SESSIONS[key] = OrtRows(path, threads)
    return _SESSIONS[key]


class OrtPredictor:
    """The Ray Data actor of the onnxruntime rows: a session of the threads Ray granted."""

    def __init__(self, path: str, threads: int):
        self.rows = OrtRows(path, threads)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {arg.name: np.ascontiguousarray(batch[arg.name]) for arg in self.rows.get_inputs()}
        out = dict(batch)
        out["output"] = run_rows(self.rows, feeds)[0]
        return out


def cycled(rows: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """Rows `numbers` of a table that cycles through `rows` (each harness makes its rows so)."""
    return np.ascontiguousarray(rows[numbers % rows.shape[0]])


def table_rows(model_rows: dict[str, np.ndarray], items: int) -> dict[str, np.ndarray]:
    """`items` rows per input, cycling through the distinct ones."""
    return {name: cycled(rows, np.arange(items)) for name, rows in model_rows.items()}


def distinct_rows(specs: list) -> dict[str, np.ndarray]:
    """DISTINCT_ROWS rows of every input, each row as the model takes one (its batch dim dropped).
    Integer inputs are 0 or 1: indices that every table of two or more rows holds (BERT's
    token types have two; random_inputs' 0..9 are out of range there, and hobbit refuses them)."""
    feeds = [random_inputs(specs, seed) for seed in range(DISTINCT_ROWS)]
    rows = {spec.name: np.concatenate([f[spec.name][:1] for f in feeds]) for spec in specs}
    return {name: value % 2 if value.dtype.kind in "iu" else value for name, value in rows.items()}


def run_engines(name: str, model: onnx.ModelProto | str, engines: list[str], items: int, cpus: int,
                batch_size: int = 32, show: Callable[[EngineTiming], None] = print, rounds: int = 1
                ) -> list[EngineTiming]:
    """Every runner of `engines` (and one process) over `items` rows of `model`, `rounds` times
    in turn: each round runs every runner once, so the machine's drift falls on all of them."""
    import hobbit
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise ConfigError(f"--engine takes {', '.join(ENGINES)}; got {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="hobbit-engine-") as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(onnx.load(model) if isinstance(model, str) else model, path)
        alone = hobbit.compile(path, threads=cpus)
        single = hobbit.compile(path, threads=1)
        distinct = distinct_rows(alone.inputs)
        data = table_rows(distinct, items)
        timings = []

        def record(engine: str, runner: str, seconds: float) -> None:
            timings.append(EngineTiming(name, engine, runner, items, seconds, cpus))
            show(timings[-1])

        session = OrtRows(path, cpus)
        for _ in range(rounds):
            record("one process", "hobbit", _one_process(alone, data))
            record("one process", "onnxruntime", _one_process(session, data))
            for engine in engines:
                runs = _ray_runs(single, path, distinct, items, cpus, batch_size) if engine == "ray" else \
                    _dask_runs(single, path, distinct, items, cpus, batch_size)
                for runner, seconds in runs:
                    record(engine, runner, seconds)
        return timings


def _one_process(model: Any, data: dict[str, np.ndarray], block: int = 32) -> float:
    rows = next(iter(data.values())).shape[0]
    start = time.perf_counter()
    for first in range(0, rows, block):
        run_rows(model, {name: value[first:first + block] for name, value in data.items()})
    return time.perf_counter() - start


def _ray_runs(model: Any, path: str, distinct: dict[str, np.ndarray], items: int, cpus: int, batch_size: int
              ) -> list[tuple[str, float]]:
    import ray
    import hobbit.ray
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        plan = hobbit.ray.actor_plan(1)
        _drain(_ray_rows(ray, distinct, 2 * batch_size, batch_size))  # untimed: Ray Data's own start
        found = []
        for runner in ("hobbit", "onnxruntime"):
            start = time.perf_counter()
            dataset = _ray_rows(ray, distinct, items, batch_size)
            if runner == "hobbit":
                out = hobbit.ray.map_batches(dataset, model, outputs={model.output_names[0]: "output"},
                                             batch_size=batch_size)
            else:
                out = dataset.map_batches(OrtPredictor, fn_constructor_kwargs={"path": path, "threads": plan.threads},
                                          concurrency=plan.actors, num_cpus=plan.num_cpus, batch_size=batch_size,
                                          batch_format="numpy", scheduling_strategy="SPREAD")
            count = _drain(out)
            found.append((runner, time.perf_counter() - start))
            if count != items:
                raise RuntimeError(f"Ray Data returned {count} rows of {items}")
        return found
    finally:
        if started:
            ray.shutdown()


def _ray_rows(ray: Any, distinct: dict[str, np.ndarray], items: int, block: int) -> Any:
    """The table's rows as Ray Data makes them: read tasks each turning a range of row numbers
    into a block of rows (from the distinct rows), one column per input, as a job reading its
    inputs from files streams them to the actors. A table put
    in the object store by the driver (from_numpy of MobileNetV2's 1.2 GB) took 3.4 s before
    the first row could move, and repartitioning it into blocks an all-to-all step that Ray
    Data finishes before the first batch reaches an actor: with both, MobileNetV2's 2,000 rows
    ran at 0.42 of one process here (BENCHMARKS.md, issue 30)."""
    return ray.data.range(items, override_num_blocks=math.ceil(items / block)).map_batches(
        _rows_of, fn_kwargs={"distinct": distinct}, batch_size=None, batch_format="numpy")


def _rows_of(numbers: dict[str, np.ndarray], distinct: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: cycled(rows, numbers["id"]) for name, rows in distinct.items()}


def _drain(dataset: Any) -> int:
    """Run the dataset to its end and count its rows (dropped as they come). Also run, untimed,
    on a few rows before the timed jobs: the first job of a process pays Ray Data's own start
    (its imports, its executor; 1-2 s here), which would otherwise fall on whichever runner
    goes first."""
    return sum(len(next(iter(batch.values()))) for batch in dataset.iter_batches(batch_format="numpy"))


def _dask_runs(model: Any, path: str, distinct: dict[str, np.ndarray], items: int, cpus: int, batch_size: int
               ) -> list[tuple[str, float]]:
    """A one-input model through map_blocks over an array whose blocks are made on the workers
    (from the distinct rows, scattered once: a graph that embeds a large numpy array is sent
    whole to the scheduler); a model of several inputs through map_partitions."""
    import dask
    import dask.array as da
    import dask.dataframe
    import distributed
    import pandas as pd
    import hobbit.dask
    with environment_kept(), \
            distributed.LocalCluster(n_workers=cpus, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=40) as cluster, distributed.Client(cluster) as client:
        loaded = hobbit.dask.load_on_workers(client, model)
        found = []
        for runner in ("hobbit", "onnxruntime"):
            start = time.perf_counter()
            if len(distinct) == 1:
                (name, rows), = distinct.items()
                scattered = client.scatter(rows, broadcast=True)
                array = da.concatenate([da.from_delayed(dask.delayed(_rows_block)(scattered, first, items, batch_size),
                                                        (min(batch_size, items - first),) + rows.shape[1:], rows.dtype)
                                        for first in range(0, items, batch_size)])
                if runner == "hobbit":
                    result = hobbit.dask.map_blocks(array, loaded)
                else:
                    result = array.map_blocks(_ort_block, path, name, dtype=np.float32, drop_axis=list(
                        range(1, rows.ndim)), new_axis=[1], chunks=(array.chunks[0], (1,)))
            else:
                data = table_rows(distinct, items)
                with dask.config.set({"dataframe.convert-string": False}):
                    frame = dask.dataframe.from_pandas(pd.DataFrame({k: list(v) for k, v in data.items()}),
                                                       chunksize=batch_size)
                if runner == "hobbit":
                    result = hobbit.dask.map_partitions(frame, loaded, outputs={loaded.output_names[0]: "output"})
                else:
                    result = frame.map_partitions(_ort_partition, path, list(data),
                                                  meta=frame._meta.assign(output=pd.Series([], dtype=object)))
            client.compute(result).result()
            found.append((runner, time.perf_counter() - start))
        return found


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """This process's environment as it was, after a Dask LocalCluster: its nanny leaves
    OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS at 1 and PYTHONHASHSEED set in the
    parent's os.environ (distributed 2026.8), for every later child process to inherit."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _rows_block(rows: np.ndarray, first: int, items: int, block: int) -> np.ndarray:
    """Rows first.. of the table, made on the worker from the distinct rows."""
    return cycled(rows, np.arange(first, min(first + block, items)))


def _ort_block(block: np.ndarray, path: str, name: str) -> np.ndarray:
    """The onnxruntime rows of a block: its first output, reduced to one number per row (the
    figure is the time; the graph stays one array whatever the output's shape)."""
    out = run_rows(_session_here(path, 1), {name: np.ascontiguousarray(block)})[0]
    return out.reshape(out.shape[0], -1)[:, :1]


def _ort_partition(part: Any, path: str, names: list[str]) -> Any:
    feeds = {name: np.stack(list(part[name])) for name in names}
    out = part.copy()
    out["output"] = list(run_rows(_session_here(path, 1), feeds)[0]) if len(part) else []
    return out


def markdown(timings: list[EngineTiming]) -> str:
    """The table: for each engine and runner, the median rows/s over its rounds (and their range,
    with more than one), per core, the median over the same runner's alone in one process, and
    hobbit's time over onnxruntime's in one engine (below 1: hobbit faster)."""
    rates: dict[tuple[str, str, str], list[float]] = {}
    for t in timings:
        rates.setdefault((t.model, t.engine, t.runner), []).append(t.rows_per_second)
    median = {key: statistics.median(values) for key, values in rates.items()}
    cpus = {(t.model, t.engine, t.runner): t.cpus for t in timings}
    lines = ["| model | engine | runner | rows/s | range | rows/s per core | vs. one process | "
             "hobbit / onnxruntime, time |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (model, engine, runner), rate in median.items():
        values = rates[(model, engine, runner)]
        spread = f"{min(values):.1f}-{max(values):.1f}" if len(values) > 1 else "—"
        peer = median.get((model, engine, "onnxruntime"))
        ratio = f"{peer / rate:.2f}" if runner == "hobbit" and peer else "—"
        lines.append(f"| {model} | {engine} | {runner} | {rate:.1f} | {spread} | {rate / cpus[(model, engine, runner)]:.1f} "
                     f"| {rate / median[(model, 'one process', runner)]:.2f} | {ratio} |")
    return "\n".join(lines) + "\n"
