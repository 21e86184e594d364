""".keras files read by tracing the inference call (hobbit.frontend.tf.keras): the names a
SavedModel export gives (the inputs', output_0..., a dict output's keys), several inputs and
outputs in their order, and Keras's own answers."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hobbit  # noqa: E402
from hobbit.errors import SignatureError  # noqa: E402
from hobbit.frontend.tf.keras import read_keras  # noqa: E402


def _two_inputs_two_outputs(as_dict: bool) -> keras.Model:
    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 3), name="image")
    extra = keras.Input((5,), name="extra")
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(image)
    pooled = keras.layers.GlobalAveragePooling2D()(x)
    joined = keras.layers.Concatenate()([pooled, extra])
    logits = keras.layers.Dense(3)(joined)
    scale = keras.layers.Dense(1, activation="sigmoid")(extra)
    outputs = {"zeta": logits, "alpha": scale} if as_dict else [logits, scale]
    return keras.Model({"image": image, "extra": extra} if as_dict else [image, extra], outputs)


@pytest.mark.parametrize("as_dict", [False, True], ids=["lists", "dicts"])
def test_names_and_values_are_the_exports_and_keras(tmp_path, as_dict: bool) -> None:
    model = _two_inputs_two_outputs(as_dict)
    path = tmp_path / "m.keras"
    model.save(path)
    graph = read_keras(path)
    assert [t.name for t in graph.inputs] == ["extra", "image"]  # sorted, as the SavedModel signature had them
    names = ["alpha", "zeta"] if as_dict else ["output_0", "output_1"]
    assert [t.name for t in graph.outputs] == names

    rng = np.random.default_rng(0)
    feeds = {"image": rng.standard_normal((1, 8, 8, 3)).astype(np.float32),
             "extra": rng.standard_normal((1, 5)).astype(np.float32)}
    compiled = hobbit.compile(str(path), cache=False)
    got = dict(zip(compiled.output_names, compiled.run(feeds)))
    want = model(feeds if as_dict else [feeds["image"], feeds["extra"]], training=False)
    want = {k: np.asarray(v) for k, v in want.items()} if as_dict else dict(zip(names, map(np.asarray, want)))
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_a_keras_file_has_one_signature(tmp_path) -> None:
    path = tmp_path / "m.keras"
    _two_inputs_two_outputs(False).save(path)
    with pytest.raises(SignatureError, match="no signature 'predict'; a Keras file has one: serving_default"):
        read_keras(path, "predict")
