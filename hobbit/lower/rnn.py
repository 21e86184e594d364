"""The recurrence kernel of RNN, GRU and LSTM.

The input projection X·Wᵀ (+ biases) of every time step is one MatMul before this
kernel (graph ops), so what is left here is inherently sequential: per step, each
gate is the precomputed projection plus a dot product of a row of R with the
previous hidden state, then the cell's element-wise update. Batch rows and
directions are independent, so (direction, batch row) pairs are shared among
threads; each pair walks its own sequence length (sequence_lens, clamped to
[0, seq]) and writes zeros to Y past it. The running state lives in the Y_h
(and Y_c) outputs; gate values go to per-thread scratch.

Node inputs: XW [seq, batch, dirs*G*H], R [dirs, G*H, H], GRU's recurrent h-gate
bias Rbh [dirs, H] (only with linear_before_reset), sequence_lens [batch] int32,
initial_h and initial_c [dirs, batch, H], peepholes P [dirs, 3H]; all but the
first two are optional. Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from hobbit.lower.builder import KernelBuilder
from hobbit.lower.kernel import KernelArgs
from hobbit.lower.reduce import hreduce, row_width, vector_type
from hobbit.lower.scalar import Emit

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}

ActivationEmit = Callable[[Emit, ir.Value, float, float], ir.Value]

ACTIVATIONS: dict[str, ActivationEmit] = {
    "Relu": lambda e, x, a, b: e.max(x, e.c(0.0)),
    "Tanh": lambda e, x, a, b: e.tanh(x),
    "Sigmoid": lambda e, x, a, b: e.sigmoid(x),
    "Affine": lambda e, x, a, b: e.fma(x, e.c(a), e.c(b)),
    "LeakyRelu": lambda e, x, a, b: e.select(e.lt(x, e.c(0.0)), e.mul(x, e.c(a)), x),
    "ThresholdedRelu": lambda e, x, a, b: e.select(e.gt(x, e.c(a)), x, e.c(0.0)),
    "ScaledTanh": lambda e, x, a, b: e.mul(e.c(a), e.tanh(e.mul(x, e.c(b)))),
    "HardSigmoid": lambda e, x, a, b: e.clamp(e.fma(x, e.c(a), e.c(b)), 0.0, 1.0),
    "Elu": lambda e, x, a, b: e.select(e.lt(x, e.c(0.0)), e.mul(e.c(a), e.sub(e.exp(x), e.c(1.0))), x),
    "Softsign": lambda e, x, a, b: e.div(x, e.add(e.c(1.0), e.abs(x))),
    "Softplus": lambda e, x, a, b: e.log(e.add(e.exp(x), e.c(1.0))),
}


def recurrence_scratch_bytes(node, target, threads: int) -> int:
    """Per thread: the G gate rows of one step plus one row for GRU's r (.) h."""
    hidden = node.attrs["hidden_size"]
    return threads * (GATES[node.attrs["cell"]] + 1) * hidden * np.dtype(node.inputs[0].dtype).itemsize


def _dot(kb: KernelBuilder, dtype: np.dtype, lanes: int, a: ir.Value, a_base, b: ir.Value, b_base,
         length: int) -> ir.Value:
    """sum(a[a_base + k] * b[b_base + k] for k < length), vectorised with a masked tail."""
    width = row_width(lanes, length)
    acc = kb.alloca(vector_type(dtype, width))
    kb.b.store(kb.const(dtype, 0, width), acc)
    e = Emit(kb, dtype, width)

    def step(index, mask) -> None:
        x = kb.vload(a, dtype, kb.add(a_base, index), width, mask)
        y = kb.vload(b, dtype, kb.add(b_base, index), width, mask)
        kb.b.store(e.fma(x, y, kb.b.load(acc)), acc)

    full = length - length % width
    if full:
        with kb.loop(0, full, width, name="k") as k:
            step(k, None)
    if length % width:
        step(full, kb.prefix_mask(width, length % width))
    return hreduce(kb, dtype, kb.b.load(acc), "add")


