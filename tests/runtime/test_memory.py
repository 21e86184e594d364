"""Process memory: the RSS readers, giving freed heap back, and what a compiled model keeps."""

from __future__ import annotations

import gc
import json
import platform
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hobbit
import hobbit.compiler
from hobbit.backend.cpu.module import pack_weights
from hobbit.compiler import lower_to_llvm
from hobbit.runtime.memory import _madvise_switch, peak_rss_bytes, release_garbage, rss_bytes, small_pages

MiB = 1 << 20


def _model(fc_out: int, seed: int = 0) -> onnx.ModelProto:
    """Three 3x3 convs (Winograd-transformed weights) and a fully-connected layer whose
    constant B the layout pass cuts into panels: the passes replace every weight once."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    inits = [weight("c1", 64, 16, 3, 3), weight("c2", 64, 64, 3, 3), weight("c3", 64, 64, 3, 3),
             weight("fc", fc_out, 64 * 7 * 7), weight("fc_bias", fc_out)]
    nodes = [helper.make_node("Conv", ["x", "c1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "c2"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("Conv", ["d", "c3"], ["e"], pads=[1, 1, 1, 1]), helper.make_node("Flatten", ["e"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fc_bias"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "convs_fc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 7, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, fc_out])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_rss_readers_see_memory_being_touched():
    before = rss_bytes()
    block = np.ones(64 * MiB, dtype=np.uint8)  # every page written
    after = rss_bytes()
    assert before is not None and after is not None
    assert after - before >= 48 * MiB
    assert peak_rss_bytes() >= after
    del block


_FRAGMENTED_HEAP = r"""
import json, sys
from hobbit.runtime.memory import release_freed_heap, rss_bytes
# 64 KiB blocks sit below glibc's mmap threshold, so they come from the heap; keeping
# every eighth alive leaves the freed ones between live blocks, where free() cannot
# shrink the heap and keeps the pages resident.
blocks = [bytearray(b"x" * 65536) for _ in range(4096)]
keep = blocks[::8]
del blocks
freed = rss_bytes()
trimmed = release_freed_heap()
print(json.dumps({"freed": freed, "after": rss_bytes(), "trimmed": trimmed}))
"""


def test_release_freed_heap_returns_freed_pages():
    """256 MiB written, 224 MiB of it freed between live blocks: malloc_trim gives most of it back."""
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED_HEAP], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    if platform.libc_ver()[0] != "glibc":
        assert got["trimmed"] is False
        return
    assert got["trimmed"] is True
    assert got["freed"] - got["after"] >= 150 * MiB


def test_release_garbage_collects_cycles():
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    a.payload = np.ones(8 * MiB, dtype=np.uint8)
    del a, b
    assert isinstance(release_garbage(), bool)
    assert not any(isinstance(o, Node) for o in gc.get_objects())


def test_compiled_graph_constants_are_read_only_views_of_the_weights():
    proto = _model(fc_out=32)
    model = hobbit.compile(proto, threads=1, cache=False)
    weights = model.report.weights
    constants = model.report.graph.constants()
    assert constants
    for value in constants:
        assert np.shares_memory(value.const, weights), value.name
        assert not value.const.flags.writeable
    x = np.random.default_rng(1).standard_normal((1, 16, 7, 7)).astype(np.float32)
    expected = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(model.run({"x": x})[0], expected[0], rtol=1e-4, atol=1e-4)


def test_compile_keeps_no_ir_text_but_lower_to_llvm_does():
    proto = _model(fc_out=8)
    assert hobbit.compile(proto, threads=1, cache=False).report.llvm_ir is None
    assert "hobbit_main" in lower_to_llvm(proto, threads=1).llvm_ir


_COMPILE_AND_MEASURE = r"""
import json, sys
from hobbit.runtime.memory import rss_bytes
from hobbit import compile  # the compiler loads on first use: here, so its imports are not counted
before = rss_bytes()
model = compile(sys.argv[1], threads=1, cache=False)
print(json.dumps({"grown": rss_bytes() - before, "weights": int(model.report.weights.nbytes)}))
"""


def test_resident_memory_after_a_compile_stays_near_the_weights(tmp_path):
    """A fresh process compiles a model with 74 MiB of packed weights and grows by at most
    1.25x the weights plus 100 MiB (LLVM's code pages and heap, the thread runtime).
    Measured: 132 MiB; 216 MiB when the graph kept its own copy of every constant beside
    the blob and freed heap stayed resident (the bound is 192 MiB)."""
    path = tmp_path / "convs_fc.onnx"
    onnx.save(_model(fc_out=6144), path)
    out = subprocess.run([sys.executable, "-c", _COMPILE_AND_MEASURE, str(path)], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    assert got["weights"] >= 70 * MiB
    assert got["grown"] <= 1.25 * got["weights"] + 100 * MiB, got


_CTRL_C_IN_A_FINALIZER = """
import gc, os, signal, time
from hobbit.runtime.memory import release_garbage

class Interrupts:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # the handler runs here, inside the finalizer

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a child of a worker inherits SIG_IGN
gc.disable()
cycle = Interrupts()
cycle.me = cycle
del cycle
try:
    release_garbage()
except KeyboardInterrupt:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    print("raised")
"""


def test_ctrl_c_during_the_collection_is_not_lost() -> None:
    """A KeyboardInterrupt raised inside a finalizer is dropped by Python; release_garbage
    holds SIGINT back during its collection and raises it afterwards. Run in a fresh
    interpreter: a pytest-xdist worker does not get SIGINT as KeyboardInterrupt, and its
    children start with SIGINT ignored (Python then keeps it ignored), so the script
    installs the default handler a terminal session has."""
    out = subprocess.run([sys.executable, "-c", _CTRL_C_IN_A_FINALIZER], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raised", out.stderr


def _huge_page_advice() -> bool:
    """numpy's current huge-page advice (read by setting it and putting it back)."""
    switch = _madvise_switch()
    now = switch(True)
    switch(now)
    return now


@pytest.mark.skipif(_madvise_switch() is None, reason="this numpy has no huge-page switch")
@pytest.mark.parametrize("before", [True, False])
def test_small_pages_turns_the_advice_off_and_back_as_it_was(before: bool, monkeypatch) -> None:
    """Off inside, as it was after, and counted: a compile that ends while another one runs
    (another thread's) leaves it off until the last one ends. A compile packs its weights
    with the advice off."""
    seen = []

    def packing(graph, plan):
        seen.append(_huge_page_advice())
        return pack_weights(graph, plan)
    monkeypatch.setattr(hobbit.compiler, "pack_weights", packing)
    switch = _madvise_switch()
    old = switch(before)
    try:
        outer, inner = small_pages(), small_pages()
        outer.__enter__()
        assert _huge_page_advice() is False
        inner.__enter__()
        outer.__exit__(None, None, None)
        assert _huge_page_advice() is False
        inner.__exit__(None, None, None)
        assert _huge_page_advice() is before
        hobbit.compile(_model(8), cache=False)
        assert seen == [False] and _huge_page_advice() is before
    finally:
        switch(old)
