"""ONNX converters, one module per op family; importing registers them."""

from hobbit.frontend.onnx_ops import elementwise, nn, norm, pool, reduce, tensor  # noqa: F401
