"""TensorFlow op converters by family; importing this package fills the converter table."""

from hobbit.frontend.tf.tf_ops import array, blocks, image, math, nn, padding, slicing  # noqa: F401
