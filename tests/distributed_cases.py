"""What tests/test_ray.py and tests/test_dask.py share: the fixtures `model` (a small CNN compiled
for batch 1) and `rows` (1,000 inputs and their single-process outputs), and a pickle of the
model that no worker here can load."""

from __future__ import annotations

import numpy as np
import pytest

import hobbit
from tests.runtime.test_batching import _cnn
from tests.runtime.test_shipped import _shipped, _Wrapped

ROWS = 1000
MISSING_FEATURE = "amx-tile"


@pytest.fixture(scope="module")
def model() -> hobbit.CompiledModel:
    """The CNN compiled for one thread and a batch of 1 (its workers run 1 thread each)."""
    return hobbit.compile(_cnn(), input_shapes={"x": (1, 3, 6, 6)}, threads=1, cache=False)


@pytest.fixture(scope="module")
def rows(model: hobbit.CompiledModel) -> tuple[np.ndarray, np.ndarray]:
    """ROWS inputs and what the model gives for them one at a time in this process."""
    x = np.random.default_rng(0).standard_normal((ROWS, 3, 6, 6)).astype(np.float32)
    return x, np.concatenate([model.run({"x": x[i:i + 1]})[0] for i in range(ROWS)])


def for_a_missing_feature(model: hobbit.CompiledModel) -> _Wrapped:
    """The model's pickle with MISSING_FEATURE added to its target: unpickling it raises TargetError."""
    state = _shipped(model)
    target = state.native.target
    elsewhere = type(target)(**{**target.__dict__, "features": f"{target.features},+{MISSING_FEATURE}"})
    return _Wrapped(type(state)(state.made_by, type(state.native)(**{**state.native.__dict__, "target": elsewhere}),
                                state.code_sha256, state.weights_sha256))
