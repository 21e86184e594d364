"""The largest tensor a model may have: no tensor larger than this machine's memory (or the
process's address-space limit) could ever be computed, so an absurd declared dimension, or a
constant folded to an absurd shape, is refused as a ModelFormatError before anything is
allocated. Every importer checks the constants it folds here (the ONNX importer its whole
graph too); the runtime asks memory_limit() before a run's allocations."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from hobbit.errors import ModelFormatError
from hobbit.graph.ir import Graph, Node, TensorType


def memory_limit() -> int:
    """Bytes of physical memory, or of the process's address-space limit (ulimit -v) when
    that is lower: no single tensor can be larger and still be computed. The limit is read
    each time (a process may lower it); the machine's memory once."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return _physical_bytes() if soft == resource.RLIM_INFINITY else min(_physical_bytes(), soft)


@lru_cache(maxsize=1)
def _physical_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fold_size(node: Node, infer: Callable[[Node], list[TensorType]]) -> None:
    """Before the importer computes a constant: refuse one that could never fit in memory
    (a ConstantOfShape or Expand to an absurd shape) instead of attempting the allocation."""
    try:
        types = infer(node)
    except Exception:  # noqa: BLE001 - an inference that needs more than types: the fold itself decides
        return
    for out, ty in zip(node.outputs, types):
        _check_size(out.name, ty, f"constant computed by node '{node.name}' ({node.op})")


def check_sizes(graph: Graph) -> None:
    """Refuse, before anything is allocated, a tensor that no run could hold (an absurd
    declared dimension, or a shape computed from one)."""
    for value in graph.inputs:
        _check_size(value.name, value.type, "graph input")
    for node in graph.nodes:
        for out in node.outputs:
            _check_size(out.name, out.type, f"output of node '{node.name}' ({node.op})")


def _check_size(name: str, ty: TensorType, where: str) -> None:
    nbytes = np.dtype(ty.dtype).itemsize
    for d in ty.shape:
        if isinstance(d, int):
            nbytes *= d  # python ints: no overflow, however absurd the dims
    limit = memory_limit()
    if nbytes > limit:
        raise ModelFormatError(f"tensor '{name}' ({where}) has shape {tuple(ty.shape)}: "
                               f"{_gib(nbytes)}, more than this machine's memory ({_gib(limit)}); "
                               "check the model's declared dimensions or input_shapes")


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 30:.4g} GiB"
