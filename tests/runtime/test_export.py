"""AOT export (hobbit.runtime.export) and hobbit.load (hobbit.runtime.load): the library runs what the
JIT runs, needs only libc/libm/libgcc_s, and a bad artifact is a clear error, never a crash."""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import hobbit
from hobbit import zoo
from hobbit.cli.main import main
from hobbit.errors import ArtifactError, ConfigError, RunError, ShapeError
from hobbit.runtime.load import bind_api
from tests.helpers import make_model, rand, run_in_four_threads

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "c" / "classify.c"
# memcheck with shorter translation blocks: at the default 60 instructions a block of the
# unrolled AVX2 kernels exhausted VEX's temporary storage ("the 'impossible' happened").
VALGRIND = ["valgrind", "--tool=memcheck", "--error-exitcode=3", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--vex-guest-max-insns=20", "--vex-guest-chase=no"]
# The libraries an exported model may need at run time (pthreads are part of libc since glibc 2.34).
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libgcc_s.so.1"}


def _tiny_model():
    """MatMul -> Softmax -> Gather: weights, libm's exp, a run-time index check, two outputs."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
             helper.make_node("Softmax", ["y"], ["s"], axis=1, name="soft"),
             helper.make_node("Gather", ["s", "idx"], ["g"], axis=1, name="pick")]
    feeds = {"x": rand(2, 16), "idx": np.array([0, 5, 31], np.int64)}
    return make_model(nodes, feeds, ["s", "g"], {"W": rand(16, 32, seed=1)}), feeds


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model, feeds = _tiny_model()
    compiled = hobbit.compile(model, threads=2, cache=False)
    folder = tmp_path_factory.mktemp("tiny")
    files = compiled.export(folder / "tiny", weights="file")  # the weights file's checks need the file
    return compiled, feeds, files


@pytest.fixture(scope="module")
def embedded(tiny, tmp_path_factory):
    """The tiny model exported the default way: its 2 KB of weights inside the library."""
    compiled, feeds, _ = tiny
    return compiled.export(tmp_path_factory.mktemp("embedded") / "tiny")


def _copy(files, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(files.library.parent, target)
    return target


def test_export_writes_library_header_weights_and_manifest(tiny):
    compiled, _, files = tiny
    for path in (files.library, files.archive, files.header, files.weights, files.manifest):
        assert path.is_file(), path
    assert files.library.name == "libtiny.so"  # the name defaults to the folder's
    header = files.header.read_text()
    assert '"x"  float32[2, 16]  (128 bytes)' in header
    assert '"idx"  int64[3]  (24 bytes)' in header
    assert '"s"  float32[2, 32]  (256 bytes)' in header
    assert '"g"  float32[2, 3]  (24 bytes)' in header
    for api in ("tiny_create", "tiny_run", "tiny_error", "tiny_destroy", "tiny_arena_bytes"):
        assert re.search(rf"\b{api}\(", header), api
    assert files.weights.stat().st_size == 16 * 32 * 4


def test_library_needs_only_libc_libm_libgcc_s(tiny):
    library = str(tiny[2].library)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout)
    assert set(needed) <= ALLOWED_NEEDED, needed
    undefined = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True, text=True,
                               check=True).stdout.split("\n")
    strong = [line.split()[-1] for line in undefined if line.strip() and line.split()[0] == "U"]
    assert strong and all(re.search(r"@(GLIBC|GCC)_[\d.]+$", sym) for sym in strong), strong
    defined = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                             check=True).stdout
    exported = {line.split()[-1] for line in defined.split("\n") if line.strip()}
    assert all(sym.startswith("tiny_") for sym in exported), exported  # hobbit_main and the runtime stay local
    archived = subprocess.run(["nm", "-g", "--defined-only", str(tiny[2].archive)], capture_output=True, text=True,
                              check=True).stdout
    globals_ = {line.split()[-1] for line in archived.split("\n") if line.strip() and not line.endswith(":")}
    assert globals_ == exported, globals_ ^ exported


def test_load_runs_like_the_jit(tiny):
    compiled, feeds, files = tiny
    loaded = hobbit.load(files.library.parent)
    assert loaded.inputs == compiled.inputs and loaded.outputs == compiled.outputs
    want = compiled.run(feeds)
    got = loaded.run(feeds)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)  # the same machine code
    out = [np.empty((2, 3), np.float32)]
    picked = loaded.run(["g"], feeds, out=out)
    assert picked[0] is out[0]
    np.testing.assert_array_equal(out[0], want[1])
    np.testing.assert_array_equal(loaded(*feeds.values())[0], want[0])
    again = pickle.loads(pickle.dumps(loaded))
    np.testing.assert_array_equal(again.run(feeds)[1], want[1])


def test_invalid_data_is_the_same_run_error_as_the_jit(tiny):
    compiled, feeds, files = tiny
    loaded = hobbit.load(files.library.parent)
    bad = {**feeds, "idx": np.array([0, 40, 1], np.int64)}
    with pytest.raises(RunError) as jit_error:
        compiled.run(bad)
    with pytest.raises(RunError) as lib_error:
        loaded.run(bad)
    assert str(lib_error.value) == str(jit_error.value)
    assert "'pick'" in str(lib_error.value) and "40" in str(lib_error.value)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_weights_are_refused_at_load(tiny, tmp_path, damage):
    folder = _copy(tiny[2], tmp_path)
    weights = folder / "tiny.weights"
    data = bytearray(weights.read_bytes())
    if damage == "flip":
        data[100] ^= 0x40
    else:
        del data[-4:]
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="crc32" if damage == "flip" else "bytes"):
        hobbit.load(folder)


def test_weights_of_another_export_are_refused(tiny, tmp_path):
    """Same model, other weights: same size, so only the checksum can tell."""
    model, _ = _tiny_model()
    model.graph.initializer[0].raw_data = rand(16, 32, seed=7).tobytes()
    other = hobbit.compile(model, threads=1, cache=False).export(tmp_path / "other", name="tiny", weights="file")
    folder = _copy(tiny[2], tmp_path)
    shutil.copy(other.weights, folder / "tiny.weights")
    with pytest.raises(ArtifactError, match=r"from another export: its crc32"):
        hobbit.load(folder)


def test_cpu_features_the_host_lacks_are_refused_before_loading(tiny, tmp_path):
    folder = _copy(tiny[2], tmp_path)
    manifest = json.loads((folder / "tiny.json").read_text())
    manifest["target"]["features"] += ",+hobbit-imaginary-feature"
    (folder / "tiny.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="lacks: hobbit-imaginary-feature"):
        hobbit.load(folder)


def test_a_replaced_library_is_refused(tiny, tmp_path):
    folder = _copy(tiny[2], tmp_path)
    with open(folder / "libtiny.so", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ArtifactError, match="sha256"):
        hobbit.load(folder)


def test_a_folder_others_can_write_is_refused(tiny, tmp_path):
    folder = _copy(tiny[2], tmp_path)
    os.chmod(folder, 0o777)
    with pytest.raises(ArtifactError, match="writable by group or others"):
        hobbit.load(folder)


def test_symbolic_dims_ask_for_input_shapes(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    compiled = hobbit.compile(model, cache=False)
    with pytest.raises(ShapeError, match=r"x\(batch, 3\).*input_shapes=\{'x': \(1, 3\)\}"):
        compiled.export(tmp_path / "relu")


def test_a_name_that_is_not_a_c_identifier_is_refused(tiny, tmp_path):
    with pytest.raises(ConfigError, match="C identifier"):
        tiny[0].export(tmp_path / "x", name="1-bad")


# -- the C example, against SqueezeNet ----------------------------------------------------------
def _build_example(files, name: str, build: Path, static: bool = False) -> Path:
    """examples/c/classify.c, written for `squeezenet_`, compiled for an export named `name`
    and linked with its shared library, or with its archive when `static`."""
    source = EXAMPLE.read_text().replace("squeezenet", name).replace("SQUEEZENET", name.upper())
    (build / f"classify_{name}.c").write_text(source)
    program = build / f"classify_{name}{'_static' if static else ''}"
    folder = str(files.library.parent)
    link = [str(files.archive), "-lm"] if static else ["-L", folder, f"-l{name}", f"-Wl,-rpath,{folder}"]
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-I", folder, str(build / f"classify_{name}.c"), *link,
                    "-o", str(program)], check=True)
    return program


def _classify(program: Path, files, image: Path, scores: Path, wrap: list[str] = ()) -> str:
    weights = [str(files.weights)] if files.weights else []  # no argument when they are inside the library
    done = subprocess.run([*wrap, str(program), *weights, str(image), str(scores)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow
def test_c_example_matches_the_jit_and_runs_clean_under_valgrind(tmp_path):
    model = zoo.build("squeezenet1_1")
    image = rand(1, 3, 224, 224, seed=3)
    image.tofile(tmp_path / "image.raw")
    compiled = hobbit.compile(model, threads=2, cache=False)
    files = compiled.export(tmp_path / "native", name="squeezenet")
    assert files.weights is None  # 5 MB: inside the library
    program = _build_example(files, "squeezenet", tmp_path)
    printed = _classify(program, files, tmp_path / "image.raw", tmp_path / "scores.raw")
    want = compiled.run({compiled.inputs[0].name: image})[0]
    got = np.fromfile(tmp_path / "scores.raw", np.float32).reshape(want.shape)
    assert np.abs(got - want).max() <= 1e-5
    top = np.argsort(-want.reshape(-1), kind="stable")[:5]
    assert [int(c) for c in re.findall(r"class (\d+)", printed)] == top.tolist()
    static = _build_example(files, "squeezenet", tmp_path, static=True)
    _classify(static, files, tmp_path / "image.raw", tmp_path / "scores_static.raw")
    np.testing.assert_array_equal(np.fromfile(tmp_path / "scores_static.raw", np.float32), got.reshape(-1))

    # valgrind 3.19 cannot decode AVX-512: it runs the x86-64-v3 (AVX2) build, against that build's JIT,
    # with its weights in a file (the mmap path).
    avx2 = hobbit.compile(model, target="x86-64-v3", threads=2, cache=False)
    avx2_files = avx2.export(tmp_path / "avx2", name="squeezenet_avx2", weights="file")
    avx2_program = _build_example(avx2_files, "squeezenet_avx2", tmp_path)
    assert shutil.which("valgrind"), "valgrind is needed (.ci/run installs it: apt-get install -y valgrind)"
    printed = _classify(avx2_program, avx2_files, tmp_path / "image.raw", tmp_path / "scores_avx2.raw",
                        VALGRIND)
    assert re.search(r"ERROR SUMMARY: 0 errors", printed), printed
    got = np.fromfile(tmp_path / "scores_avx2.raw", np.float32).reshape(want.shape)
    want_avx2 = avx2.run({avx2.inputs[0].name: image})[0]
    assert np.abs(got - want_avx2).max() <= 1e-5


def test_cli_emit_lib_writes_a_loadable_library(tmp_path, capsys):
    model, feeds = _tiny_model()
    path = tmp_path / "tiny.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["compile", str(path), "--emit", "lib", "-o", str(tmp_path / "out"), "--name", "tiny_cli",
                 "--threads", "1"]) == 0
    assert "libtiny_cli.so" in capsys.readouterr().err
    loaded = hobbit.load(tmp_path / "out")
    want = hobbit.compile(model, threads=1, cache=False).run(feeds)
    for got, expected in zip(loaded.run(feeds), want):
        np.testing.assert_array_equal(got, expected)


def test_a_model_from_the_compile_cache_exports_the_same_code(tmp_path):
    model, feeds = _tiny_model()
    fresh = hobbit.compile(model, threads=1, cache=True)
    cached = hobbit.compile(model, threads=1, cache=True)
    assert getattr(cached.report, "cached", False)
    files = cached.export(tmp_path / "cached")
    assert json.loads(files.manifest.read_text())["threads"] == 1
    for got, want in zip(hobbit.load(files.library.parent).run(feeds), fresh.run(feeds)):
        np.testing.assert_array_equal(got, want)


def test_c_api_checks_threads_and_a_caller_provided_arena(tiny):
    """The C API itself, through ctypes: a caller's arena must be big enough and 64-byte aligned,
    and threads is 0 (all) or 1 to the count the library was built for (2 here)."""
    _, feeds, files = tiny
    api = bind_api(ctypes.CDLL(str(files.library)), "tiny")
    weights = str(files.weights).encode()
    size = api["arena_bytes"]()
    raw = np.zeros(size + 128, np.uint8)
    aligned = raw.ctypes.data + (-raw.ctypes.data) % 64

    def create(threads: int, arena: int | None, nbytes: int) -> tuple[int, str, ctypes.c_void_p]:
        handle = ctypes.c_void_p()
        code = api["create"](weights, threads, arena, nbytes, ctypes.byref(handle))
        return code, api["error"](handle).decode(), handle

    for threads, arena, nbytes, message in ((3, None, 0, "built for 2 thread"), (-1, None, 0, "threads must be 1 to 2"),
                                            (0, aligned, size - 1, f"the model needs {size}"),
                                            (0, aligned + 8, size, "aligned to 64")):
        code, text, handle = create(threads, arena, nbytes)
        assert code == 1 and message in text, (code, text)  # HOBBIT_E_ARGUMENT
        api["destroy"](handle)
    code, text, handle = create(2, aligned, size)
    assert code == 0, text
    x, idx = np.ascontiguousarray(feeds["x"]), np.ascontiguousarray(feeds["idx"])
    s, g = np.empty((2, 32), np.float32), np.empty((2, 3), np.float32)
    inputs = (ctypes.c_void_p * 2)(x.ctypes.data, idx.ctypes.data)
    outputs = (ctypes.c_void_p * 2)(s.ctypes.data, g.ctypes.data)
    assert api["run"](handle, inputs, outputs) == 0
    np.testing.assert_array_equal(g, tiny[0].run(feeds)[1])
    api["destroy"](handle)


def test_a_loaded_model_runs_from_four_threads_at_once(tmp_path):
    """Each Python thread gets its own context (arena), as a CompiledModel gives each its own arena."""
    model = make_model([helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Tanh", ["y"], ["z"])],
                       {"x": rand(8, 64)}, ["z"], {"W": rand(64, 64, seed=2)})
    hobbit.compile(model, threads=2, cache=False).export(tmp_path / "four")
    run_in_four_threads(hobbit.load(tmp_path / "four"), model, [rand(8, 64, seed=s) for s in range(4)], runs=50)


_THREADS_CHILD = """
import os, sys
import numpy as np
import hobbit
model = hobbit.load(sys.argv[1], threads=int(sys.argv[2]) or None)
feeds = dict(np.load(sys.argv[3]))
before = len(os.listdir("/proc/self/task"))
outputs = model.run(feeds)
np.savez(sys.argv[4], *outputs)
print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.parametrize("threads, workers", [(1, 0), (2, 1), (0, 1)])
def test_a_context_runs_with_fewer_threads_than_built(tiny, tmp_path, threads, workers):
    """threads=1 on a 2-thread library starts no worker and gives the JIT's answers; 0 is all."""
    compiled, feeds, files = tiny
    np.savez(tmp_path / "feeds.npz", **feeds)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _THREADS_CHILD, str(files.library.parent), str(threads),
                           str(tmp_path / "feeds.npz"), str(tmp_path / "out.npz")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) == workers
    got = np.load(tmp_path / "out.npz")
    for i, want in enumerate(compiled.run(feeds)):
        np.testing.assert_array_equal(got[f"arr_{i}"], want)