class _Step:
    """Addresses and helpers of one (direction, batch row) pair inside the kernel."""

    def __init__(self, k: KernelArgs, d: ir.Value, row: ir.Value, gates: ir.Value, temp: ir.Value):
        node = k.node
        self.k, self.kb, self.node = k, k.kb, node
        self.dtype = np.dtype(node.inputs[0].dtype)
        self.hidden = node.attrs["hidden_size"]
        self.cell = node.attrs["cell"]
        self.g = GATES[self.cell]
        seq, batch, _ = node.inputs[0].shape
        self.seq, self.batch = seq, batch
        self.dirs = len(node.attrs["reverse"])
        self.d, self.row = d, row
        self.gates, self.temp = gates, temp
        self.e = Emit(self.kb, self.dtype, 1)
        # Where this pair's [H] row starts in the [dirs, batch, H] state tensors.
        self.state_base = self.kb.mul(self.kb.add(self.kb.mul(d, batch), row), self.hidden)
        self.state_h = self.kb.gep(k.outputs[1], self.dtype, self.state_base)
        self.state_c = self.kb.gep(k.outputs[2], self.dtype, self.state_base) if self.cell == "LSTM" else None

    def activation(self, which: int, x: ir.Value) -> ir.Value:
        """Apply activation `which` (0 = f, 1 = g, 2 = h) of this pair's direction."""
        per_dir = self.node.attrs["activations"]
        if self.dirs == 1 or per_dir[0][which] == per_dir[1][which]:
            name, alpha, beta = per_dir[0][which]
            return ACTIVATIONS[name](self.e, x, alpha, beta)
        # Bidirectional with different functions: compute both, keep this direction's.
        values = [ACTIVATIONS[name](self.e, x, alpha, beta) for name, alpha, beta in (p[which] for p in per_dir)]
        is_second = self.kb.b.icmp_unsigned("==", self.d, self.kb.i64(1))
        return self.e.select(is_second, values[1], values[0])

    def clip(self, x: ir.Value) -> ir.Value:
        limit = self.node.attrs["clip"]
        return x if limit <= 0 else self.e.clamp(x, -limit, limit)

    def init_state(self) -> None:
        """Copy initial_h / initial_c (or zeros) into the running state."""
        kb, hidden, base = self.kb, self.hidden, self.state_base
        pairs = [(self.state_h, self.k.inputs[4])]
        if self.state_c is not None:
            pairs.append((self.state_c, self.k.inputs[5]))
        with kb.loop(0, hidden, name="j") as j:
            for state, initial in pairs:
                value = self.e.c(0.0) if initial is None else kb.load(initial, self.dtype, kb.add(base, j))
                kb.store(value, state, self.dtype, j)

    def length(self) -> ir.Value:
        """This row's sequence length, clamped to [0, seq]."""
        kb = self.kb
        lens = self.k.inputs[3]
        if lens is None:
            return kb.i64(self.seq)
        raw = kb.b.sext(kb.load(lens, np.dtype(np.int32), self.row), kb.i64(0).type)
        low = kb.b.select(kb.b.icmp_signed("<", raw, kb.i64(0)), kb.i64(0), raw)
        return kb.b.select(kb.b.icmp_signed(">", low, kb.i64(self.seq)), kb.i64(self.seq), low)

    def xw_index(self, t: ir.Value, u: int | ir.Value) -> ir.Value:
        """Where XW[t, row, d, u] (u = g*H + j) lies."""
        kb, gh = self.kb, self.g * self.hidden
        return kb.add(kb.add(kb.mul(kb.add(kb.mul(t, self.batch), self.row), self.dirs * gh), kb.mul(self.d, gh)), u)

    def gate_rows(self, t: ir.Value | None, first: int, count: int, hidden_src: ir.Value, dst: ir.Value) -> None:
        """dst[u - first*H] = R[d, u, :] · hidden_src (+ XW[t, row, d, u] unless t is None)
        for the rows u of gates [first, first + count)."""
        kb, hidden, dtype = self.kb, self.hidden, self.dtype
        r_base = kb.mul(self.d, self.g * hidden * hidden)
        lanes = self.k.width(dtype)
        with kb.loop(first * hidden, (first + count) * hidden, name="u") as u:
            value = _dot(kb, dtype, lanes, self.k.inputs[1], kb.add(r_base, kb.mul(u, hidden)), hidden_src, 0, hidden)
            if t is not None:
                value = self.e.add(kb.load(self.k.inputs[0], dtype, self.xw_index(t, u)), value)
            kb.store(value, dst, dtype, kb.add(u, -first * hidden))

    def store_y(self, t: ir.Value, j: ir.Value, value: ir.Value) -> None:
        kb = self.kb
        at = kb.add(kb.mul(kb.add(kb.mul(kb.add(kb.mul(t, self.dirs), self.d), self.batch), self.row), self.hidden), j)
        kb.store(value, self.k.outputs[0], self.dtype, at)

    def gate(self, g: int, j: ir.Value) -> ir.Value:
        return self.kb.load(self.gates, self.dtype, self.kb.add(g * self.hidden, j))


def _rnn_update(s: _Step, t: ir.Value) -> None:
    kb = s.kb
    s.gate_rows(t, 0, 1, s.state_h, s.gates)
    with kb.loop(0, s.hidden, name="j") as j:
        h = s.activation(0, s.clip(s.gate(0, j)))
        kb.store(h, s.state_h, s.dtype, j)
        s.store_y(t, j, h)


