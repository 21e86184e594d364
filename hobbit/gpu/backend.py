"""The GPU backend's kernel table, filled: importing this module imports every
hobbit/gpu module that registers kernels in GPU (hobbit/gpu/kernels.py)."""

from hobbit.gpu import conv  # noqa: F401
from hobbit.gpu import elementwise  # noqa: F401
from hobbit.gpu import matmul  # noqa: F401
from hobbit.gpu import norm  # noqa: F401
from hobbit.gpu import pool  # noqa: F401
from hobbit.gpu import reduce  # noqa: F401
from hobbit.gpu import tensor  # noqa: F401
from hobbit.gpu.kernels import GPU

__all__ = ["GPU"]
