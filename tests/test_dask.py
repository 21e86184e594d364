"""hobbit.dask on a LocalCluster of 2 worker processes: the model loaded once per worker from its
machine code, 1,000 rows giving exactly the single-process outputs in order, a worker killed
mid-run replaced with every row still there once, and a model a worker cannot load failing with
the hobbit error rather than hanging."""

from __future__ import annotations

import os

import numpy as np
import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402

import hobbit  # noqa: E402
import hobbit.dask  # noqa: E402
from hobbit.bench.scaleout import environment_kept  # noqa: E402
from hobbit.errors import ArtifactError  # noqa: E402
from tests.distributed_cases import (MISSING_FEATURE, ROWS, for_a_missing_feature,  # noqa: E402, F401
                                    model, rows)


@pytest.fixture(scope="module")
def client():
    with environment_kept(), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=40) as cluster, distributed.Client(cluster) as c:
        yield c


def test_map_blocks_on_the_local_scheduler(model, rows) -> None:
    x, want = rows
    got = hobbit.dask.map_blocks(da.from_array(x, chunks=(64, 3, 6, 6)), model).compute(scheduler="threads")
    np.testing.assert_array_equal(got, want)


def test_map_blocks_on_two_worker_processes(client, model, rows) -> None:
    x, want = rows
    loaded = hobbit.dask.load_on_workers(client, model)
    got = hobbit.dask.map_blocks(da.from_array(x, chunks=(50, 3, 6, 6)), loaded).compute()
    np.testing.assert_array_equal(got, want)
    pids = client.run(lambda: os.getpid())
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()


def test_each_worker_caps_its_threads_at_nthreads(client, model) -> None:
    hobbit.dask.load_on_workers(client, model)
    caps = client.run(lambda: __import__("hobbit.runtime.cpus", fromlist=["_CAP"])._CAP)
    assert set(caps.values()) == {1}


def test_map_partitions_adds_an_output_column_in_order(client, model, rows) -> None:
    x, want = rows
    with dask.config.set({"dataframe.convert-string": False}):
        frame = dd.from_pandas(pd.DataFrame({"image": list(x), "id": np.arange(ROWS)}), npartitions=7)
        out = hobbit.dask.map_partitions(frame, model, inputs="image", outputs="logits").compute()
    assert list(out["id"]) == list(range(ROWS))
    np.testing.assert_array_equal(np.stack(list(out["logits"])), want)


def test_a_column_dask_turned_into_strings_is_a_clear_error(model, rows) -> None:
    x, _ = rows
    with dask.config.set({"dataframe.convert-string": True}):
        frame = dd.from_pandas(pd.DataFrame({"image": list(x[:10])}), npartitions=2)
        with pytest.raises(hobbit.InputError, match="not numpy arrays.*convert-string"):
            hobbit.dask.map_partitions(frame, model, inputs="image").compute(scheduler="sync")


class CrashOnce:
    """A model that kills its worker process the first time it runs anywhere (a marker file
    says it did), then runs as the model it wraps."""

    def __init__(self, model, marker: str):
        self.model, self.marker = model, marker
        self.output_names, self.outputs = model.output_names, model.outputs

    def get_inputs(self):
        return self.model.get_inputs()

    def get_outputs(self):
        return self.model.get_outputs()

    def run(self, feeds):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return self.model.run(feeds)


def test_a_worker_killed_mid_run_is_replaced_and_every_row_comes_once(client, model, rows, tmp_path) -> None:
    x, want = rows
    marker = str(tmp_path / "killed")
    loaded = hobbit.dask.load_on_workers(client, CrashOnce(model, marker))
    got = hobbit.dask.map_blocks(da.from_array(x, chunks=(100, 3, 6, 6)), loaded).compute()
    assert os.path.exists(marker)
    np.testing.assert_array_equal(got, want)
    client.wait_for_workers(2, timeout=60)


def test_a_model_for_missing_cpu_features_fails_with_the_hobbit_error(client, model) -> None:
    moved = for_a_missing_feature(model)
    with pytest.raises(Exception, match=f"TargetError|lacks: {MISSING_FEATURE}") as caught:
        hobbit.dask.load_on_workers(client, moved)
    assert MISSING_FEATURE in str(caught.value)


def test_a_library_without_its_weights_fails_with_the_hobbit_error(client, model, tmp_path) -> None:
    model.export(tmp_path / "lib", weights="file")
    next((tmp_path / "lib").glob("*.weights")).unlink()
    with pytest.raises(Exception, match="weights") as caught:
        hobbit.dask.load_on_workers(client, str(tmp_path / "lib"))
    assert isinstance(caught.value, ArtifactError) or "ArtifactError" in repr(caught.value)
