"""Batch separability: does a graph treat the samples along dim 0 independently?

When it does, running batch N equals running the graph compiled for batch b over chunks
of b samples (hobbit/runtime/batching.py), so one compiled variant serves every batch
size. Two facts are combined, both required:

- per op: the registry's `per_sample` predicate (hobbit/ops/per_sample.py) for every
  node that touches a batched value; an op without one ends the analysis;
- structure: the model imported at two batch sizes gives the same nodes with the same
  wiring and attributes; each value derived from a batched input has dim 0 = k * batch
  with the same k at both sizes (a sample is a block of k whole rows) and every other dim
  equal; every other value, constants included, is identical. An attribute may differ
  only where it is the node's output shape (Reshape's target, Slice's sizes).

The inputs are graphs as imported, before passes: passes keep the computed function, and
comparing the imports is cheap next to compiling."""

from __future__ import annotations

from typing import Any

import numpy as np

from hobbit.graph.compare import same_value
from hobbit.graph.ir import Graph, Node, Value
from hobbit.graph.separation import Separation
from hobbit.ops.registry import get_op


class _Refused(Exception):
    """Internal: the first reason the graphs are not separable."""


def separation(small: Graph, small_batch: int, large: Graph, large_batch: int) -> Separation:
    """Compare the model imported at two different batch sizes (see the module docstring)."""
    if small_batch == large_batch:
        return Separation(None, "separation needs two different batch sizes")
    try:
        return Separation(_Walk(small_batch, large_batch).run(small, large))
    except _Refused as exc:
        return Separation(None, str(exc))


