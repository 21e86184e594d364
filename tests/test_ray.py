"""hobbit.ray on a local Ray cluster (2 CPUs) and on a two-node cluster on this machine: the
model travels as machine code, 1,000 rows give exactly the single-process outputs in order,
an actor killed mid-run is replaced with every row there once, a model an actor cannot load
fails with the hobbit error rather than hanging, and the default actor plan leaves Ray Data a
CPU (the 2-CPU deadlock of 2 one-CPU actors and a repartition)."""

from __future__ import annotations

import os

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
from ray.cluster_utils import Cluster  # noqa: E402

import hobbit  # noqa: E402
import hobbit.ray  # noqa: E402
from hobbit.errors import ConfigError  # noqa: E402
from tests.distributed_cases import (MISSING_FEATURE, ROWS, for_a_missing_feature,  # noqa: E402, F401
                                    model, rows)
from tests.runtime.test_batching import _cnn  # noqa: E402

_INIT = {"include_dashboard": False, "log_to_driver": False}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, **_INIT)
    context = ray.data.DataContext.get_current()
    order = context.execution_options.preserve_order
    context.execution_options.preserve_order = True
    yield
    context.execution_options.preserve_order = order
    ray.shutdown()


def _dataset(x: np.ndarray):
    return ray.data.from_numpy(x).rename_columns({"data": "image"}).repartition(10)


def test_the_actor_plan_leaves_ray_data_a_cpu() -> None:
    assert hobbit.ray.actor_plan(1, node_cpus=[2]) == hobbit.ray.ActorPlan(2, 0.5, 1)
    assert hobbit.ray.actor_plan(4, node_cpus=[16]) == hobbit.ray.ActorPlan(4, 3.75, 4)
    assert hobbit.ray.actor_plan(2, node_cpus=[2]) == hobbit.ray.ActorPlan(1, 1.0, 2)
    assert hobbit.ray.actor_plan(1, node_cpus=[1, 1]) == hobbit.ray.ActorPlan(2, 0.0, 1)
    assert hobbit.ray.actor_plan(2, node_cpus=[8, 4]) == hobbit.ray.ActorPlan(6, 1.5, 2)
    with pytest.raises(ConfigError, match="cpus_per_actor"):
        hobbit.ray.actor_plan(0, node_cpus=[2])


def test_map_batches_gives_the_single_process_outputs_in_order(local_ray, model, rows) -> None:
    x, want = rows
    out = hobbit.ray.map_batches(_dataset(x), model, inputs="image", outputs="logits").take_all()
    assert len(out) == ROWS
    np.testing.assert_array_equal(np.stack([r["logits"] for r in out]), want)


def test_an_actor_runs_the_threads_ray_granted(local_ray, model) -> None:
    @ray.remote(num_cpus=0.5)
    def threads_in_actor(m):
        predictor = hobbit.ray.Predictor(m)
        from hobbit.runtime import cpus
        return predictor.threads, cpus._CAP

    assert ray.get(threads_in_actor.remote(model)) == (1, 1)


class CrashOnce(hobbit.ray.Predictor):
    """Kills its actor's process at its first batch anywhere (a marker file says it did)."""

    def __init__(self, marker: str, **kwargs):
        super().__init__(**kwargs)
        self.marker = marker

    def __call__(self, batch):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return super().__call__(batch)


def test_an_actor_killed_mid_run_is_replaced_and_every_row_comes_once(local_ray, model, rows, tmp_path) -> None:
    x, want = rows
    plan = hobbit.ray.actor_plan(1)
    marker = str(tmp_path / "killed")
    out = _dataset(x).map_batches(CrashOnce, fn_constructor_kwargs={"marker": marker, "model": model,
                                                                    "inputs": "image", "outputs": "logits"},
                                  concurrency=plan.actors, num_cpus=plan.num_cpus, batch_size=32,
                                  batch_format="numpy").take_all()
    assert os.path.exists(marker) and len(out) == ROWS
    np.testing.assert_array_equal(np.stack([r["logits"] for r in out]), want)


def test_a_model_for_missing_cpu_features_fails_with_the_hobbit_error(local_ray, model, rows) -> None:
    moved = for_a_missing_feature(model)
    with pytest.raises(Exception, match="TargetError") as caught:
        hobbit.ray.map_batches(_dataset(rows[0][:64]), moved, inputs="image").take_all()
    assert f"lacks: {MISSING_FEATURE}" in str(caught.value)


def test_the_engine_benchmark_scores_every_row_through_ray(local_ray) -> None:
    from hobbit.bench import scaleout
    model = _cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    timings = scaleout.run_engines("cnn", model, ["ray"], items=40, cpus=2, batch_size=8, show=lambda t: None)
    assert [(t.engine, t.runner) for t in timings][2:] == [("ray", "hobbit"), ("ray", "onnxruntime")]
    assert ray.is_initialized()  # the harness leaves a cluster it did not start running


def test_the_benchmark_s_read_tasks_make_the_table_s_rows_in_order(local_ray) -> None:
    from hobbit.bench import scaleout
    distinct = {"a": np.arange(scaleout.DISTINCT_ROWS * 6, dtype=np.float32).reshape(-1, 2, 3),
                "b": np.arange(scaleout.DISTINCT_ROWS, dtype=np.int64)}
    made = scaleout._ray_rows(ray, distinct, 45, 8).take_batch(45, batch_format="numpy")
    want = scaleout.table_rows(distinct, 45)
    assert sorted(made) == ["a", "b"]
    for name in want:
        np.testing.assert_array_equal(made[name], want[name])


def test_a_two_node_cluster_gives_the_same_outputs(model, rows) -> None:
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, **_INIT)
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        x, want = rows
        out = hobbit.ray.map_batches(_dataset(x), model, inputs="image", outputs="logits").take_all()
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(nodes) == 2
        np.testing.assert_array_equal(np.stack([r["logits"] for r in out]), want)
    finally:
        ray.shutdown()
        cluster.shutdown()

