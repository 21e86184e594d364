"""Exported libraries with run-time dims (DynamicModel.export, hobbit.runtime.export_c.RunTimeDims):
the manifest's "dynamic" section and the header, hobbit.load running the library as a DynamicModel
(exactly the JIT's outputs, and numpy's), the bounds checked by the loaded model and by the C API
itself, the C example at two lengths, and a damaged "dynamic" section refused at load.

The models are element-wise (Add of a bias, Relu), whose kernels follow run-time extents, so
the JIT, the library and numpy agree exactly."""

from __future__ import annotations

import ctypes
import json
import pickle
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit.errors import ArtifactError, HobbitError, InputError
from hobbit.runtime.export_c import RunTimeDims
from hobbit.runtime.load import bind_api
from tests.helpers import make_model, rand
from tests.runtime.test_dynamic import _bias_relu, _x
from tests.runtime.test_export import VALGRIND

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "c" / "sequence.c"
BIAS = np.linspace(-1, 1, 16, dtype=np.float32)  # the bias of _bias_relu


def _numpy(x: np.ndarray) -> np.ndarray:
    return np.maximum(x + BIAS, np.float32(0))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """[1, seq, 16] with seq in [1, 64], exported as `encoder` (the C example's name)."""
    compiled = hobbit.compile(_bias_relu(), threads=2, cache=False, dynamic_shapes={"seq": (1, 64)})
    assert type(compiled).__name__ == "DynamicModel"
    files = compiled.export(tmp_path_factory.mktemp("encoder") / "encoder", name="encoder")
    return compiled, files


@pytest.fixture(scope="module")
def two_symbols(tmp_path_factory):
    """[batch, seq, 16], batch in [1, 4] and seq in [2, 20]: most shapes are not a prefix of the bound layout."""
    compiled = hobbit.compile(_bias_relu(("batch", "seq", 16)), threads=2, cache=False,
                              dynamic_shapes={"batch": (1, 4), "seq": (2, 20)})
    assert type(compiled).__name__ == "DynamicModel"
    files = compiled.export(tmp_path_factory.mktemp("two") / "two", name="two", weights="file")
    return compiled, files


