"""Batch inference on Dask with hobbit models: `map_blocks` over a dask array of rows and
`map_partitions` over a dask dataframe whose columns hold one tensor per row.

With a distributed Client, the model is loaded once per worker process by a worker plugin
(`load_on_workers`): the plugin carries the model as compiled code (hobbit.runtime.shipped)
to every worker, including one the nanny starts after a crash (the scheduler keeps the plugin,
weights included, for those), and the tasks name the model by a key, so no task ships it again. Each worker caps every inference at its `nthreads`
threads (hobbit.runtime.cpus): Dask pins nothing, and its nanny sets OMP_NUM_THREADS=1,
which hobbit does not read. A worker runs up to nthreads tasks at once; a second task that
finds the thread team busy runs its inference on its own thread (hobbit.runtime.pool), so
the worker never runs more than nthreads + 1 busy threads. Without a distributed Client
(dask's local schedulers) the tasks take the model itself.

A model that cannot run on a worker (a pickle for CPU features it lacks, a library whose
weights file is missing) makes `load_on_workers` raise the hobbit error from the worker's
setup; a worker lost mid-run is replaced and its tasks run again (tests/test_dask.py)."""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from hobbit.errors import ConfigError, HobbitError, InputError, MissingDependencyError, import_optional
from hobbit.runtime.rows import Columns, column_map, run_rows, worker_threads
from hobbit.workers import worker_model

try:  # the plugin's base class; without distributed, every function here says what to install
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:
    WorkerPlugin = object

# The models loaded in this worker process, by key (load_on_workers).
_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _dask_module(name: str) -> Any:
    return import_optional(name, lambda exc: MissingDependencyError(
        f"hobbit.dask needs {name} ({exc}): pip install 'hobbit[dask]'"))


class ModelPlugin(WorkerPlugin):
    """The worker plugin that puts a model in each worker process, as `key`."""

    def __init__(self, model: Any, key: str, threads: int | None):
        self.model = model
        self.key = key
        self.name = f"hobbit-model-{key}"
        self.threads = threads

    def setup(self, worker: Any) -> None:
        threads = worker_threads(float(worker.state.nthreads), self.threads)
        model = worker_model(self.model, threads)
        with _LOCK:
            _MODELS[self.key] = model

    def teardown(self, worker: Any) -> None:
        with _LOCK:
            _MODELS.pop(self.key, None)


@dataclass(frozen=True)
class WorkerModel:
    """A model loaded in the workers of a cluster (load_on_workers): the key the tasks look it
    up by, and what the driver needs to plan a graph over it (its tensors, not its code)."""

    key: str
    inputs: list  # NodeArg, as model.get_inputs()
    outputs: list
    output_names: list[str]
    dtypes: dict[str, np.dtype]  # of each output

    def get_inputs(self) -> list:
        return list(self.inputs)

    def get_outputs(self) -> list:
        return list(self.outputs)


def load_on_workers(client: Any, model: Any, threads: int | None = None) -> WorkerModel:
    """Put `model` (a compiled model, an exported library's folder, or a model file every worker
    can read) in every worker of `client`'s cluster, now and in workers that join later;
    map_blocks and map_partitions take what this returns in its place. `threads`: per
    inference (default: each worker's nthreads)."""
    _dask_module("distributed")
    key = _key(model)
    plugin = ModelPlugin(model, key, threads)
    client.register_plugin(plugin, name=plugin.name)
    if isinstance(model, (str, os.PathLike)):
        return client.submit(_describe, key, pure=False).result()
    return _described(key, model)


def _described(key: str, model: Any) -> WorkerModel:
    return WorkerModel(key, model.get_inputs(), model.get_outputs(), list(model.output_names),
                       {spec.name: np.dtype(spec.dtype) for spec in model.outputs})


def _describe(key: str) -> WorkerModel:
    return _described(key, _model_here(WorkerModel(key, [], [], [], {})))


def _key(model: Any) -> str:
    """A key naming this model among those a cluster holds."""
    if isinstance(model, (str, os.PathLike)):
        text = os.path.abspath(os.fspath(model))
    else:
        text = f"{type(model).__name__}-{id(model)}-{os.getpid()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _model_here(model: Any) -> Any:
    """In a task: the model a WorkerModel names in this worker, or the model itself."""
    if not isinstance(model, WorkerModel):
        return model
    with _LOCK:
        found = _MODELS.get(model.key)
    if found is None:
        raise HobbitError(f"hobbit model {model.key} is not loaded in this worker process (pid {os.getpid()}); "
                          f"load it with hobbit.dask.load_on_workers(client, model)")
    return found


