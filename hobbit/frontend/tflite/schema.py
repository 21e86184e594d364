"""What TFLite's schema (schema.fbs, file identifier "TFL3") says, as named numbers: the
field index of every table field hobbit reads, the enums it decodes and the
BuiltinOperator names. Field indices count union fields twice (their type, then their
value), as flatbuffers does; flatbuffer.py turns an index into its vtable slot."""

from __future__ import annotations

import numpy as np

from hobbit.frontend.tf.graph import TFDType

FILE_IDENTIFIER = b"TFL3"


class ModelField:
    VERSION = 0
    OPERATOR_CODES = 1
    SUBGRAPHS = 2
    BUFFERS = 4
    SIGNATURE_DEFS = 7


class SignatureDefField:
    INPUTS = 0
    OUTPUTS = 1
    SIGNATURE_KEY = 2
    SUBGRAPH_INDEX = 4


class TensorMapField:
    NAME = 0
    TENSOR_INDEX = 1


class SubGraphField:
    TENSORS = 0
    INPUTS = 1
    OUTPUTS = 2
    OPERATORS = 3


class TensorField:
    SHAPE = 0
    TYPE = 1
    BUFFER = 2
    NAME = 3
    QUANTIZATION = 4
    SPARSITY = 6
    SHAPE_SIGNATURE = 7
    HAS_RANK = 8


class QuantizationField:
    SCALE = 2
    ZERO_POINT = 3


class BufferField:
    DATA = 0
    OFFSET = 1
    SIZE = 2


class OperatorCodeField:
    DEPRECATED_BUILTIN_CODE = 0
    CUSTOM_CODE = 1
    VERSION = 2
    BUILTIN_CODE = 3


class OperatorField:
    OPCODE_INDEX = 0
    INPUTS = 1
    OUTPUTS = 2
    BUILTIN_OPTIONS = 4


# TensorType -> numpy dtype, or the TensorFlow DataType (enum, name) of those numpy lacks.
TENSOR_TYPES: dict[int, np.dtype | TFDType] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    2: np.dtype(np.int32),
    3: np.dtype(np.uint8),
    4: np.dtype(np.int64),
    5: TFDType(7, "string"),
    6: np.dtype(np.bool_),
    7: np.dtype(np.int16),
    8: np.dtype(np.complex64),
    9: np.dtype(np.int8),
    10: np.dtype(np.float64),
    11: np.dtype(np.complex128),
    12: np.dtype(np.uint64),
    13: TFDType(20, "resource"),
    14: TFDType(21, "variant"),
    15: np.dtype(np.uint32),
    16: np.dtype(np.uint16),
    17: TFDType(29, "int4"),
    18: TFDType(14, "bfloat16"),
}

INTEGER_TYPES_QUANTIZED_WHEN_SCALED = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))

PADDING = ("SAME", "VALID")

MIRROR_PAD_MODE = ("REFLECT", "SYMMETRIC")

ACTIVATION_NONE = 0
ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT")

# BuiltinOperator names in enum order: BUILTIN_OPERATORS[code] is the operator's name.
BUILTIN_OPERATORS = tuple("""
ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE
EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D
LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1
RELU6 RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH CONCAT_EMBEDDINGS SKIP_GRAM
CALL CUSTOM EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN GATHER BATCH_TO_SPACE_ND
SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB DIV SQUEEZE UNIDIRECTIONAL_SEQUENCE_LSTM STRIDED_SLICE
BIDIRECTIONAL_SEQUENCE_RNN EXP TOPK_V2 SPLIT LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM
CAST PRELU MAXIMUM ARG_MAX MINIMUM LESS NEG PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE
SIN TRANSPOSE_CONV SPARSE_TO_DENSE TILE EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW
ARG_MIN FAKE_QUANT REDUCE_PROD REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK
REDUCE_MIN FLOOR_DIV REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR
LEAKY_RELU SQUARED_DIFFERENCE MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS
WHERE RANK ELU REVERSE_SEQUENCE MATRIX_DIAG QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE
NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND SELECT_V2 DENSIFY SEGMENT_SUM
BATCH_MATMUL PLACEHOLDER_FOR_GREATER_OP_CODES CUMSUM CALL_ONCE BROADCAST_TO RFFT2D CONV_3D IMAG
REAL COMPLEX_ABS HASHTABLE HASHTABLE_FIND HASHTABLE_IMPORT HASHTABLE_SIZE REDUCE_ALL
CONV_3D_TRANSPOSE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BROADCAST_ARGS RANDOM_STANDARD_NORMAL
BUCKETIZE RANDOM_UNIFORM MULTINOMIAL GELU DYNAMIC_UPDATE_SLICE RELU_0_TO_1 UNSORTED_SEGMENT_PROD
UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_SUM ATAN2 UNSORTED_SEGMENT_MIN SIGN BITCAST BITWISE_XOR
RIGHT_SHIFT STABLEHLO_LOGISTIC STABLEHLO_ADD STABLEHLO_DIVIDE STABLEHLO_MULTIPLY
STABLEHLO_MAXIMUM STABLEHLO_RESHAPE STABLEHLO_CLAMP STABLEHLO_CONCATENATE
STABLEHLO_BROADCAST_IN_DIM STABLEHLO_CONVOLUTION STABLEHLO_SLICE STABLEHLO_CUSTOM_CALL
STABLEHLO_REDUCE STABLEHLO_ABS STABLEHLO_AND STABLEHLO_COSINE STABLEHLO_EXPONENTIAL
STABLEHLO_FLOOR STABLEHLO_LOG STABLEHLO_MINIMUM STABLEHLO_NEGATE STABLEHLO_OR STABLEHLO_POWER
STABLEHLO_REMAINDER STABLEHLO_RSQRT STABLEHLO_SELECT STABLEHLO_SUBTRACT STABLEHLO_TANH
STABLEHLO_SCATTER STABLEHLO_COMPARE STABLEHLO_CONVERT STABLEHLO_DYNAMIC_SLICE
STABLEHLO_DYNAMIC_UPDATE_SLICE STABLEHLO_PAD STABLEHLO_IOTA STABLEHLO_DOT_GENERAL
STABLEHLO_REDUCE_WINDOW STABLEHLO_SORT STABLEHLO_WHILE STABLEHLO_GATHER STABLEHLO_TRANSPOSE
DILATE STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW STABLEHLO_COMPOSITE COMPLEX
""".split())