class _Walk:
    def __init__(self, small_batch: int, large_batch: int):
        self.sizes = (small_batch, large_batch)
        self.pairs: dict[int, Value] = {}  # id of a small-graph value -> its large-graph twin
        self.rows: dict[int, int] = {}  # id of a batched small-graph value -> rows per sample

    def run(self, small: Graph, large: Graph) -> tuple[int, ...]:
        if len(small.inputs) != len(large.inputs) or len(small.nodes) != len(large.nodes):
            raise _Refused("the graph changes with the batch size")
        for s, g in zip(small.inputs, large.inputs):
            self._pair(s, g)
            self.rows[id(s)] = self._scale(s, g)
            if self.rows[id(s)] != 1:
                raise _Refused(f"input '{s.name}' does not carry the batch on dim 0")
        for s_node, g_node in zip(small.nodes, large.nodes):
            self._node(s_node, g_node)
        if len(small.outputs) != len(large.outputs):
            raise _Refused("the outputs change with the batch size")
        rows = []
        for s, g in zip(small.outputs, large.outputs):
            self._same_value(s, g, "output")
            if id(s) not in self.rows:
                raise _Refused(f"output '{s.name}' does not depend on the batched inputs")
            rows.append(self.rows[id(s)])
        return tuple(rows)

    def _node(self, s: Node, g: Node) -> None:
        where = f"{s.op} node '{s.name}'"
        if s.op != g.op or len(s.inputs) != len(g.inputs) or len(s.outputs) != len(g.outputs):
            raise _Refused(f"{where} differs between batch sizes")
        if self._gather_by_sample(s, g, where):
            return
        batched = []
        for s_in, g_in in zip(s.inputs, g.inputs):
            if (s_in is None) != (g_in is None):
                raise _Refused(f"{where} differs between batch sizes")
            batched.append(s_in is not None and self._input(s_in, g_in, where))
        self._attrs(s, g, any(batched), where)
        if not any(batched):
            for s_out, g_out in zip(s.outputs, g.outputs):
                if s_out.shape != g_out.shape or s_out.dtype != g_out.dtype:
                    raise _Refused(f"{where} computes a value that depends on the batch size")
                self._pair(s_out, g_out)
            return
        fact = get_op(s.op).per_sample
        if fact is None:
            raise _Refused(f"{where}: {s.op} has no per-sample fact, so it may mix samples")
        if not fact(s, batched):
            raise _Refused(f"{where} mixes samples along dim 0")
        for s_out, g_out in zip(s.outputs, g.outputs):
            self._pair(s_out, g_out)
            self.rows[id(s_out)] = self._scale(s_out, g_out)

    def _gather_by_sample(self, s: Node, g: Node, where: str) -> bool:
        """A Gather along dim 0 of batched rows whose constant indices pick, for sample b, the
        rows of sample b: index[b] = index[0] + b * rows per sample, index[0] inside sample 0's
        rows. An exporter's attention mask flattened to batch * sequence and gathered back
        ([[b * S + s]]) is one; the output then carries the batch on dim 0, one row a sample."""
        if s.op != "Gather" or s.attrs.get("axis", 0) != 0 or len(s.inputs) != 2 or id(s.inputs[0]) not in self.rows:
            return False
        small, large = s.inputs[1].const, g.inputs[1].const
        if small is None or large is None or same_value(small, large):
            return False
        self._same_value(s.inputs[0], g.inputs[0], where)
        rows = self.rows[id(s.inputs[0])]
        base = small[:1]
        for index, count in ((small, self.sizes[0]), (large, self.sizes[1])):
            if index.ndim == 0 or index.shape[0] != count or index.shape[1:] != base.shape[1:]:
                return False
            steps = np.arange(count).reshape((count,) + (1,) * (index.ndim - 1)) * rows
            if not np.array_equal(index, base + steps):
                return False
        if base.min(initial=0) < 0 or base.max(initial=0) >= rows:
            return False
        self._attrs(s, g, True, where)
        self._pair(s.outputs[0], g.outputs[0])
        self.rows[id(s.outputs[0])] = self._scale(s.outputs[0], g.outputs[0])
        return True

    def _input(self, s: Value, g: Value, where: str) -> bool:
        """Whether this input is batched; a constant seen first here is paired by content."""
        if id(s) not in self.pairs:
            if s.const is None or g.const is None:
                raise _Refused(f"{where} reads a value the graph never defined")
            if not same_value(s.const, g.const):
                self._repeated_constant(s, g, where)
            self._pair(s, g)
        self._same_value(s, g, where)
        return id(s) in self.rows

    def _repeated_constant(self, s: Value, g: Value, where: str) -> None:
        """A constant that differs between the sizes only by repeating one sample's block along
        dim 0 (a buffer expanded to the batch: BERT's token types when they are no input) is
        a batched value, the same block for every sample."""
        small, large = s.const, g.const
        rows = self._scale(s, g) if small.ndim and small.shape[0] else 0
        block = small[:rows]
        if not rows or any(not same_value(c, np.concatenate([block] * (len(c) // rows))) for c in (small, large)):
            raise _Refused(f"{where} reads a constant that depends on the batch size")
        self.rows[id(s)] = rows

    def _same_value(self, s: Value, g: Value, where: str) -> None:
        if self.pairs.get(id(s)) is not g:
            raise _Refused(f"{where} is wired differently at the two batch sizes")

    def _pair(self, s: Value, g: Value) -> None:
        self.pairs[id(s)] = g

    def _scale(self, s: Value, g: Value) -> int:
        """k where dim 0 is k * batch at both sizes and every other dim is equal."""
        a, b = s.shape, g.shape
        small, large = self.sizes
        ok = (len(a) == len(b) >= 1 and a[1:] == b[1:] and s.dtype == g.dtype
              and a[0] % small == 0 and b[0] % large == 0 and a[0] // small == b[0] // large >= 1)
        if not ok:
            raise _Refused(f"value '{s.name}' is {s.type} at batch {small} but {g.type} at batch {large}: "
                           f"dim 0 does not scale with the batch")
        return a[0] // small

    def _attrs(self, s: Node, g: Node, batched: bool, where: str) -> None:
        if s.attrs.keys() != g.attrs.keys():
            raise _Refused(f"{where} has different attributes at the two batch sizes")
        for key, value in s.attrs.items():
            if same_value(value, g.attrs[key]):
                continue
            output_shape = (batched and len(s.outputs) == 1 and _dims(value) == s.outputs[0].shape
                            and _dims(g.attrs[key]) == g.outputs[0].shape)
            if not output_shape:
                raise _Refused(f"{where}: attribute '{key}' depends on the batch size")


def _dims(value: Any) -> tuple | None:
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, np.integer)) for v in value):
        return tuple(int(v) for v in value)
    return None

