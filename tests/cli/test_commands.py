"""The `hobbit` command: every subcommand on a tiny model, the zoo, and error exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper

import hobbit
import hobbit.cli.main
from hobbit.bench import suite
from hobbit.cli.main import main
from tests.helpers import make_model, needs_host_feature, rand


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """Conv(bias=False) -> BatchNorm -> Relu -> Flatten -> Gemm, saved as an .onnx file."""
    x = rand(1, 3, 8, 8)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="stem_conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], name="stem_bn"),
             helper.make_node("Relu", ["n"], ["r"], name="stem_relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="head_fc", transB=1)]
    inits = {"w": rand(4, 3, 3, 3, seed=1) * 0.3, "g": np.ones(4, np.float32), "b": np.zeros(4, np.float32),
             "m": np.zeros(4, np.float32), "v": np.ones(4, np.float32),
             "fc_w": rand(5, 256, seed=2) * 0.05, "fc_b": rand(5, seed=3)}
    path = tmp_path_factory.mktemp("cli") / "tiny.onnx"
    onnx.save(make_model(nodes, {"x": x}, ["y"], inits), path)
    return str(path)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["compile", "--help"], ["inspect", "--help"],
                                  ["bench", "--help"], ["conformance", "--help"], ["zoo", "--help"]])
def test_help(argv, capsys):
    assert main(argv) == 0
    assert "usage: hobbit" in capsys.readouterr().out


@pytest.mark.parametrize("command", [None, "run", "compile", "inspect", "bench"])
def test_help_examples_show_input_shape(command, capsys):
    assert main([command, "--help"] if command else ["--help"]) == 0
    examples = capsys.readouterr().out.split("\nexamples:\n", 1)[1]
    assert "--input-shape input=" in examples


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_run_random_and_file_inputs(tiny, tmp_path, capsys):
    assert main(["run", tiny, "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "output y: float32[1, 5]" in out and "(random)" in out and "latency:" in out
    np.save(tmp_path / "x.npy", rand(1, 3, 8, 8, seed=5))
    assert main(["run", tiny, "--input", f"x={tmp_path / 'x.npy'}", "--runs", "1"]) == 0
    assert "(from file)" in capsys.readouterr().out


def test_emit_llvm_names_functions_after_nodes(tiny, capsys):
    assert main(["compile", tiny, "--emit", "llvm"]) == 0
    ir = capsys.readouterr().out
    defines = [line for line in ir.splitlines() if line.startswith("define")]
    assert any("stem_conv" in line and "Relu" in line for line in defines)
    assert any("head_fc" in line for line in defines)
    assert any("hobbit_main" in line for line in defines)


def test_emit_asm_and_graph_to_file(tiny, tmp_path, capsys):
    asm = tmp_path / "tiny.s"
    assert main(["compile", tiny, "--emit", "asm", "-o", str(asm)]) == 0
    assert "hobbit_main" in asm.read_text()
    assert main(["compile", tiny, "--emit", "graph"]) == 0
    graph = capsys.readouterr().out
    assert "Conv[stem_conv]" in graph and "BatchNormalization" not in graph


def test_precision_flag_reaches_compile_and_inspect(tiny, capsys):
    """The tiny model's conv and Gemm run in bf16 under --precision bf16: the pipeline inspect
    reports has the bf16 pass, the code has vdpbf16ps (and none without the flag). For a
    Zen 4, so that a host without AVX512-BF16 checks it too (the code is only emitted)."""
    assert main(["inspect", tiny, "--precision", "bf16", "--target", "znver4"]) == 0
    assert "fuse-depthwise, bf16, dce" in capsys.readouterr().out
    assert main(["compile", tiny, "--precision", "bf16", "--target", "znver4", "--emit", "asm"]) == 0
    assert "vdpbf16ps" in capsys.readouterr().out
    assert main(["compile", tiny, "--target", "znver4", "--emit", "asm"]) == 0
    assert "vdpbf16ps" not in capsys.readouterr().out
    assert main(["run", tiny, "--precision", "int8"]) == 2


@needs_host_feature("avx512bf16")
def test_precision_flag_reaches_run(tiny, capsys):
    assert main(["run", tiny, "--precision", "bf16", "--runs", "1"]) == 0
    assert "output y: float32[1, 5]" in capsys.readouterr().out
    assert main(["compile", tiny, "--precision", "bf16", "--emit", "asm"]) == 0
    assert "vdpbf16ps" in capsys.readouterr().out


def test_inspect_lists_fused_groups(tiny, capsys):
    assert main(["inspect", tiny]) == 0
    out = capsys.readouterr().out
    conv_line = next(line for line in out.splitlines() if "stem_conv" in line)
    assert "Conv+Relu" in conv_line and "stem_relu" in conv_line and "float32[1x4x8x8]" in conv_line
    assert "arena:" in out and "weights:" in out


def test_disable_pass_changes_the_plan(tiny, capsys):
    assert main(["inspect", tiny, "--disable", "fuse"]) == 0
    out = capsys.readouterr().out
    assert "Conv+Relu" not in out and "stem_relu" in out
    assert main(["compile", tiny, "--emit", "graph", "--passes", "dce,fold"]) == 0
    assert "stem_relu" in capsys.readouterr().out


def test_threads_option_and_default(tiny, capsys, monkeypatch):
    """--threads on run/compile/inspect picks the count built for; without it HOBBIT_NUM_THREADS does."""
    assert main(["inspect", tiny, "--threads", "3"]) == 0
    assert "threads: 3 " in capsys.readouterr().out
    monkeypatch.setenv("HOBBIT_NUM_THREADS", "2")
    assert main(["inspect", tiny]) == 0
    assert "threads: 2 " in capsys.readouterr().out
    monkeypatch.setenv("HOBBIT_NUM_THREADS", "zero")
    assert main(["compile", tiny, "--emit", "graph"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error: HOBBIT_NUM_THREADS") and "'zero'" in err


@pytest.mark.parametrize("argv", [["run", "{tiny}"], ["compile", "{tiny}"], ["inspect", "{tiny}"], ["bench"]])
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_threads_below_one_is_a_usage_error(argv, value, tiny, capsys):
    assert main([a.format(tiny=tiny) for a in argv] + ["--threads", value]) == 2
    err = capsys.readouterr().err
    assert "argument --threads" in err and repr(value) in err


def test_bench_prints_ratio(tiny, capsys):
    assert main(["bench", "--model", tiny, "--runs", "5", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "ratio hobbit/onnxruntime" in out and "p10-p90" in out and "compile:" in out


def test_bench_refuses_ratio_on_mismatch(tiny, capsys, monkeypatch):
    monkeypatch.setattr(suite, "compare_outputs", lambda got, exp, names: (1.0, "output 'y' differs"))
    assert main(["bench", "--model", tiny, "--runs", "2"]) == 1
    out = capsys.readouterr().out
    assert "OUTPUTS DISAGREE" in out and "ratio hobbit" not in out


def test_compare_outputs():
    a = np.ones((2, 3), np.float32)
    assert suite.compare_outputs([a], [a.copy()], ["y"]) == (0.0, None)
    worst, why = suite.compare_outputs([a + 0.01], [a], ["y"])
    assert why is not None and "6 of 6" in why and worst == pytest.approx(0.01, rel=1e-3)
    assert suite.compare_outputs([a], [a.T], ["y"])[1].startswith("output 'y' has shape")


def test_compare_outputs_scales_atol_with_the_output() -> None:
    """A box corner near 0 among corners of hundreds of pixels carries their rounding: 7e-4
    there agrees; the same error on an output of magnitude 1 does not."""
    boxes = np.array([[0.01, 120.0, 300.0, 250.0]], np.float32)
    assert suite.compare_outputs([boxes + np.float32(7e-4) * (boxes < 1)], [boxes], ["boxes"])[1] is None
    scores = np.array([[0.01, 0.5, 1.0]], np.float32)
    assert suite.compare_outputs([scores + np.float32(7e-4) * (scores < 0.1)], [scores], ["scores"])[1] is not None


@pytest.mark.parametrize("argv, message", [
    (["run", "no_such_model"], "neither an existing file nor a zoo model"),
    (["run", "{tiny}", "--input", "nope=x.npy"], "--input names 'nope', which is not a model input"),
    (["inspect", "{tiny}", "--passes", "dce,bogus"], "unknown pass 'bogus'"),
    (["compile", "{bad}", "--emit", "graph"], ""),
])
def test_errors_exit_2_without_traceback(argv, message, tiny, tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf")
    argv = [a.format(tiny=tiny, bad=bad) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error:") and message in err and "Traceback" not in err


def test_wrong_input_name(tiny, tmp_path, capsys):
    np.save(tmp_path / "x.npy", rand(1, 3, 8, 8))
    assert main(["run", tiny, "--input", f"image={tmp_path / 'x.npy'}"]) == 2
    assert "--input names 'image', which is not a model input; the model takes x: float32[1, 3, 8, 8]" \
        in capsys.readouterr().err


def test_zoo_list_and_save(tmp_path, capsys):
    assert main(["zoo"]) == 0
    assert "resnet18" in capsys.readouterr().out
    path = tmp_path / "sq.onnx"
    assert main(["zoo", "squeezenet1_1", "-o", str(path)]) == 0
    assert onnx.load(str(path)).graph.input[0].name == "input"


@pytest.mark.slow
def test_zoo_model_inspect_and_emit(capsys):
    assert main(["inspect", "resnet18"]) == 0
    out = capsys.readouterr().out
    residual = next(line for line in out.splitlines() if "/layer1/layer1.0/conv2/Conv" in line)
    assert "Conv+Add+Relu" in residual or "ConvWinograd+Add+Relu" in residual
    assert "/layer1/layer1.0/relu_1/Relu" in residual
    assert main(["compile", "squeezenet1_1", "--emit", "llvm"]) == 0
    assert "/features/features.3/expand3x3/Conv" in capsys.readouterr().out


# -- symbolic dims: --input-shape and --input files size them ---------------------------
@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> str:
    """Conv -> Relu on an input of symbolic batch N: float32[N, 3, 8, 8]."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                               ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [onnx.numpy_helper.from_array(rand(4, 3, 3, 3, seed=1), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("cli") / "dynamic.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("argv", [["run", "{m}"], ["inspect", "{m}"], ["compile", "{m}", "--emit", "graph"],
                                  ["bench", "--model", "{m}"]])