CUSTOM = BUILTIN_OPERATORS.index("CUSTOM")

# Below this code an OperatorCode may carry its builtin only in deprecated_builtin_code.
PLACEHOLDER_FOR_GREATER_OP_CODES = BUILTIN_OPERATORS.index("PLACEHOLDER_FOR_GREATER_OP_CODES")

# Builtins whose options name other subgraphs, and the options' fields that do.
SUBGRAPH_FIELDS = {
    "CALL": (0,),
    "IF": (0, 1),
    "WHILE": (0, 1),
    "CALL_ONCE": (0,),
}


# Field indices of the builtin options tables hobbit reads.


class Conv2DOptions:
    PADDING = 0
    STRIDE_W = 1
    STRIDE_H = 2
    ACTIVATION = 3
    DILATION_W = 4
    DILATION_H = 5


class DepthwiseConv2DOptions:
    PADDING = 0
    STRIDE_W = 1
    STRIDE_H = 2
    DEPTH_MULTIPLIER = 3
    ACTIVATION = 4
    DILATION_W = 5
    DILATION_H = 6


class Pool2DOptions:
    PADDING = 0
    STRIDE_W = 1
    STRIDE_H = 2
    FILTER_WIDTH = 3
    FILTER_HEIGHT = 4
    ACTIVATION = 5


class TransposeConvOptions:
    PADDING = 0
    STRIDE_W = 1
    STRIDE_H = 2
    ACTIVATION = 3


class FullyConnectedOptions:
    ACTIVATION = 0
    WEIGHTS_FORMAT = 1
    KEEP_NUM_DIMS = 2


class ArithmeticOptions:
    """AddOptions, SubOptions, MulOptions, DivOptions."""

    ACTIVATION = 0


class ConcatenationOptions:
    AXIS = 0
    ACTIVATION = 1


class SoftmaxOptions:
    BETA = 0


class ReshapeOptions:
    NEW_SHAPE = 0


class ReducerOptions:
    KEEP_DIMS = 0


class SqueezeOptions:
    SQUEEZE_DIMS = 0


class SplitOptions:
    """SplitOptions and SplitVOptions."""

    NUM_SPLITS = 0


class StridedSliceOptions:
    BEGIN_MASK = 0
    END_MASK = 1
    ELLIPSIS_MASK = 2
    NEW_AXIS_MASK = 3
    SHRINK_AXIS_MASK = 4
    OFFSET = 5


class PackOptions:
    VALUES_COUNT = 0
    AXIS = 1


class UnpackOptions:
    NUM = 0
    AXIS = 1


class GatherOptions:
    AXIS = 0
    BATCH_DIMS = 1


class ResizeBilinearOptions:
    ALIGN_CORNERS = 2
    HALF_PIXEL_CENTERS = 3


class ResizeNearestNeighborOptions:
    ALIGN_CORNERS = 0
    HALF_PIXEL_CENTERS = 1


class BatchMatMulOptions:
    ADJ_X = 0
    ADJ_Y = 1


class LeakyReluOptions:
    ALPHA = 0


class MirrorPadOptions:
    MODE = 0


class GeluOptions:
    APPROXIMATE = 0


class BlockSizeOptions:
    """SpaceToDepthOptions and DepthToSpaceOptions."""

    BLOCK_SIZE = 0


class CumsumOptions:
    EXCLUSIVE = 0
    REVERSE = 1


class LocalResponseNormalizationOptions:
    RADIUS = 0
    BIAS = 1
    ALPHA = 2
    BETA = 3
