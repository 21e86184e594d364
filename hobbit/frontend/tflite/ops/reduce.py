"""TFLite pooling and reductions as TensorFlow ops: 2-D average and max pooling (with their
fused activation), the reducers with keep_dims, arg max/min and cumulative sums."""

from __future__ import annotations

from hobbit.frontend.tf.graph import TensorRef
from hobbit.frontend.tflite import schema as S
from hobbit.frontend.tflite.emit import OpContext
from hobbit.frontend.tflite.ops.common import activation, padding, strides
from hobbit.frontend.tflite.ops.table import translates


_POOLS = {"AVERAGE_POOL_2D": "AvgPool", "MAX_POOL_2D": "MaxPool"}


@translates(*_POOLS)
def pool_2d(c: OpContext) -> list[TensorRef]:
    O = S.Pool2DOptions
    y = c.node(
        _POOLS[c.op.builtin],
        [c.input(0)],
        T=c.dtype(0),
        ksize=[1, c.int_option(O.FILTER_HEIGHT), c.int_option(O.FILTER_WIDTH), 1],
        strides=strides(c, O.STRIDE_H, O.STRIDE_W),
        padding=padding(c, O.PADDING),
        data_format="NHWC",
    )
    return [activation(c, y, c.enum_option(O.ACTIVATION))]


_REDUCERS = {
    "MEAN": "Mean", "SUM": "Sum", "REDUCE_MAX": "Max", "REDUCE_MIN": "Min",
    "REDUCE_PROD": "Prod", "REDUCE_ANY": "Any", "REDUCE_ALL": "All",
}


@translates(*_REDUCERS)
def reduce(c: OpContext) -> list[TensorRef]:
    op = _REDUCERS[c.op.builtin]
    attrs = {"keep_dims": c.bool_option(S.ReducerOptions.KEEP_DIMS), "Tidx": c.dtype(1)}
    if op not in ("Any", "All"):
        attrs["T"] = c.dtype(0)
    return [c.node(op, [c.input(0), c.input(1)], **attrs)]


@translates("ARG_MAX", "ARG_MIN")
def arg_max_min(c: OpContext) -> list[TensorRef]:
    op = "ArgMax" if c.op.builtin == "ARG_MAX" else "ArgMin"
    return [
        c.node(op, [c.input(0), c.input(1)], T=c.dtype(0), Tidx=c.dtype(1), output_type=c.output(0).dtype)
    ]


@translates("CUMSUM")
def cumsum(c: OpContext) -> list[TensorRef]:
    O = S.CumsumOptions
    return [
        c.node(
            "Cumsum", [c.input(0), c.input(1)], T=c.dtype(0), Tidx=c.dtype(1),
            exclusive=c.bool_option(O.EXCLUSIVE), reverse=c.bool_option(O.REVERSE),
        )
    ]
