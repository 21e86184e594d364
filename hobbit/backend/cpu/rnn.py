"""The recurrence kernel of RNN, GRU and LSTM.

The input projection X·Wᵀ (+ biases) of every time step is one MatMul before this
kernel (graph ops), so what is left here is inherently sequential: per step, each
gate is the precomputed projection plus a dot product of a row of R with the
previous hidden state, then the cell's element-wise update. Batch rows and
directions are independent, so blocks of up to ROW_BLOCK rows (hobbit/plan/rnn.py) of one direction
are shared among threads; within a block every row of R is read once per step
and dotted with all the block's hidden states (R stays in cache however large
the batch). Each row walks its own sequence length (sequence_lens; one outside
[0, seq] is a RunError) and writes zeros to Y past it. The running state lives in the Y_h
(and Y_c) outputs; gate values go to per-thread scratch.

Node inputs: XW [seq, batch, dirs*G*H], R [dirs, G*H, H], GRU's recurrent h-gate
bias Rbh [dirs, H] (only with linear_before_reset), sequence_lens [batch] int32,
initial_h and initial_c [dirs, batch, H], peepholes P [dirs, 3H]; all but the
first two are optional. Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.backend.cpu.reduce import hreduce, row_width, vector_type
from hobbit.emit.scalar import Emit
from hobbit.emit.status import check_range
from hobbit.ops.rnn import NUMPY_ACTIVATIONS
from hobbit.plan.rnn import GATES, RecurrencePlan

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
assert ACTIVATIONS.keys() == NUMPY_ACTIVATIONS.keys()


def _dots(kb: KernelBuilder, dtype: np.dtype, lanes: int, a: ir.Value, a_base, rows: list[ir.Value],
          length: int) -> list[ir.Value]:
    """[sum(a[a_base + k] * row[k] for k < length) for row in rows]: each vector of `a` is
    loaded once for all rows; vectorised with a masked tail."""
    width = row_width(lanes, length)
    accs = [kb.alloca(vector_type(dtype, width)) for _ in rows]
    for acc in accs:
        kb.b.store(kb.const(dtype, 0, width), acc)
    e = Emit(kb, dtype, width)

    def step(index, mask) -> None:
        x = kb.vload(a, dtype, kb.add(a_base, index), width, mask)
        for acc, row in zip(accs, rows):
            kb.b.store(e.fma(x, kb.vload(row, dtype, index, width, mask), kb.b.load(acc)), acc)

    full = length - length % width
    if full:
        with kb.loop(0, full, width, name="k") as k:
            step(k, None)
    if length % width:
        step(full, kb.prefix_mask(width, length % width))
    return [hreduce(kb, dtype, kb.b.load(acc), "add") for acc in accs]


class _Row:
    """Addresses and helpers of one batch row of one direction at one step.

    `row` is the batch row, `slot` its index in the thread's block scratch; `step` the
    loop step, from which the time index t follows (run backwards for a reverse
    direction within this row's length)."""

    def __init__(self, k: KernelArgs, d: ir.Value, row: int | ir.Value, slot: int | ir.Value, scratch: ir.Value,
                 step: ir.Value, backwards: ir.Value | None):
        node = k.node
        self.k, self.kb, self.node = k, k.kb, node
        kb = self.kb
        self.dtype = np.dtype(node.inputs[0].dtype)
        self.hidden = node.attrs["hidden_size"]
        self.cell = node.attrs["cell"]
        self.g = GATES[self.cell]
        self.seq, self.batch, _ = node.inputs[0].shape
        self.dirs = len(node.attrs["reverse"])
        self.d, self.row, self.step = d, row, step
        self.e = Emit(kb, self.dtype, 1)
        self.gates = kb.gep(scratch, self.dtype, kb.mul(slot, k.plan.row_stride))
        self.temp = kb.gep(self.gates, self.dtype, self.g * self.hidden)
        # Where this row starts in the [dirs, batch, H] state tensors.
        self.state_base = kb.mul(kb.add(kb.mul(d, self.batch), row), self.hidden)
        self.state_h = kb.gep(k.outputs[1], self.dtype, self.state_base)
        self.state_c = kb.gep(k.outputs[2], self.dtype, self.state_base) if self.cell == "LSTM" else None
        self.length = self._length()
        self.active = kb.b.icmp_signed("<", step, self.length)
        # Inactive rows still compute (discarded) gates: clamp t so those reads stay in bounds.
        flipped = kb.b.sub(kb.b.sub(self.length, kb.i64(1)), step)
        flipped = kb.b.select(kb.b.icmp_signed("<", flipped, kb.i64(0)), kb.i64(0), flipped)
        self.t = kb.b.select(backwards, flipped, step) if backwards is not None else step

    def _length(self) -> ir.Value:
        """This row's sequence length: one outside [0, seq] is reported (hobbit.emit.status)
        and clamped."""
        kb = self.kb
        lens = self.k.inputs[3]
        if lens is None:
            return kb.i64(self.seq)
        raw = kb.b.sext(kb.load(lens, np.dtype(np.int32), self.row), kb.i64(0).type)
        check_range(kb, raw, 0, self.seq, "sequence length")
        low = kb.b.select(kb.b.icmp_signed("<", raw, kb.i64(0)), kb.i64(0), raw)
        return kb.b.select(kb.b.icmp_signed(">", low, kb.i64(self.seq)), kb.i64(self.seq), low)

    def activation(self, which: int, x: ir.Value) -> ir.Value:
        """Apply activation `which` (0 = f, 1 = g, 2 = h) of this row's direction."""
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

    def xw_index(self, u: int | ir.Value) -> ir.Value:
        """Where XW[t, row, d, u] (u = g*H + j) lies."""
        kb, gh = self.kb, self.g * self.hidden
        return kb.add(kb.add(kb.mul(kb.add(kb.mul(self.t, self.batch), self.row), self.dirs * gh),
                             kb.mul(self.d, gh)), u)

    def xw(self, u: int | ir.Value) -> ir.Value:
        return self.kb.load(self.k.inputs[0], self.dtype, self.xw_index(u))

    def gate(self, g: int, j: ir.Value) -> ir.Value:
        return self.kb.load(self.gates, self.dtype, self.kb.add(g * self.hidden, j))

    def finish(self, update: Callable[[_Row, ir.Value], None]) -> None:
        """Run update(row, j) over j < H where this row is active; past its length, Y is 0."""
        kb = self.kb
        with kb.b.if_else(self.active) as (then, otherwise):
            with then, kb.loop(0, self.hidden, name="j") as j:
                update(self, j)
            with otherwise, kb.loop(0, self.hidden, name="j") as j:
                self.store_y(self.step, j, self.e.c(0.0))

    def store_y(self, t: ir.Value, j: ir.Value, value: ir.Value) -> None:
        kb = self.kb
        at = kb.add(kb.mul(kb.add(kb.mul(kb.add(kb.mul(t, self.dirs), self.d), self.batch), self.row), self.hidden), j)
        kb.store(value, self.k.outputs[0], self.dtype, at)

    def store_h(self, j: ir.Value, h: ir.Value) -> None:
        self.kb.store(h, self.state_h, self.dtype, j)
        self.store_y(self.t, j, h)


def _gate_rows(rows: list[_Row], first: int, count: int, source: Callable[[_Row], ir.Value],
               dest: Callable[[_Row], ir.Value], with_input: bool) -> None:
    """dest(row)[u - first*H] = R[d, u, :] · source(row) (+ XW[t, row, d, u] when with_input)
    for the rows u of gates [first, first + count), every batch row of the block at once."""
    r0 = rows[0]
    kb, hidden, dtype = r0.kb, r0.hidden, r0.dtype
    r_base = kb.mul(r0.d, r0.g * hidden * hidden)
    lanes = r0.k.width(dtype)
    with kb.loop(first * hidden, (first + count) * hidden, name="u") as u:
        dots = _dots(kb, dtype, lanes, r0.k.inputs[1], kb.add(r_base, kb.mul(u, hidden)),
                     [source(r) for r in rows], hidden)
        for r, value in zip(rows, dots):
            if with_input:
                value = r.e.add(r.xw(u), value)
            kb.store(value, dest(r), dtype, kb.add(u, -first * hidden))


def _rnn_step(rows: list[_Row]) -> None:
    _gate_rows(rows, 0, 1, lambda r: r.state_h, lambda r: r.gates, True)

    def update(r: _Row, j) -> None:
        r.store_h(j, r.activation(0, r.clip(r.gate(0, j))))

    for r in rows:
        r.finish(update)


def _gru_step(rows: list[_Row]) -> None:
    """z and r first; the h gate reads r (.) H (default) or r (.) (H·R_hᵀ + Rb_h) (linear_before_reset)."""
    r0 = rows[0]
    kb, hidden, dtype = r0.kb, r0.hidden, r0.dtype
    before_reset = r0.node.attrs["linear_before_reset"]
    _gate_rows(rows, 0, 2, lambda r: r.state_h, lambda r: r.gates, True)
    if before_reset:
        _gate_rows(rows, 2, 1, lambda r: r.state_h, lambda r: r.temp, False)
    for r in rows:  # z and r activated in place (rows past their length compute unused values)
        with kb.loop(0, hidden, name="j") as j:
            z = r.activation(0, r.clip(r.gate(0, j)))
            reset = r.activation(0, r.clip(r.gate(1, j)))
            kb.store(z, r.gates, dtype, j)
            kb.store(reset, r.gates, dtype, kb.add(hidden, j))
            if not before_reset:
                kb.store(r.e.mul(reset, kb.load(r.state_h, dtype, j)), r.temp, dtype, j)
    if not before_reset:
        _gate_rows(rows, 2, 1, lambda r: r.temp, lambda r: kb.gep(r.gates, dtype, 2 * hidden), True)

    def update(r: _Row, j) -> None:
        e = r.e
        if before_reset:
            recurrent = kb.load(r.temp, dtype, j)
            rbias = r.k.inputs[2]
            if rbias is not None:
                recurrent = e.add(recurrent, kb.load(rbias, dtype, kb.add(kb.mul(r.d, hidden), j)))
            pre = e.add(r.xw(kb.add(2 * hidden, j)), e.mul(r.gate(1, j), recurrent))
        else:
            pre = r.gate(2, j)
        z = r.gate(0, j)
        candidate = r.activation(1, r.clip(pre))
        previous = kb.load(r.state_h, dtype, j)
        r.store_h(j, e.add(e.mul(e.sub(e.c(1.0), z), candidate), e.mul(z, previous)))

    for r in rows:
        r.finish(update)


def _lstm_step(rows: list[_Row]) -> None:
    _gate_rows(rows, 0, 4, lambda r: r.state_h, lambda r: r.gates, True)

    def update(r: _Row, j) -> None:
        kb, e, hidden, dtype = r.kb, r.e, r.hidden, r.dtype
        peep = r.k.inputs[6]

        def peephole(slot: int, c):
            if peep is None:
                return e.c(0.0)
            return e.mul(kb.load(peep, dtype, kb.add(kb.mul(r.d, 3 * hidden), kb.add(slot * hidden, j))), c)

        c_prev = kb.load(r.state_c, dtype, j)
        i = r.activation(0, r.clip(e.add(r.gate(0, j), peephole(0, c_prev))))
        if r.node.attrs["input_forget"]:
            f = e.sub(e.c(1.0), i)
        else:
            f = r.activation(0, r.clip(e.add(r.gate(2, j), peephole(2, c_prev))))
        candidate = r.activation(1, r.clip(r.gate(3, j)))
        c = e.add(e.mul(f, c_prev), e.mul(i, candidate))
        o = r.activation(0, r.clip(e.add(r.gate(1, j), peephole(1, c))))
        kb.store(c, r.state_c, dtype, j)
        r.store_h(j, e.mul(o, r.activation(2, c)))

    for r in rows:
        r.finish(update)


_STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def lower_recurrence(k: KernelArgs) -> None:
    """Threads share (direction, block of batch rows) units; the last block may be shorter."""
    kb, node = k.kb, k.node
    dtype = np.dtype(node.inputs[0].dtype)
    seq, batch, _ = node.inputs[0].shape
    reverse = node.attrs["reverse"]
    plan: RecurrencePlan = k.plan
    block = plan.block
    blocks = -(-batch // block)
    last = batch - (blocks - 1) * block
    lo, hi = k.threads.split(len(reverse) * blocks)
    scratch = k.thread_scratch(0, block * plan.row_stride, dtype)
    with kb.loop(lo, hi, name="unit") as unit:
        d = kb.b.udiv(unit, kb.i64(blocks))
        first_row = kb.mul(kb.b.urem(unit, kb.i64(blocks)), block)
        backwards = _direction_flag(kb, reverse, d)
        if last == block:
            _run_block(k, d, first_row, block, scratch, backwards, seq)
        else:
            with kb.b.if_else(kb.b.icmp_unsigned("==", first_row, kb.i64(batch - last))) as (short, full):
                with short:
                    _run_block(k, d, first_row, last, scratch, backwards, seq)
                with full:
                    _run_block(k, d, first_row, block, scratch, backwards, seq)


def _run_block(k: KernelArgs, d: ir.Value, first_row: ir.Value, size: int, scratch: ir.Value,
               backwards: ir.Value | None, seq: int) -> None:
    kb = k.kb
    zero = kb.i64(0)
    for i in range(size):
        _Row(k, d, kb.add(first_row, i), i, scratch, zero, backwards).init_state()
    with kb.loop(0, seq, name="s") as step:
        rows = [_Row(k, d, kb.add(first_row, i), i, scratch, step, backwards) for i in range(size)]
        _STEPS[k.node.attrs["cell"]](rows)


def _direction_flag(kb: KernelBuilder, reverse: tuple[int, ...], d: ir.Value) -> ir.Value | None:
    """An i1 that is true for reverse directions, or None when every direction runs forward."""
    if not any(reverse):
        return None
    if all(reverse):
        return ir.Constant(ir.IntType(1), 1)
    first_reverse = reverse.index(1)
    return kb.b.icmp_unsigned("==", d, kb.i64(first_reverse))


CPU.register("Recurrence", lower=lower_recurrence)