def _resolved(model: Any, client: Any) -> Any:
    """What tasks take for `model`: a WorkerModel where a distributed client runs the graph
    (the given one, else the current one), the model itself on dask's local schedulers."""
    if isinstance(model, WorkerModel):
        return model
    if client is None:
        try:
            client = _dask_module("distributed").get_client()
        except ValueError:
            if isinstance(model, (str, os.PathLike)):
                return worker_model(model, worker_threads(None))
            return model
    return load_on_workers(client, model)


def _dtype(model: Any, name: str) -> np.dtype:
    if isinstance(model, WorkerModel):
        return model.dtypes[name]
    return next(np.dtype(spec.dtype) for spec in model.outputs if spec.name == name)


def map_blocks(array: Any, model: Any, *, output: str | int = 0, client: Any = None) -> Any:
    """The model's output `output` (a name or position) for every row of the dask array `array`
    (dim 0: rows), as a dask array with the same row chunks. `model`: a compiled model, a path
    (see load_on_workers) or load_on_workers' WorkerModel. The array is rechunked to whole
    rows where it is cut along other dims."""
    da = _dask_module("dask.array")
    ref = _resolved(model, client)
    inputs, names = ref.get_inputs(), list(ref.output_names)
    if len(inputs) != 1:
        raise ConfigError(f"map_blocks feeds one array to a model with one input; this one has "
                          f"{[a.name for a in inputs]}: use map_partitions")
    if isinstance(output, str) and output not in names:
        raise ConfigError(f"the model has no output named {output!r}; its outputs: {names}")
    index = names.index(output) if isinstance(output, str) else int(output)
    spec = ref.get_outputs()[index]
    row_shape = tuple(spec.shape[1:])
    if not all(isinstance(d, int) for d in row_shape):
        raise ConfigError(f"output '{spec.name}' has symbolic dims {spec.shape}: map_blocks needs the shape of a row")
    dtype = _dtype(ref, spec.name)
    whole_rows = array.rechunk({axis: -1 for axis in range(1, array.ndim)})
    return da.map_blocks(_run_block, whole_rows, ref, inputs[0].name, index, dtype=dtype,
                         chunks=(whole_rows.chunks[0],) + tuple((d,) for d in row_shape),
                         drop_axis=list(range(1, array.ndim)), new_axis=list(range(1, 1 + len(row_shape))),
                         meta=np.empty((0,) + row_shape, dtype))


def _run_block(block: np.ndarray, model: Any, name: str, index: int) -> np.ndarray:
    return run_rows(_model_here(model), {name: np.ascontiguousarray(block)})[index]


def map_partitions(frame: Any, model: Any, *, inputs: Columns = None, outputs: Columns = None,
                   client: Any = None) -> Any:
    """Every partition of the dask dataframe `frame` with the model's outputs added as columns:
    input columns hold one array per row (stacked into the model's batch), and each output
    column gets one array per row. `inputs`/`outputs` name the columns as in hobbit.ray
    (default: the model's tensor names)."""
    pd = _dask_module("pandas")
    ref = _resolved(model, client)
    in_map = column_map(inputs, [a.name for a in ref.get_inputs()], "inputs")
    out_map = column_map(outputs, list(ref.output_names), "outputs")
    meta = frame._meta.copy()
    for column in out_map.values():
        meta[column] = pd.Series([], dtype=object)
    return frame.map_partitions(_run_partition, ref, in_map, out_map, meta=meta)


def _run_partition(part: Any, model: Any, in_map: dict[str, str], out_map: dict[str, str]) -> Any:
    out = part.copy()
    if len(part) == 0:
        for column in out_map.values():
            out[column] = []
        return out
    feeds = {name: _stacked(part[column], column) for name, column in in_map.items()}
    results = run_rows(_model_here(model), feeds)
    for column, value in zip(out_map.values(), results):
        out[column] = list(value)
    return out


def _stacked(series: Any, column: str) -> np.ndarray:
    """A column of one array per row, as one array with the rows as dim 0."""
    first = series.iloc[0]
    if not isinstance(first, np.ndarray):
        raise InputError(f"column '{column}' holds {type(first).__name__} values, not numpy arrays; a dask dataframe "
                         f"turns a column of arrays into strings unless dask.config.set"
                         f"({{'dataframe.convert-string': False}}) is in effect when it is built")
    return np.stack(list(series))

