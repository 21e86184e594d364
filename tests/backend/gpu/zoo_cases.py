"""The zoo models on the GPU backend: compiled for sm_90 (ptxas, no spills) and gfx942 (linked,
one descriptor per kernel), their kernels emulated on the CPU and compared with onnxruntime.

Tolerances as the CPU zoo parity (tests/zoo/test_zoo_parity.py): rtol 1e-3, atol 1e-4 on the
1x1000 logits of a random N(0, 1) input; the GPU kernels sum in another order than either CPU
engine. The threads of each phase run in a shuffled order, watched for races."""

from __future__ import annotations

import numpy as np

from hobbit import zoo
from tests.backend.gpu.gpu_cases import compiled_for
from tests.helpers import rand, run_ort


def check_zoo_model(name: str) -> None:
    model = zoo.build(name)
    x = rand(1, 3, 224, 224, seed=11)
    expected = run_ort(model, {"input": x})[0]
    compiled_for(model, "rocm:gfx942")
    got = compiled_for(model, "cuda:sm_90").emulate({"input": x}, order=3)[0]
    assert got.shape == (1, 1000) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)
