"""The GPU backend's kernel table, filled: importing this module imports every
hobbit/backend/gpu module that registers kernels in GPU (hobbit/backend/gpu/args.py)."""

from hobbit.backend.gpu import conv  # noqa: F401
from hobbit.backend.gpu import elementwise  # noqa: F401
from hobbit.backend.gpu import matmul  # noqa: F401
from hobbit.backend.gpu import norm  # noqa: F401
from hobbit.backend.gpu import pool  # noqa: F401
from hobbit.backend.gpu import reduce  # noqa: F401
from hobbit.backend.gpu import tensor  # noqa: F401
from hobbit.backend.gpu.args import GPU

__all__ = ["GPU"]
