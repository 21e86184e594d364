"""mobilenet_v2 on the GPU backend against onnxruntime (tests/backend/gpu/zoo_cases.py); one file per model so
that xdist's --dist loadfile runs the models on different workers."""

import pytest

from tests.backend.gpu.zoo_cases import check_zoo_model


@pytest.mark.slow
def test_mobilenet_v2_emulated_matches_onnxruntime() -> None:
    check_zoo_model("mobilenet_v2")
