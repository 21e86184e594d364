"""The grid emulation's race finder (hobbit.backend.gpu.racecheck): what it says about barriers.

Hand-written kernels show each mechanism alone: a race inside a phase, a missing barrier
between phases (read after write, write after read), the poison a block's shared memory
starts with, and the shuffled thread order. Then mutation: every barrier of the GEMM,
tensor-core, depthwise, reduction, arg-reduction and normalisation kernels is deleted in
turn, and each deletion must make the emulation raise a RaceError. A barrier whose deletion
went unnoticed would be one the emulation cannot vouch for."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import pytest
from llvmlite import ir
from onnx import helper

import hobbit
from hobbit.backend.gpu.launch import Launch
from hobbit.backend.gpu.module import _grid_function
from hobbit.backend.gpu.racecheck import RaceChecker
from hobbit.backend.gpu.simt import Simt
from hobbit.emit.builder import I64, PTR, KernelBuilder
from hobbit.errors import CodegenError, RaceError
from hobbit.plan.memory import Place
from hobbit.runtime.emulate import GridEmulator
from tests.backend.gpu.test_gemm import conv_case
from tests.helpers import make_model, rand, run_ort

THREADS = 8
F32 = np.dtype(np.float32)


def emulator(body: Callable[[KernelBuilder, Simt, ir.Value], None], threads: int = THREADS) -> GridEmulator:
    """A one-block kernel `k(out)` whose body(kb, simt, out) is emulated, out of 64 float32."""
    module = ir.Module()
    races = RaceChecker(module)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] + [I64] * 3), name="k")
    fn.linkage = "internal"
    kb = KernelBuilder(fn)
    simt = Simt(kb, "host", threads, list(fn.args[1:]), races)
    body(kb, simt, fn.args[0])
    kb.finish()
    _grid_function(module, fn, 1)
    races.finish()
    launch = Launch("k", "node", "Relu", (1, 1, 1), threads, 0, (Place("output", 0, 0),))
    return GridEmulator(str(module), [launch], np.zeros(1, np.uint8), 0)


def run(emu: GridEmulator, order: int | None = None) -> np.ndarray:
    out = np.zeros(64, np.float32)
    emu.run([], [out], order)
    return out


def neighbour_sum(sync: bool, same_phase: bool = False) -> Callable:
    """Each thread stores its id in tile[t], then adds its right neighbour's to out[t]."""
    def body(kb: KernelBuilder, simt: Simt, out: ir.Value) -> None:
        tile = simt.shared(F32, THREADS, "tile")

        def right(tid: ir.Value) -> ir.Value:
            return kb.b.urem(kb.b.add(tid, kb.i64(1)), kb.i64(THREADS))
        with simt.phase(sync=sync) as tid:
            kb.store(kb.b.uitofp(tid, ir.FloatType()), tile, F32, tid)
            if same_phase:
                kb.store(kb.load(tile, F32, right(tid)), out, F32, tid)
        if not same_phase:
            with simt.phase(sync=False) as tid:
                kb.store(kb.load(tile, F32, right(tid)), out, F32, tid)
    return body


def test_a_kernel_with_its_barrier_runs_clean_in_any_order() -> None:
    emu = emulator(neighbour_sum(sync=True))
    for order in (None, 0, 1, 2):
        assert run(emu, order)[:THREADS].tolist() == [float((t + 1) % THREADS) for t in range(THREADS)]


def test_a_missing_barrier_is_a_race_naming_kernel_phase_array_and_threads() -> None:
    with pytest.raises(RaceError) as caught:
        run(emulator(neighbour_sum(sync=False)))
    message = str(caught.value)
    assert "kernel 'k', phase 2" in message and "reads element" in message and "array 'tile'" in message
    assert "wrote with no barrier between" in message and f"{THREADS} racing accesses" in message


def test_a_race_inside_one_phase_is_found_in_every_order() -> None:
    emu = emulator(neighbour_sum(sync=True, same_phase=True))
    for order in (None, 0, 1):
        with pytest.raises(RaceError, match="phase 1"):
            run(emu, order)


def test_a_write_after_another_threads_read_is_a_race() -> None:
    """Thread t reads tile[t+1], then (no barrier) overwrites tile[t]: its neighbour's read
    and this write are unordered on a GPU."""
    def body(kb: KernelBuilder, simt: Simt, out: ir.Value) -> None:
        tile = simt.shared(F32, THREADS, "tile")
        with simt.phase() as tid:
            kb.store(kb.const(F32, 1.0), tile, F32, tid)
        with simt.phase(sync=False) as tid:
            kb.store(kb.load(tile, F32, kb.b.urem(kb.b.add(tid, kb.i64(1)), kb.i64(THREADS))), out, F32, tid)
        with simt.phase(sync=False) as tid:
            kb.store(kb.const(F32, 2.0), tile, F32, tid)
    with pytest.raises(RaceError, match="phase 3: thread \\d+ writes .* which thread \\d+ read"):
        run(emulator(body))


