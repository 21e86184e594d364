"""The `hobbit` command: every subcommand on a tiny model, the zoo, and error exits."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from hobbit import bench
from hobbit.cli import main
from tests.helpers import make_model, rand


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
                                  ["bench", "--help"], ["zoo", "--help"]])
def test_help(argv, capsys):
    assert main(argv) == 0
    assert "usage: hobbit" in capsys.readouterr().out


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
    monkeypatch.setattr(bench, "compare_outputs", lambda got, exp, names: (1.0, "output 'y' differs"))
    assert main(["bench", "--model", tiny, "--runs", "2"]) == 1
    out = capsys.readouterr().out
    assert "OUTPUTS DISAGREE" in out and "ratio hobbit" not in out


def test_compare_outputs():
    a = np.ones((2, 3), np.float32)
    assert bench.compare_outputs([a], [a.copy()], ["y"]) == (0.0, None)
    worst, why = bench.compare_outputs([a + 0.01], [a], ["y"])
    assert why is not None and "6 of 6" in why and worst == pytest.approx(0.01, rel=1e-3)
    assert bench.compare_outputs([a], [a.T], ["y"])[1].startswith("output 'y' has shape")


@pytest.mark.parametrize("argv, message", [
    (["run", "no_such_model"], "neither an existing file nor a zoo model"),
    (["run", "{tiny}", "--input", "nope=x.npy"], "cannot read input"),
    (["run", "{tiny}", "--input", "x"], "NAME=FILE.npy"),
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
    assert "not model inputs" in capsys.readouterr().err


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
