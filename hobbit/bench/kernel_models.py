"""DeepBench's inference problems (hobbit.bench.deepbench_shapes) as one-op ONNX models with
random constant weights, and the seeded inputs to run them on: what `hobbit bench --kernels`
compiles and times (hobbit.bench.kernels).

What each model means, and why:

* GEMM: DeepBench computes C[m, n] = op(A)[m, k] op(B)[k, n] column-major (cuBLAS, MKL's
  CblasColMajor), A the weights (m: output units), B the activations (n: batch, or batch x
  timesteps: 1, 2, 4, 700, 1500 in its inference rows). Read row-major, the same memory is
  Y[n, m] = X[n, k] W[k, m] with X = B and W = A: one MatMul with the input X and a constant
  W, exactly DeepBench's layout. a_t (A stored k x m column-major, i.e. W is [m, k]) and b_t
  (X stored [k, n]) become a Gemm with transB = a_t and transA = b_t; no inference row sets
  either.
* int8 GEMM: MatMulInteger of int8 X and int8 W to int32, DeepBench's int8 x int8 -> int32
  (its NVIDIA inference precision). Signed on both sides: onnxruntime's uint8 x int8 path on
  AVX2 saturates its pair sums (vpmaddubsw) and gave wrong products on full-range data here,
  int8 x int8 is exact. Only for untransposed shapes (MatMulInteger has no transpose).
* Conv: Conv NCHW, X [n, c, h, w], constant W [k, c, filter_h, filter_w], DeepBench's pads
  and strides, no bias (its cuDNN call has none); int8: ConvInteger of int8 X and W to int32.
* RNN: one unidirectional layer of the ONNX LSTM / GRU / RNN op, X [timesteps, batch, hidden],
  the input size equal to the hidden size as DeepBench feeds it, output Y (every step's
  hidden state). DeepBench's cuDNN cells: vanilla is CUDNN_RNN_RELU (activations Relu), GRU is
  cuDNN's, which applies the reset gate after the recurrent product (linear_before_reset=1).
  DeepBench skips the input projection (CUDNN_SKIP_INPUT); the ONNX ops always compute it, and
  RnnShape.flops counts it.

Weights are seeded and scaled so outputs stay near 1 (W ~ N(0, 1/k) for products; PyTorch's
U(-1/sqrt(H), 1/sqrt(H)) for recurrences, which keeps a ReLU recurrence from blowing up over
672 steps), so the comparison's tolerances mean the same on every shape."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hobbit.bench.deepbench_shapes import ConvShape, GemmShape, RnnShape

Shape = GemmShape | ConvShape | RnnShape
OPSET = 17
INPUT = "x"
OUTPUT = "y"
RNN_OPS = {"vanilla": "RNN", "lstm": "LSTM", "gru": "GRU"}
_GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


def kind_of(shape: Shape) -> str:
    """"gemm", "conv" or "rnn"."""
    return {GemmShape: "gemm", ConvShape: "conv", RnnShape: "rnn"}[type(shape)]


def describe(shape: Shape) -> str:
    """A short name of the problem in DeepBench's own terms, for tables."""
    if isinstance(shape, GemmShape):
        flags = "".join(f" {name}" for name, on in (("a_t", shape.a_t), ("b_t", shape.b_t)) if on)
        return f"{shape.m}x{shape.n}x{shape.k}{flags}"
    if isinstance(shape, ConvShape):
        s = shape
        return (f"{s.w}x{s.h} c{s.c} n{s.n} k{s.k} f{s.filter_w}x{s.filter_h} "
                f"p{s.pad_w},{s.pad_h} s{s.stride_w},{s.stride_h}")
    return f"{shape.kind} h{shape.hidden} b{shape.batch} t{shape.timesteps}"


def input_shape(shape: Shape) -> tuple[int, ...]:
    """The shape of the model's one input."""
    if isinstance(shape, GemmShape):
        return (shape.k, shape.n) if shape.b_t else (shape.n, shape.k)
    if isinstance(shape, ConvShape):
        return (shape.n, shape.c, shape.h, shape.w)
    return (shape.timesteps, shape.batch, shape.hidden)


def output_shape(shape: Shape) -> tuple[int, ...]:
    """The shape of the model's one output."""
    if isinstance(shape, GemmShape):
        return (shape.n, shape.m)
    if isinstance(shape, ConvShape):
        return (shape.n, shape.k, *shape.output_hw())
    return (shape.timesteps, 1, shape.batch, shape.hidden)


def weight_bytes(shape: Shape, itemsize: int = 4) -> int:
    """Bytes of the model's constant weights at `itemsize` bytes an element."""
    if isinstance(shape, GemmShape):
        count = shape.m * shape.k
    elif isinstance(shape, ConvShape):
        count = shape.k * shape.c * shape.filter_h * shape.filter_w
    else:
        gates = _GATES[shape.kind]
        count = 2 * gates * shape.hidden * shape.hidden + 2 * gates * shape.hidden
    return count * itemsize


def int8_supported(shape: Shape) -> bool:
    """Whether int8_model builds a model for `shape`: GEMMs without transposes, and convs."""
    if isinstance(shape, GemmShape):
        return not (shape.a_t or shape.b_t)
    return isinstance(shape, ConvShape)