def _copy(files, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(files.library.parent, target)
    return target


def test_the_manifest_and_header_describe_the_run_time_dims(encoder, two_symbols):
    _, files = encoder
    manifest = json.loads(files.manifest.read_text())
    seq = {"terms": [[0, 1]], "const": 0}
    assert manifest["dynamic"] == {"symbols": ["seq"], "ranges": [[1, 64]], "bound": [64],
                                   "inputs": [[None, seq, None]], "outputs": [[None, seq, None]]}
    assert manifest["inputs"][-1] == ["hobbit.dims", [1], "<i8"]
    header = files.header.read_text()
    for text in ("#define ENCODER_NUM_SYMBOLS 1", "#define ENCODER_SEQ_MIN 1", "#define ENCODER_SEQ_MAX 64",
                 "the values of the symbols, in this order: seq",
                 '"x"  float32[1, seq, 16]  (at most 4096 bytes: [1, 64, 16])  C order',
                 '"y"  float32[1, seq, 16]  (at most 4096 bytes: [1, 64, 16])  C order',
                 "HOBBIT_E_ARGUMENT and runs nothing"):
        assert text in header, text
    header = two_symbols[1].header.read_text()
    assert "#define TWO_BATCH_MAX 4" in header and "#define TWO_SEQ_MIN 2" in header
    assert '"x"  float32[batch, seq, 16]  (at most 5120 bytes: [4, 20, 16])  bound strides S = [320, 16, 1]' in header


def test_symbols_become_c_identifiers_in_the_header_and_strings_in_the_library(tmp_path):
    dims = RunTimeDims(("seq", "past-len", "past_len", "\u00e9", "a_1", "a"), ((1, 2),) * 6, (2,) * 6, (), ())
    assert dims.macros("m") == ["M_SEQ", "M_PAST_LEN_1", "M_PAST_LEN_2", "M_DIM", "M_A_1", "M_A"]
    assert RunTimeDims(("a", "a", "a_1"), ((1, 2),) * 3, (2,) * 3, (), ()).macros("m") == ["M_A_0", "M_A_1", "M_A_1_"]
    symbol = 'n "tok" */ \u00e9'
    compiled = hobbit.compile(_bias_relu((1, symbol, 16)), cache=False, dynamic_shapes={symbol: (1, 8)})
    files = compiled.export(tmp_path / "w", name="w")
    header = files.header.read_text()
    assert "#define W_N_TOK_MIN 1" in header and "#define W_N_TOK_MAX 8" in header
    assert header.count("*/") == header.count("/*")  # the symbol cannot end a comment
    loaded = hobbit.load(files.library.parent)
    assert loaded.get_inputs() == compiled.get_inputs()
    with pytest.raises(InputError, match=r"\('n \"tok\" \*/ \u00e9'\) must be in \[1, 8\]"):
        loaded.run({"x": _x(1, 9, 16)})
    api = bind_api(ctypes.CDLL(str(files.library)), "w")
    handle = ctypes.c_void_p()
    assert api["create"](None, 0, None, 0, ctypes.byref(handle)) == 0
    x, y, n = np.zeros((1, 8, 16), np.float32), np.zeros((1, 8, 16), np.float32), np.array([9], np.int64)
    assert api["run"](handle, (ctypes.c_void_p * 2)(x.ctypes.data, n.ctypes.data),
                      (ctypes.c_void_p * 1)(y.ctypes.data)) == 1
    assert api["error"](handle).decode().startswith(f"run-time dim '{symbol}' (inputs[1][0]) is 9")
    api["destroy"](handle)


def test_a_static_model_says_it_has_no_run_time_dims(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"])
    files = hobbit.compile(model, cache=False).export(tmp_path / "relu", name="relu")
    assert json.loads(files.manifest.read_text())["dynamic"] is None
    assert "#define RELU_NUM_SYMBOLS 0" in files.header.read_text()


def test_load_runs_like_the_jit_at_every_length(encoder):
    compiled, files = encoder
    loaded = hobbit.load(files.library.parent)
    assert type(loaded).__name__ == "DynamicModel" and loaded.bounds == {"seq": 64} and loaded.compiles == 0
    assert loaded.get_inputs() == compiled.get_inputs() and loaded.get_outputs() == compiled.get_outputs()
    assert [s.name for s in loaded.inputs] == ["x"] and loaded.output_names == ["y"]
    for size in (1, 7, 16, 17, 63, 64):
        x = _x(1, size, 16, seed=size)
        got, = loaded.run({"x": x})
        assert got.shape == (1, size, 16)
        np.testing.assert_array_equal(got, compiled.run({"x": x})[0])
        np.testing.assert_array_equal(got, _numpy(x))
    x = _x(1, 9, 16)
    out = np.full((1, 9, 16), np.nan, np.float32)
    got, = loaded.run(["y"], {"x": x}, out=[out])
    assert got is out
    np.testing.assert_array_equal(out, _numpy(x))
    np.testing.assert_array_equal(loaded(x), _numpy(x))
    assert compiled.compiles == 1


def test_load_copies_what_is_not_a_prefix_of_the_bound_layout(two_symbols):
    compiled, files = two_symbols
    assert files.weights is not None
    loaded = hobbit.load(files.library.parent, threads=1)
    assert loaded.bounds == {"batch": 4, "seq": 20}
    for shape in ((3, 5, 16), (1, 20, 16), (4, 2, 16), (2, 20, 16), (4, 20, 16)):
        x = _x(*shape)
        got, = loaded.run({"x": x})
        np.testing.assert_array_equal(got, compiled.run({"x": x})[0])
        np.testing.assert_array_equal(got, _numpy(x))
        out = np.empty(shape, np.float32)
        assert loaded.run({"x": x}, out=[out])[0] is out
        np.testing.assert_array_equal(out, got)


def test_the_loaded_model_refuses_sizes_outside_its_bounds(encoder, two_symbols):
    loaded = hobbit.load(encoder[1].library.parent)
    with pytest.raises(InputError, match=r"input 'x'.*dim 1 \('seq'\) must be in \[1, 64\] \(the bounds of the "
                                         r"exported library, which cannot grow.*got 65"):
        loaded.run({"x": _x(1, 65, 16)})
    with pytest.raises(InputError, match=r"input 'x'.*dim 2 is static and must be 16"):
        loaded.run({"x": _x(1, 8, 15)})
    two = hobbit.load(two_symbols[1].library.parent)
    with pytest.raises(InputError, match=r"dim 1 \('seq'\) must be in \[2, 20\].*got 1"):
        two.run({"x": _x(2, 1, 16)})
    with pytest.raises(InputError, match=r"dim 0 \('batch'\) must be in \[1, 4\].*got 5"):
        two.run({"x": _x(5, 3, 16)})
    with pytest.raises(InputError, match="cannot compile"):
        two._build((8, 20))
    assert loaded.compiles == 0 and two.compiles == 0


def test_a_symbol_with_no_declared_bound_exports_the_bound_it_has(tmp_path):
    compiled = hobbit.compile(_bias_relu(), cache=False)  # seq grows from 64
    x = _x(1, 100, 16)
    compiled.run({"x": x})
    assert compiled.bounds == {"seq": 256}
    files = compiled.export(tmp_path / "grown", name="grown")
    dynamic = json.loads(files.manifest.read_text())["dynamic"]
    assert dynamic["ranges"] == [[1, 256]] and dynamic["bound"] == [256]
    assert "#define GROWN_SEQ_MAX 256" in files.header.read_text()
    loaded = hobbit.load(files.library.parent)
    np.testing.assert_array_equal(loaded.run({"x": x})[0], _numpy(x))
    with pytest.raises(InputError, match=r"must be in \[1, 256\].*got 257"):
        loaded.run({"x": _x(1, 257, 16)})


def test_a_loaded_dynamic_model_pickles_as_a_load_and_is_not_exported_again(encoder, tmp_path):
    loaded = hobbit.load(encoder[1].library.parent)
    again = pickle.loads(pickle.dumps(loaded))
    assert type(again).__name__ == "DynamicModel" and again.bounds == {"seq": 64}
    x = _x(1, 33, 16)
    np.testing.assert_array_equal(again.run({"x": x})[0], loaded.run({"x": x})[0])
    with pytest.raises(HobbitError, match="cannot be exported again"):
        loaded.export(tmp_path / "again")


def test_the_c_api_refuses_dims_outside_the_bounds(two_symbols):
    """The library itself, through ctypes: no value outside its bounds runs, and a NULL dims
    vector is refused; inside them it computes what the JIT does."""
    compiled, files = two_symbols
    api = bind_api(ctypes.CDLL(str(files.library)), "two")
    handle = ctypes.c_void_p()
    assert api["create"](str(files.weights).encode(), 0, None, 0, ctypes.byref(handle)) == 0
    x = np.zeros((4, 20, 16), np.float32)
    x[:3, :5] = _x(3, 5, 16)
    y = np.full((4, 20, 16), np.nan, np.float32)

    def run(dims: list[int] | None) -> tuple[int, str]:
        vector = None if dims is None else np.array(dims, np.int64)
        inputs = (ctypes.c_void_p * 2)(x.ctypes.data, None if vector is None else vector.ctypes.data)
        code = api["run"](handle, inputs, (ctypes.c_void_p * 1)(y.ctypes.data))
        return code, api["error"](handle).decode()

    for dims, message in (([5, 5], "run-time dim 'batch' (inputs[1][0]) is 5, this library runs 1 to 4"),
                          ([0, 5], "'batch' (inputs[1][0]) is 0"),
                          ([3, 21], "run-time dim 'seq' (inputs[1][1]) is 21, this library runs 2 to 20"),
                          ([3, 1], "'seq' (inputs[1][1]) is 1"), ([3, -(2**62)], "is -4611686018427387904"),
                          (None, "inputs[1], the values of the run-time dims, is NULL")):
        code, text = run(dims)
        assert code == 1 and message in text and "nothing was run" in text, (dims, code, text)  # HOBBIT_E_ARGUMENT
        assert np.isnan(y).all()  # nothing was written
    assert run([3, 5]) == (0, "")
    np.testing.assert_array_equal(y[:3, :5], compiled.run({"x": x[:3, :5]})[0])
    assert np.isnan(y[3]).all() and np.isnan(y[:, 5:]).all()  # only inside the extents
    api["destroy"](handle)


# -- the C example ------------------------------------------------------------------------------
def _build_example(files, build: Path) -> Path:
    program = build / "sequence"
    folder = str(files.library.parent)
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", folder, str(EXAMPLE), "-L", folder,
                    "-lencoder", f"-Wl,-rpath,{folder}", "-o", str(program)], check=True)
    return program


