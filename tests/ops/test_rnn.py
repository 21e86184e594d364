"""RNN, GRU and LSTM against onnxruntime: directions, sequence_lens, initial states,
biases, peepholes, clip, layout 1, non-default activations, float64, and threads.
Every input is a runtime input, so the recurrence kernel itself runs."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import hobbit
from tests.helpers import make_model, rand, run_ort

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6


def _feeds(cell, dirs, dtype=np.float32, layout=0, lens=None, states=True, peepholes=False):
    g = GATES[cell]
    x_shape = (BATCH, SEQ, INPUT) if layout else (SEQ, BATCH, INPUT)
    state_shape = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    feeds = {"X": rand(*x_shape, seed=1, dtype=dtype),
             "W": 0.5 * rand(dirs, g * HIDDEN, INPUT, seed=2, dtype=dtype),
             "R": 0.5 * rand(dirs, g * HIDDEN, HIDDEN, seed=3, dtype=dtype),
             "B": 0.5 * rand(dirs, 2 * g * HIDDEN, seed=4, dtype=dtype),
             "sequence_lens": np.array(lens if lens is not None else [SEQ] * BATCH, dtype=np.int32)}
    if states:
        feeds["initial_h"] = rand(*state_shape, seed=5, dtype=dtype)
        if cell == "LSTM":
            feeds["initial_c"] = rand(*state_shape, seed=6, dtype=dtype)
    if peepholes:
        feeds["P"] = rand(dirs, 3 * HIDDEN, seed=7, dtype=dtype)
    return feeds


def _check(cell, feeds, threads=1, rtol=1e-4, atol=1e-5, **attrs):
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    if cell != "LSTM":
        names = names[:6]
    inputs = [n if n in feeds else "" for n in names]
    while inputs and not inputs[-1]:
        inputs.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if cell == "LSTM" else [])
    node = helper.make_node(cell, inputs, outputs, hidden_size=HIDDEN, **attrs)
    model = make_model([node], feeds, outputs, opset=14)
    if feeds["X"].dtype == np.float64:  # onnxruntime's recurrent kernels are float32 only
        expected = ReferenceEvaluator(model).run(None, feeds)
    else:
        expected = run_ort(model, feeds)
    got = hobbit.compile(model, threads=threads).run(feeds)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_ragged_sequence_lens(cell, direction):
    dirs = 2 if direction == "bidirectional" else 1
    _check(cell, _feeds(cell, dirs, lens=[5, 2, 3]), direction=direction)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_layout_1_and_two_threads(cell):
    """onnxruntime has no layout 1: compare with its layout-0 result on transposed data."""
    feeds = _feeds(cell, 2, layout=1, lens=[4, 5, 1])
    outputs = ["Y", "Y_h"] + (["Y_c"] if cell == "LSTM" else [])
    node = helper.make_node(cell, list(feeds), outputs, hidden_size=HIDDEN, direction="bidirectional", layout=1)
    got = hobbit.compile(make_model([node], feeds, outputs, opset=14), threads=2).run(feeds)
    seq_major = {k: v.transpose(1, 0, 2) if k in ("X", "initial_h", "initial_c") else v for k, v in feeds.items()}
    node0 = helper.make_node(cell, list(feeds), outputs, hidden_size=HIDDEN, direction="bidirectional")
    expected = run_ort(make_model([node0], seq_major, outputs, opset=14), seq_major)
    np.testing.assert_allclose(got[0], expected[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    for g, e in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(g, e.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_float64_without_initial_state(cell):
    _check(cell, _feeds(cell, 1, dtype=np.float64, states=False), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset(linear_before_reset):
    _check("GRU", _feeds("GRU", 2, lens=[3, 5, 4]), direction="bidirectional",
           linear_before_reset=linear_before_reset)


def test_lstm_peepholes_clip_and_input_forget():
    _check("LSTM", _feeds("LSTM", 1, peepholes=True, lens=[5, 4, 2]), clip=0.7, input_forget=1)


def test_non_default_activations():
    _check("GRU", _feeds("GRU", 2), direction="bidirectional",
           activations=["HardSigmoid", "Relu", "Sigmoid", "LeakyRelu"],
           activation_alpha=[0.3, 0.05], activation_beta=[0.4])


def test_minimal_inputs_and_missing_outputs():
    feeds = {k: v for k, v in _feeds("LSTM", 1).items() if k in ("X", "W", "R")}
    node = helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=HIDDEN)
    model = make_model([node], feeds, ["Y_h"], opset=14)
    got, = hobbit.compile(model).run(feeds)
    np.testing.assert_allclose(got, run_ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_unknown_activation_is_unsupported():
    feeds = _feeds("RNN", 1)
    node = helper.make_node("RNN", list(feeds), ["Y"], hidden_size=HIDDEN, activations=["Gelu"])
    with pytest.raises(hobbit.errors.UnsupportedModelError, match="activation"):
        hobbit.compile(make_model([node], feeds, ["Y"], opset=14))


def test_lstm_with_constant_weights():
    """The usual exported form: W, R, B are initializers (the input projection folds W's transpose)."""
    feeds = _feeds("LSTM", 2)
    weights = {k: feeds.pop(k) for k in ("W", "R", "B")}
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c"],
                            ["Y", "Y_h", "Y_c"], hidden_size=HIDDEN, direction="bidirectional")
    model = make_model([node], feeds, ["Y", "Y_h", "Y_c"], weights, opset=14)
    for g, e in zip(hobbit.compile(model).run(feeds), run_ort(model, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_float16_gru_runs_in_float32():
    """onnxruntime has no float16 GRU: the float32 run on the same (float16-exact) data decides."""
    feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in _feeds("GRU", 1).items()}
    node = helper.make_node("GRU", list(feeds), ["Y", "Y_h"], hidden_size=HIDDEN)
    got = hobbit.compile(make_model([node], feeds, ["Y", "Y_h"], opset=14)).run(feeds)
    wide = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()}
    expected = run_ort(make_model([node], wide, ["Y", "Y_h"], opset=14), wide)
    for g, e in zip(got, expected):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), e, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_constant_inputs_fold_through_the_reference(cell):
    """With every input constant the recurrence is folded at import by its numpy reference."""
    inits = _feeds(cell, 2, lens=[5, 2, 3])
    outputs = ["Y", "Y_h"] + (["Y_c"] if cell == "LSTM" else [])
    attrs = {"linear_before_reset": 1} if cell == "GRU" else {}
    node = helper.make_node(cell, list(inits), outputs, hidden_size=HIDDEN, direction="bidirectional", **attrs)
    model = make_model([node], {}, outputs, inits, opset=14)
    for g, e in zip(hobbit.compile(model).run({}), run_ort(model, {})):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_batch_larger_than_a_row_block_with_a_short_last_block(cell):
    """11 rows = one block of 8 and one of 3, on two threads, ragged lengths, both directions."""
    g = GATES[cell]
    lens = np.array([5, 1, 3, 5, 0, 2, 4, 5, 3, 1, 5], np.int32)
    feeds = {"X": rand(SEQ, 11, INPUT, seed=1), "W": 0.5 * rand(2, g * HIDDEN, INPUT, seed=2),
             "R": 0.5 * rand(2, g * HIDDEN, HIDDEN, seed=3), "B": 0.5 * rand(2, 2 * g * HIDDEN, seed=4),
             "sequence_lens": np.maximum(lens, 1), "initial_h": rand(2, 11, HIDDEN, seed=5)}
    if cell == "LSTM":
        feeds["initial_c"] = rand(2, 11, HIDDEN, seed=6)
    _check(cell, feeds, threads=2, direction="bidirectional")
