"""What every GPU kernel test checks, in one place.

For each GPU target hobbit knows (sm_80, sm_90, gfx90a, gfx942) the model compiles;
the PTX assembles with ptxas for its arch with no register spills (each kernel's
registers and spills are ptxas's -v report); the AMDGPU code object links with ld.lld and
carries one kernel descriptor per launch. The kernels' results come from the grid
emulation (the same kernel bodies built for the host, hobbit.runtime.emulate) for a
32-wide-warp target and a 64-wide one, and are compared with onnxruntime's: with the
threads of each phase in index order and in two shuffled orders, every run watched for
shared-memory races (a RaceError fails the test)."""

from __future__ import annotations

import numpy as np
import onnx

import hobbit
from hobbit.backend.gpu.device_code import kernel_descriptors
from hobbit.runtime.gpu_model import GpuModel
from tests.helpers import run_ort

GPU_TARGETS = ("cuda:sm_80", "cuda:sm_90", "rocm:gfx90a", "rocm:gfx942")
EMULATED = ("cuda:sm_90", "rocm:gfx942")
ORDERS = (None, 1, 2)  # thread orders within a phase: index order, then two seeded shuffles


def compiled_for(model: onnx.ModelProto, spec: str, precision: str = "fp32") -> GpuModel:
    """The model compiled for GPU target `spec`, its device code checked as the module says."""
    gm = hobbit.compile(model, target=spec, precision=precision, cache=False)
    assert isinstance(gm, GpuModel)
    names = {launch.kernel for launch in gm.launches}
    if gm.target.vendor == "cuda":
        assert gm.cubin is not None, "ptxas (pip nvidia-cuda-nvcc) is a test dependency"
        assert set(gm.resources) == names, (set(gm.resources), names)
        spilled = {name: r for name, r in gm.resources.items() if r.spill_stores or r.spill_loads}
        assert not spilled, f"register spills on {spec}: {spilled}"
    else:
        assert set(kernel_descriptors(gm.device_code)) == names
    return gm


def assert_gpu_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-4,
                           atol: float = 1e-5, targets: tuple[str, ...] = GPU_TARGETS,
                           emulated: tuple[str, ...] = EMULATED) -> list[GpuModel]:
    expected = run_ort(model, feeds)
    models = []
    for spec in targets:
        gm = compiled_for(model, spec)
        models.append(gm)
        if spec not in emulated:
            continue
        for order in ORDERS:
            got = gm.emulate(feeds, order)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.shape == e.shape and g.dtype == e.dtype, (spec, g.shape, e.shape, g.dtype, e.dtype)
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"on {spec}, thread order {order}")
    return models
