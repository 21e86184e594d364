"""TensorFlow op converters by family; importing this package fills the converter table."""

from hobbit.frontend.tf.tf_ops import array, image, math, nn  # noqa: F401
