"""The op definitions; importing this package fills the op registry."""

from hobbit.ops import bitwise, elementwise, nn, norm, pool, reduce, tensor  # noqa: F401
from hobbit.ops import resize  # noqa: F401
from hobbit.ops import index  # noqa: F401
from hobbit.ops import unique  # noqa: F401
from hobbit.ops import convnd  # noqa: F401
from hobbit.ops import rnn  # noqa: F401
from hobbit.ops import gridsample  # noqa: F401
from hobbit.ops import quantize  # noqa: F401
from hobbit.ops import qlinear  # noqa: F401
from hobbit.ops import linalg  # noqa: F401
from hobbit.ops import col2im  # noqa: F401
from hobbit.ops import scatter  # noqa: F401
from hobbit.ops import expand_depthwise  # noqa: F401
from hobbit.ops import bounded  # noqa: F401
from hobbit.ops import selection  # noqa: F401
from hobbit.ops import nms  # noqa: F401
from hobbit.ops import roialign  # noqa: F401
from hobbit.ops import loop  # noqa: F401