def _model(node: onnx.NodeProto, in_type: int, in_shape: tuple[int, ...], out_type: int,
           out_shape: tuple[int, ...], weights: list[onnx.TensorProto]) -> onnx.ModelProto:
    graph = helper.make_graph([node], "deepbench_kernel",
                              [helper.make_tensor_value_info(INPUT, in_type, list(in_shape))],
                              [helper.make_tensor_value_info(OUTPUT, out_type, list(out_shape))], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="hobbit bench --kernels")


def fp32_model(shape: Shape, seed: int = 0) -> onnx.ModelProto:
    """The float32 one-op model of `shape` (module docstring)."""
    rng = np.random.default_rng(seed)
    if isinstance(shape, GemmShape):
        dims = (shape.m, shape.k) if shape.a_t else (shape.k, shape.m)
        w = (rng.standard_normal(dims) / np.sqrt(shape.k)).astype(np.float32)
        if shape.a_t or shape.b_t:
            node = helper.make_node("Gemm", [INPUT, "W"], [OUTPUT], transA=int(shape.b_t), transB=int(shape.a_t))
        else:
            node = helper.make_node("MatMul", [INPUT, "W"], [OUTPUT])
        return _model(node, TensorProto.FLOAT, input_shape(shape), TensorProto.FLOAT, output_shape(shape),
                      [numpy_helper.from_array(w, "W")])
    if isinstance(shape, ConvShape):
        fan_in = shape.c * shape.filter_h * shape.filter_w
        w = (rng.standard_normal((shape.k, shape.c, shape.filter_h, shape.filter_w)) / np.sqrt(fan_in))
        return _model(_conv_node("Conv", shape), TensorProto.FLOAT, input_shape(shape), TensorProto.FLOAT,
                      output_shape(shape), [numpy_helper.from_array(w.astype(np.float32), "W")])
    return _rnn_model(shape, rng)


def _conv_node(op: str, shape: ConvShape) -> onnx.NodeProto:
    return helper.make_node(op, [INPUT, "W"], [OUTPUT], kernel_shape=[shape.filter_h, shape.filter_w],
                            pads=[shape.pad_h, shape.pad_w, shape.pad_h, shape.pad_w],
                            strides=[shape.stride_h, shape.stride_w])


def _rnn_model(shape: RnnShape, rng: np.random.Generator) -> onnx.ModelProto:
    hidden, gates = shape.hidden, _GATES[shape.kind]
    bound = 1 / np.sqrt(hidden)

    def uniform(*dims: int) -> np.ndarray:
        return rng.uniform(-bound, bound, dims).astype(np.float32)

    weights = [numpy_helper.from_array(uniform(1, gates * hidden, hidden), "W"),
               numpy_helper.from_array(uniform(1, gates * hidden, hidden), "R"),
               numpy_helper.from_array(uniform(1, 2 * gates * hidden), "B")]
    attrs: dict[str, object] = {"hidden_size": hidden}
    if shape.kind == "vanilla":
        attrs["activations"] = ["Relu"]
    if shape.kind == "gru":
        attrs["linear_before_reset"] = 1
    node = helper.make_node(RNN_OPS[shape.kind], [INPUT, "W", "R", "B"], [OUTPUT], **attrs)
    return _model(node, TensorProto.FLOAT, input_shape(shape), TensorProto.FLOAT, output_shape(shape), weights)


def int8_model(shape: Shape, seed: int = 0) -> onnx.ModelProto:
    """The int8 x int8 -> int32 one-op model of `shape` (MatMulInteger, ConvInteger), full-range
    int8 weights; only where int8_supported(shape)."""
    if not int8_supported(shape):
        raise ValueError(f"no int8 model for {describe(shape)}")
    rng = np.random.default_rng(seed)
    if isinstance(shape, GemmShape):
        w = rng.integers(-128, 128, (shape.k, shape.m), dtype=np.int8)
        node = helper.make_node("MatMulInteger", [INPUT, "W"], [OUTPUT])
    else:
        w = rng.integers(-128, 128, (shape.k, shape.c, shape.filter_h, shape.filter_w), dtype=np.int8)
        node = _conv_node("ConvInteger", shape)
    return _model(node, TensorProto.INT8, input_shape(shape), TensorProto.INT32, output_shape(shape),
                  [numpy_helper.from_array(w, "W")])


def fp32_input(shape: Shape, seed: int = 1) -> np.ndarray:
    """The float32 input: N(0, 1)."""
    return np.random.default_rng(seed).standard_normal(input_shape(shape)).astype(np.float32)


def int8_input(shape: Shape, seed: int = 1) -> np.ndarray:
    """The int8 input: uniform over all 256 values."""
    return np.random.default_rng(seed).integers(-128, 128, input_shape(shape), dtype=np.int8)


def weights_of(model: onnx.ModelProto) -> np.ndarray:
    """The model's first constant ("W"), for the numpy GEMM that multiplies by the same matrix."""
    return numpy_helper.to_array(model.graph.initializer[0])