def test_shared_memory_starts_each_block_poisoned() -> None:
    """What no thread wrote reads as NaN, not as zero or the previous block's value."""
    def body(kb: KernelBuilder, simt: Simt, out: ir.Value) -> None:
        tile = simt.shared(F32, THREADS, "tile")
        with simt.phase(sync=False) as tid:
            kb.store(kb.load(tile, F32, tid), out, F32, tid)
            kb.store(kb.const(F32, 5.0), tile, F32, tid)
    out = run(emulator(body))
    assert np.isnan(out[:THREADS]).all()


def test_threads_run_in_the_seeded_order() -> None:
    """Every thread writes its id to out[0] in one phase (a race on global memory, which the
    finder does not watch): the last thread of the order wins, so the seeds are visible."""
    def body(kb: KernelBuilder, simt: Simt, out: ir.Value) -> None:
        with simt.phase(sync=False) as tid:
            kb.store(kb.b.uitofp(tid, ir.FloatType()), out, F32, 0)
    emu = emulator(body, threads=32)
    last = {order: run(emu, order)[0] for order in (None, 0, 1, 2, 3)}
    assert last[None] == 31.0 and len(set(last.values())) > 2
    assert run(emu, 2)[0] == last[2]


def test_vector_access_of_shared_memory_is_refused() -> None:
    def body(kb: KernelBuilder, simt: Simt, out: ir.Value) -> None:
        tile = simt.shared(F32, THREADS, "tile")
        with simt.phase(sync=False):
            kb.vload(tile, F32, 0, 4)
    with pytest.raises(CodegenError, match="scalar accesses"):
        emulator(body)


# -- mutation: every barrier of the kernels that have barriers ------------------------------

def _matmul(m: int, k: int, n: int):
    a, b = rand(m, k, seed=1), rand(k, n, seed=2)
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b}), {"a": a}


def _depthwise():
    return conv_case((1, 8, 12, 12), (8, 1, 3, 3), pads=(1, 1, 1, 1), group=8)


def _single(op: str, x: np.ndarray, **attrs):
    return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"]), {"x": x}


def _reduce():
    x = rand(6, 500, seed=5)
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    return make_model([node], {"x": x}, ["y"], {"axes": np.array([1], np.int64)}), {"x": x}


def _layernorm():
    x, scale = rand(4, 300, seed=3), rand(300, seed=4)
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1)
    return make_model([node], {"x": x}, ["y"], {"s": scale}), {"x": x}


FAMILIES = {  # a model whose kernels have barriers, its precision, and K spanning several tiles
    "gemm": (lambda: _matmul(64, 96, 40), "fp32"),
    "gemm_split_k": (lambda: _matmul(4, 2048, 4), "fp32"),
    "conv": (lambda: conv_case((1, 16, 10, 10), (24, 16, 3, 3), pads=(1, 1, 1, 1)), "fp32"),
    "mma_tf32": (lambda: _matmul(64, 64, 32), "tf32"),
    "mma_bf16": (lambda: _matmul(64, 64, 32), "bf16"),
    "depthwise": (_depthwise, "fp32"),
    "reduce": (_reduce, "fp32"),
    "argmax": (lambda: _single("ArgMax", rand(6, 500, seed=6), axis=1), "fp32"),
    "softmax": (lambda: _single("Softmax", rand(4, 1000, seed=7), axis=-1), "fp32"),
    "layernorm": (_layernorm, "fp32"),
}


@contextmanager
def barriers(monkeypatch: pytest.MonkeyPatch, drop: int | None) -> Iterator[list[int]]:
    """Count the host build's barriers (sync phases); with `drop`, that one (0-based) is none."""
    seen, original = [0], Simt.phase

    def phase(self: Simt, sync: bool = True):
        if sync and self.flavour == "host":
            seen[0] += 1
            if seen[0] - 1 == drop:
                sync = False
        return original(self, sync)
    with monkeypatch.context() as m:
        m.setattr(Simt, "phase", phase)
        yield seen


@pytest.mark.parametrize("family", FAMILIES)
def test_deleting_any_barrier_is_caught(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    build, precision = FAMILIES[family]
    model, feeds = build()
    gm = hobbit.compile(model, target="cuda:sm_90", precision=precision, cache=False)
    arrays = [feeds[s.name] for s in gm.inputs]

    def emulate(drop: int | None) -> tuple[int, list[np.ndarray]]:
        with barriers(monkeypatch, drop) as seen:
            emu = GridEmulator(gm.host_module(), gm.launches, gm.weights, gm.arena_bytes)
        outputs = [np.empty(s.shape, s.dtype) for s in gm.outputs]
        emu.run(arrays, outputs, order=drop)
        return seen[0], outputs

    count, outputs = emulate(None)
    expected = run_ort(model, feeds)
    if precision == "fp32":
        for got, want in zip(outputs, expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert count >= 1, f"{family}: no barrier to delete"
    for drop in range(count):
        with pytest.raises(RaceError):
            emulate(drop)
