"""The graph pass pipeline: a named, ordered list you can print, reorder and
switch off (API: `compile(..., passes=[...])`, CLI: `--passes` / `--disable`).
Legalisation runs after it unconditionally."""

from __future__ import annotations

from typing import Callable

from hobbit.errors import HobbitError
from hobbit.graph.ir import Graph
from hobbit.passes.batchnorm import fold_batchnorm
from hobbit.passes.dce import eliminate_dead_code
from hobbit.passes.fold import fold_constants
from hobbit.passes.fuse import fuse_epilogues
from hobbit.passes.legalize import legalize
from hobbit.passes.winograd import use_winograd

PASSES: dict[str, Callable[[Graph], Graph]] = {
    "dce": eliminate_dead_code,
    "fold": fold_constants,
    "fold-batchnorm": fold_batchnorm,
    "winograd": use_winograd,
    "fuse": fuse_epilogues,
}

DEFAULT_PIPELINE: list[str] = ["dce", "fold", "fold-batchnorm", "winograd", "fuse", "dce"]


def run_pipeline(graph: Graph, pipeline: list[str] | None = None) -> Graph:
    for name in DEFAULT_PIPELINE if pipeline is None else pipeline:
        if name not in PASSES:
            raise HobbitError(f"unknown pass {name!r}; known passes: {', '.join(PASSES)}")
        graph = PASSES[name](graph)
    return legalize(eliminate_dead_code(graph))
