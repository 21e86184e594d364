"""run_rows: a block of any number of rows through a model of a fixed batch (sliced, the last
slice padded) or of a symbolic one (as it is); and the worker's thread count and columns."""

from __future__ import annotations

import numpy as np
import pytest

import hobbit
from hobbit.errors import ConfigError, InputError
from hobbit.runtime.rows import column_map, run_rows, worker_threads
from tests.helpers import rand, run_ort
from tests.runtime.test_batching import _cnn


@pytest.mark.parametrize("batch,rows", [(1, 5), (4, 10), (4, 4), (3, 1)])
def test_a_fixed_batch_model_runs_any_number_of_rows(batch: int, rows: int) -> None:
    model = _cnn()
    m = hobbit.compile(model, input_shapes={"x": (batch, 3, 6, 6)}, threads=1, cache=False)
    x = rand(rows, 3, 6, 6, seed=rows)
    got, = run_rows(m, {"x": x})
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_a_symbolic_batch_model_takes_the_block_as_it_is() -> None:
    model = _cnn()
    m = hobbit.compile(model, threads=1, cache=False)
    x = rand(7, 3, 6, 6)
    got, = run_rows(m, {"x": x})
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_inputs_with_different_row_counts_are_refused() -> None:
    from tests.runtime.test_api import _symbolic
    m = hobbit.compile(_symbolic(), dynamic_shapes=False, cache=False)
    with pytest.raises(InputError, match="same number of rows"):
        run_rows(m, {"x": rand(3, 2, 3), "b": np.ones(2, bool)})


def test_a_model_whose_output_drops_the_batch_cannot_be_cut() -> None:
    from onnx import helper
    from tests.helpers import make_model
    model = make_model([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], {"x": rand(2, 3)}, ["y"])
    m = hobbit.compile(model, cache=False)
    with pytest.raises(InputError, match="takes 2 row.*'y'"):
        run_rows(m, {"x": rand(5, 3)})


def test_worker_threads_follow_the_grant() -> None:
    assert worker_threads(2.0) == 2 and worker_threads(0.5) == 1 and worker_threads(3.75) == 3
    assert worker_threads(0.5, 1) == 1 and worker_threads(3.75, 4) == 4 and worker_threads(1.0, 4) == 1
    with pytest.raises(ConfigError, match="positive integer"):
        worker_threads(1.0, 0)


def test_column_maps() -> None:
    assert column_map(None, ["a", "b"], "inputs") == {"a": "a", "b": "b"}
    assert column_map("img", ["x"], "inputs") == {"x": "img"}
    assert column_map({"b": "B"}, ["a", "b"], "outputs") == {"a": "a", "b": "B"}
    with pytest.raises(ConfigError, match="has 2 inputs"):
        column_map("img", ["a", "b"], "inputs")
    with pytest.raises(ConfigError, match="no output named 'c'"):
        column_map({"c": "C"}, ["a"], "outputs")
