"""The CPU backend's kernel table, filled: importing this module imports every
hobbit/backend/cpu module that registers kernels in CPU (hobbit/backend/cpu/args.py)."""

from hobbit.backend.cpu import col2im, conv, convnd, expand_depthwise, gridsample, linalg, matmul, norm  # noqa: F401
from hobbit.backend.cpu import int8_conv, int8_matmul, int8_pool  # noqa: F401
from hobbit.backend.cpu import bounded  # noqa: F401
from hobbit.backend.cpu import divisor  # noqa: F401
from hobbit.backend.cpu import nms  # noqa: F401
from hobbit.backend.cpu import elementwise  # noqa: F401
from hobbit.backend.cpu import pool, positional, reduce, resize, rnn, scatter, tensor, winograd  # noqa: F401
from hobbit.backend.cpu import selection  # noqa: F401
from hobbit.backend.cpu import unique  # noqa: F401
from hobbit.backend.cpu import roialign  # noqa: F401
from hobbit.backend.cpu import loop  # noqa: F401
from hobbit.backend.cpu.args import CPU

__all__ = ["CPU"]