def test_load_refuses_more_threads_than_built(tiny):
    with pytest.raises(ConfigError, match="threads= must be 1 to 2"):
        hobbit.load(tiny[2].library.parent, threads=3)


# -- weights inside the library -------------------------------------------------------------
def test_small_weights_go_inside_the_library(tiny, embedded):
    compiled, feeds, _ = tiny
    folder = embedded.library.parent
    assert embedded.weights is None and not (folder / "tiny.weights").exists()
    assert json.loads(embedded.manifest.read_text())["weights"]["file"] is None
    assert "tiny_create(NULL," in embedded.header.read_text()
    assert "#define TINY_WEIGHTS_EMBEDDED 1" in embedded.header.read_text()
    for got, want in zip(hobbit.load(folder).run(feeds), compiled.run(feeds)):
        np.testing.assert_array_equal(got, want)


def test_weights_choice_is_checked(tiny, tmp_path):
    with pytest.raises(ConfigError, match="weights= is one of auto, embed, file"):
        tiny[0].export(tmp_path / "x", weights="inline")


def test_embedded_weights_take_no_path_and_are_checked(tiny, embedded, tmp_path):
    """The C API refuses a path for a library that carries its weights, and checks their crc32:
    a library whose weights bytes were changed (bypassing hobbit.load's sha256) does not start."""
    blob = np.ascontiguousarray(tiny[0]._weights).tobytes()
    data = bytearray(embedded.library.read_bytes())
    at = data.find(blob)
    assert at > 0
    api = bind_api(ctypes.CDLL(str(embedded.library)), "tiny")
    handle = ctypes.c_void_p()
    assert api["create"](b"tiny.weights", 0, None, 0, ctypes.byref(handle)) == 1
    assert "pass NULL as weights_path" in api["error"](handle).decode()
    api["destroy"](handle)
    data[at + 100] ^= 0x40
    damaged = tmp_path / "libtiny_damaged.so"
    damaged.write_bytes(bytes(data))
    api = bind_api(ctypes.CDLL(str(damaged)), "tiny")
    assert api["create"](None, 0, None, 0, ctypes.byref(handle)) == 3  # HOBBIT_E_WEIGHTS
    assert "weights inside this library are damaged" in api["error"](handle).decode()
    api["destroy"](handle)


def test_a_replaced_library_with_embedded_weights_is_refused(embedded, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(embedded.library.parent, folder)
    data = bytearray((folder / "libtiny.so").read_bytes())
    data[-1] ^= 1
    (folder / "libtiny.so").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="sha256"):
        hobbit.load(folder)
