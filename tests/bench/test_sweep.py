"""`hobbit bench --sweep`: one compile of a model with symbolic dims timed at each value of one dim
(or of several moved together: an image's height and width) beside a static compile and
onnxruntime (hobbit.bench.sweep). No timing thresholds: that every
column is filled, names are checked before anything compiles, and a disagreement exits 1."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hobbit.bench import sweep
from hobbit.cli.main import main
from hobbit.errors import ConfigError, InputError


def tiny_model() -> onnx.ModelProto:
    """[batch, sequence, 16] @ 16x8, then Softmax: a batch to fix and a sequence to sweep."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def image_model() -> onnx.ModelProto:
    """Relu(x + bias) on an image [1, 3, height, width]: two symbolic dims, element-wise kernels
    only (they follow run-time dims), so the one compile is one module."""
    bias = numpy_helper.from_array(np.arange(3, dtype=np.float32).reshape(1, 3, 1, 1) - 1, "bias")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "height", "width"])], [bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sweep") / "tiny.onnx"
    onnx.save(tiny_model(), path)
    return str(path)


@pytest.fixture(scope="module")
def image_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sweep") / "image.onnx"
    onnx.save(image_model(), path)
    return str(path)


def test_one_row_per_value_with_every_engine_timed(tiny_path, tmp_path, capsys):
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    argv = ["bench", "--model", tiny_path, "--sweep", "sequence=3,20", "--dynamic", "sequence=1:32",
            "--runs", "3", "--warmup", "1", "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith(f"| {tiny_path} |")]
    assert [(row[2], row[3]) for row in rows] == [("none", "3"), ("none", "20")]
    for row in rows:  # first, second, first - second, the three medians, two ratios, compile s, memory
        assert "—" not in row and "outputs disagree" not in row[7]
        assert all("(" in cell for cell in row[7:10]) and float(row[10]) > 0 and float(row[11]) > 0
    assert "one compile at 1 thread: " in out
    doc = json.loads(out_json.read_text())
    assert [(r["value"], r["threads"]) for r in doc["results"]] == [(3, 1), (20, 1)]
    for r in doc["results"]:
        assert r["outputs_agree"] and r["inputs"] == f"x: float32[1x{r['value']}x16]"
        assert r["symbol"] == "sequence" and r["sizes"] == {"sequence": r["value"]}
        assert r["static_ms"]["median"] > 0 and r["onnxruntime_ms"]["median"] > 0 and r["static_compile_seconds"] > 0
        assert r["one_compile_over_static"] == pytest.approx(r["one_compile_ms"]["median"] / r["static_ms"]["median"])
        assert r["first_minus_second_ms"] == pytest.approx(r["first_run_ms"] - r["second_run_ms"])
        assert r["rss_bytes"] > 0 and r["rss_after_compile_bytes"] > 0
    md = out_md.read_text()
    assert md.startswith("# Sweep of `sequence`") and "--sweep sequence=3,20 --dynamic sequence=1:32" in md
    assert "Machine: " in md and md.count(f"| {tiny_path} |") == 2


def test_other_symbols_take_their_input_shape_and_threads_each_get_a_compile(tiny_path, tmp_path):
    out_json = tmp_path / "s.json"
    argv = ["bench", "--model", tiny_path, "--sweep", "sequence=5", "--input-shape", "x=2x9x16", "--threads", "1,2",
            "--runs", "2", "--warmup", "0", "--json", str(out_json)]
    assert main(argv) == 0
    results = json.loads(out_json.read_text())["results"]
    assert [(r["threads"], r["value"]) for r in results] == [(1, 5), (2, 5)]
    assert all(r["outputs_agree"] and r["inputs"] == "x: float32[2x5x16]" for r in results)


def test_height_and_width_move_together_on_one_compile(image_path, tmp_path, capsys):
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    argv = ["bench", "--model", image_path, "--sweep", "height,width=5x7,16x9", "--dynamic", "height=1:16",
            "--dynamic", "width=2:16", "--runs", "2", "--warmup", "0", "--json", str(out_json),
            "--markdown", str(out_md)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| model | threads | load | height,width | first run ms |" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith(f"| {image_path} |")]
    assert [row[3] for row in rows] == ["5x7", "16x9"]
    assert all("—" not in row and "outputs disagree" not in row[7] for row in rows)
    assert "height,width=5x7: first run" in out and "one compile at 1 thread: DynamicModel, " in out
    doc = json.loads(out_json.read_text())
    got = [(r["symbol"], r["value"], r["sizes"], r["inputs"]) for r in doc["results"]]
    assert got == [("height,width", "5x7", {"height": 5, "width": 7}, "x: float32[1x3x5x7]"),
                   ("height,width", "16x9", {"height": 16, "width": 9}, "x: float32[1x3x16x9]")]
    assert all(r["outputs_agree"] and r["one_compile"] == "DynamicModel" for r in doc["results"])
    md = out_md.read_text()
    assert md.startswith("# Sweep of `height,width`")
    assert "--sweep height,width=5x7,16x9 --dynamic height=1:16 --dynamic width=2:16" in md


def test_points_of_several_dims_are_checked_before_anything_compiles(monkeypatch):
    monkeypatch.setattr(sweep.hobbit, "compile", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(InputError, match=r"no symbolic input dim named 'wide' to sweep.*'height' \(x dim 2\); "
                                         r"'width' \(x dim 3\)"):
        sweep.run_sweep(image_model(), "image", ("height", "wide"), [(4, 4)], [1])
    with pytest.raises(ConfigError, match=r"must each give 2 whole numbers >= 1 joined by 'x'.*got 4x4, 4"):
        sweep.run_sweep(image_model(), "image", "height,width", [(4, 4), (4,)], [1])
    with pytest.raises(ConfigError, match=r"values \[20\] are outside the bounds 1..16 of 'width'"):
        sweep.run_sweep(image_model(), "image", ("height", "width"), [(4, 4), (20, 20)], [1],
                        bounds={"height": (1, 32), "width": (1, 16)})
    assert sweep.sweep_points("height,width", [(4, 5)]) == (("height", "width"), [(4, 5)])
    assert sweep.sweep_points("sequence", [4, 8]) == (("sequence",), [(4,), (8,)])


def test_image_feeds_are_normal_floats_at_each_size():
    from hobbit.frontend.onnx.source import OnnxSource
    feeds = sweep.feeds_at(OnnxSource(image_model()).declared_inputs(), {"height": 6, "width": 11}, {}, seed=[6, 11])
    x = feeds["x"]
    assert x.shape == (1, 3, 6, 11) and x.dtype == np.float32 and x.min() < 0 < x.max()


def test_a_wrong_symbol_is_a_clear_error_before_anything_compiles(tiny_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep.hobbit, "compile", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(InputError, match=r"no symbolic input dim named 'seq'.*'batch' \(x dim 0\); 'sequence' "
                                         r"\(x dim 1\)"):
        sweep.run_sweep(tiny_model(), "tiny", "seq", [4], [1])
    with pytest.raises(ConfigError, match=r"values \[40\] are outside the bounds 1..32"):
        sweep.run_sweep(tiny_model(), "tiny", "sequence", [4, 40], [1], bounds={"sequence": (1, 32)})
    with pytest.raises(ConfigError, match="bounds are for the swept dim 'sequence' only"):
        sweep.run_sweep(tiny_model(), "tiny", "sequence", [4], [1], bounds={"batch": (1, 4)})
    assert main(["bench", "--model", tiny_path, "--sweep", "seq=4"]) == 2
    assert "no symbolic input dim named 'seq'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--sweep", "sequence"], ["--sweep", "sequence=0,4"], ["--sweep", "=4"],
                                  ["--sweep", "sequence=4", "--dynamic", "sequence=8:4"],
                                  ["--sweep", "sequence=4", "--load", "two-procs"], ["--dynamic", "sequence=1:8"]])
def test_bad_sweep_flags_are_usage_errors(tiny_path, argv, capsys):
    assert main(["bench", "--model", tiny_path, *argv]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["batch,sequence=4", "batch,sequence=1x4x4", "sequence,sequence=4x4", "batch,=1x4",
                                  "sequence=4x4", "batch,sequence=1x0"])
def test_bad_points_of_several_dims_are_usage_errors_with_an_example(tiny_path, text, capsys):
    assert main(["bench", "--model", tiny_path, "--sweep", text]) == 2
    err = capsys.readouterr().err
    assert "argument --sweep" in err and "e.g. sequence=16,64,128, or height,width=224x224,160x240" in err


def test_each_load_condition_times_every_point_again(tiny_path, tmp_path, capsys):
    """A sweep under --load none,alternate: one row per point and condition, the one compile's
    first and second runs shared, its medians measured under each."""
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    argv = ["bench", "--model", tiny_path, "--sweep", "sequence=3,20", "--dynamic", "sequence=1:32", "--runs", "2",
            "--warmup", "0", "--load", "none,alternate", "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == 0
    results = json.loads(out_json.read_text())["results"]
    assert [(r["value"], r["load"]) for r in results] == [(3, "none"), (3, "alternate"), (20, "none"),
                                                          (20, "alternate")]
    assert all(r["outputs_agree"] and r["one_compile_ms"]["median"] > 0 for r in results)
    assert results[0]["first_run_ms"] == results[1]["first_run_ms"]
    md = out_md.read_text()
    assert "--load none,alternate" in md and "- alternate: single runs of the two engines alternate" in md
    assert "threads 1  load alternate  sequence=20: first run" in capsys.readouterr().out


def test_disagreeing_outputs_get_no_ratio_and_exit_1(tiny_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "compare_outputs", lambda got, exp, names: (1.0, "output 'y' differs"))
    assert main(["bench", "--model", tiny_path, "--sweep", "sequence=4", "--runs", "2", "--warmup", "0"]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {tiny_path} |"))
    assert "outputs disagree" in row and row.count("—") == 4


def test_feeds_keep_ids_below_the_table_they_index_and_masks_at_one():
    table = numpy_helper.from_array(np.zeros((7, 4), np.float32), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("Cast", ["mask"], ["c"], to=1),
         helper.make_node("Unsqueeze", ["c", "axes"], ["u"]), helper.make_node("Mul", ["e", "u"], ["y"])], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [table, numpy_helper.from_array(np.array([-1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert sweep.index_bounds(model) == {"ids": 7}
    from hobbit.frontend.onnx.source import OnnxSource
    feeds = sweep.feeds_at(OnnxSource(model).declared_inputs(), {"batch": 1, "sequence": 300}, {"ids": 7})
    assert feeds["ids"].max() < 7 and feeds["ids"].dtype == np.int64 and (feeds["mask"] == 1).all()
