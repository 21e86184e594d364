"""Exported libraries for other CPUs run there and match onnxruntime on the host.

AArch64 builds (NEON on a Neoverse N1, SVE on a Neoverse V1) of the zoo models are linked
with Debian's cross toolchain (gcc-aarch64-linux-gnu), driven by the C example
(examples/c/classify.c) built for AArch64 and run under qemu-user; an x86-64-v3 (AVX2)
build runs on this machine through hobbit.load and through the C example. qemu is ~200x
slower than the hardware: these tests check answers, never timings. `.ci/run` installs
the toolchain and qemu (apt-get install gcc-aarch64-linux-gnu qemu-user-static).

Tolerances: rtol 1e-3 on the 1x1000 logits as the zoo parity tests, with atol 1e-4 times the
largest logit (at least 1e-4): float32 sums run in another order with AArch64's 4-lane vectors
than with the host's 16, and the difference grows with depth and with the logits' scale
(ResNet-50's NEON build: 1.3e-4 at logits up to 3.7, measured; the shallower models stay
inside 1e-4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hobbit
from hobbit import zoo
from hobbit.runtime.export_only import ExportOnlyModel
from tests.helpers import rand, run_ort

EXAMPLE = Path(__file__).parents[2] / "examples" / "c" / "classify.c"
# The zoo but VGG-16 (15.5 GFLOPs and 553 MB: minutes under qemu, for nothing ResNet-50 does not
# cover), with one float16 model (NEON and SVE have native half arithmetic).
MODELS = ["squeezenet1_1", "mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1-fp16"]
QEMU = ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"]
# qemu's CPU for each AArch64 target: its "max" CPU has SVE; the vector length is set to the
# Neoverse V1's 256 bits, and to 512 bits for a run that shows the code assumes no more than
# its minimum.
TARGETS = {
    "neon": ("aarch64-linux-gnu:neoverse-n1", ["-cpu", "max,sve=off"]),
    "sve256": ("aarch64-linux-gnu:neoverse-v1", ["-cpu", "max,sve-default-vector-length=32"]),
}
SVE512 = ["-cpu", "max,sve-default-vector-length=64"]


def _tool(name: str) -> str:
    assert shutil.which(name), f"{name} is needed (.ci/run installs it: apt-get install -y " \
                               f"gcc-aarch64-linux-gnu qemu-user-static)"
    return name


def _build_example(folder: Path, name: str, compiler: str) -> Path:
    """examples/c/classify.c for an export named `name`, linked with its shared library."""
    source = folder / f"classify_{name}.c"
    source.write_text(EXAMPLE.read_text().replace("squeezenet", name).replace("SQUEEZENET", name.upper()))
    program = folder / f"classify_{name}"
    subprocess.run([compiler, "-O2", "-Wall", "-Werror", "-I", str(folder), str(source), "-L", str(folder),
                    f"-l{name}", f"-Wl,-rpath,{folder}", "-o", str(program)], check=True)
    return program


def _classify(program: Path, folder: Path, name: str, image: Path, wrap: list[str] = (),
              dtype: type = np.float32) -> np.ndarray:
    scores = folder / "scores.raw"
    weights = [str(folder / f"{name}.weights")] if (folder / f"{name}.weights").exists() else []
    done = subprocess.run([*wrap, str(program), *weights, str(image), str(scores)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return np.fromfile(scores, dtype)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The same image as float32 and as float16 (for the -fp16 model), each as a raw file."""
    folder = tmp_path_factory.mktemp("image")
    found = {}
    for dtype in (np.float32, np.float16):
        x = rand(1, 3, 224, 224, seed=5).astype(dtype)
        x.tofile(folder / f"{np.dtype(dtype).name}.raw")
        found[np.dtype(dtype)] = x, folder / f"{np.dtype(dtype).name}.raw"
    return found


def _image(images, model):
    dtype = np.float16 if model.graph.input[0].type.tensor_type.elem_type == 10 else np.float32
    return images[np.dtype(dtype)]


@pytest.mark.slow
@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("variant", list(TARGETS))
def test_aarch64_export_runs_under_qemu_and_matches_onnxruntime(model_name, variant, images, tmp_path):
    compiler = _tool("aarch64-linux-gnu-gcc")
    _tool(QEMU[0])
    spec, cpu = TARGETS[variant]
    model = zoo.build(model_name)
    # Two threads for the smallest model: the thread runtime's futex waits, under qemu.
    compiled = hobbit.compile(model, target=spec, threads=2 if model_name == "squeezenet1_1" else 1)
    assert isinstance(compiled, ExportOnlyModel)
    files = compiled.export(tmp_path, name="model")
    machine = subprocess.run(["readelf", "-h", str(files.library)], capture_output=True, text=True).stdout
    assert "AArch64" in machine
    program = _build_example(tmp_path, "model", compiler)
    x, path = _image(images, model)
    want = run_ort(model, {"input": x})[0].reshape(-1)
    # float16 models compute in float32 and round the logits once, as onnxruntime's do
    # (tests/zoo/test_float16.py): the same tolerance holds.
    got = _classify(program, tmp_path, "model", path, QEMU + cpu, want.dtype)
    atol = 1e-4 * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=atol)
    if variant == "sve256" and model_name == "squeezenet1_1":
        np.testing.assert_allclose(_classify(program, tmp_path, "model", path, QEMU + SVE512), want,
                                   rtol=1e-3, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["squeezenet1_1", "mobilenet_v2", "resnet18"])
def test_x86_64_v3_export_runs_here_and_matches_onnxruntime(model_name, images, tmp_path):
    model = zoo.build(model_name)
    compiled = hobbit.compile(model, target="x86-64-v3", threads=2, cache=False)
    files = compiled.export(tmp_path, name="model")
    x, path = images[np.dtype(np.float32)]
    want = run_ort(model, {"input": x})[0]
    loaded = hobbit.load(tmp_path)
    np.testing.assert_allclose(loaded.run({"input": x})[0], want, rtol=1e-3, atol=1e-4)
    program = _build_example(tmp_path, "model", "cc")
    np.testing.assert_allclose(_classify(program, tmp_path, "model", path), want.reshape(-1), rtol=1e-3, atol=1e-4)
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(files.library)], capture_output=True,
                         text=True, check=True).stdout
    assert "%ymm" in asm and "%zmm" not in asm


def test_an_aarch64_library_is_refused_by_load_on_this_host(tmp_path):
    _tool("aarch64-linux-gnu-gcc")
    compiled = hobbit.compile(zoo.build("squeezenet1_1"), target="aarch64-linux-gnu:neoverse-n1")
    compiled.export(tmp_path, name="model")
    with pytest.raises(hobbit.ArtifactError, match="built for aarch64-unknown-linux-gnu"):
        hobbit.load(tmp_path)
