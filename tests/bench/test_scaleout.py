"""`hobbit bench --engine`: the harness scores every row through each runner (checked by the
row counts it asserts and by Dask's results), and the table's ratios are the ones its rows
give. Ray's runs are exercised in tests/test_ray.py, beside its own cluster."""

from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

pytest.importorskip("distributed")
pytest.importorskip("onnxruntime")

from hobbit.bench import scaleout  # noqa: E402
from hobbit.cli.bench import parse_engines  # noqa: E402
from tests.runtime.test_batching import _cnn  # noqa: E402


def test_parse_engines() -> None:
    assert parse_engines("dask, ray,dask") == ["dask", "ray"]
    with pytest.raises(argparse.ArgumentTypeError, match="ray, dask"):
        parse_engines("spark")


def test_the_dask_harness_scores_every_row_in_both_runners() -> None:
    """(And leaves the process's environment as it found it: Dask's nanny does not.)"""
    before = dict(os.environ)
    model = _cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    shown = []
    timings = scaleout.run_engines("cnn", model, ["dask"], items=40, cpus=2, batch_size=8, show=shown.append,
                                   rounds=2)
    assert [(t.engine, t.runner) for t in timings] == [("one process", "hobbit"), ("one process", "onnxruntime"),
                                                        ("dask", "hobbit"), ("dask", "onnxruntime")] * 2
    assert shown == timings and all(t.rows == 40 and t.seconds > 0 for t in timings)
    assert dict(os.environ) == before


def test_the_table_gives_rates_and_ratios() -> None:
    timings = [scaleout.EngineTiming("m", "one process", "hobbit", 100, 1.0, 2),
               scaleout.EngineTiming("m", "one process", "onnxruntime", 100, 2.0, 2),
               scaleout.EngineTiming("m", "dask", "hobbit", 100, 1.25, 2),
               scaleout.EngineTiming("m", "dask", "onnxruntime", 100, 2.5, 2)]
    table = scaleout.markdown(timings).splitlines()
    assert table[2] == "| m | one process | hobbit | 100.0 | — | 50.0 | 1.00 | 0.50 |"
    assert table[4] == "| m | dask | hobbit | 80.0 | — | 40.0 | 0.80 | 0.50 |"
    assert table[5].endswith("| 0.80 | — |")


def test_rounds_give_the_median_and_the_range() -> None:
    timings = [scaleout.EngineTiming("m", engine, runner, 100, seconds, 2)
               for engine, runner, seconds in [("one process", "hobbit", 1.0), ("one process", "onnxruntime", 2.0),
                                               ("one process", "hobbit", 2.0), ("one process", "onnxruntime", 2.0),
                                               ("one process", "hobbit", 0.5), ("one process", "onnxruntime", 1.0)]]
    table = scaleout.markdown(timings).splitlines()
    assert len(table) == 4
    assert table[2] == "| m | one process | hobbit | 100.0 | 50.0-200.0 | 50.0 | 1.00 | 0.50 |"
    assert table[3] == "| m | one process | onnxruntime | 50.0 | 50.0-100.0 | 25.0 | 1.00 | — |"


def test_rows_cycle_through_the_distinct_ones() -> None:
    distinct = {"x": np.arange(scaleout.DISTINCT_ROWS * 2).reshape(scaleout.DISTINCT_ROWS, 2)}
    table = scaleout.table_rows(distinct, 20)["x"]
    assert table.shape == (20, 2) and np.array_equal(table[scaleout.DISTINCT_ROWS], distinct["x"][0])
