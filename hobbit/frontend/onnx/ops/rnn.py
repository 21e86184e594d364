"""Converters for RNN, GRU and LSTM.

Each becomes: (layout 1: transposes to the sequence-major layout), one MatMul for
the input projection of every step X·Wᵀ plus the biases that can be folded into it,
the `Recurrence` op for the sequential part, and transposes back for layout 1.
float16/bfloat16 models run in float32 and round their outputs once."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen_half
from hobbit.frontend.onnx.converters import converter
from hobbit.ops.rnn import GATES, NUMPY_ACTIVATIONS

_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
# (alpha, beta) defaults of the activations that take them, as ONNX's RNN docs give them.
_DEFAULT_PARAMS = {"Affine": (1.0, 0.0), "LeakyRelu": (0.01, None), "ThresholdedRelu": (1.0, None),
                   "ScaledTanh": (1.0, 1.0), "HardSigmoid": (0.2, 0.5), "Elu": (1.0, None)}
_CANONICAL = {name.lower(): name for name in NUMPY_ACTIVATIONS}


def _activations(cell: str, a: dict, dirs: int) -> tuple:
    """Per direction, the cell's (name, alpha, beta) triples. activation_alpha/beta are
    consumed in order by the activations that take an alpha/beta (as onnxruntime does)."""
    names = [str(n) for n in a.get("activations", [])] or list(_DEFAULT_ACTIVATIONS[cell]) * dirs
    per_dir = len(_DEFAULT_ACTIVATIONS[cell])
    if len(names) != per_dir * dirs:
        raise Unsupported(f"{cell} with {len(names)} activations (expected {per_dir * dirs})")
    alphas = [float(v) for v in a.get("activation_alpha", [])]
    betas = [float(v) for v in a.get("activation_beta", [])]
    triples = []
    for name in names:
        canonical = _CANONICAL.get(name.lower())
        if canonical is None:
            raise Unsupported(f"{cell} activation {name!r}")
        alpha, beta = _DEFAULT_PARAMS.get(canonical, (None, None))
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        triples.append((canonical, alpha or 0.0, beta or 0.0))
    return tuple(tuple(triples[d * per_dir:(d + 1) * per_dir]) for d in range(dirs))


def _slice_cols(ctx, v, start: int, size: int):
    """v[:, start:start + size] of a 2-D value."""
    rows = v.shape[0]
    return ctx.emit1("Slice", [v], {"starts": (0, start), "steps": (1, 1), "sizes": (rows, size)})


def _input(ins: list, index: int):
    return ins[index] if len(ins) > index else None


def _convert(cell: str):
    def convert(ctx, node, ins):
        a = ctx.attrs(node)
        dtype = np.dtype(ins[0].dtype)
        ins = [None if v is None else widen_half(ctx, v) for v in ins]
        x, w, r = ins[0], ins[1], ins[2]
        if np.dtype(x.dtype) not in (np.float32, np.float64):
            raise Unsupported(f"{cell} on {dtype.name} tensors")
        direction = a.get("direction", "forward")
        reverse = {"forward": (0,), "reverse": (1,), "bidirectional": (0, 1)}.get(direction)
        if reverse is None:
            raise Unsupported(f"{cell} direction {direction!r}")
        dirs, gates = len(reverse), GATES[cell]
        hidden = int(a.get("hidden_size", r.shape[-1]))
        layout = int(a.get("layout", 0))
        if len(x.shape) != 3 or tuple(w.shape[:2]) != (dirs, gates * hidden) or \
                tuple(r.shape) != (dirs, gates * hidden, hidden) or w.shape[2] != x.shape[2]:
            raise Unsupported(f"{cell} shapes X {x.shape}, W {w.shape}, R {r.shape} do not fit "
                              f"{dirs} direction(s) and hidden_size {hidden}")
        if cell == "LSTM" and _input(ins, 7) is not None and tuple(ins[7].shape) != (dirs, 3 * hidden):
            raise Unsupported(f"LSTM peepholes of shape {ins[7].shape}")
        if layout:
            x = ctx.emit1("Transpose", [x], {"perm": (1, 0, 2)})
        seq, batch, width = x.shape
        gh = gates * hidden

        # Input projection of all steps: [seq*batch, I] x [I, dirs*G*H] (+ biases).
        flat = ctx.emit1("Reshape", [x], {"shape": (seq * batch, width)})
        w_t = ctx.emit1("Reshape", [ctx.emit1("Transpose", [w], {"perm": (2, 0, 1)})], {"shape": (width, dirs * gh)})
        xw = ctx.emit1("MatMul", [flat, w_t])
        bias, rbias_h = _biases(ctx, cell, _input(ins, 3), a, dirs, hidden)
        if bias is not None:
            xw = ctx.emit1("Add", [xw, ctx.emit1("Reshape", [bias], {"shape": (dirs * gh,)})])
        xw = ctx.emit1("Reshape", [xw], {"shape": (seq, batch, dirs * gh)})

        lens = _input(ins, 4)
        if lens is not None and np.dtype(lens.dtype) != np.int32:
            lens = ctx.emit1("Cast", [lens], {"to": "int32"})
        states = [_input(ins, 5), _input(ins, 6) if cell == "LSTM" else None]
        for k, state in enumerate(states):
            if state is not None and layout:
                states[k] = ctx.emit1("Transpose", [state], {"perm": (1, 0, 2)})
        peep = _input(ins, 7) if cell == "LSTM" else None
        attrs = {"cell": cell, "hidden_size": hidden, "reverse": reverse,
                 "activations": _activations(cell, a, dirs), "clip": float(a.get("clip", 0.0)),
                 "linear_before_reset": int(a.get("linear_before_reset", 0)),
                 "input_forget": int(a.get("input_forget", 0))}
        outs = ctx.emit("Recurrence", [xw, r, rbias_h, lens] + states + [peep], attrs,
                        n_outputs=3 if cell == "LSTM" else 2)
        if layout:
            outs = [ctx.emit1("Transpose", [outs[0]], {"perm": (2, 0, 1, 3)})] + \
                   [ctx.emit1("Transpose", [v], {"perm": (1, 0, 2)}) for v in outs[1:]]
        return [narrow(ctx, v, dtype) for v in outs]
    return convert


def _biases(ctx, cell: str, b, a: dict, dirs: int, hidden: int):
    """(bias folded into XW [dirs, G*H] or None, GRU's separate Rb_h [dirs, H] or None).

    B = [Wb, Rb]; both add to the gate pre-activations, except GRU's Rb_h under
    linear_before_reset, which is scaled by the reset gate and stays in the kernel."""
    if b is None:
        return None, None
    gh = GATES[cell] * hidden
    if tuple(b.shape) != (dirs, 2 * gh):
        raise Unsupported(f"{cell} bias of shape {b.shape} (expected {(dirs, 2 * gh)})")
    wb, rb = _slice_cols(ctx, b, 0, gh), _slice_cols(ctx, b, gh, gh)
    if cell == "GRU" and int(a.get("linear_before_reset", 0)):
        zeros = ctx.const(np.zeros((dirs, hidden), dtype=b.dtype))
        rb_zr = ctx.emit1("Concat", [_slice_cols(ctx, rb, 0, 2 * hidden), zeros], {"axis": 1})
        return ctx.emit1("Add", [wb, rb_zr]), _slice_cols(ctx, rb, 2 * hidden, hidden)
    return ctx.emit1("Add", [wb, rb]), None


for _cell in ("RNN", "GRU", "LSTM"):
    converter(_cell, since=7)(_convert(_cell))
