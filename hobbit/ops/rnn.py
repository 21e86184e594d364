"""The recurrence of RNN, GRU and LSTM as one graph op, `Recurrence`.

Converters compute the input projection XW = X·Wᵀ + biases for all steps with a
MatMul and hand this op the rest (see hobbit/backend/cpu/rnn.py for the input list).
Attributes: cell ("RNN", "GRU", "LSTM"), hidden_size, reverse (one 0/1 per
direction), activations (per direction, the cell's (name, alpha, beta) triples:
f for RNN; f, g for GRU; f, g, h for LSTM), clip (<= 0: none),
linear_before_reset (GRU), input_forget (LSTM). Outputs Y [seq, dirs, batch, H],
Y_h [dirs, batch, H] and, for LSTM, Y_c [dirs, batch, H]."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hobbit.errors import ShapeError
from hobbit.graph.ir import Node, TensorType
from hobbit.ops.registry import OpDef, register_op
from hobbit.plan.rnn import GATES


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


NUMPY_ACTIVATIONS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x < 0, a * x, x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: np.where(x < 0, a * (np.exp(x) - 1), x),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: np.log1p(np.exp(x)),
}


def _infer(node: Node) -> list[TensorType]:
    a = node.attrs
    xw, r = node.inputs[0], node.inputs[1]
    hidden, dirs, gates = a["hidden_size"], len(a["reverse"]), GATES[a["cell"]]
    if len(xw.shape) != 3 or xw.shape[2] != dirs * gates * hidden:
        raise ShapeError(f"Recurrence input {xw.type} is not [seq, batch, {dirs}*{gates}*{hidden}]")
    if tuple(r.shape) != (dirs, gates * hidden, hidden):
        raise ShapeError(f"Recurrence R {r.type} is not [{dirs}, {gates * hidden}, {hidden}]")
    seq, batch, _ = xw.shape
    state = TensorType(xw.dtype, (dirs, batch, hidden))
    outputs = [TensorType(xw.dtype, (seq, dirs, batch, hidden)), state]
    return outputs + [state] if a["cell"] == "LSTM" else outputs


def _reference(ins: list, a: dict) -> list[np.ndarray]:
    xw, r, rbias, lens, h0, c0, peep = (list(ins) + [None] * 7)[:7]
    seq, batch, _ = xw.shape
    hidden, dirs, cell = a["hidden_size"], len(a["reverse"]), a["cell"]
    g = GATES[cell]
    xw = xw.reshape(seq, batch, dirs, g, hidden).astype(np.float64)
    lengths = np.full(batch, seq) if lens is None else lens.astype(np.int64)
    if np.any((lengths < 0) | (lengths > seq)):
        raise ShapeError(f"sequence length {int(lengths[(lengths < 0) | (lengths > seq)][0])} "
                         f"is out of range [0, {seq}]")
    y = np.zeros((seq, dirs, batch, hidden))
    h_out = np.zeros((dirs, batch, hidden))
    c_out = np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        acts = [_numpy_activation(spec) for spec in a["activations"][d]]
        for b in range(batch):
            h = np.zeros(hidden) if h0 is None else h0[d, b].astype(np.float64)
            c = np.zeros(hidden) if c0 is None else c0[d, b].astype(np.float64)
            steps = range(lengths[b])
            for t in (reversed(steps) if a["reverse"][d] else steps):
                gates = xw[t, b, d]
                rec = r[d].reshape(g, hidden, hidden).astype(np.float64)
                h, c = _cell_step(cell, a, acts, gates, rec, h, c, d, rbias, peep)
                y[t, d, b] = h
            h_out[d, b], c_out[d, b] = h, c
    dtype = ins[0].dtype
    outs = [y.astype(dtype), h_out.astype(dtype)]
    return outs + [c_out.astype(dtype)] if cell == "LSTM" else outs


def _numpy_activation(spec) -> Callable[[np.ndarray], np.ndarray]:
    name, alpha, beta = spec
    return lambda x: NUMPY_ACTIVATIONS[name](x, alpha, beta)


def _cell_step(cell: str, a: dict, acts: list, gates: np.ndarray, rec: np.ndarray, h: np.ndarray,
               c: np.ndarray, d: int, rbias, peep) -> tuple[np.ndarray, np.ndarray]:
    def clip(x):
        return np.clip(x, -a["clip"], a["clip"]) if a["clip"] > 0 else x

    if cell == "RNN":
        return acts[0](clip(gates[0] + rec[0] @ h)), c
    if cell == "GRU":
        z = acts[0](clip(gates[0] + rec[0] @ h))
        r = acts[0](clip(gates[1] + rec[1] @ h))
        if a["linear_before_reset"]:
            rb = 0 if rbias is None else rbias[d].astype(np.float64)
            candidate = acts[1](clip(gates[2] + r * (rec[2] @ h + rb)))
        else:
            candidate = acts[1](clip(gates[2] + rec[2] @ (r * h)))
        return (1 - z) * candidate + z * h, c
    p = np.zeros((3, len(h))) if peep is None else peep[d].reshape(3, -1).astype(np.float64)
    i = acts[0](clip(gates[0] + rec[0] @ h + p[0] * c))
    f = 1 - i if a["input_forget"] else acts[0](clip(gates[2] + rec[2] @ h + p[2] * c))
    c = f * c + i * acts[1](clip(gates[3] + rec[3] @ h))
    o = acts[0](clip(gates[1] + rec[1] @ h + p[1] * c))
    return o * acts[2](c), c


def _flops(node: Node) -> int:
    seq, batch, width = node.inputs[0].shape
    return 2 * seq * batch * width * node.attrs["hidden_size"]


register_op(OpDef(
    "Recurrence", infer=_infer, reference=_reference, flops=_flops,
    checks_data=True,
    attrs={"cell": "RNN", "hidden_size": 1, "reverse": (0,), "activations": ((("Tanh", 0.0, 0.0),),),
           "clip": 0.0, "linear_before_reset": 0, "input_forget": 0},
    doc="the sequential part of RNN/GRU/LSTM: inputs XW[seq, batch, dirs*G*H] (input projection with "
        "biases), R, GRU's Rb_h, sequence_lens, initial_h, initial_c, P; outputs Y, Y_h[, Y_c]"))
