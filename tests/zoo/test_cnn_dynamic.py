"""A fully convolutional CNN with run-time image sizes (issue 28): SqueezeNet 1.1 from the zoo
with its input's height and width made symbolic, compiled ONCE for 64..320 pixels each way,
and compared with onnxruntime at three sizes (square, oblong, the bound).

Every kernel on its path follows run-time height and width: the strided stem conv, the
MaxPool(3, 2, ceil_mode=1) between the Fire modules, their 1x1 and 3x3 convs and the Concat
of the two expand branches along the channels, the classifier conv, and the global average
pool (a mean over H and W that divides by the run-time count) before the Flatten. A silent
fall back to one compile per shape fails the test (the reason is in the message).

Tolerance as the static zoo tier's for SqueezeNet (rtol 1e-4, atol 1e-4 on the logits)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hobbit
from hobbit.passes import DEFAULT_PIPELINE
from hobbit.zoo import squeezenet1_1
from tests.helpers import run_ort

pytestmark = pytest.mark.slow

BOUNDS = {"height": (64, 320), "width": (64, 320)}
SIZES = [(224, 224), (160, 240), (320, 320)]


def symbolic_hw(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its input's dims 2 and 3 named "height" and "width" (and the shapes
    recorded for the fixed size dropped)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for axis, name in ((2, "height"), (3, "width")):
        dims[axis].Clear()
        dims[axis].dim_param = name
    del model.graph.value_info[:]
    return model


@pytest.mark.parametrize("passes", [None, [p for p in DEFAULT_PIPELINE if p != "winograd"]],
                         ids=["default", "no-winograd"])
def test_squeezenet_one_module_at_three_sizes(passes: list[str] | None) -> None:
    """With the default passes (3x3 convs as Winograd convs where they pay) and without
    Winograd (every conv through the GEMM, im2col and direct kernels)."""
    model = symbolic_hw(squeezenet1_1())
    compiled = hobbit.compile(model, dynamic_shapes=BOUNDS, cache=False, passes=passes)
    assert type(compiled).__name__ == "DynamicModel", getattr(compiled, "reason", None)
    name = model.graph.input[0].name
    for h, w in SIZES:
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        got = compiled.run({name: x})
        want = run_ort(model, {name: x})
        assert len(got) == len(want) == 1
        assert got[0].shape == want[0].shape == (1, 1000)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4, err_msg=f"at {h}x{w}")
