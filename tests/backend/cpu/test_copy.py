"""Strided copies (hobbit.backend.cpu.copy): a transpose that reads its input with a stride
innermost is copied in tiles, and every permutation, dtype and ragged edge still equals numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.backend.cpu.copy import _tiled_dim
from tests.helpers import make_model


def test_tiles_only_a_transpose_whose_strided_rows_leave_the_l1_cache():
    # NHWC -> NCHW of [1, 56, 56, 64]: out [64, 3136] after merging, reads with stride 64 innermost
    assert _tiled_dim((64, 3136), [1, 64], [3136, 1], 32, 4) == 0
    assert _tiled_dim((64, 3136), [3136, 1], [3136, 1], 32, 4) is None  # a plain copy: contiguous innermost
    assert _tiled_dim((4, 3136), [1, 4], [3136, 1], 32, 4) is None  # too few rows for a tile
    assert _tiled_dim((64, 8), [1, 64], [8, 1], 32, 4) is None  # too short a row
    # NCHW -> NHWC of [1, 64, 56, 56]: 64 strided lines a row stay in L1, so no tiles ...
    assert _tiled_dim((3136, 64), [1, 3136], [64, 1], 32, 4) is None
    # ... unless the stride is a multiple of 4 KiB, every line in one L1 set
    assert _tiled_dim((4096, 64), [1, 4096], [64, 1], 32, 4) == 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64, np.float16])
@pytest.mark.parametrize("shape,perm", [
    ((100, 37), (1, 0)), ((257, 129), (1, 0)), ((1, 33, 45, 70), (0, 2, 3, 1)), ((1, 45, 70, 33), (0, 3, 1, 2)),
    ((64, 20, 48), (2, 0, 1)), ((3, 40, 50), (0, 2, 1)), ((3, 4, 5, 6), (3, 2, 1, 0)),
    ((300, 70), (1, 0)), ((1, 40, 1024), (0, 2, 1)),
])
def test_transposes_equal_numpy(shape, perm, dtype, threads):
    x = (np.arange(int(np.prod(shape))) % 251).astype(dtype).reshape(shape)
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], {"x": x}, ["y"])
    (y,) = hobbit.compile(model, threads=threads, cache=False).run({"x": x})
    np.testing.assert_array_equal(y, np.transpose(x, perm))
