"""Keras models for the whole-model parity tests, with random weights that keep every
activation near unit scale, and the files TensorFlow writes for them.

A network with `weights=None` has BatchNormalization statistics of 0 and 1: its
activations grow or vanish layer by layer until the logits are all zeros, saturated or
NaN, and a comparison of such outputs proves nothing. So each BatchNormalization's
moving mean and variance are set to the statistics of its actual input on a calibration
batch of smooth random images (`calibrate`), and the convolutions of a network without
BatchNorm get He-scaled kernels (`he_scale`). Nothing is downloaded: every application
is built with `weights=None`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

INPUT_NAME = "image"
CLASSES = 10
CALIBRATION_BATCH = 32


def smooth_images(count: int, size: int, seed: int, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """`count` NHWC images of low-pass filtered noise (a Gaussian in frequency space, a
    blob scale of about size/8): natural images are smooth, and white noise would make
    every convolution see an input no trained network ever meets. Each channel is scaled
    to `mean` and `std`."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((count, size, size, 3))
    freq = np.fft.fftfreq(size)
    gain = np.exp(-(freq[:, None] ** 2 + freq[None, :] ** 2) / (2 * (1 / 8) ** 2))
    smooth = np.real(np.fft.ifft2(np.fft.fft2(noise, axes=(1, 2)) * gain[None, :, :, None], axes=(1, 2)))
    smooth = (smooth - smooth.mean(axis=(1, 2), keepdims=True)) / smooth.std(axis=(1, 2), keepdims=True)
    return (mean + std * smooth).astype(np.float32)


def _layers(model: keras.Model) -> list[keras.layers.Layer]:
    """Every layer, nested models' included, in the order they were built."""
    return [layer for layer in model._flatten_layers(include_self=False)]


def calibrate(model: keras.Model, images: np.ndarray, seed: int) -> None:
    """Give each BatchNormalization a random scale and shift, then set its moving statistics
    to the batch statistics of its input.

    One pass does it: in training mode a BatchNormalization normalises with the batch's
    own statistics, so the input each one sees then is exactly what it sees in inference
    once its moving statistics are those statistics. Dropout would break that, so its rate
    is 0 during the pass."""
    rng = np.random.default_rng(seed)
    norms = [layer for layer in _layers(model) if isinstance(layer, keras.layers.BatchNormalization)]
    if not norms:
        return
    for norm in norms:
        channels = norm.gamma.shape[0]
        norm.gamma.assign(rng.uniform(0.8, 1.2, channels).astype(np.float32))
        norm.beta.assign(rng.normal(0.0, 0.2, channels).astype(np.float32))
    dropouts = {layer: layer.rate for layer in _layers(model) if isinstance(layer, keras.layers.Dropout)}
    for layer in dropouts:
        layer.rate = 0.0
    probe = keras.Model(model.inputs, [norm.input for norm in norms])
    seen = probe([images], training=True)
    for layer, rate in dropouts.items():
        layer.rate = rate
    for norm, value in zip(norms, seen):
        axes = tuple(a for a in range(len(value.shape)) if a != norm.axis % len(value.shape))
        norm.moving_mean.assign(np.mean(value, axis=axes))
        norm.moving_variance.assign(np.var(value, axis=axes))


def he_scale(model: keras.Model, seed: int) -> None:
    """Redraw every convolution and dense kernel from He's normal distribution (std
    sqrt(2 / fan_in)), which keeps a ReLU network's activations at the scale of its input
    without BatchNormalization; Keras's default Glorot kernels halve the variance at every
    layer, and VGG16's thirteen would leave logits near 1e-2."""
    rng = np.random.default_rng(seed)
    for layer in _layers(model):
        if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense)):
            shape = tuple(layer.kernel.shape)
            fan_in = int(np.prod(shape[:-1]))
            layer.kernel.assign(rng.normal(0.0, np.sqrt(2.0 / fan_in), shape).astype(np.float32))


def _image_input(size: int) -> keras.KerasTensor:
    return keras.Input((size, size, 3), name=INPUT_NAME)