def test_the_c_example_runs_two_lengths_from_one_library(encoder, tmp_path):
    compiled, files = encoder
    program = _build_example(files, tmp_path)
    lengths = (5, 64)
    args = []
    for n in lengths:
        _x(1, n, 16, seed=n).tofile(tmp_path / f"in{n}.raw")
        args += [str(tmp_path / f"in{n}.raw"), str(tmp_path / f"out{n}.raw")]
    done = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.findall(r"seq (\d+):", done.stdout) == ["5", "64"]
    for n in lengths:
        x = _x(1, n, 16, seed=n)
        got = np.fromfile(tmp_path / f"out{n}.raw", np.float32).reshape(1, n, 16)
        np.testing.assert_array_equal(got, compiled.run({"x": x})[0])
        np.testing.assert_array_equal(got, _numpy(x))
    _x(1, 65, 16).tofile(tmp_path / "in65.raw")
    done = subprocess.run([str(program), str(tmp_path / "in65.raw"), str(tmp_path / "out65.raw")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "run-time dim 'seq' (inputs[1][0]) is 65, this library runs 1 to 64" \
        in done.stderr, done.stderr
    assert not (tmp_path / "out65.raw").exists()


def test_the_c_example_runs_clean_under_valgrind(tmp_path):
    """valgrind cannot decode AVX-512: the x86-64-v3 build, its weights in a file (the mmap path)."""
    assert shutil.which("valgrind"), "valgrind is needed (.ci/run installs it: apt-get install -y valgrind)"
    compiled = hobbit.compile(_bias_relu(), target="x86-64-v3", threads=2, cache=False,
                              dynamic_shapes={"seq": (1, 64)})
    files = compiled.export(tmp_path / "lib", name="encoder", weights="file")
    program = _build_example(files, tmp_path)
    for n in (3, 64):
        _x(1, n, 16, seed=n).tofile(tmp_path / f"in{n}.raw")
    done = subprocess.run([*VALGRIND, str(program), str(files.weights), str(tmp_path / "in3.raw"),
                           str(tmp_path / "out3.raw"), str(tmp_path / "in64.raw"), str(tmp_path / "out64.raw")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "ERROR SUMMARY: 0 errors" in done.stderr, done.stderr[-3000:]
    for n in (3, 64):
        got = np.fromfile(tmp_path / f"out{n}.raw", np.float32).reshape(1, n, 16)
        np.testing.assert_array_equal(got, _numpy(_x(1, n, 16, seed=n)))


# -- the manifest's "dynamic" section, checked -------------------------------------------------
def _edit(folder: Path, change) -> None:
    path = folder / "two.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _set(*path_and_value):
    *path, value = path_and_value

    def change(manifest: dict) -> None:
        target = manifest["dynamic"]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(dynamic=[]), r"field 'dynamic' is \[\], not null or an object with exactly symbols"),
    (lambda m: m["dynamic"].pop("bound"), "field 'dynamic' is"),
    (lambda m: m["dynamic"].update(extra=1), "not null or an object with exactly"),
    (_set("symbols", "batch"), "field 'dynamic.symbols' is 'batch', not a list of distinct, non-empty names"),
    (_set("symbols", ["batch", "batch"]), "field 'dynamic.symbols'"),
    (_set("symbols", ["batch", 7]), "field 'dynamic.symbols'"),
    (_set("symbols", ["batch"]), r"field 'dynamic.bound' is \[4, 20\], not a list of 1 sizes"),
    (_set("bound", [4, "20"]), "field 'dynamic.bound' is '20', not an integer from 1"),
    (_set("bound", [4, 2**63]), "field 'dynamic.bound'"),
    (_set("ranges", [[1, 4]]), "field 'dynamic.ranges' is"),
    (_set("ranges", 1, [2, 21]), r"field 'dynamic.ranges\[1\]' is 21, not an integer from 2 to 20"),
    (_set("ranges", 1, [0, 20]), r"field 'dynamic.ranges\[1\]' is 0, not an integer from 1 to 20"),
    (_set("ranges", 1, [5, 4]), r"field 'dynamic.ranges\[1\]' is 4, not an integer from 5 to 20"),
    (_set("ranges", 1, [True, 20]), r"field 'dynamic.ranges\[1\]' is True"),
    (_set("ranges", 1, "2-20"), r"field 'dynamic.ranges\[1\]' is '2-20', not \[low, high\]"),
    (_set("inputs", []), "field 'dynamic.inputs' is \\[\\], not a list of 1"),
    (_set("outputs", [[None, None]]), r"field 'dynamic.outputs\[0\]' is \[None, None\], not a list of 3"),
    (_set("inputs", 0, 1, {"terms": [[1, 1]]}), r"field 'dynamic.inputs\[0\]\[1\]' is .*exactly terms and const"),
    (_set("inputs", 0, 1, {"terms": [[2, 1]], "const": 0}), r"field 'dynamic.inputs\[0\]\[1\].terms' is 2"),
    (_set("inputs", 0, 1, {"terms": [[1, 0]], "const": 20}), "terms of distinct slots with non-zero coefficients"),
    (_set("inputs", 0, 1, {"terms": [[1, 1], [1, 1]], "const": 0}), "terms of distinct slots"),
    (_set("inputs", 0, 1, {"terms": [[1, 1]], "const": 1.0}), r"field 'dynamic.inputs\[0\]\[1\].const' is 1.0"),
    (_set("inputs", 0, 1, {"terms": "seq", "const": 0}), r"field 'dynamic.inputs\[0\]\[1\].terms' is 'seq'"),
    (_set("inputs", 0, 1, {"terms": [[1, 2]], "const": -20}), "an extent that is at most 20 at the bound and inside"),
    (_set("inputs", 0, 1, {"terms": [[1, 1]], "const": 1}), "an extent that is at most 20 at the bound"),
    (_set("inputs", 0, 2, {"terms": [[0, 4]], "const": 0}), r"'dynamic.inputs\[0\]\[2\]'.*one symbol"),
    (_set("inputs", 0, 0, None), "field 'dynamic.inputs' is .*not extents that give every symbol's value"),
    (_set("outputs", 0, 1, {"terms": [[1, 2]], "const": -20}), r"'dynamic.outputs\[0\]\[1\]'.*inside \[0, 20\]"),
    (lambda m: m["inputs"].pop(), "field 'inputs' is .*not inputs whose last is the dims vector"),
    (lambda m: m["inputs"][-1].__setitem__(2, "<i4"), "field 'inputs' is .*the dims vector"),
])
def test_a_damaged_dynamic_section_is_refused(two_symbols, tmp_path, change, message):
    folder = _copy(two_symbols[1], tmp_path)
    _edit(folder, change)
    with pytest.raises(ArtifactError, match=message):
        hobbit.load(folder)


def test_a_manifest_without_the_section_still_loads(two_symbols, tmp_path):
    """A manifest written before libraries took run-time dims has no "dynamic": a static library.
    This one (a dynamic library's, with the section removed) then runs at its bound shapes with
    the dims vector as an input like any other."""
    folder = _copy(two_symbols[1], tmp_path)
    _edit(folder, lambda m: m.pop("dynamic"))
    loaded = hobbit.load(folder)
    assert type(loaded).__name__ == "LoadedModel"
    x = _x(4, 20, 16)
    y, = loaded.run({"x": x, "hobbit.dims": np.array([4, 20], np.int64)})
    np.testing.assert_array_equal(y, _numpy(x))
