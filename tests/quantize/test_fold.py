"""BatchNorm folding on the ONNX graph against onnxruntime on the unfolded model."""

from __future__ import annotations

import numpy as np
import onnx

from hobbit.quantize.fold import fold_batchnorm
from hobbit.quantize.graph import OnnxGraph
from tests.helpers import run_ort
from tests.quantize.test_quantize import SHAPE, small_cnn


def test_folded_model_computes_the_same_and_has_no_batchnorm():
    """float32 products in another order: agreement to 1e-5 relative."""
    model = small_cnn()
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    assert fold_batchnorm(OnnxGraph(folded.graph)) == 2
    assert "BatchNormalization" not in [n.op_type for n in folded.graph.node]
    assert not {"bn1_g", "bn2_v"} & {t.name for t in folded.graph.initializer}
    x = {"x": np.random.default_rng(0).standard_normal((1, *SHAPE)).astype(np.float32)}
    np.testing.assert_allclose(run_ort(folded, x)[0], run_ort(model, x)[0], rtol=1e-5, atol=1e-5)
