"""ONNX converters, one module per op family; importing registers them."""

from hobbit.frontend.onnx.ops import elementwise, nn, norm, pool, reduce, tensor  # noqa: F401
from hobbit.frontend.onnx.ops import resize  # noqa: F401
from hobbit.frontend.onnx.ops import index  # noqa: F401
from hobbit.frontend.onnx.ops import convnd  # noqa: F401
from hobbit.frontend.onnx.ops import pool_nd  # noqa: F401
from hobbit.frontend.onnx.ops import rnn  # noqa: F401
from hobbit.frontend.onnx.ops import bitwise  # noqa: F401
from hobbit.frontend.onnx.ops import gridsample  # noqa: F401
from hobbit.frontend.onnx.ops import quantize  # noqa: F401
from hobbit.frontend.onnx.ops import control  # noqa: F401
from hobbit.frontend.onnx.ops import linalg  # noqa: F401
from hobbit.frontend.onnx.ops import spectral  # noqa: F401
from hobbit.frontend.onnx.ops import sequence  # noqa: F401
from hobbit.frontend.onnx.ops import nms  # noqa: F401
from hobbit.frontend.onnx.ops import roialign  # noqa: F401