def test_symbolic_model_without_sizes_shows_the_flag(argv, dynamic, capsys):
    assert main([a.format(m=dynamic) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error: input 'x' is float32[N, 3, 8, 8]")
    assert "pass e.g. --input-shape x=1x3x8x8" in err and "Traceback" not in err


def test_input_shape_sizes_the_batch_on_every_command(dynamic, tmp_path, capsys):
    assert main(["run", dynamic, "--input-shape", "x=2x3x8x8", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[2, 3, 8, 8] (random)" in out and "output y: float32[2, 4, 8, 8]" in out
    assert main(["inspect", dynamic, "--input-shape", "x=3x3x8x8"]) == 0
    assert "float32[3x4x8x8]" in next(line for line in capsys.readouterr().out.splitlines() if "conv" in line)
    assert main(["compile", dynamic, "--input-shape", "x=2x3x8x8", "--emit", "llvm"]) == 0
    assert any(line.startswith("define") and "hobbit_main" in line for line in capsys.readouterr().out.splitlines())
    asm = tmp_path / "dynamic.s"
    assert main(["compile", dynamic, "--input-shape", "x=2x3x8x8", "--emit", "asm", "-o", str(asm)]) == 0
    assert "hobbit_main" in asm.read_text()


def test_bench_with_input_shape_checks_against_onnxruntime(dynamic, capsys):
    assert main(["bench", "--model", dynamic, "--input-shape", "x=2x3x8x8", "--runs", "2", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "ratio hobbit/onnxruntime" in out and "OUTPUTS DISAGREE" not in out


def test_bench_batch_and_input_shape_must_agree(dynamic, capsys):
    assert main(["bench", "--model", dynamic, "--input-shape", "x=2x3x8x8", "--batch", "4"]) == 2
    assert "--batch 4 sets the first dim of every input" in capsys.readouterr().err


def test_input_file_sizes_the_batch(dynamic, tmp_path, capsys):
    np.save(tmp_path / "x.npy", rand(3, 3, 8, 8, seed=4))
    assert main(["run", dynamic, "--input", f"x={tmp_path / 'x.npy'}", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[3, 3, 8, 8] (from file)" in out and "output y: float32[3, 4, 8, 8]" in out


@pytest.mark.parametrize("value", ["x=1x0x8x8", "x=1x3xax8", "x", "=1x3x8x8", "x=1x-3x8x8", "x=1x3x8x8x"])
def test_malformed_input_shape_is_a_usage_error(value, dynamic, capsys):
    assert main(["run", dynamic, "--input-shape", value]) == 2
    err = capsys.readouterr().err
    assert "argument --input-shape: expected NAME=DIMS" in err and repr(value) in err


@pytest.mark.parametrize("argv, message", [
    (["--input-shape", "image=1x3x8x8"], "--input-shape names 'image', which is not a model input; "
                                         "the model takes x: float32[N, 3, 8, 8]"),
    (["--input-shape", "x=1x3x8"], "--input-shape x=1x3x8 has rank 3, but input 'x' is declared "
                                   "float32[N, 3, 8, 8] (rank 4)"),
    (["--input-shape", "x=1x4x8x8"], "sets axis 1 to 4, but input 'x' is declared float32[N, 3, 8, 8], "
                                     "which fixes it at 3"),
    (["--input-shape", "x=1x3x8x8", "--input-shape", "x=2x3x8x8"], "two shapes: 1x3x8x8 and 2x3x8x8"),
])
@pytest.mark.parametrize("command", ["run", "inspect", "compile"])
def test_input_shape_that_does_not_fit_the_model(command, argv, message, dynamic, capsys):
    assert main([command, dynamic] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("hobbit: error:") and message in err


@pytest.fixture
def no_compile(monkeypatch):
    """hobbit.compile fails the test if reached: these errors must come before the compile."""
    def refuse(*args, **kwargs):
        raise AssertionError("compiled before checking the inputs")
    monkeypatch.setattr(hobbit, "compile", refuse)


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.npy", "cannot open the file (No such file or directory)"),
    (lambda d: d, "cannot open the file (Is a directory)"),
    (lambda d: _write_bytes(d / "x.onnx", b"\x08\x08 not numpy"), "not a .npy file (write one with numpy.save)"),
    (lambda d: _savez(d / "x.npz"), "an .npz archive of arrays"),
    (lambda d: _write_bytes(d / "cut.npy", b"\x93NUMPY\x01\x00"), "a broken or unsupported .npy file"),
    (lambda d: _save(d / "f64.npy", rand(2, 3, 8, 8).astype(np.float64)),
     "holds float64 data, but input 'x' is float32[N, 3, 8, 8]; save it as float32"),
    (lambda d: _save(d / "rank3.npy", rand(3, 8, 8)), "has rank 3, but input 'x' is declared"),
    (lambda d: _save(d / "c4.npy", rand(2, 4, 8, 8)), "(shape 2x4x8x8) sets axis 1 to 4"),
])
def test_bad_input_file_is_reported_before_compiling(make, message, dynamic, tmp_path, capsys, no_compile):
    path = make(tmp_path)
    assert main(["run", dynamic, "--input", f"x={path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hobbit: error: --input x={path}") and message in err


def test_input_file_and_input_shape_must_agree(dynamic, tmp_path, capsys, no_compile):
    path = _save(tmp_path / "x.npy", rand(2, 3, 8, 8))
    assert main(["run", dynamic, "--input", f"x={path}", "--input-shape", "x=1x3x8x8"]) == 2
    assert "has shape 2x3x8x8, but --input-shape gives x=1x3x8x8" in capsys.readouterr().err
    assert main(["run", dynamic, "--input", f"x={path}", "--input", f"x={path}"]) == 2
    assert "more than once" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["x", "=x.npy", "x="])
def test_malformed_input_is_a_usage_error(value, dynamic, capsys):
    assert main(["run", dynamic, "--input", value]) == 2
    assert f"argument --input: expected NAME=FILE.npy, got {value!r}" in capsys.readouterr().err


def _write_bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def _save(path, array: np.ndarray):
    np.save(path, array)
    return path


def _savez(path):
    np.savez(path, x=rand(2, 3, 8, 8))
    return path


# -- counts ------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, option, value, expected", [
    (["run", "{m}"], "--runs", "0", ">= 1"), (["run", "{m}"], "--runs", "-2", ">= 1"),
    (["run", "{m}"], "--runs", "ten", ">= 1"), (["bench"], "--runs", "0", ">= 1"),
    (["bench"], "--warmup", "-1", ">= 0"), (["bench"], "--warmup", "1.5", ">= 0"),
    (["bench"], "--batch", "0", ">= 1"), (["bench"], "--streams", "0", ">= 1"),
])
def test_counts_out_of_range_are_usage_errors(argv, option, value, expected, tiny, capsys):
    assert main([a.format(m=tiny) for a in argv] + [option, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected a whole number {expected}, got {value!r}" in err


# -- Ctrl-C ------------------------------------------------------------------------------
def test_keyboard_interrupt_exits_130_quietly(tiny, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(hobbit, "compile", interrupted)
    assert main(["run", tiny]) == 130
    captured = capsys.readouterr()
    assert captured.err == "hobbit: interrupted\n" and "Traceback" not in captured.out


def test_sigint_while_running_a_zoo_model_exits_130(tmp_path):
    """A real Ctrl-C: SIGINT to a process running the command's main() on a zoo model. The child
    says when its imports are done, so the signal always lands inside main(), however loaded
    the machine is."""
    # The child starts from Python's own SIGINT handling whatever the test process passes down
    # (an ignored or blocked SIGINT is inherited across exec): what is under test is main().
    script = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])\n"
              "from hobbit.cli.main import main\nprint('ready', flush=True)\n"
              "sys.exit(main(['run', 'squeezenet1_1', '--runs', '1000000']))\n")
    env = {**os.environ, "HOBBIT_CACHE": "0"}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "ready", "the command never got going"
        time.sleep(1.0)
        assert child.poll() is None, "finished before it could be interrupted"
        # Python acts on the signal when the native call in progress returns (under heavy load one
        # LLVM optimisation can take tens of seconds), and drops a KeyboardInterrupt that lands in
        # a finalizer (a user presses Ctrl-C again): signal again while the command still runs.
        deadline = time.monotonic() + 300
        while child.poll() is None and time.monotonic() < deadline:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                continue
        out, err = child.communicate(timeout=10)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 130, err
    assert "Traceback" not in err and err.strip().endswith("hobbit: interrupted")


def test_sigint_during_the_imports_exits_130_quietly() -> None:
    """A real SIGINT while the command's modules are still importing (sent from inside the
    import of onnx, so it always lands there): one line and status 130, as during the command."""
    script = ("import builtins, os, signal, sys\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])\n"
              "real = builtins.__import__\n"
              "def hook(name, *args, **kwargs):\n"
              "    if name == 'onnx':\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "    return real(name, *args, **kwargs)\n"
              "builtins.__import__ = hook\n"
              "from hobbit.console import main\n"
              "sys.argv[1:] = ['zoo']\n"
              "sys.exit(main())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "hobbit: interrupted\n" and done.stdout == ""


def test_warnings_print_as_one_line(tmp_path, monkeypatch, capsys) -> None:
    """No file, line number, category or source line: `hobbit: warning: MESSAGE`."""
    def warn_and_build(name: str) -> onnx.ModelProto:
        warnings.warn("hobbit: compile cache entry X is damaged\n(ValueError); deleted", stacklevel=2)
        return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(1, 2)}, ["y"])
    monkeypatch.setattr(hobbit.zoo, "build", warn_and_build)
    assert main(["zoo", "resnet18", "-o", str(tmp_path / "m.onnx")]) == 0
    assert capsys.readouterr().err == "hobbit: warning: compile cache entry X is damaged (ValueError); deleted\n"
    assert warnings.showwarning is not hobbit.cli.main.show_warning  # only while the command runs


def test_python_dash_m_hobbit_is_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "hobbit", "zoo"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resnet18" in done.stdout


def test_emit_lib_keeps_a_range_as_a_run_time_dim(tmp_path, capsys):
    """`--input-shape x=1x1..24x16 --emit lib`: one library for every length from 1 to 24."""
    from tests.runtime.test_dynamic import _bias_relu, _x
    path = tmp_path / "seq.onnx"
    onnx.save(_bias_relu(("batch", "seq", 16)), path)
    out = tmp_path / "lib"
    assert main(["compile", str(path), "--emit", "lib", "--input-shape", "x=1x1..24x16", "-o", str(out)]) == 0
    loaded = hobbit.load(out)
    assert type(loaded).__name__ == "DynamicModel" and loaded.bounds == {"seq": 24}
    bias = np.linspace(-1, 1, 16, dtype=np.float32)
    for size in (1, 24):
        x = _x(1, size, 16, seed=size)
        np.testing.assert_array_equal(loaded.run({"x": x})[0], np.maximum(x + bias, np.float32(0)))
    assert main(["compile", str(path), "--emit", "llvm", "--input-shape", "x=1x1..24x16"]) == 2
    assert "a dim LOW..HIGH is a run-time dim, which `hobbit compile --emit lib` keeps" in capsys.readouterr().err
