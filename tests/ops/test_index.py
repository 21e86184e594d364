"""OneHot, Trilu, EyeLike, ReverseSequence, CumSum/CumProd, TopK, Compress,
DepthToSpace/SpaceToDepth, Col2Im, BitCast, ArgMax/ArgMin and every dtype through the
data-movement ops, against onnxruntime (or numpy where onnxruntime lacks a dtype).

Every tensor the kernels read positions or values from is a graph input, so the
generated code is what runs. These ops move or select data, so results must
match exactly (rtol=atol=0), except float sums and products."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import hobbit
from tests.helpers import (BF16, DATA_DTYPES, assert_ort_exact, assert_same, i64, make_model, rand, run_hobbit, run_ort,
                           sample)

OPSET = 18  # Split num_outputs, Pad axes


def _hobbit(nodes, inputs, outputs, inits=None, opset: int = OPSET) -> list[np.ndarray]:
    return run_hobbit(nodes, inputs, outputs, inits, opset)


# -- OneHot ------------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.float32])
def test_one_hot(index_dtype):
    """Every axis position (and negative ones) on one index tensor; indices in and out of [-depth, depth)."""
    depth, axes = 6, [0, 1, 2, 3, -1, -3]
    idx = np.random.default_rng(7).integers(-8, 9, size=(2, 1, 5)).astype(index_dtype)
    if index_dtype == np.float32:
        idx = idx + np.float32(0.5) * np.sign(idx)  # truncated towards zero
    values = np.array([-2.5, 7.0], dtype=np.float32)
    nodes = [helper.make_node("OneHot", ["i", "d", "v"], [f"y{a}"], axis=a) for a in axes]
    assert_ort_exact(nodes, {"i": idx, "v": values}, [f"y{a}" for a in axes],
                     {"d": np.array(depth, dtype=index_dtype)}, opset=11)  # dtype combinations onnxruntime implements


def test_one_hot_int_values_and_constant_values():
    idx = np.array([[0, 3], [-1, 9]], dtype=np.int64)
    assert_ort_exact([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], {"i": idx}, ["y"],
                     {"d": np.array([4.0], dtype=np.float32), "v": np.array([0, 9], dtype=np.int32)})


# -- Trilu and EyeLike -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 5), (5, 3), (2, 3, 3), (2, 1, 1, 6), (0, 4)])
def test_trilu_runtime_k(shape):
    """k is a run-time input: one compiled model serves every k, past either corner too."""
    x = rand(*shape)
    feeds = {"x": x, "k": np.array(0, dtype=np.int64)}
    nodes = [helper.make_node("Trilu", ["x", "k"], ["upper"], upper=1),
             helper.make_node("Trilu", ["x", "k"], ["lower"], upper=0),
             helper.make_node("Trilu", ["x"], ["default"])]
    model = hobbit.compile(make_model(nodes, feeds, ["upper", "lower", "default"]))
    for k in (0, -2, 1, 7, -9, np.iinfo(np.int64).max, np.iinfo(np.int64).min):
        feeds["k"] = np.array(k, dtype=np.int64)
        upper, lower, default = model.run(feeds)
        same_as = int(np.clip(k, -100, 100))  # numpy overflows on the extreme ones
        assert_same(upper, np.triu(x, same_as))
        assert_same(lower, np.tril(x, same_as))
        assert_same(default, np.triu(x))


def test_trilu_matches_onnxruntime():
    feeds = {"x": rand(2, 4, 5), "k": np.array(-1, dtype=np.int64)}
    assert_ort_exact([helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)], feeds, ["y"])


@pytest.mark.parametrize("dtype", [BF16, np.bool_, np.int8])
def test_trilu_dtypes(dtype):
    x = sample((3, 4), dtype)
    got, = _hobbit([helper.make_node("Trilu", ["x"], ["y"], upper=0)], {"x": x}, ["y"])
    assert_same(got, np.tril(x))


@pytest.mark.parametrize("shape,k,dtype", [((3, 4), 0, None), ((4, 3), -1, TensorProto.DOUBLE),
                                           ((2, 5), 3, TensorProto.INT32)])
def test_eye_like(shape, k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    assert_ort_exact([helper.make_node("EyeLike", ["x"], ["y"], **attrs)], {"x": rand(*shape)}, ["y"])


# -- ReverseSequence ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,batch_axis,time_axis", [((4, 3), 1, 0), ((3, 5), 0, 1), ((5, 2, 3), 1, 0),
                                                        ((2, 4, 3, 2), 0, 1)])
def test_reverse_sequence(shape, batch_axis, time_axis):
    steps = shape[time_axis]
    lengths = np.random.default_rng(8).integers(1, steps + 1, size=shape[batch_axis]).astype(np.int64)
    assert_ort_exact([helper.make_node("ReverseSequence", ["x", "n"], ["y"], batch_axis=batch_axis,
                                       time_axis=time_axis)],
                     {"x": rand(*shape), "n": lengths}, ["y"])


# -- CumSum and CumProd ------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), 1)])
def test_cumsum(shape, axis):
    variants = [(0, 0), (1, 0), (0, 1), (1, 1)]
    nodes = [helper.make_node("CumSum", ["x", "a"], [f"y{e}{r}"], exclusive=e, reverse=r) for e, r in variants]
    assert_ort_exact(nodes, {"x": rand(*shape)}, [f"y{e}{r}" for e, r in variants],
                     {"a": np.array(axis, dtype=np.int32)},
                     rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.uint64])
def test_cumsum_dtypes(dtype):
    x = sample((3, 4), dtype)
    nodes = [helper.make_node("CumSum", ["x", "a"], ["y"], reverse=1)]
    got, = _hobbit(nodes, {"x": x}, ["y"], {"a": np.array(1, dtype=np.int64)})
    assert_same(got, np.flip(np.cumsum(np.flip(x, 1), axis=1, dtype=dtype), 1))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, BF16])
def test_cumprod(dtype):
    x = (np.arange(12).reshape(3, 4) % 3 + 1).astype(dtype)
    variants = [(0, 0), (1, 0), (0, 1), (1, 1)]
    nodes = [helper.make_node("CumProd", ["x", "a"], [f"y{e}{r}"], exclusive=e, reverse=r) for e, r in variants]
    got = _hobbit(nodes, {"x": x}, [f"y{e}{r}" for e, r in variants], {"a": np.array(0, dtype=np.int64)}, opset=26)
    for (exclusive, reverse), g in zip(variants, got):
        scan = np.flip(x, 0) if reverse else x
        want = np.cumprod(scan.astype(np.float64), axis=0)
        if exclusive:
            want = np.concatenate([np.ones((1, 4)), want[:-1]])
        assert_same(g, (np.flip(want, 0) if reverse else want).astype(dtype))


# -- TopK ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,k", [((9,), 0, 4), ((3, 7), 1, 7), ((6, 4), 0, 2), ((2, 5, 3), -2, 3),
                                          ((4, 6), 1, 0)])
def test_top_k(shape, axis, k):
    x = np.round(rand(*shape) * 2).astype(np.float32)  # many ties: onnxruntime orders them by index
    nodes = [helper.make_node("TopK", ["x", "k"], ["v1", "i1"], axis=axis, largest=1),
             helper.make_node("TopK", ["x", "k"], ["v0", "i0"], axis=axis, largest=0)]
    assert_ort_exact(nodes, {"x": x}, ["v1", "i1", "v0", "i0"], {"k": i64(k)})


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.float64, np.float16, BF16])
def test_top_k_dtypes(dtype):
    x = sample((3, 8), dtype)
    x[0, :3] = x[0, 5]
    got = _hobbit([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=1)], {"x": x}, ["v", "i"], {"k": i64(5)},
                  opset=24)
    key = ~x if np.dtype(dtype).kind in "iu" else -x.astype(np.float64)
    order = np.argsort(key, axis=1, kind="stable")[:, :5]
    assert_same(got[1], order.astype(np.int64))
    assert_same(got[0], np.take_along_axis(x, order, axis=1))


def test_top_k_attribute_k_opset1():
    assert_ort_exact([helper.make_node("TopK", ["x"], ["v", "i"], k=2)], {"x": rand(3, 5)}, ["v", "i"], opset=9)


# -- Compress ---------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_constant_condition(axis):
    condition = np.array([1, 0, 1, 1], dtype=bool)
    attrs = {} if axis is None else {"axis": axis}
    assert_ort_exact([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)], {"x": rand(4, 4)}, ["y"],
                     {"c": condition})


# -- DepthToSpace and SpaceToDepth -------------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,blocksize", [((1, 8, 2, 3), 2), ((2, 18, 2, 1), 3)])
def test_depth_to_space(mode, shape, blocksize):
    assert_ort_exact([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=blocksize, mode=mode)],
                     {"x": rand(*shape)}, ["y"])


@pytest.mark.parametrize("shape,blocksize", [((1, 2, 4, 6), 2), ((2, 3, 3, 6), 3)])
def test_space_to_depth(shape, blocksize):
    assert_ort_exact([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=blocksize)], {"x": rand(*shape)}, ["y"])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_inverts_depth_to_space(mode):
    x = sample((2, 3, 4, 6), np.int16)
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=2, mode=mode),
             helper.make_node("DepthToSpace", ["s"], ["y"], blocksize=2, mode=mode)]
    got, = _hobbit(nodes, {"x": x}, ["y"], opset=28)
    assert_same(got, x)


# -- Col2Im --------------------------------------------------------------------------------

@pytest.mark.parametrize("image,block,attrs", [
    ((5, 5), (2, 3), {}),
    ((6, 7), (3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((6, 6), (2, 2), {"dilations": [2, 3], "strides": [1, 2]}),
    ((3, 4, 5), (2, 1, 3), {"pads": [0, 1, 1, 1, 0, 2], "strides": [1, 2, 2]}),
])
def test_col2im(image, block, attrs):
    """A run-time input exercises the kernel, a constant one the numpy reference (folded)."""
    rank = len(image)
    strides = attrs.get("strides", [1] * rank)
    dilations = attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    blocks = [(image[d] + pads[d] + pads[d + rank] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
              for d in range(rank)]
    x = rand(2, 3 * int(np.prod(block)), int(np.prod(blocks)))
    nodes = [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs),
             helper.make_node("Col2Im", ["c", "image", "block"], ["folded"], **attrs)]
    assert_ort_exact(nodes, {"x": x}, ["y", "folded"], {"c": x, "image": i64(*image), "block": i64(*block)},
                     rtol=1e-6, atol=1e-6)


# -- BitCast ----------------------------------------------------------------------------------

@pytest.mark.parametrize("source,target", [(np.float32, TensorProto.INT32), (np.uint16, TensorProto.BFLOAT16),
                                           (BF16, TensorProto.FLOAT16), (np.int8, TensorProto.BOOL),
                                           (np.float64, TensorProto.UINT64)])
def test_bit_cast(source, target):
    x = sample((3, 5), source) if np.dtype(source) != np.int8 else np.array([0, 1, 1, 0, 1], np.int8)
    got, = _hobbit([helper.make_node("BitCast", ["x"], ["y"], to=target)], {"x": x}, ["y"], opset=26)
    want_dtype = helper.tensor_dtype_to_np_dtype(target)
    assert_same(got, x.view(want_dtype))


# -- every dtype through the data-movement ops ---------------------------------------------------

@pytest.mark.parametrize("dtype", DATA_DTYPES)
def test_data_movement_dtypes(dtype):
    """Transpose, Slice, Concat, Split, Gather, Expand, Tile and each Pad mode only move
    elements, so every dtype of a size hobbit stores works, bfloat16 and bool included."""
    x = sample((3, 4), dtype)
    value = np.array(1, dtype=dtype)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Slice", ["x", "s0", "s1", "s2", "s3"], ["s"]),
             helper.make_node("Concat", ["x", "x"], ["c"], axis=0),
             helper.make_node("Split", ["x"], ["p0", "p1"], axis=1, num_outputs=2),
             helper.make_node("Gather", ["x", "gi"], ["g"], axis=1),
             helper.make_node("Expand", ["x", "es"], ["e"]),
             helper.make_node("Tile", ["x", "tr"], ["r"]),
             helper.make_node("Pad", ["x", "pads", "value"], ["pc"], mode="constant"),
             helper.make_node("Pad", ["x", "pads"], ["pr"], mode="reflect"),
             helper.make_node("Pad", ["x", "pads"], ["pe"], mode="edge"),
             helper.make_node("Pad", ["x", "pads"], ["pw"], mode="wrap")]
    inits = {"s0": i64(2, 0), "s1": i64(-4, 4), "s2": i64(0, 1), "s3": i64(-1, 2), "gi": np.array([3, 0, -1]),
             "es": i64(2, 3, 4), "tr": i64(2, 1), "pads": i64(1, 2, 2, 0), "value": value}
    outputs = ["t", "s", "c", "p0", "p1", "g", "e", "r", "pc", "pr", "pe", "pw"]
    got = _hobbit(nodes, {"x": x}, outputs, inits)
    pads = ((1, 2), (2, 0))
    want = [x.T, x[2::-1, 0:4:2], np.concatenate([x, x]), x[:, :2], x[:, 2:], x[:, [3, 0, 3]],
            np.broadcast_to(x, (2, 3, 4)), np.tile(x, (2, 1)), np.pad(x, pads, constant_values=value),
            np.pad(x, pads, mode="reflect"), np.pad(x, pads, mode="edge"), np.pad(x, pads, mode="wrap")]
    for g, w in zip(got, want):
        assert_same(g, np.ascontiguousarray(w))


# -- ArgMax and ArgMin on every numeric dtype ----------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64, np.int8, np.uint64])
def test_arg_max_min_dtypes(dtype):
    """16-bit floats compare exactly in float32; ties pick the first or (select_last_index) last."""
    x = sample((3, 5, 4), dtype) // 8 if np.dtype(dtype).kind in "iu" else np.round(sample((3, 5, 4), dtype) / 16)
    x = x.astype(dtype)
    variants = [(op, axis, keep, last) for op in ("ArgMax", "ArgMin") for axis, keep, last in
                ((1, 1, 0), (-1, 0, 1), (0, 0, 0), (1, 0, 1))]
    nodes = [helper.make_node(op, ["x"], [f"y{n}"], axis=axis, keepdims=keep, select_last_index=last)
             for n, (op, axis, keep, last) in enumerate(variants)]
    got = _hobbit(nodes, {"x": x}, [f"y{n}" for n in range(len(variants))])
    wide = x.astype(np.float64)
    for g, (op, axis, keep, last) in zip(got, variants):
        pick = np.argmax if op == "ArgMax" else np.argmin
        want = x.shape[axis] - 1 - pick(np.flip(wide, axis), axis=axis) if last else pick(wide, axis=axis)
        assert_same(g, (np.expand_dims(want, axis) if keep else want).astype(np.int64))


# -- large enough to split across threads ----------------------------------------------------------

def test_large_kernels_split_across_threads():
    """Above PARALLEL_MIN elements the independent kernels share their outer loop; each
    thread must write exactly its own rows (compared with onnxruntime, 3 threads)."""
    rng = np.random.default_rng(9)
    x = rand(96, 400)
    feeds = {"x": x, "gi": rng.integers(-400, 400, size=(96, 400)).astype(np.int64),
             "ni": rng.integers(-96, 96, size=(50, 700, 1)).astype(np.int64),
             "oi": rng.integers(-9, 9, size=(4000,)).astype(np.int64),
             "lens": rng.integers(0, 97, size=(400,)).astype(np.int64), "k": np.array(3, dtype=np.int64)}
    nodes = [helper.make_node("GatherElements", ["x", "gi"], ["ge"], axis=1),
             helper.make_node("GatherND", ["x", "ni"], ["gn"]),
             helper.make_node("OneHot", ["oi", "depth", "values"], ["oh"]),
             helper.make_node("Trilu", ["x", "k"], ["tr"]),
             helper.make_node("CumSum", ["x", "axis"], ["cs"]),
             helper.make_node("TopK", ["x", "kk"], ["tv", "ti"], axis=1),
             helper.make_node("ReverseSequence", ["x", "lens"], ["rs"], batch_axis=1, time_axis=0)]
    inits = {"depth": i64(9), "values": np.array([0.0, 1.0], dtype=np.float32),
             "axis": np.array(1, dtype=np.int64), "kk": i64(90)}
    outputs = ["ge", "gn", "oh", "tr", "cs", "tv", "ti", "rs"]
    model = make_model(nodes, feeds, outputs, inits, opset=18)
    expected = run_ort(model, feeds)
    got = hobbit.compile(model, threads=3).run(feeds)
    for name, g, e in zip(outputs, got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5 if name == "cs" else 0, atol=1e-4 if name == "cs" else 0,
                                   err_msg=name)
