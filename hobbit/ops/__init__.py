"""The op definitions; importing this package fills the op registry."""

from hobbit.ops import elementwise, nn, norm, pool, reduce, tensor  # noqa: F401
