"""Batch inference on Ray Data with hobbit models: `map_batches(dataset, model, ...)`.

The model travels to the actors as compiled code (a compiled model pickles as its machine
code and weights: hobbit.runtime.shipped), so an actor starts in about the time it takes to
import hobbit and read the weights, with no compile and no shared compile cache; Ray keeps the
pickled weights in its object store, and every actor on a node maps the same copy. A model
given as a path is an exported library's folder on storage every node can read (hobbit.load),
or a model file each actor compiles for its own threads.

Sizing: each actor runs `cpus_per_actor` threads per inference (never more than the CPUs Ray
granted it, rounded up), and the whole process is capped there (hobbit.runtime.cpus), since
Ray pins nothing and sets only OMP_NUM_THREADS. Ray Data's own tasks (reading, repartition)
ask for a whole CPU each, so an actor pool that reserves every CPU starves them and the job
never ends: on a 2-CPU node, 2 actors of num_cpus=1 with a repartition stood still for 10
minutes here, as did num_cpus=0.9. `actor_plan` therefore leaves one CPU of every node
unreserved for those tasks and shares the rest among the node's actors (2 actors of 0.5 CPU
on that node, each running 1 thread), which is what map_batches uses by default.

Faults: Ray restarts a dead actor and retries its batch; the outputs of a finished run hold
every row once (tests/test_ray.py). A model that cannot run on an actor's machine (a pickle
made for CPU features it lacks, a library whose weights file is missing) fails the job with
the hobbit error raised in the actor's constructor."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hobbit.errors import ConfigError, MissingDependencyError, import_optional
from hobbit.runtime.rows import Columns, column_map, run_rows, worker_threads
from hobbit.workers import worker_model


def _ray() -> Any:
    return import_optional("ray", lambda exc: MissingDependencyError(
        f"hobbit.ray needs Ray Data ({exc}): pip install 'hobbit[ray]'"))


class Predictor:
    """A callable class for `Dataset.map_batches` (run as an actor pool): loads the model once
    per actor and adds its outputs to each batch as columns.

    `model`: a compiled hobbit model, an exported library's folder or a model file (see the
    module docstring); `inputs`: the column of the model's one input (a str), or {input name:
    column}; default: columns named as the inputs. `outputs` likewise names the output
    columns (default: the output names). `threads`: threads per inference (default: the CPUs
    Ray granted the actor, at least 1)."""

    def __init__(self, model: Any, inputs: Columns = None, outputs: Columns = None, threads: int | None = None):
        granted = _ray().get_runtime_context().get_assigned_resources().get("CPU")
        self.threads = worker_threads(granted, threads)
        self.model = worker_model(model, self.threads)
        self._inputs = column_map(inputs, [arg.name for arg in self.model.get_inputs()], "inputs")
        self._outputs = column_map(outputs, list(self.model.output_names), "outputs")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {name: _column(batch, column) for name, column in self._inputs.items()}
        results = run_rows(self.model, feeds)
        out = dict(batch)
        out.update({column: value for column, value in zip(self._outputs.values(), results)})
        return out


def _column(batch: dict[str, np.ndarray], column: str) -> np.ndarray:
    if column not in batch:
        raise ConfigError(f"the batch has no column '{column}' (its columns: {sorted(batch)}); name the model's "
                          f"input columns with inputs=")
    return np.ascontiguousarray(batch[column])


@dataclass(frozen=True)
class ActorPlan:
    """How many actors, the CPUs each reserves from Ray (fewer than it runs threads on: see
    the module docstring) and the threads each runs."""

    actors: int
    num_cpus: float
    threads: int


def actor_plan(cpus_per_actor: int = 1, actors: int | None = None,
               node_cpus: list[float] | None = None) -> ActorPlan:
    """Actors of `cpus_per_actor` threads over the CPUs of the cluster's nodes (`node_cpus`,
    default Ray's alive nodes), one CPU of every node left unreserved for Ray Data's tasks:
    one free CPU in the whole cluster is not enough, as on two 1-CPU nodes each actor's half
    CPU leaves no node a whole one and the job stands still (measured here). Each node holds
    as many actors as its CPUs take threads; `actors` overrides the count."""
    if isinstance(cpus_per_actor, bool) or not isinstance(cpus_per_actor, int) or cpus_per_actor < 1:
        raise ConfigError(f"cpus_per_actor must be a positive integer, got {cpus_per_actor!r}")
    if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
        raise ConfigError(f"actors must be a positive integer or None, got {actors!r}")
    cpus = node_cpus if node_cpus is not None else _alive_node_cpus()
    per_node = [max(1, math.floor(c / cpus_per_actor)) for c in cpus]
    share = min(min(float(cpus_per_actor), max(0.0, (c - 1) / n)) for c, n in zip(cpus, per_node))
    return ActorPlan(actors or sum(per_node), math.floor(share * 1000) / 1000, cpus_per_actor)


def _alive_node_cpus() -> list[float]:
    return [float(node["Resources"].get("CPU", 0)) for node in _ray().nodes()
            if node.get("Alive") and node["Resources"].get("CPU", 0) > 0] or [1.0]


def map_batches(dataset: Any, model: Any, *, inputs: Columns = None, outputs: Columns = None,
                cpus_per_actor: int = 1, actors: int | None = None, batch_size: int = 32,
                num_gpus: float | None = None, **options: Any) -> Any:
    """`dataset.map_batches` with a Predictor actor pool sized by actor_plan: the model's
    outputs added as columns. For the best code, compile the model with
    threads=cpus_per_actor (code built for more threads runs correctly on fewer, a little
    slower). A GPU model gets one GPU per actor unless `num_gpus` says otherwise; `options`
    go to map_batches as they are; the actors are spread over the nodes (Ray's SPREAD) unless
    they name another scheduling_strategy."""
    plan = actor_plan(cpus_per_actor, actors)
    options.setdefault("scheduling_strategy", "SPREAD")
    if num_gpus is None:
        num_gpus = 1 if type(model).__name__ == "GpuModel" else 0
    return dataset.map_batches(Predictor, fn_constructor_kwargs={"model": model, "inputs": inputs, "outputs": outputs,
                                                                  "threads": plan.threads},
                               concurrency=plan.actors, num_cpus=plan.num_cpus, num_gpus=num_gpus,
                               batch_size=batch_size, batch_format="numpy", **options)