def small_cnn(size: int) -> keras.Model:
    """What the applications lack: Flatten + Dense on a 4-D conv output (the flattening
    order is NHWC's, which a layout change must honour), ReLU6, a channel Concatenate, a
    softmax head."""
    image = _image_input(size)
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(image)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU(6.0)(x)
    branch = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    branch = keras.layers.BatchNormalization()(branch)
    x = keras.layers.Concatenate()([x, keras.layers.Activation("relu")(branch)])
    x = keras.layers.Conv2D(8, 1)(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    x = keras.layers.Dense(CLASSES)(x)
    return keras.Model(image, keras.layers.Softmax()(x * 4.0), name="small_cnn")


def _application(build: Callable[..., keras.Model], **options: object) -> Callable[[int], keras.Model]:
    def make(size: int) -> keras.Model:
        return build(weights=None, input_tensor=_image_input(size), **options)
    return make


def _classifier(build: Callable[..., keras.Model]) -> Callable[[int], keras.Model]:
    return _application(build, classes=CLASSES, classifier_activation=None)


@dataclass(frozen=True)
class Recipe:
    """How to build one test model: its builder, input size (each application's minimum,
    32, keeps compiles fast), the range its input images take, and how its random weights
    are made sane."""

    build: Callable[[int], keras.Model]
    size: int = 32
    image_mean: float = 0.0
    image_std: float = 1.0
    he: bool = False


# EfficientNet and ConvNeXt carry their own preprocessing (a rescale of 0..255 pixels).
RECIPES: dict[str, Recipe] = {
    "MobileNetV2": Recipe(_classifier(keras.applications.MobileNetV2)),
    "ResNet50": Recipe(_classifier(keras.applications.ResNet50)),
    "VGG16": Recipe(_application(keras.applications.VGG16, include_top=False, pooling="avg"), he=True),
    "DenseNet121": Recipe(_classifier(keras.applications.DenseNet121)),
    "EfficientNetB0": Recipe(_classifier(keras.applications.EfficientNetB0), size=64, image_mean=127.5, image_std=60.0),
    "ConvNeXtTiny": Recipe(_classifier(keras.applications.ConvNeXtTiny), image_mean=127.5, image_std=60.0),
    "small_cnn": Recipe(small_cnn, he=True),
}


def build(name: str, seed: int = 0) -> tuple[keras.Model, np.ndarray]:
    """The model `name` with calibrated random weights, and its calibration images."""
    recipe = RECIPES[name]
    keras.utils.set_random_seed(seed)
    model = recipe.build(recipe.size)
    if recipe.he:
        he_scale(model, seed)
    images = smooth_images(CALIBRATION_BATCH, recipe.size, seed, recipe.image_mean, recipe.image_std)
    calibrate(model, images, seed)
    return model, images


def sample_image(name: str, seed: int = 1) -> np.ndarray:
    """One image for `name` that is not among its calibration images."""
    recipe = RECIPES[name]
    return smooth_images(1, recipe.size, 1000 + seed, recipe.image_mean, recipe.image_std)


# -- the four formats ---------------------------------------------------------------------
def write_saved_model(model: keras.Model, path: Path) -> Path:
    model.export(str(path), verbose=False)
    return path


def write_frozen_graph(model: keras.Model, path: Path) -> Path:
    """A frozen GraphDef: the model traced as one concrete function of a fixed input
    signature, its variables turned into constants."""
    size = model.inputs[0].shape[1]
    function = tf.function(lambda image: model(image, training=False))
    concrete = function.get_concrete_function(tf.TensorSpec((None, size, size, 3), tf.float32, name=INPUT_NAME))
    frozen = convert_variables_to_constants_v2(concrete)
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


def write_keras(model: keras.Model, path: Path) -> Path:
    model.save(str(path))
    return path


def write_tflite(saved_model: Path, path: Path) -> Path:
    """A float32 flatbuffer from TF's own converter, no optimisations. It converts the
    SavedModel already written: TFLiteConverter.from_keras_model would export the same
    SavedModel again first, a third of the whole conversion's time."""
    path.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved_model)).convert())
    return path



def run_tflite(path: Path, image: np.ndarray) -> np.ndarray:
    """TFLite's own interpreter on `image`: the reference for the .tflite file."""
    interpreter = tf.lite.Interpreter(model_path=str(path))
    (detail,) = interpreter.get_input_details()
    if tuple(detail["shape"]) != image.shape:
        interpreter.resize_tensor_input(detail["index"], image.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(detail["index"], image)
    interpreter.invoke()
    (output,) = interpreter.get_output_details()
    return interpreter.get_tensor(output["index"]).copy()


@dataclass(frozen=True)
class SavedApp:
    """One model written in every format, with its test image and TensorFlow's outputs on
    it (Keras's own, and TFLite's interpreter's for the .tflite file)."""

    name: str
    paths: dict[str, Path]
    image: np.ndarray
    expected: np.ndarray
    expected_tflite: np.ndarray

    def reference(self, fmt: str) -> np.ndarray:
        return self.expected_tflite if fmt == "tflite" else self.expected


def save_app(name: str, directory: Path) -> SavedApp:
    """Build `name`, write its four files under `directory` and compute TF's outputs."""
    model, _ = build(name)
    directory.mkdir(parents=True, exist_ok=True)
    saved_model = write_saved_model(model, directory / "saved_model")
    paths = {"savedmodel": saved_model, "graphdef": write_frozen_graph(model, directory / "frozen.pb"),
             "keras": write_keras(model, directory / "model.keras"),
             "tflite": write_tflite(saved_model, directory / "model.tflite")}
    image = sample_image(name)
    expected = np.asarray(model([image], training=False))
    return SavedApp(name, paths, image, expected, run_tflite(paths["tflite"], image))
