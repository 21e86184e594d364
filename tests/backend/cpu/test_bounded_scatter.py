"""The BoundedScatterElements kernel against the op's numpy reference (which reuses
ScatterElements' own), on one-node graphs whose inputs, extents included, are graph inputs:
only the valid index rows write, indices are checked against the data's run-time extent."""

from __future__ import annotations

import numpy as np
import pytest

import hobbit
from hobbit.errors import RunError
from hobbit.frontend.common.source import Source
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.ops.registry import get_op


class _Scatter(Source):
    format = "graph"

    def __init__(self, arrays: dict[str, np.ndarray], attrs: dict):
        self.model, self.arrays, self.attrs = None, arrays, attrs

    def import_graph(self, input_shapes=None, input_values=None) -> Graph:
        ins = [Value(name, TensorType(a.dtype, tuple(a.shape))) for name, a in self.arrays.items()]
        opdef = get_op("BoundedScatterElements")
        node = Node("BoundedScatterElements", "scatter", ins, [Value("y")], {**opdef.attrs, **self.attrs})
        node.outputs[0].type = opdef.infer(node)[0]
        return Graph("one_node", ins, node.outputs, [node])


def _feeds(rng, axis: int, rows: int, extent: int) -> dict[str, np.ndarray]:
    data = rng.standard_normal((6, 5)).astype(np.float32)
    indices = rng.integers(-extent, extent, size=(4, 5) if axis == 1 else (4, 3))
    return {"data": data, "indices": indices, "updates": rng.standard_normal(indices.shape).astype(np.float32),
            "count": np.array(rows, np.int64), "dim": np.array(extent, np.int64)}


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_matches_the_reference(axis, reduction):
    rng = np.random.default_rng(axis * 3 + len(reduction))
    attrs = {"axis": axis, "reduction": reduction}
    compiled = hobbit.compile(_Scatter(_feeds(rng, axis, 4, 5), attrs), threads=1, cache=False)
    reference = get_op("BoundedScatterElements").reference
    for rows, extent in ((0, 5), (2, 3), (4, 5), (4, 1)):
        feeds = _feeds(rng, axis, rows, extent)
        want = reference(list(feeds.values()), attrs)[0]
        np.testing.assert_array_equal(compiled.run(feeds)[0], want)


def test_an_index_past_the_extent_is_a_run_error():
    rng = np.random.default_rng(0)
    feeds = _feeds(rng, 0, 4, 4)
    compiled = hobbit.compile(_Scatter(feeds, {"axis": 0}), threads=1, cache=False)
    feeds["indices"][3, 0] = 4  # inside the bound of 6 rows, past the extent of 4
    with pytest.raises(RunError, match="index"):
        compiled.run(feeds)
    feeds["count"] = np.array(3, np.int64)  # the bad index is in a padding row: never read
    np.testing.assert_array_equal(compiled.run(feeds)[0],
                                  get_op("BoundedScatterElements").reference(list(feeds.values()), {"axis": 0,
                                                                             "reduction": "none"})[0])


def test_no_row_of_data_makes_every_index_a_run_error():
    """A data extent of 0 leaves no valid position: reported, and nothing written outside the bound."""
    rng = np.random.default_rng(1)
    feeds = _feeds(rng, 0, 4, 5)
    compiled = hobbit.compile(_Scatter(feeds, {"axis": 0}), threads=1, cache=False)
    feeds["dim"] = np.array(0, np.int64)
    with pytest.raises(RunError, match="index"):
        compiled.run(feeds)
