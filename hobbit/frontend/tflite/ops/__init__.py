"""TFLite builtins translated into TensorFlow ops with tf.raw_ops semantics, so TFLite
models share the TensorFlow converters. Each translation reads one operator (OpContext)
and returns the node outputs that hold its output tensors.

TFLite differs from TensorFlow mostly in three ways, undone here: fused activations
(a separate node after the op), filter layouts (OHWI, [1,H,W,C*M] for depthwise; TF
wants HWIO, [H,W,C,M]) and attributes kept as operands or options the other way round.
A builtin without a translation becomes a node of op "TFLite:<NAME>", which the
converter reports with the model's other unsupported ops.

One module per op family: conv (convolutions, dense layers), elementwise, reduce (pooling
and reductions), shapes (shapes and data movement); common holds what they share, and
table the registry they fill (TRANSLATIONS) and translate(). Importing this package
imports every family, so the table is complete before the reader uses it."""

from hobbit.frontend.tflite.ops import conv, elementwise, reduce, shapes  # noqa: F401  (fill TRANSLATIONS)