def _gru_update(s: _Step, t: ir.Value) -> None:
    """z and r first; the h gate reads r (.) H (default) or r (.) (H·R_hᵀ + Rb_h) (linear_before_reset)."""
    kb, e, hidden, dtype = s.kb, s.e, s.hidden, s.dtype
    before_reset = s.node.attrs["linear_before_reset"]
    s.gate_rows(t, 0, 2, s.state_h, s.gates)
    if before_reset:
        s.gate_rows(None, 2, 1, s.state_h, s.temp)
    with kb.loop(0, hidden, name="j") as j:  # z and r activated in place
        z = s.activation(0, s.clip(s.gate(0, j)))
        r = s.activation(0, s.clip(s.gate(1, j)))
        kb.store(z, s.gates, dtype, j)
        kb.store(r, s.gates, dtype, kb.add(hidden, j))
        if not before_reset:
            kb.store(e.mul(r, kb.load(s.state_h, dtype, j)), s.temp, dtype, j)
    if not before_reset:
        s.gate_rows(t, 2, 1, s.temp, s.kb.gep(s.gates, dtype, 2 * hidden))
    with kb.loop(0, hidden, name="j") as j:
        if before_reset:
            recurrent = kb.load(s.temp, dtype, j)
            rbias = s.k.inputs[2]
            if rbias is not None:
                recurrent = e.add(recurrent, kb.load(rbias, dtype, kb.add(kb.mul(s.d, hidden), j)))
            xw = kb.load(s.k.inputs[0], dtype, s.xw_index(t, kb.add(2 * hidden, j)))
            pre = e.add(xw, e.mul(s.gate(1, j), recurrent))
        else:
            pre = s.gate(2, j)
        z = s.gate(0, j)
        candidate = s.activation(1, s.clip(pre))
        previous = kb.load(s.state_h, dtype, j)
        h = e.add(e.mul(e.sub(e.c(1.0), z), candidate), e.mul(z, previous))
        kb.store(h, s.state_h, dtype, j)
        s.store_y(t, j, h)


def _lstm_update(s: _Step, t: ir.Value) -> None:
    kb, e, hidden, dtype = s.kb, s.e, s.hidden, s.dtype
    s.gate_rows(t, 0, 4, s.state_h, s.gates)
    peep = s.k.inputs[6]

    def peephole(slot: int, j, c):
        if peep is None:
            return e.c(0.0)
        return e.mul(kb.load(peep, dtype, kb.add(kb.mul(s.d, 3 * hidden), kb.add(slot * hidden, j))), c)

    with kb.loop(0, hidden, name="j") as j:
        c_prev = kb.load(s.state_c, dtype, j)
        i = s.activation(0, s.clip(e.add(s.gate(0, j), peephole(0, j, c_prev))))
        if s.node.attrs["input_forget"]:
            f = e.sub(e.c(1.0), i)
        else:
            f = s.activation(0, s.clip(e.add(s.gate(2, j), peephole(2, j, c_prev))))
        candidate = s.activation(1, s.clip(s.gate(3, j)))
        c = e.add(e.mul(f, c_prev), e.mul(i, candidate))
        o = s.activation(0, s.clip(e.add(s.gate(1, j), peephole(1, j, c))))
        h = e.mul(o, s.activation(2, c))
        kb.store(c, s.state_c, dtype, j)
        kb.store(h, s.state_h, dtype, j)
        s.store_y(t, j, h)


_UPDATES = {"RNN": _rnn_update, "GRU": _gru_update, "LSTM": _lstm_update}


def lower_recurrence(k: KernelArgs) -> None:
    kb, node = k.kb, k.node
    dtype = np.dtype(node.inputs[0].dtype)
    seq, batch, _ = node.inputs[0].shape
    hidden = node.attrs["hidden_size"]
    reverse = node.attrs["reverse"]
    dirs = len(reverse)
    per_thread = (GATES[node.attrs["cell"]] + 1) * hidden
    lo, hi = k.threads.split(dirs * batch)
    gates = k.thread_scratch(0, per_thread, dtype)
    temp = kb.gep(gates, dtype, GATES[node.attrs["cell"]] * hidden)
    update = _UPDATES[node.attrs["cell"]]
    with kb.loop(lo, hi, name="pair") as pair:
        d = kb.b.udiv(pair, kb.i64(batch))
        row = kb.b.urem(pair, kb.i64(batch))
        s = _Step(k, d, row, gates, temp)
        s.init_state()
        length = s.length()
        backwards = _direction_flag(kb, reverse, d)
        with kb.loop(0, seq, name="s") as step:
            active = kb.b.icmp_signed("<", step, length)
            with kb.b.if_else(active) as (then, otherwise):
                with then:
                    flipped = kb.b.sub(kb.b.sub(length, kb.i64(1)), step)
                    t = kb.b.select(backwards, flipped, step) if backwards is not None else step
                    update(s, t)
                with otherwise:
                    with kb.loop(0, hidden, name="j") as j:
                        s.store_y(step, j, s.e.c(0.0))


def _direction_flag(kb: KernelBuilder, reverse: tuple[int, ...], d: ir.Value) -> ir.Value | None:
    """An i1 that is true for reverse directions, or None when every direction runs forward."""
    if not any(reverse):
        return None
    if all(reverse):
        return ir.Constant(ir.IntType(1), 1)
    first_reverse = reverse.index(1)
    return kb.b.icmp_unsigned("==", d, kb.i64(first_reverse))
