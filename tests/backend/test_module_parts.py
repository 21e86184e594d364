"""Kernels handed to LLVM's threads while the module is emitted (hobbit.backend.module_parts,
hobbit.backend.llvm.PartCompiler): each part a valid module of its own, the module's text as one
unchanged, and models compiled in parts answering exactly as in one part and as onnxruntime."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir
from onnx import TensorProto, helper

import hobbit
import hobbit.backend.cpu.backend as cpu_backend
import hobbit.backend.llvm as hobbit_llvm
import hobbit.backend.module_parts as module_parts
from hobbit.backend.llvm import PartCompiler
from hobbit.backend.module_parts import KernelHandOff
from hobbit.compiler import lower_to_llvm
from hobbit.runtime.jit import jit_engine
from hobbit.target import host_target
from tests.helpers import make_model, rand, run_ort

I64 = ir.IntType(64)


class _Recorder:
    """A PartCompiler that keeps the texts it is given."""

    parallel = True

    def __init__(self):
        self.texts: list[str] = []

    def submit(self, text: str) -> None:
        self.texts.append(text)


def _kernel_module() -> tuple[ir.Module, list[ir.Function]]:
    """Three noinline kernels (one reads a private constant table, one calls a declared
    runtime function behind a branch with weights: metadata) and an entry point that calls
    them on out[0..2]."""
    module = ir.Module("kernels")
    module.triple = host_target().triple
    table = ir.GlobalVariable(module, ir.ArrayType(I64, 4), name="table")
    table.global_constant, table.linkage, table.unnamed_addr = True, "private", True
    table.initializer = ir.Constant(ir.ArrayType(I64, 4), [5, 6, 7, 8])
    notify = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="hobbit_notify")
    kernels = []
    for name in ("Gather[a]", "Mul[b]", "Add[c]"):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(I64), I64]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        out, x = fn.args
        if name == "Gather[a]":
            value = b.load(b.gep(table, [ir.Constant(I64, 0), x], inbounds=True))
        elif name == "Mul[b]":
            value = b.mul(x, ir.Constant(I64, 3))
            with b.if_then(b.icmp_signed(">", x, ir.Constant(I64, 100)), likely=False):
                b.call(notify, [])
        else:
            value = b.add(x, ir.Constant(I64, 40))
        b.store(value, out)
        b.ret_void()
        kernels.append(fn)
    main = ir.Function(module, ir.FunctionType(ir.IntType(32), [ir.PointerType(I64)]), name="hobbit_main")
    b = ir.IRBuilder(main.append_basic_block("entry"))
    for i, fn in enumerate(kernels):
        b.call(fn, [b.gep(main.args[0], [ir.Constant(I64, i)]), ir.Constant(I64, 2)])
    b.ret(ir.Constant(ir.IntType(32), 0))
    return module, kernels


def test_each_part_is_a_module_of_its_own_and_the_text_as_one_is_unchanged(monkeypatch) -> None:
    module, kernels = _kernel_module()
    before = str(module)
    monkeypatch.setattr(module_parts, "PART_INSTRUCTIONS", 1)
    recorder = _Recorder()
    hand_off = KernelHandOff(recorder)
    for kernel in kernels:
        hand_off.add(kernel)
    assert len(recorder.texts) == 3
    for kernel, text in zip(kernels, recorder.texts):
        llvm.parse_assembly(text, context=llvm.create_context()).verify()
        assert f'define hidden void @"{kernel.name}"' in text
        assert ("!prof" in text) == (kernel.name == "Mul[b]")
        assert ('@"table" = private' in text) == (kernel.name == "Gather[a]" or '@"table"' in text)
    after = str(module)
    assert all(f'declare hidden void @"{k.name}"' in after and f'define internal void @"{k.name}"' not in after
               for k in kernels)
    assert hand_off.whole_text(after) == before


def test_small_kernels_wait_for_a_part_and_one_thread_hands_nothing_off() -> None:
    module, kernels = _kernel_module()
    recorder = _Recorder()
    hand_off = KernelHandOff(recorder)
    for kernel in kernels:
        hand_off.add(kernel)
    assert recorder.texts == []
    hand_off.flush()
    assert len(recorder.texts) == 1 and all(f'define hidden void @"{k.name}"' in recorder.texts[0] for k in kernels)
    module, kernels = _kernel_module()
    recorder.parallel = False
    hand_off = KernelHandOff(recorder)
    for kernel in kernels:
        hand_off.add(kernel)
    hand_off.flush()
    assert len(recorder.texts) == 1 and "declare hidden" not in str(module)


def test_the_parts_optimised_on_threads_and_joined_run_like_the_module(monkeypatch) -> None:
    module, kernels = _kernel_module()
    monkeypatch.setattr(module_parts, "PART_INSTRUCTIONS", 1)
    compiler = PartCompiler(host_target(), 3, 3, jit_code=True)
    hand_off = KernelHandOff(compiler)
    for kernel in kernels:
        hand_off.add(kernel)
    assert len(compiler._parts) == 3
    optimized = compiler.finish(str(module))
    assert sorted(f.name for f in optimized.module.functions if not f.is_declaration) == \
        ["Add[c]", "Gather[a]", "Mul[b]", "hobbit_main"]
    for code in (optimized.module, optimized.code):  # MCJIT compiles the module; the parts' joined object
        engine = jit_engine(code, host_target())
        out = np.zeros(3, np.int64)
        main = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(engine.get_function_address("hobbit_main"))
        assert main(out.ctypes.data) == 0
        assert out.tolist() == [7, 6, 42]


def _conv_chain() -> tuple:
    """Convolutions of several shapes (one pair alike, so one shares the other's body), pooling
    and a Gather of constant indices (a private constant table)."""
    rng = np.random.default_rng(0)
    weights = {f"w{i}": (rng.standard_normal(shape) * 0.2).astype(np.float32)
               for i, shape in enumerate([(16, 3, 3, 3), (16, 16, 3, 3), (16, 16, 3, 3), (32, 16, 1, 1)])}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w3"], ["c3"]),
             helper.make_node("Gather", ["c3", "idx"], ["y"], axis=1)]
    x = rand(1, 3, 20, 20)
    consts = {**weights, "idx": np.array([5, 0, 31, 7, 7], np.int64)}
    return make_model(nodes, {"x": x}, ["y"], consts), {"x": x}


def _conv_loop() -> tuple:
    """A Loop whose body is a Conv (its kernels are emitted inside the loop's kernel)."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((8, 8, 3, 3)) * 0.08).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Conv", ["x_in", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["x_out"]),
         helper.make_node("ReduceMax", ["x_out"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "lim"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["x1"], pads=[1, 1, 1, 1]),
             helper.make_node("Loop", ["", "", "x1"], ["y"], body=body)]
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y"], {"lim": np.array(0.05, np.float32), "w0": w}), {"x": x}


@pytest.fixture
def split_everything(monkeypatch):
    """Every kernel a part of its own, on three threads, and a record of the parts submitted."""
    made: list[int] = []
    real = PartCompiler.submit

    def recording(self, text: str) -> None:
        made.append(len(text))
        real(self, text)
    monkeypatch.setattr(module_parts, "PART_INSTRUCTIONS", 1)
    monkeypatch.setattr(PartCompiler, "submit", recording)
    monkeypatch.setattr(cpu_backend, "compile_threads", lambda: 3)
    return made


@pytest.mark.parametrize("build", [_conv_chain, _conv_loop], ids=["conv-chain", "conv-loop"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_model_compiled_in_parts_answers_as_in_one_part_and_as_onnxruntime(build, threads, split_everything,
                                                                             monkeypatch) -> None:
    model, feeds = build()
    parts = hobbit.compile(model, threads=threads, cache=False)
    assert split_everything  # the loop's kernel and its body's stay; the Conv before it moves
    in_parts = lower_to_llvm(model, threads=threads).llvm_ir
    monkeypatch.setattr(cpu_backend, "compile_threads", lambda: 1)
    whole = hobbit.compile(model, threads=threads, cache=False)
    assert lower_to_llvm(model, threads=threads).llvm_ir == in_parts
    for got, same, want in zip(parts.run(feeds), whole.run(feeds), run_ort(model, feeds)):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_profiled_model_in_parts_times_every_kernel(split_everything) -> None:
    """The profile counters are a mutable global: what writes them stays in the first part,
    and every kernel, moved or not, is timed."""
    model, feeds = _conv_chain()
    compiled = hobbit.compile(model, threads=2, cache=False, profile=True)
    times = compiled.profile(feeds, runs=3)
    assert len(split_everything) >= 3
    assert len(times) >= 5 and all(t.seconds > 0 for t in times)
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.fixture
def machine_code(monkeypatch):
    """The objects PartCompiler made for the JIT, one per compile (None: MCJIT compiled)."""
    made: list[bytes | None] = []
    real = PartCompiler.finish

    def recording(self, text):
        optimized = real(self, text)
        made.append(optimized.code)
        return optimized
    monkeypatch.setattr(PartCompiler, "finish", recording)
    return made


def test_the_parts_machine_code_serves_the_jit_the_cache_and_an_export(split_everything, machine_code, tmp_path,
                                                                       monkeypatch) -> None:
    """One object joined by `ld -r` from the parts' objects: the model runs it, the compile
    cache stores and loads it, and the exported library runs the same instructions."""
    monkeypatch.setenv("HOBBIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HOBBIT_CACHE", "1")
    model, feeds = _conv_chain()
    want = run_ort(model, feeds)[0]
    compiled = hobbit.compile(model, threads=2)
    assert machine_code and machine_code[-1] is not None and machine_code[-1].startswith(b"\x7fELF")
    assert compiled.native_model().code == machine_code[-1]
    cached = hobbit.compile(model, threads=2)
    assert getattr(cached.report, "cached", False)
    compiled.export(tmp_path / "lib")
    loaded = hobbit.load(tmp_path / "lib")
    for got in (compiled.run(feeds)[0], cached.run(feeds)[0], loaded.run(feeds)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_without_a_linker_mcjit_compiles_the_joined_module(split_everything, machine_code, monkeypatch) -> None:
    monkeypatch.setattr(hobbit_llvm.shutil, "which", lambda name: None)
    model, feeds = _conv_chain()
    compiled = hobbit.compile(model, threads=2, cache=False)
    assert machine_code == [None]
    np.testing.assert_allclose(compiled.run(feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_compiles_on_several_threads_at_once_answer_right(split_everything) -> None:
    """Four compiles at once, each with its parts on threads of its own, in private LLVM
    contexts that llvmlite's lock does not guard; joining takes the global one, locked."""
    from concurrent.futures import ThreadPoolExecutor
    cases = [_conv_chain(), _conv_loop(), _conv_chain(), _conv_loop()]

    def check(case) -> None:
        model, feeds = case
        got = hobbit.compile(model, threads=2, cache=False).run(feeds)
        for g, w in zip(got, run_ort(model, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(check, cases))


def _long_chain(convs: int) -> tuple:
    """`convs` alike 3x3 convolutions with a ReLU after each (one shared body, one wrapper per
    node), more steps than one function of the team walk holds."""
    rng = np.random.default_rng(3)
    nodes, inits, last = [], {}, "x"
    for i in range(convs):
        inits[f"w{i}"] = (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32)
        nodes += [helper.make_node("Conv", [last, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        last = f"r{i}"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


def test_the_team_walk_runs_in_parts_on_llvms_threads(split_everything, monkeypatch) -> None:
    """A team walk of more steps than team.CHUNK_STEPS is several functions, each handed to
    LLVM's threads with the wrappers it calls, and answers as the walk in one function
    (a profiled model keeps it whole) and as onnxruntime."""
    from hobbit.backend.cpu import team

    parts: list[str] = []
    real = PartCompiler.submit

    def keeping(self, text: str) -> None:
        parts.append(text)
        real(self, text)
    monkeypatch.setattr(PartCompiler, "submit", keeping)
    model, feeds = _long_chain(2 * team.CHUNK_STEPS + 3)
    compiled = hobbit.compile(model, threads=2, cache=False)
    chunks = [f'define hidden i1 @"{team.TEAM}.{k}"' for k in (0, team.CHUNK_STEPS, 2 * team.CHUNK_STEPS)]
    assert all(any(chunk in part for part in parts) for chunk in chunks)
    assert sum(part.count('define hidden void @"Conv+Relu[') for part in parts) == 2 * team.CHUNK_STEPS + 3
    whole = hobbit.compile(model, threads=2, cache=False, profile=True)
    want = run_ort(model, feeds)[0]
    for _ in range(3):  # the pool's workers join, leave and rejoin across runs
        got = compiled.run(feeds)[0]
        np.testing.assert_array_equal(got, whole.run(feeds)[0])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)  # 35 convs deep
