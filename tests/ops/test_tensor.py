"""Data-movement and shape ops against onnxruntime, across axes, ranks and opsets.

Data movement is exact, so outputs must match bit for bit (rtol=atol=0); the
cast test uses float tolerances only where a float is rounded."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hobbit
from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType, Value
from hobbit.ops.registry import get_op
from tests.helpers import assert_matches_ort, make_model, rand

EXACT = {"rtol": 0, "atol": 0}


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _check(nodes, inputs, outputs, inits=None, opset=17):
    model = make_model(nodes, inputs, outputs, inits, opset=opset)
    return assert_matches_ort(model, inputs, **EXACT)


# -- Concat ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,opset", [
    ((7,), 0, 11), ((3, 5), 1, 13), ((3, 5), -2, 17), ((2, 3, 5), -1, 18),
    ((2, 3, 4, 5), 2, 13), ((2, 1, 3, 2, 5), -4, 17),
])
def test_concat(shape, axis, opset):
    rank = len(shape)
    ax = axis % rank
    inputs = {}
    for i, extra in enumerate((1, 3, 2)):
        s = list(shape)
        s[ax] = s[ax] + extra - 1
        inputs[f"x{i}"] = rand(*s, seed=i)
    const = rand(*[d if k != ax else 2 for k, d in enumerate(shape)], seed=9)
    _check([helper.make_node("Concat", ["x0", "c", "x1", "x2"], ["y"], axis=axis)],
           inputs, ["y"], {"c": const}, opset)


def test_concat_axis_past_the_first_operands_rank_is_a_shape_error():
    """Shape inference of a Concat whose first operand is shorter than its axis (what a pass
    rewriting operands might build) refuses it instead of indexing past the shape."""
    short, full = Value("a", TensorType(np.float32, (8, 1))), Value("b", TensorType(np.float32, (1, 8, 9)))
    node = Node("Concat", "cat", [short, full], [Value("y", TensorType(np.float32, (1, 8, 10)))], {"axis": 2})
    with pytest.raises(ShapeError, match="Concat 'cat': axis 2"):
        get_op("Concat").infer(node)


# -- Split -------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("shape,axis", [((9,), 0), ((4, 7), -1), ((2, 6, 3, 5), 1)])
def test_split_sizes(opset, shape, axis):
    dim = shape[axis]
    sizes = [1, dim - 3, 2]
    x = rand(*shape)
    if opset < 13:
        node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=axis, split=sizes)
        inits = {}
    else:
        node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=axis)
        inits = {"s": _i64(*sizes)}
    _check([node], {"x": x}, ["a", "b", "c"], inits, opset)


def test_split_equal_and_num_outputs():
    x = rand(2, 6, 7)
    _check([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1)], {"x": x}, ["a", "b", "c"], opset=13)
    _check([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)],
           {"x": x}, ["a", "b", "c"], opset=18)


# -- Slice -------------------------------------------------------------------------

_SLICES = [  # starts, ends, axes, steps
    ([1], [4], [0], [1]),
    ([-1], [-100], [1], [-1]),                       # reverse a whole dim, end clamped to -1
    ([10, 0], [-10, 2**62], [0, 2], [-2, 3]),        # start clamped to dim-1, huge end
    ([0, -3], [1, 100], [-1, -3], [1, 2]),
    ([2], [2], [1], [1]),                            # empty result
    ([-2, 1], [-5, 3], [2, 1], [-1, 1]),
]


@pytest.mark.parametrize("opset", [10, 13, 18])
def test_slice_inputs(opset):
    x = rand(5, 6, 7)
    nodes, inits, outs = [], {}, []
    for i, (starts, ends, axes, steps) in enumerate(_SLICES):
        names = [f"s{i}", f"e{i}", f"a{i}", f"t{i}"]
        for n, v in zip(names, (starts, ends, axes, steps)):
            inits[n] = _i64(*v)
        nodes.append(helper.make_node("Slice", ["x"] + names, [f"y{i}"]))
        outs.append(f"y{i}")
    # axes and steps omitted: the first len(starts) dims, step 1
    inits.update({"s_d": _i64(1, -4), "e_d": _i64(-1, 1000)})
    nodes.append(helper.make_node("Slice", ["x", "s_d", "e_d"], ["yd"]))
    _check(nodes, {"x": x}, outs + ["yd"], inits, opset)


def test_slice_attrs_opset9_and_5d():
    x = rand(2, 3, 4, 5, 6)
    nodes = [helper.make_node("Slice", ["x"], ["y"], starts=[1, -3, 0], ends=[100, -1, 2], axes=[4, 2, 0]),
             helper.make_node("Slice", ["x"], ["z"], starts=[1], ends=[3])]
    _check(nodes, {"x": x}, ["y", "z"], opset=9)


def test_slice_runtime_starts_specialise_per_value():
    """Starts fed as an input decide the output shape: hobbit compiles one variant per value."""
    x = rand(4, 4)
    model = make_model([helper.make_node("Slice", ["x", "s", "e"], ["y"])],
                       {"x": x, "s": _i64(1)}, ["y"], {"e": _i64(3)}, opset=13)
    compiled = hobbit.compile(model)
    assert compiled.value_inputs == ["s"]
    for start in (1, 0, 2, 1):
        y, = compiled.run({"x": x, "s": _i64(start)})
        np.testing.assert_array_equal(y, x[start:3])


# -- Pad ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode,pads,shape", [
    ("constant", (1, 0, 2, 3, 2, 0), (3, 4, 5)),
    ("constant", (-1, 2, 0, -2), (4, 5)),            # negative pads crop
    ("constant", (0, 1, 1, 0, 0, 0, 2, 1, 1, 2), (2, 2, 3, 4, 5)),
    ("reflect", (0, 2, 1, 0, 3, 2), (2, 4, 5)),
    ("edge", (1, 3, 2, 0), (3, 4)),
    ("edge", (2, 1), (5,)),
])
@pytest.mark.parametrize("opset", [11, 18])
def test_pad(mode, pads, shape, opset):
    x = rand(*shape)
    inputs = ["x", "p"] + (["v"] if mode == "constant" else [])
    inits = {"p": _i64(*pads), "v": np.array(1.5, np.float32)}
    if mode != "constant":
        inits.pop("v")
    _check([helper.make_node("Pad", inputs, ["y"], mode=mode)], {"x": x}, ["y"], inits, opset)


def test_pad_attrs_opset2_and_int():
    x = rand(3, 4)
    _check([helper.make_node("Pad", ["x"], ["y"], pads=[1, 2, 0, 1], value=-2.0)], {"x": x}, ["y"], opset=9)
    xi = np.arange(12, dtype=np.int64).reshape(3, 4)
    _check([helper.make_node("Pad", ["x", "p", "v"], ["y"])], {"x": xi}, ["y"],
           {"p": _i64(0, 1, 2, 0), "v": np.array(7, np.int64)}, opset=13)


def test_pad_axes_and_wrap():
    x = rand(2, 3, 4)
    _check([helper.make_node("Pad", ["x", "p", "", "a"], ["y"]),
            helper.make_node("Pad", ["x", "p", "", "a"], ["w"], mode="wrap")],
           {"x": x}, ["y", "w"], {"p": _i64(1, 2, 2, 1), "a": _i64(-1, 1)}, opset=19)


# -- Gather ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,indices", [
    ((7,), 0, [[3, -1], [0, 6]]),
    ((4, 5), 1, [4, 0, -2, 0]),
    ((4, 5), -2, 2),                                  # scalar index drops the dim
    ((2, 3, 4, 5), 2, [1, 2]),                        # affine indices: a strided copy
    ((2, 3, 4, 5), -1, [[4], [0], [2]]),
    ((2, 3, 2, 3, 2), 0, [1, 1, 0]),
])
def test_gather_constant_indices(shape, axis, indices):
    x = rand(*shape)
    _check([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], {"x": x}, ["y"],
           {"i": np.array(indices, np.int64)}, opset=13)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_runtime_indices(dtype):
    x = rand(3, 6, 4)
    idx = np.array([[5, -6], [0, -1], [2, 3]], dtype=dtype)
    table = rand(10, 8, seed=3)  # an embedding: constant data, runtime indices
    tok = np.array([9, 0, -1, 4], dtype=dtype)
    _check([helper.make_node("Gather", ["x", "i"], ["y"], axis=1),
            helper.make_node("Gather", ["t", "k"], ["e"], axis=0)],
           {"x": x, "i": idx, "k": tok}, ["y", "e"], {"t": table}, opset=13)


# -- Expand and Tile ---------------------------------------------------------------

@pytest.mark.parametrize("shape,target", [
    ((3, 1), (2, 3, 4)), ((1,), (5,)), ((4, 1, 5), (1, 3, 1)), ((2, 1, 1, 3, 1), (2, 4, 3, 2)),
])
def test_expand(shape, target):
    x = rand(*shape)
    _check([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": _i64(*target)}, opset=13)


@pytest.mark.parametrize("shape,repeats", [((5,), (3,)), ((2, 3), (2, 1)), ((1, 3, 2, 4), (2, 2, 1, 3))])
def test_tile(shape, repeats):
    x = rand(*shape)
    _check([helper.make_node("Tile", ["x", "r"], ["y"])], {"x": x}, ["y"], {"r": _i64(*repeats)}, opset=13)


# -- Squeeze, Unsqueeze, Transpose, Reshape ----------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    x = rand(1, 3, 1, 4)
    if opset < 13:
        nodes = [helper.make_node("Squeeze", ["x"], ["a"], axes=[0, -2]),
                 helper.make_node("Unsqueeze", ["a"], ["b"], axes=[-1, 0, 2])]
        inits = {}
    else:
        nodes = [helper.make_node("Squeeze", ["x", "sa"], ["a"]),
                 helper.make_node("Unsqueeze", ["a", "ua"], ["b"])]
        inits = {"sa": _i64(0, -2), "ua": _i64(-1, 0, 2)}
    nodes += [helper.make_node("Squeeze", ["x"], ["c"]), helper.make_node("Relu", ["b"], ["d"])]
    _check(nodes, {"x": x}, ["a", "b", "c", "d"], inits, opset)


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [4, 0, 3, 1, 2]])
def test_transpose(perm):
    x = rand(*((2, 3, 4, 5, 3) if perm and len(perm) == 5 else (3, 4, 5)))
    attrs = {} if perm is None else {"perm": perm}
    _check([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": x}, ["y"])


def test_reshape_attr_form_opset4():
    x = rand(2, 3, 4)
    _check([helper.make_node("Reshape", ["x"], ["y"], shape=[0, -1]),
            helper.make_node("Identity", ["y"], ["z"])], {"x": x}, ["y", "z"], opset=4)


# -- Cast ----------------------------------------------------------------------------

def test_cast():
    x = (rand(4, 9) * 100).astype(np.float32)
    x[0, :3] = [0.0, -0.0, 0.5]
    casts = [("i32", TensorProto.INT32), ("i64", TensorProto.INT64), ("f64", TensorProto.DOUBLE),
             ("b", TensorProto.BOOL), ("i8", TensorProto.INT8), ("f16", TensorProto.FLOAT16)]
    nodes = [helper.make_node("Cast", ["x"], [name], to=to) for name, to in casts]
    nodes += [helper.make_node("Cast", ["i64"], ["back"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["i32"], ["wide"], to=TensorProto.INT64),
              helper.make_node("Cast", ["i64"], ["narrow"], to=TensorProto.INT32)]
    model = make_model(nodes, {"x": np.clip(x, -120, 120)}, [n for n, _ in casts] + ["back", "bf", "wide", "narrow"])
    assert_matches_ort(model, {"x": np.clip(x, -120, 120)}, rtol=1e-3, atol=0)


# -- Comparisons, logic, Where -----------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_compare_logic_where(dtype):
    a = (rand(3, 4, 5) * 3).round().astype(dtype)
    b = (rand(4, 1, seed=1) * 3).round().astype(dtype)
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()])
             for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")]
    nodes += [helper.make_node("And", ["less", "equal"], ["and"]),
              helper.make_node("Or", ["greater", "equal"], ["or"]),
              helper.make_node("Xor", ["lessorequal", "greaterorequal"], ["xor"]),
              helper.make_node("Not", ["less"], ["not"]),
              helper.make_node("Where", ["greater", "a", "b"], ["where"])]
    outs = ["equal", "less", "greater", "lessorequal", "greaterorequal", "and", "or", "xor", "not", "where"]
    _check(nodes, {"a": a, "b": b}, outs, opset=13)


def test_cast_and_bool_ops_fuse():
    """Cast feeding an int Add, Less -> Not and Where -> Relu each become one fused kernel."""
    x = rand(3, 17) * 10
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT64),
             helper.make_node("Add", ["c", "k"], ["y"]),
             helper.make_node("Less", ["x", "z"], ["l"]),
             helper.make_node("Not", ["l"], ["n"]),
             helper.make_node("Where", ["n", "x", "z"], ["w"]),
             helper.make_node("Relu", ["w"], ["r"])]
    model = make_model(nodes, {"x": x}, ["y", "n", "r"],
                       {"k": np.arange(17, dtype=np.int64), "z": np.zeros((1, 17), np.float32)})
    assert_matches_ort(model, {"x": x}, **EXACT)
    graph = hobbit.compile(model).report.graph
    assert [[n.op] + [s.op for s in n.epilogue] for n in graph.nodes] == [
        ["Cast", "Add"], ["Less", "Not"], ["Where", "Relu"]]


def test_latest_opset():
    """Converters pick the newest version <= the model's opset, so the newest opset imports too."""
    x = rand(2, 3)
    _check([helper.make_node("Unsqueeze", ["x", "ax"], ["y"])], {"x": x}, ["y"], {"ax": _i64(1)},
           opset=onnx.defs.onnx_opset_version())
