"""`hobbit bench --kernels` (hobbit.bench.kernels, kernel_models, kernel_timing, kernel_report):
the spec and --configs parsing, the one-op models against numpy references through onnxruntime
(so each model means what DeepBench means), the budgeted rounds with counting engines, and a few
tiny made-up shapes through the whole harness and the command (runs=2, a fixed peak; no timing
thresholds, only that every row and column is there, numbers positive, and disagreeing or
too-slow configurations are reported as such)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest

import hobbit
from hobbit.backend import polly
from hobbit.bench import kernel_models as km, kernel_report, kernels
from hobbit.bench.deepbench_shapes import ConvShape, GemmShape, RnnShape
from hobbit.bench.kernel_timing import MIN_RUNS, budgeted_rounds, over_budget, warm_up
from hobbit.bench.kernels import (CONFIG_NAMES, KINDS, MISMATCH, OK, OVER_BUDGET, SKIPPED, Case, KernelBench,
                                  KernelSpec, Peaks, cases_of, parse_configs, parse_spec, sample)
from hobbit.bench.ort import ort_session
from hobbit.cli.main import main
from hobbit.errors import ConfigError, MissingDependencyError

PEAK = 100.0
PEAKS = {1: Peaks(PEAK, None, "no vpdpbusd here")}
TINY_GEMM = GemmShape(24, 3, 40, False, False)
TINY_CONV = ConvShape(9, 7, 3, 2, 4, 3, 2, 1, 0, 2, 1)  # w 9, h 7: width and height differ everywhere
TINY_RNN = RnnShape("lstm", 8, 2, 5)


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort_session(model, 1).run(None, {km.INPUT: x})[0]


# -- the spec, --configs and the sample of a set ---------------------------------------------
@pytest.mark.parametrize(("text", "kinds", "set_name"), [
    ("deepbench", KINDS, "device"), ("deepbench:gemm", ("gemm",), "device"), ("deepbench:server", KINDS, "server"),
    ("deepbench:conv:server", ("conv",), "server"), ("DeepBench:Server:RNN", ("rnn",), "server")])
def test_spec_parses_kind_and_set_in_either_order(text, kinds, set_name):
    spec = parse_spec(text)
    assert spec == KernelSpec(kinds, set_name)
    assert parse_spec(str(spec)) == spec


@pytest.mark.parametrize(("text", "says"), [
    ("deepbenc", "unknown kernel suite"), ("", "unknown kernel suite"), ("deepbench:lstm", "neither a kind"),
    ("deepbench:gemm:conv", "at most one kind"), ("deepbench:server:device", "at most one kind and one set"),
    ("deepbench::gemm", "neither a kind")])
def test_bad_specs_say_what_is_wrong(text, says):
    with pytest.raises(ConfigError, match=says):
        parse_spec(text)


def test_configs_parse_in_column_order_and_bad_names_are_refused():
    assert parse_configs("onnxruntime, hobbit,hobbit") == ("hobbit", "onnxruntime")
    for bad in ("", "hobbit,blas", "naive+O3"):
        with pytest.raises(ConfigError, match="expected names from hobbit, naive"):
            parse_configs(bad)


def test_sample_spreads_evenly_and_names_deepbench_rows():
    assert sample(13, 4) == [0, 3, 6, 9]
    assert sample(3, 10) == sample(3, None) == [0, 1, 2]
    assert sample(75, 1) == [0]
    cases = cases_of(parse_spec("deepbench:server"), limit=2)
    assert [(c.kind, c.index) for c in cases] == [("gemm", 0), ("gemm", 37), ("conv", 0), ("conv", 53),
                                                  ("rnn", 0), ("rnn", 34)]
    assert cases[1].shape == kernels.TABLES["gemm"]["server"][37]


def test_asked_for_configuration_that_cannot_run_is_an_error(monkeypatch):
    missing = MissingDependencyError("opt-22 missing")
    monkeypatch.setattr(kernels, "unavailable", lambda c: missing if c.loops == "polly" else None)
    chosen, notes = kernels.select_configs(None)
    assert [c.name for c in chosen] == list(CONFIG_NAMES) and notes == {"naive+polly": "opt-22 missing"}
    with pytest.raises(MissingDependencyError, match="opt-22"):
        kernels.select_configs(("hobbit", "naive+polly"))


# -- the one-op models mean what DeepBench means ---------------------------------------------
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_is_deepbench_column_major_product_read_row_major(a_t, b_t):
    """C = op(A) op(B) column-major with A the weights: row-major that is Y[n, m] = X W, with W
    stored [m, k] when a_t and X stored [k, n] when b_t."""
    shape = GemmShape(6, 5, 7, a_t, b_t)
    model = km.fp32_model(shape)
    onnx.checker.check_model(model, full_check=True)
    x, w = km.fp32_input(shape), km.weights_of(model)
    want = (x.T if b_t else x) @ (w.T if a_t else w)
    assert want.shape == km.output_shape(shape) == (shape.n, shape.m)
    np.testing.assert_allclose(run_ort(model, x), want, rtol=1e-5, atol=1e-6)
    assert shape.flops() == 2 * 6 * 5 * 7


def _conv_reference(x: np.ndarray, w: np.ndarray, s: ConvShape) -> np.ndarray:
    x = np.pad(x.astype(np.int64 if x.dtype.kind == "i" else np.float64),
               ((0, 0), (0, 0), (s.pad_h, s.pad_h), (s.pad_w, s.pad_w)))
    oh, ow = s.output_hw()
    y = np.zeros((s.n, s.k, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            window = x[:, :, i * s.stride_h:i * s.stride_h + s.filter_h, j * s.stride_w:j * s.stride_w + s.filter_w]
            y[:, :, i, j] = np.einsum("nchw,kchw->nk", window, w.astype(x.dtype))
    return y


def test_conv_output_is_deepbench_output_hw_and_a_direct_convolution():
    model = km.fp32_model(TINY_CONV)
    x = km.fp32_input(TINY_CONV)
    got = run_ort(model, x)
    assert got.shape == (TINY_CONV.n, TINY_CONV.k, *TINY_CONV.output_hw()) == km.output_shape(TINY_CONV)
    assert TINY_CONV.output_hw() == (6, 5)  # h: (7 - 2) / 1 + 1, w: (9 + 2 - 3) / 2 + 1
    np.testing.assert_allclose(got, _conv_reference(x, km.weights_of(model), TINY_CONV), rtol=1e-5, atol=1e-5)


def test_int8_models_are_exact_int8_by_int8_to_int32_products():
    gemm = km.int8_model(TINY_GEMM)
    x, w = km.int8_input(TINY_GEMM), km.weights_of(gemm)
    assert x.dtype == w.dtype == np.int8 and x.min() < 0 < x.max()
    got = run_ort(gemm, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))
    conv = km.int8_model(TINY_CONV)
    x = km.int8_input(TINY_CONV)
    np.testing.assert_array_equal(run_ort(conv, x), _conv_reference(x, km.weights_of(conv), TINY_CONV))
    assert not km.int8_supported(GemmShape(4, 4, 4, True, False)) and not km.int8_supported(TINY_RNN)


def test_vanilla_rnn_is_deepbench_relu_cell():
    shape = RnnShape("vanilla", 6, 2, 4)
    model = km.fp32_model(shape)
    x = km.fp32_input(shape)
    w, r, b = (onnx.numpy_helper.to_array(t)[0] for t in model.graph.initializer)
    h = np.zeros((shape.batch, shape.hidden))
    want = []
    for step in x:
        h = np.maximum(step @ w.T + h @ r.T + b[:6] + b[6:], 0)
        want.append(h)
    got = run_ort(model, x)
    assert got.shape == km.output_shape(shape) == (4, 1, 2, 6)
    np.testing.assert_allclose(got[:, 0], np.stack(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,op", [("lstm", "LSTM"), ("gru", "GRU")])
def test_lstm_and_gru_are_one_layer_with_hidden_sized_input(kind, op):
    shape = RnnShape(kind, 8, 2, 5)
    model = km.fp32_model(shape)
    (node,) = model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert node.op_type == op and attrs["hidden_size"] == 8
    assert attrs.get("linear_before_reset") == (1 if kind == "gru" else None)  # cuDNN's GRU
    gates = 4 if kind == "lstm" else 3
    assert [list(t.dims) for t in model.graph.initializer] == [[1, gates * 8, 8], [1, gates * 8, 8], [1, 2 * gates * 8]]
    assert run_ort(model, km.fp32_input(shape)).shape == (5, 1, 2, 8)
    assert km.weight_bytes(shape) == 4 * sum(np.prod(t.dims) for t in model.graph.initializer)


# -- the budgeted rounds ----------------------------------------------------------------------
def counting_engines(names: str) -> tuple[dict, dict[str, int]]:
    counts = dict.fromkeys(names, 0)

    def engine(name: str):
        def run() -> None:
            counts[name] += 1
        return run
    return {name: engine(name) for name in names}, counts


def test_rounds_stop_at_runs_or_budget_but_not_before_the_minimum():
    engines, counts = counting_engines("ab")
    seconds = budgeted_rounds(engines, runs=7, budget_s=60.0, first_s={"a": 1e-6, "b": 1e-6}, cooldown=0.0)
    assert counts == {"a": 7, "b": 7} and all(len(s) == 7 for s in seconds.values())
    # a spent budget still gets MIN_RUNS (a zero budget is spent before the first run)
    engines, counts = counting_engines("ab")
    budgeted_rounds(engines, runs=30, budget_s=0.0, first_s={"a": 1.0, "b": 1.0}, cooldown=0.0)
    assert counts == {"a": MIN_RUNS, "b": MIN_RUNS}
    engines, counts = counting_engines("a")
    budgeted_rounds(engines, runs=2, budget_s=0.0, first_s={"a": 1.0}, cooldown=0.0)
    assert counts == {"a": 2}  # fewer runs asked than the minimum


def test_warm_up_stops_at_half_the_budget():
    engines, counts = counting_engines("ab")
    warm_up(engines["a"], warmup=3, first_s=1e-6, budget_s=10.0)
    warm_up(engines["b"], warmup=3, first_s=6.0, budget_s=10.0)  # the checked run already took 6 s
    assert counts == {"a": 2, "b": 0}


def test_over_budget_estimates_from_a_known_rate():
    assert over_budget(10**10, None, 10.0) is None  # nothing known: the first run shows it
    assert over_budget(10**10, 2.0, 10.0) is None  # 5 s
    assert over_budget(10**11, 2.0, 10.0) == pytest.approx(50.0)


# -- the harness and its reports --------------------------------------------------------------
def configs(*names: str) -> tuple[kernels.Config, ...]:
    return tuple(CONFIG_NAMES[name] for name in names)


ENGINES = ("hobbit", "numpy", "onnxruntime", "hobbit-int8", "onnxruntime-int8")


def test_tiny_shapes_through_the_harness_fill_every_cell():
    cases = [Case("gemm", "device", 3, TINY_GEMM), Case("conv", "server", 5, TINY_CONV),
             Case("conv", "device", 1, TINY_CONV), Case("rnn", "device", 2, TINY_RNN)]
    bench = KernelBench(configs(*ENGINES), [1], runs=2, warmup=1, budget_s=0.01, peaks=PEAKS)
    rows = bench.run(cases)
    assert [(r.kind, r.set, r.index, r.threads) for r in rows] == [(c.kind, c.set, c.index, 1) for c in cases]
    gemm, conv, conv_device, rnn = rows
    assert all(cell.status == OK for cell in gemm.cells.values())
    assert [n for n, c in conv.cells.items() if c.status == OK] == ["hobbit", "onnxruntime", "hobbit-int8",
                                                                     "onnxruntime-int8"]
    assert conv_device.cells["hobbit-int8"].status == SKIPPED  # DeepBench runs device convs in fp32
    assert "fp32 only" in conv_device.cells["hobbit-int8"].note
    assert [n for n, c in rnn.cells.items() if c.status == OK] == ["hobbit", "onnxruntime"]
    for row in rows:
        for cell in row.cells.values():
            if cell.status == OK:
                assert cell.runs == 2 and cell.gflops > 0
                assert cell.gflops == pytest.approx(row.flops / (cell.timing.median / 1e3) / 1e9)
                low, high = cell.gflops_p10_p90
                assert low <= cell.gflops <= high
                if cell.config == "hobbit-int8":
                    assert cell.peak_percent is None and cell.max_abs_error == 0  # no int8 peak here; exact
                elif cell.config == "onnxruntime-int8":
                    assert cell.max_abs_error is None  # the reference itself
                else:
                    assert cell.peak_percent == pytest.approx(100 * cell.gflops / PEAK)
    assert gemm.cells["hobbit"].build_seconds > 0 and gemm.cells["numpy"].build_seconds is None

    table = kernel_report.speed_table(rows)
    assert "| # | shape | GFLOP | hobbit | numpy | onnxruntime | hobbit-int8 | onnxruntime-int8 |" in table
    assert "| # | shape | GFLOP | hobbit | onnxruntime | hobbit-int8 | onnxruntime-int8 |" in table  # conv server
    assert "| # | shape | GFLOP | hobbit | onnxruntime |" in table  # conv device, rnn: no int8 columns
    assert f"| 3 | {km.describe(TINY_GEMM)} |" in table and "(1 of DeepBench's 13 shapes)" in table
    assert "- hobbit-int8, not run: DeepBench runs conv device in fp32 only (#1)" in table
    assert "hobbit's compile seconds" in kernel_report.compile_table(rows)


def test_disagreeing_outputs_are_reported_not_timed(monkeypatch):
    compile_right = hobbit.compile

    class Wrong:
        def __init__(self, model, **options):
            self.model = compile_right(model, **options)
            self.report = self.model.report

        def run(self, feeds):
            return [y + 1 for y in self.model.run(feeds)]

    monkeypatch.setattr(kernels.hobbit, "compile", Wrong)
    (row,) = KernelBench(configs("hobbit", "onnxruntime"), [1], runs=2, budget_s=0.01,
                         peaks=PEAKS).run([Case("gemm", "device", 0, TINY_GEMM)])
    cell = row.cells["hobbit"]
    assert cell.status == MISMATCH and cell.gflops is None and cell.timing is None and "differ" in cell.note
    assert row.cells["onnxruntime"].status == OK
    table = kernel_report.speed_table([row])
    assert "| outputs disagree |" in table and "- hobbit, outputs disagree: output 'y'" in table


def test_a_configuration_over_the_cap_is_not_timed():
    """With a cap of nanoseconds, the first shape's first run at one thread is over it; the same
    shape at two threads, and the larger second shape, are then estimated over it without a run."""
    bench = KernelBench(configs("hobbit", "onnxruntime"), [1, 2], runs=2, budget_s=1e-9,
                        peaks={1: PEAKS[1], 2: PEAKS[1]})
    small, small_2, large, _ = bench.run([Case("gemm", "device", 0, TINY_GEMM),
                                          Case("gemm", "device", 1, GemmShape(48, 6, 80, False, False))])
    assert small.cells["hobbit"].status == OVER_BUDGET and "one run took" in small.cells["hobbit"].note
    assert small_2.threads == 2 and "a run expected from its" in small_2.cells["hobbit"].note
    assert large.cells["hobbit"].status == OVER_BUDGET and "a run expected from its" in large.cells["hobbit"].note
    assert "| over budget |" in kernel_report.speed_table([small, large])


polly_ready = pytest.mark.skipif(shutil.which("opt-22") is None, reason="needs opt-22 (Debian's llvm-22)")


def test_polly_columns_without_opt_are_unavailable(monkeypatch):
    monkeypatch.setattr(polly.shutil, "which", lambda name: None)
    assert isinstance(kernels.unavailable(CONFIG_NAMES["naive+polly"]), MissingDependencyError)
    assert kernels.unavailable(CONFIG_NAMES["naive"]) is None


@polly_ready
def test_naive_and_polly_columns():
    """Every column times; the loop facts say the naive nest stayed scalar and Polly rewrote it."""
    (row,) = KernelBench(configs("hobbit", "naive", "naive+polly", "naive+polly-early", "onnxruntime"), [1], runs=2,
                         budget_s=0.01, peaks=PEAKS).run([Case("gemm", "device", 0, GemmShape(64, 48, 96, False, False))])
    assert all(cell.status == OK and cell.gflops > 0 for cell in row.cells.values()), row.cells
    assert row.cells["naive"].loops.polly_loops == 0 and row.cells["naive"].loops.vector_lanes == 1
    assert row.cells["hobbit"].loops.vector_lanes > 1
    assert row.cells["naive+polly"].loops.polly_loops > 0 and row.cells["naive+polly-early"].loops.polly_loops > 0
    assert "What the loops became" in kernel_report.loops_table([row])


def test_command_writes_markdown_json_and_plot(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(kernels, "TABLES", {"gemm": {"device": (TINY_GEMM, GemmShape(8, 1, 16, False, False)),
                                                     "server": ()}})
    monkeypatch.setattr(kernels.Peaks, "measure", classmethod(lambda cls, threads: PEAKS[1]))
    paths = {flag: tmp_path / name for flag, name in (("--markdown", "k.md"), ("--json", "k.json"),
                                                       ("--plot", "k.png"))}
    args = ["bench", "--kernels", "deepbench:gemm", "--configs", "hobbit,numpy,onnxruntime", "--runs", "2",
            "--warmup", "1", "--budget", "0.01", "--limit", "1"]
    assert main(args + [str(part) for flag, path in paths.items() for part in (flag, path)]) == 0
    out = capsys.readouterr().out
    assert "gemm device #0 24x3x40" in out and "| 0 | 24x3x40 |" in out and "8x1x16" not in out
    page = paths["--markdown"].read_text()
    assert "# DeepBench kernels" in page and kernels.deepbench_shapes.COMMIT in page and "Machine:" in page
    doc = json.loads(paths["--json"].read_text())
    (row,) = doc["rows"]
    assert set(row["cells"]) == {"hobbit", "numpy", "onnxruntime"} and row["cells"]["numpy"]["gflops"] > 0
    assert doc["settings"]["budget_s"] == 0.01 and doc["deepbench"]["commit"] == kernels.deepbench_shapes.COMMIT
    assert paths["--plot"].stat().st_size > 0


@pytest.mark.parametrize(("args", "says"), [
    (["--kernels", "deepbench:blas"], "neither a kind"),
    (["--kernels", "--configs", "fast"], "expected names"),
    (["--kernels", "--budget", "0"], "number of seconds > 0"),
    (["--kernels", "--model", "resnet18"], "not --model"),
    (["--limit", "3"], "go with --kernels")])
def test_bad_kernel_flags_fail_before_benchmarking(args, says, capsys):
    assert main(["bench", *args]) == 2
    assert says in capsys.readouterr().err
