"""Every TensorFlow converter over its attribute variants, against TensorFlow: each test
freezes a tiny tf.function, imports it, compiles it with hobbit's pipeline and compares
the outputs with TensorFlow's on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hobbit.frontend.tf.convert import import_tf
from tests.frontend.tf.conftest import check_against_tf, compile_graph, freeze

RNG = np.random.default_rng(0)


def rand(*shape: int, low: float | None = None) -> np.ndarray:
    data = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(data) + low if low is not None else data


def const(*shape: int) -> tf.Tensor:
    return tf.constant(rand(*shape))


# -- convolutions ---------------------------------------------------------------------

CONV_CASES = [  # (input NHWC, filter HWIO, strides, padding, dilations)
    ((1, 7, 7, 3), (3, 3, 3, 4), 1, "SAME", 1),
    ((2, 8, 8, 3), (3, 3, 3, 5), 2, "SAME", 1),
    ((1, 9, 7, 2), (3, 2, 2, 3), (2, 1), "VALID", 1),
    ((1, 8, 8, 3), (3, 3, 3, 4), 1, "SAME", 2),
    ((1, 9, 9, 2), (5, 5, 2, 3), 3, "SAME", 1),
    ((1, 7, 7, 3), (3, 3, 3, 4), 1, [[0, 0], [1, 2], [0, 1], [0, 0]], 1),
    ((1, 6, 6, 4), (1, 1, 2, 6), 1, "VALID", 1),  # grouped: 2 groups of 2 channels
]


@pytest.mark.parametrize("x_shape,f_shape,strides,padding,dilations", CONV_CASES)
def test_conv2d_nhwc(x_shape, f_shape, strides, padding, dilations):
    f = const(*f_shape)
    check_against_tf(lambda x: tf.nn.conv2d(x, f, strides, padding, dilations=dilations), rand(*x_shape),
                     op="Conv2D")


@pytest.mark.parametrize("strides,padding", [(1, "SAME"), (2, "VALID"),
                                             (1, [[0, 0], [0, 0], [1, 0], [2, 1]])])
def test_conv2d_nchw(strides, padding):
    f = const(3, 3, 3, 4)
    check_against_tf(lambda x: tf.nn.conv2d(x, f, strides, padding, data_format="NCHW"), rand(1, 3, 7, 7),
                     op="Conv2D")


@pytest.mark.parametrize("multiplier,strides,padding,dilations", [
    (1, 1, "SAME", 1), (2, 2, "SAME", 1), (1, 1, "VALID", 2), (3, 2, "VALID", 1)])
def test_depthwise_conv2d(multiplier, strides, padding, dilations):
    f = const(3, 3, 4, multiplier)
    check_against_tf(lambda x: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=f, strides=[1, strides, strides, 1], padding=padding, dilations=[1, dilations, dilations, 1]),
        rand(1, 9, 9, 4), op="DepthwiseConv2dNative")


def test_depthwise_conv2d_nchw():
    f = const(3, 3, 4, 2)
    check_against_tf(lambda x: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME", data_format="NCHW"),
                     rand(1, 4, 6, 6), op="DepthwiseConv2dNative")


@pytest.mark.parametrize("in_hw,out_hw,strides,padding", [
    ((4, 4), (8, 8), 2, "SAME"), ((4, 4), (9, 9), 2, "VALID"), ((4, 4), (7, 7), 2, "SAME"),
    ((5, 5), (5, 5), 1, "SAME"), ((4, 4), (12, 12), 3, "VALID")])
def test_conv2d_backprop_input(in_hw, out_hw, strides, padding):
    f = const(3, 3, 2, 4)  # HW, output channels of the deconvolution, its input channels
    check_against_tf(lambda dy: tf.nn.conv2d_transpose(dy, f, (1,) + out_hw + (2,), strides, padding),
                     rand(1, *in_hw, 4), op="Conv2DBackpropInput")


def test_conv2d_backprop_input_explicit_padding():
    f = const(3, 3, 2, 4)
    check_against_tf(lambda dy: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=[1, 7, 6, 2], filter=f, out_backprop=dy, strides=[1, 2, 2, 1], padding="EXPLICIT",
        explicit_paddings=[0, 0, 1, 1, 0, 1, 0, 0]), rand(1, 4, 3, 4), op="Conv2DBackpropInput")


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add(fmt):
    b = const(3)
    x = rand(2, 4, 5, 3) if fmt == "NHWC" else rand(2, 3, 4, 5)
    check_against_tf(lambda x: tf.nn.bias_add(x, b, data_format=fmt), x, op="BiasAdd")


@pytest.mark.parametrize("op,fmt", [("FusedBatchNorm", "NHWC"), ("FusedBatchNormV3", "NHWC"),
                                    ("FusedBatchNormV2", "NCHW"), ("FusedBatchNormV3", "NCHW")])
def test_fused_batch_norm(op, fmt):
    scale, offset, mean, var = const(3), const(3), const(3), tf.constant(rand(3, low=0.5))
    x = rand(2, 5, 5, 3) if fmt == "NHWC" else rand(2, 3, 5, 5)
    check_against_tf(lambda x: getattr(tf.raw_ops, op)(x=x, scale=scale, offset=offset, mean=mean, variance=var,
                                                       epsilon=1e-3, data_format=fmt, is_training=False)[0],
                     x, op=op)


def test_conv_then_fused_batch_norm():
    f, scale, offset, mean, var = const(3, 3, 3, 4), const(4), const(4), const(4), tf.constant(rand(4, low=0.5))

    def model(x):
        y = tf.nn.conv2d(x, f, 1, "SAME")
        return tf.nn.relu(tf.raw_ops.FusedBatchNormV3(x=y, scale=scale, offset=offset, mean=mean, variance=var,
                                                      is_training=False)[0])

    check_against_tf(model, rand(1, 6, 6, 3), op="FusedBatchNormV3")


def test_decomposed_batch_norm_arithmetic():
    """What Keras 3 emits: (x - mean) * (gamma * rsqrt(var + eps)) + beta, constants folded."""
    f, gamma, beta, mean, var = const(3, 3, 3, 4), const(4), const(4), const(4), tf.constant(rand(4, low=0.5))

    def model(x):
        y = tf.nn.conv2d(x, f, 1, "SAME")
        inv = tf.math.rsqrt(var + 1e-3) * gamma
        return y * inv + (beta - mean * inv)

    imported = check_against_tf(model, rand(1, 6, 6, 3), op="Rsqrt")
    assert "Sqrt" not in {n.op for n in imported.nodes}  # the constant part folded at import


# -- pools, softmax, activations --------------------------------------------------------

@pytest.mark.parametrize("pool", [tf.nn.max_pool2d, tf.nn.avg_pool2d])
@pytest.mark.parametrize("ksize,strides,padding", [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "SAME"),
                                                   ((2, 3), (1, 2), "VALID"), (3, 3, "SAME")])
def test_pools_nhwc(pool, ksize, strides, padding):
    check_against_tf(lambda x: pool(x, ksize, strides, padding), rand(2, 7, 8, 3))


@pytest.mark.parametrize("pool,op", [(tf.nn.max_pool2d, "MaxPool"), (tf.nn.avg_pool2d, "AvgPool")])
def test_pools_nchw(pool, op):
    check_against_tf(lambda x: pool(x, 3, 2, "SAME", data_format="NCHW"), rand(1, 3, 7, 7), op=op)


def test_max_pool_v2():
    check_against_tf(lambda x: tf.raw_ops.MaxPoolV2(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                                    padding="SAME"), rand(1, 7, 7, 2), op="MaxPoolV2")


def test_max_pool_explicit_padding():
    check_against_tf(lambda x: tf.raw_ops.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                                  padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 0, 0, 0]),
                     rand(1, 7, 7, 2), op="MaxPool")


@pytest.mark.parametrize("fn,op", [(tf.nn.softmax, "Softmax"), (tf.nn.log_softmax, "LogSoftmax")])
@pytest.mark.parametrize("shape", [(7,), (3, 10), (2, 3, 5)])
def test_softmax(fn, op, shape):
    check_against_tf(fn, rand(*shape) * 3, op=op)


@pytest.mark.parametrize("fn,op", [
    (tf.nn.relu, "Relu"), (tf.nn.relu6, "Relu6"), (tf.nn.elu, "Elu"), (tf.nn.selu, "Selu"),
    (lambda x: tf.nn.leaky_relu(x, 0.1), "LeakyRelu"), (tf.nn.sigmoid, "Sigmoid"), (tf.nn.tanh, "Tanh"),
    (tf.nn.softplus, "Softplus"), (tf.nn.softsign, "Softsign"), (tf.math.erf, "Erf"),
    (tf.nn.silu, "Sigmoid"), (lambda x: tf.nn.gelu(x, approximate=False), "Erfc"),
    (lambda x: tf.nn.gelu(x, approximate=True), "Tanh")])
def test_activations(fn, op):
    check_against_tf(fn, rand(3, 16) * 4, op=op)


# -- element-wise arithmetic ---------------------------------------------------------------

BROADCAST_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("fn,op", [
    (tf.add, "AddV2"), (tf.raw_ops.Add, "Add"), (tf.subtract, "Sub"), (tf.multiply, "Mul"),
    (tf.divide, "RealDiv"), (tf.raw_ops.Div, "Div"), (tf.maximum, "Maximum"), (tf.minimum, "Minimum"),
    (tf.math.squared_difference, "SquaredDifference")])
@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_SHAPES)
def test_binary_ops_broadcast(fn, op, a_shape, b_shape):
    check_against_tf(lambda a, b: fn(x=a, y=b) if fn in (tf.raw_ops.Add, tf.raw_ops.Div) else fn(a, b),
                     rand(*a_shape), rand(*b_shape, low=0.5), op=op)


def test_pow():
    check_against_tf(tf.pow, rand(3, 4, low=0.5), rand(4), op="Pow")


@pytest.mark.parametrize("fn,op", [(tf.math.floordiv, "FloorDiv"), (tf.math.floormod, "FloorMod")])
def test_floor_div_and_mod_float(fn, op):
    check_against_tf(fn, rand(3, 4) * 5, rand(3, 4, low=0.5) * np.sign(rand(3, 4)), op=op)


def test_floor_mod_int():
    a = RNG.integers(-20, 20, (3, 4)).astype(np.int32)
    b = (RNG.integers(1, 6, (3, 4)) * np.where(RNG.random((3, 4)) < 0.5, -1, 1)).astype(np.int32)
    check_against_tf(tf.math.floormod, a, b, op="FloorMod")


@pytest.mark.parametrize("fn,op,positive", [
    (tf.math.rsqrt, "Rsqrt", True), (tf.sqrt, "Sqrt", True), (tf.square, "Square", False), (tf.exp, "Exp", False),
    (tf.math.log, "Log", True), (tf.abs, "Abs", False), (tf.negative, "Neg", False), (tf.floor, "Floor", False),
    (tf.math.ceil, "Ceil", False), (tf.round, "Round", False), (tf.math.reciprocal, "Reciprocal", True),
    (tf.sign, "Sign", False), (tf.sin, "Sin", False), (tf.cos, "Cos", False), (tf.math.log1p, "Log1p", True)])
def test_unary_ops(fn, op, positive):
    x = rand(3, 7, low=0.1) if positive else rand(3, 7) * 3
    check_against_tf(fn, x, op=op)


def test_add_n():
    check_against_tf(lambda a, b, c: tf.add_n([a, b, c]), rand(2, 3), rand(2, 3), rand(2, 3), op="AddN")


@pytest.mark.parametrize("dtype", [tf.int32, tf.float16, tf.bool, tf.int64])
def test_cast(dtype):
    check_against_tf(lambda x: tf.cast(x * 3, dtype), rand(3, 4), op="Cast")


@pytest.mark.parametrize("fn,op", [(tf.greater, "Greater"), (tf.greater_equal, "GreaterEqual"), (tf.less, "Less"),
                                   (tf.less_equal, "LessEqual"), (tf.equal, "Equal"), (tf.not_equal, "NotEqual")])
def test_comparisons(fn, op):
    a = np.round(rand(3, 4))
    check_against_tf(lambda a, b: tf.cast(fn(a, b), tf.float32), a, np.round(rand(4)), op=op)


def test_logic_and_select():
    def model(a, b):
        condition = tf.logical_or(tf.logical_and(a > 0, b > 0), tf.logical_not(a > b))
        return tf.where(condition, a, b)

    check_against_tf(model, rand(3, 4), rand(4), op="SelectV2")


def test_select_v1_picks_rows():
    check_against_tf(lambda c, a, b: tf.raw_ops.Select(condition=c > 0, x=a, y=b), rand(3), rand(3, 4),
                     rand(3, 4), op="Select")


# -- matrix products -----------------------------------------------------------------------

@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(transpose_a, transpose_b):
    a = rand(5, 3) if transpose_a else rand(3, 5)
    b = const(4, 5) if transpose_b else const(5, 4)
    check_against_tf(lambda a: tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b), a, op="MatMul")


def test_matmul_of_two_inputs():
    check_against_tf(lambda a, b: tf.matmul(a, b, transpose_b=True), rand(3, 5), rand(4, 5), op="MatMul")


@pytest.mark.parametrize("a_shape,b_shape,adj_x,adj_y", [
    ((2, 3, 4), (2, 4, 5), False, False), ((2, 4, 3), (2, 4, 5), True, False),
    ((2, 3, 4), (2, 5, 4), False, True), ((2, 1, 3, 4), (3, 4, 5), False, False),
    ((3, 4), (2, 4, 5), False, False), ((2, 2, 4, 3), (2, 5, 4), True, True)])
def test_batch_matmul(a_shape, b_shape, adj_x, adj_y):
    check_against_tf(lambda a, b: tf.raw_ops.BatchMatMulV2(x=a, y=b, adj_x=adj_x, adj_y=adj_y),
                     rand(*a_shape), rand(*b_shape), op="BatchMatMulV2")


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("abc->cb", [(2, 3, 4)]),
    ("...ij,jk->...ik", [(2, 3, 4), (4, 5)])])
def test_einsum(equation, shapes):
    check_against_tf(lambda *xs: tf.einsum(equation, *xs), *[rand(*s) for s in shapes], op="Einsum")


# -- reductions ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn,op", [(tf.reduce_mean, "Mean"), (tf.reduce_sum, "Sum"), (tf.reduce_max, "Max"),
                                   (tf.reduce_min, "Min"), (tf.reduce_prod, "Prod")])
@pytest.mark.parametrize("axes,keep_dims", [([1, 2], True), ([1, 2], False), (-1, False), ([0, -1], True),
                                            (None, False)])
def test_reductions(fn, op, axes, keep_dims):
    check_against_tf(lambda x: fn(x, axis=axes, keepdims=keep_dims), rand(2, 3, 4) * 0.8 + 0.5, op=op)


def test_reduction_over_no_axes_is_the_input():
    check_against_tf(lambda x: tf.raw_ops.Sum(input=x, axis=tf.constant([], tf.int32)), rand(2, 3), op="Sum")


@pytest.mark.parametrize("fn,op,output_type", [(tf.argmax, "ArgMax", tf.int64), (tf.argmin, "ArgMin", tf.int32)])
def test_arg_reductions(fn, op, output_type):
    check_against_tf(lambda x: fn(x, axis=-1, output_type=output_type), rand(3, 7), op=op)


# -- data movement ---------------------------------------------------------------------------

@pytest.mark.parametrize("paddings", [[[0, 0], [1, 2], [2, 1], [0, 0]], [[1, 0], [0, 0], [0, 3], [1, 1]]])
def test_pad(paddings):
    check_against_tf(lambda x: tf.pad(x, paddings), rand(1, 3, 4, 2), op="Pad")


def test_pad_v2():
    check_against_tf(lambda x: tf.pad(x, [[1, 1], [2, 0]], constant_values=-1.5), rand(3, 4), op="PadV2")


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("paddings", [[[0, 0], [2, 1], [1, 2], [0, 0]], [[1, 1], [0, 3], [3, 0], [0, 1]]])
def test_mirror_pad(mode, paddings):
    check_against_tf(lambda x: tf.pad(x, paddings, mode=mode), rand(2, 4, 4, 2), op="MirrorPad")


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat(axis):
    check_against_tf(lambda a, b: tf.concat([a, b, a], axis), rand(2, 3, 4), rand(2, 3, 4), op="ConcatV2")


@pytest.mark.parametrize("shape", [[6, 4], [-1, 2], [2, -1, 3], [24], [1, 2, 3, 4]])
def test_reshape(shape):
    check_against_tf(lambda x: tf.reshape(x, shape), rand(2, 3, 4), op="Reshape")


def test_reshape_from_computed_shape_folds():
    """Shape -> StridedSlice -> Pack -> Reshape, as Flatten layers emit: all folded at import."""
    def model(x):
        batch = tf.raw_ops.Shape(input=x)[0]  # tf.shape would fold a static shape already
        return tf.reshape(x, tf.stack([batch, -1]))

    imported = check_against_tf(model, rand(2, 3, 4), op="Shape")
    assert {n.op for n in imported.nodes} <= {"Reshape", "Copy"}


@pytest.mark.parametrize("axis", [None, [1], [-1], [1, 3]])
def test_squeeze(axis):
    check_against_tf(lambda x: tf.squeeze(x, axis), rand(2, 1, 3, 1), op="Squeeze")


@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_expand_dims(axis):
    check_against_tf(lambda x: tf.expand_dims(x, axis), rand(2, 3), op="ExpandDims")


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 1, 2], None])
def test_transpose(perm):
    check_against_tf(lambda x: tf.transpose(x, perm), rand(2, 3, 4), op="Transpose")


STRIDED_SLICES = [
    lambda x: x[1:3], lambda x: x[:, ::2], lambda x: x[..., 1], lambda x: x[:, tf.newaxis, 1:],
    lambda x: x[::-1], lambda x: x[-2:, ::-2, 1:3], lambda x: x[1, ..., tf.newaxis], lambda x: x[-1, :, -1],
    lambda x: x[:, 10:], lambda x: x[3:0:-1, -10:10], lambda x: x[tf.newaxis, ..., ::3],
    lambda x: x[1:2, 2],
]


@pytest.mark.parametrize("index", range(len(STRIDED_SLICES)))
def test_strided_slice(index):
    check_against_tf(STRIDED_SLICES[index], rand(4, 5, 6), op="StridedSlice")


def test_strided_slice_raw_masks():
    check_against_tf(lambda x: tf.raw_ops.StridedSlice(input=x, begin=[1, 0, 5, 0], end=[3, 0, 1, 2],
                                                       strides=[1, 1, -2, 1], begin_mask=0b0010, end_mask=0b0001,
                                                       ellipsis_mask=0, new_axis_mask=0b1000,
                                                       shrink_axis_mask=0b0010),
                     rand(4, 5, 6), op="StridedSlice")


@pytest.mark.parametrize("begin,size", [([0, 1, 0], [2, 2, -1]), ([1, 0, 2], [-1, -1, 2]), ([0, 0, 0], [2, 3, 4])])
def test_slice(begin, size):
    check_against_tf(lambda x: tf.slice(x, begin, size), rand(2, 3, 4), op="Slice")


@pytest.mark.parametrize("num,axis", [(2, 0), (3, 1), (2, -1)])
def test_split(num, axis):
    check_against_tf(lambda x: tf.split(x, num, axis), rand(4, 6, 4), op="Split")


@pytest.mark.parametrize("sizes,axis", [([1, 3, 2], 1), ([2, -1], -1), ([4], 0)])
def test_split_v(sizes, axis):
    check_against_tf(lambda x: tf.split(x, sizes, axis), rand(4, 6, 4), op="SplitV")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack(axis):
    check_against_tf(lambda a, b: tf.stack([a, b, a], axis), rand(2, 3), rand(2, 3), op="Pack")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unpack(axis):
    check_against_tf(lambda x: tf.unstack(x, axis=axis), rand(2, 3, 4), op="Unpack")


@pytest.mark.parametrize("axis,batch_dims,indices", [
    (0, 0, [[0, 1], [1, 1]]), (1, 0, [2, 0, 1]), (-1, 0, [3, 0]), (1, 1, [[2, 0], [1, 1]])])
def test_gather_v2(axis, batch_dims, indices):
    idx = tf.constant(indices, tf.int32)
    check_against_tf(lambda x: tf.gather(x, idx, axis=axis, batch_dims=batch_dims), rand(2, 3, 4), op="GatherV2")


def test_gather_of_an_index_input():
    check_against_tf(lambda x, i: tf.gather(x, i, axis=1), rand(2, 5), np.array([4, 0, 2], np.int32),
                     op="GatherV2")


def test_identities():
    check_against_tf(lambda a, b: tf.identity_n([tf.stop_gradient(a) + 1.0, tf.identity(b) * 2.0]),
                     rand(2, 3), rand(3), op="IdentityN")


def test_shape_ops_fold():
    def model(x):
        ones = tf.ones_like(x) + tf.zeros_like(x)
        filled = tf.fill(tf.raw_ops.Shape(input=x), tf.cast(tf.raw_ops.Size(input=x), tf.float32))
        ramp = tf.cast(tf.range(tf.raw_ops.Rank(input=x), 10, 2), tf.float32)
        shapes = tf.raw_ops.ShapeN(input=[x, ones])
        return x * ones + filled + ramp[:4] + tf.cast(tf.reduce_sum(shapes[0] * shapes[1]), tf.float32)

    imported = check_against_tf(model, rand(3, 4), op="ShapeN")
    assert not {"Shape", "Size", "Range", "ConstantOfShape"} & {n.op for n in imported.nodes}


def test_fill_with_a_computed_value():
    check_against_tf(lambda x: tf.fill([2, 3], tf.reduce_sum(x)), rand(4), op="Fill")


@pytest.mark.parametrize("multiples", [[1, 2], [3, 1], [2, 2]])
def test_tile(multiples):
    check_against_tf(lambda x: tf.tile(x, multiples), rand(2, 3), op="Tile")


def test_broadcast_to():
    check_against_tf(lambda x: tf.broadcast_to(x, [2, 3, 4]), rand(3, 1), op="BroadcastTo")


# -- images -------------------------------------------------------------------------------

RESIZE_FLAGS = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("align_corners,half_pixel_centers", RESIZE_FLAGS)
@pytest.mark.parametrize("size", [(8, 10), (3, 2), (5, 7)])
def test_resize_bilinear(align_corners, half_pixel_centers, size):
    check_against_tf(lambda x: tf.raw_ops.ResizeBilinear(images=x, size=size, align_corners=align_corners,
                                                         half_pixel_centers=half_pixel_centers),
                     rand(1, 4, 5, 2), op="ResizeBilinear")


@pytest.mark.parametrize("align_corners,half_pixel_centers", RESIZE_FLAGS)
@pytest.mark.parametrize("size", [(8, 10), (3, 2), (5, 7)])
def test_resize_nearest_neighbor(align_corners, half_pixel_centers, size):
    check_against_tf(lambda x: tf.raw_ops.ResizeNearestNeighbor(images=x, size=size, align_corners=align_corners,
                                                                half_pixel_centers=half_pixel_centers),
                     rand(1, 4, 5, 2), op="ResizeNearestNeighbor")


def test_keras_upsampling_bilinear():
    check_against_tf(lambda x: tf.image.resize(x, (8, 10), "bilinear"), rand(1, 4, 5, 3), op="ResizeBilinear")


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_dilated_depthwise_conv_through_space_to_batch(padding):
    """tf.nn.depthwise_conv2d dilates with SpaceToBatchND -> conv -> BatchToSpaceND."""
    f = const(3, 3, 4, 2)
    check_against_tf(lambda x: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], padding, dilations=[2, 2]),
                     rand(1, 9, 10, 4), op="SpaceToBatchND")


@pytest.mark.parametrize("block,paddings", [([2, 2], [[0, 0], [0, 0]]), ([2, 3], [[1, 1], [0, 2]]), ([3], [[1, 1]])])
def test_space_to_batch_and_back(block, paddings):
    def model(x):
        y = tf.space_to_batch_nd(x, block, paddings) * 2.0
        return tf.batch_to_space(y, block, paddings)

    check_against_tf(model, rand(2, 4, 4, 3), op="BatchToSpaceND")


def test_space_to_batch_alone():
    check_against_tf(lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]), rand(2, 4, 4, 3),
                     op="SpaceToBatchND")


# -- ops the TFLite translations emit ---------------------------------------------------


@pytest.mark.parametrize("fn,op", [(tf.reduce_all, "All"), (tf.reduce_any, "Any")])
@pytest.mark.parametrize("axes,keep_dims", [([1], False), ([0, 2], True), (-1, True), ([], False)])
def test_logical_reductions(fn, op, axes, keep_dims):
    x = rand(3, 4, 5)
    x[1] = 1.0  # a row that is all true, for All
    check_against_tf(lambda x: tf.cast(fn(x > -0.5, axes, keepdims=keep_dims), tf.float32), x, op=op)


def test_logical_reduction_of_an_empty_dim():
    check_against_tf(lambda x: tf.cast(tf.stack([tf.reduce_all(x > 0, 1), tf.reduce_any(x > 0, 1)]), tf.float32),
                     rand(2, 0, 3), op="All")


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -0.3, np.inf, -np.inf, np.nan], np.float32)


def test_atan2_of_every_quadrant_and_special_value():
    y, x = (v.reshape(-1).copy() for v in np.meshgrid(SPECIAL, SPECIAL, indexing="ij"))
    specs = [tf.TensorSpec(y.shape, tf.float32, name="x0"), tf.TensorSpec(x.shape, tf.float32, name="x1")]
    graph, frozen = freeze(tf.math.atan2, *specs)
    assert "Atan2" in {n.op for n in graph.nodes.values()}
    want = np.asarray(frozen(tf.constant(y), tf.constant(x))[0])
    (got,) = compile_graph(import_tf(graph)).run({"x0": y, "x1": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_broadcast(dtype):
    check_against_tf(tf.math.atan2, (rand(3, 4) * 3).astype(dtype), (rand(4) * 3).astype(dtype), op="Atan2")


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum(axis, exclusive, reverse):
    check_against_tf(lambda x: tf.cumsum(x, axis, exclusive=exclusive, reverse=reverse), rand(3, 4, 5), op="Cumsum")


def test_cumsum_int():
    check_against_tf(lambda x: tf.cumsum(x, 1, exclusive=True), RNG.integers(-9, 9, (2, 6)).astype(np.int32),
                     op="Cumsum")


@pytest.mark.parametrize("block,shape", [(2, (1, 3, 4, 8)), (3, (2, 2, 2, 9)), (2, (1, 2, 3, 12))])
def test_depth_to_space(block, shape):
    check_against_tf(lambda x: tf.nn.depth_to_space(x, block), rand(*shape), op="DepthToSpace")


@pytest.mark.parametrize("block,shape", [(2, (1, 4, 6, 3)), (3, (2, 6, 3, 2)), (2, (1, 2, 2, 5))])
def test_space_to_depth(block, shape):
    check_against_tf(lambda x: tf.nn.space_to_depth(x, block), rand(*shape), op="SpaceToDepth")


@pytest.mark.parametrize("op", ["DepthToSpace", "SpaceToDepth"])
def test_block_rearrangement_nchw(op):
    """TensorFlow's CPU kernels take only NHWC, so the NCHW graph is checked against the
    NHWC op between transposes."""
    fn = getattr(tf.nn, "depth_to_space" if op == "DepthToSpace" else "space_to_depth")
    x = rand(1, 8, 4, 6) if op == "DepthToSpace" else rand(1, 2, 4, 6)
    graph, _ = freeze(lambda x: fn(x, 2, data_format="NCHW"), tf.TensorSpec(x.shape, tf.float32, name="x0"))
    assert op in {n.op for n in graph.nodes.values()}
    want = np.transpose(fn(np.transpose(x, (0, 2, 3, 1)), 2).numpy(), (0, 3, 1, 2))
    (got,) = compile_graph(import_tf(graph)).run({"x0": x})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("indices", [[[1, 0], [0, 2]], [[1], [0]], [[[0, 1, 3]], [[1, 2, 0]]], [[0, 2, 1]]])
def test_gather_nd(indices):
    idx = tf.constant(indices, tf.int32)
    check_against_tf(lambda x: tf.gather_nd(x, idx), rand(2, 3, 4), op="GatherNd")


def test_gather_nd_of_an_index_input():
    check_against_tf(tf.gather_nd, rand(3, 4), np.array([[2, 1], [0, 3], [1, 1]], np.int64), op="GatherNd")


@pytest.mark.parametrize("axis", [[0], [1], [-1], [0, 2], [], [0, 1, 2]])
def test_reverse_v2(axis):
    check_against_tf(lambda x: tf.reverse(x, axis), rand(2, 3, 4), op="ReverseV2")


@pytest.mark.parametrize("axis,batch_dims,shape,indices", [
    (2, 1, (2, 3, 4), [[3, 0], [1, 1]]), (3, 1, (2, 3, 2, 5), [[4, 0, 2], [1, 1, 3]]),
    (3, 2, (2, 3, 2, 5), [[[4, 0], [1, 2], [3, 3]], [[0, 1], [2, 2], [4, 4]]]),
    (2, 1, (2, 3, 4), [[[3], [0]], [[1], [2]]]), (-1, -1, (2, 3, 4), [[3, 0], [1, 1]])])
def test_gather_v2_batch_dims_below_axis(axis, batch_dims, shape, indices):
    idx = tf.constant(indices, tf.int32)
    check_against_tf(lambda x: tf.gather(x, idx, axis=axis, batch_dims=batch_dims), rand(*shape), op="GatherV2")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_floor_div_int(dtype):
    a = np.array([[7, -7, 7, -7, 6, -6, 0, 0, 1, -1, 2147483647 // 2, -(2 ** 30)]], dtype)
    b = np.array([[2, 2, -2, -2, 3, -3, 5, -5, 7, 7, 3, 7]], dtype)
    check_against_tf(tf.math.floordiv, a, b, op="FloorDiv")


def test_floor_div_int_broadcast():
    a = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
    b = (RNG.integers(1, 7, (4,)) * np.array([1, -1, 1, -1])).astype(np.int32)
    check_against_tf(tf.math.floordiv, a, b, op="FloorDiv")


@pytest.mark.parametrize("depth_radius,bias,alpha,beta", [(5, 1.0, 1.0, 0.5), (2, 2.0, 1e-2, 0.75), (0, 0.5, 0.3, 1.0)])
def test_lrn(depth_radius, bias, alpha, beta):
    check_against_tf(lambda x: tf.nn.local_response_normalization(x, depth_radius, bias, alpha, beta),
                     rand(1, 3, 4, 9), op="LRN")
