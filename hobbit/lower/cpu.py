"""The CPU backend's kernel table, filled: importing this module imports every
hobbit/lower module that registers kernels in CPU (hobbit/emit/table.py)."""

from hobbit.lower import col2im, conv, convnd, expand_depthwise, gridsample, linalg, matmul, norm  # noqa: F401
from hobbit.lower import int8_conv, int8_matmul, int8_pool  # noqa: F401
from hobbit.lower import bounded  # noqa: F401
from hobbit.lower import divisor  # noqa: F401
from hobbit.lower import nms  # noqa: F401
from hobbit.lower import elementwise, pool, positional, reduce, resize, rnn, scatter, tensor, winograd  # noqa: F401
from hobbit.lower import selection  # noqa: F401
from hobbit.lower import unique  # noqa: F401
from hobbit.lower import roialign  # noqa: F401
from hobbit.lower import loop  # noqa: F401
from hobbit.lower.kernel import CPU

__all__ = ["CPU"]
