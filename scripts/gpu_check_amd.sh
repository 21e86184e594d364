#!/usr/bin/env bash
# The GPU backend's checks on a machine with an AMD GPU and ROCm, in one go: the AMD twin of
# scripts/gpu_check.sh. The HIP runtime's tests on the real device (tests/runtime/test_hip_device.py,
# which skip everywhere else; test_hip.py and test_gpu_runtime.py through the fake driver besides),
# then the zoo benchmark compiled for the device's arch (rocm:gfxNNN) against PyTorch eager (ROCm
# build), its table written to OUTDIR/gpu_bench_amd.md.
#
#   scripts/gpu_check_amd.sh [OUTDIR]      # OUTDIR defaults to gpu-check-amd/
#
# It needs python3 with onnx, onnxruntime, llvmlite >= 0.50, ml_dtypes, flatbuffers, pytest, ld.lld
# (Debian's lld-22, or ld.lld on PATH: it links the AMDGPU code objects) and hip-python matching the
# installed ROCm (its versions follow ROCm's: hip-python==6.4.* for ROCm 6.4). What is missing is
# installed with pip where a package index is reachable (hip-python at the ROCm version read from
# $ROCM_PATH/.info/version); on a machine with none, put the wheels in .whl/ (python3 -m pip download
# --no-deps --only-binary=:all: ... -d .whl on a machine with one). PyTorch's ROCm build is not
# installed here (PyPI's torch is CUDA's): without it the torch tests and the benchmark are skipped.
# BENCH_BUDGET (seconds, default 240) bounds the benchmark: what is left past it is listed as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu-check-amd}
PY=${PYTHON:-python3}
ROCM=${ROCM_PATH:-/opt/rocm}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
export PATH="$PATH:$ROCM/bin:$ROCM/llvm/bin"

if compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

missing() {
    "$PY" - <<'PYEOF'
import importlib
missing = []
for name in ["numpy", "onnx", "onnxruntime", "llvmlite", "ml_dtypes", "flatbuffers", "hip", "pytest"]:
    try:
        module = importlib.import_module(name)
    except ImportError:
        missing.append(name)
        continue
    if name == "llvmlite" and tuple(int(p) for p in module.__version__.split(".")[:2]) < (0, 50):
        missing.append(f"llvmlite>=0.50 (found {module.__version__})")
print(" ".join(missing))
PYEOF
}
need=$(missing)
if [ -n "$need" ]; then
    rocm_version=$(sed -n '1s/^\([0-9]*\.[0-9]*\).*/\1/p' "$ROCM/.info/version" 2>/dev/null || true)
    hip_python=${rocm_version:+hip-python==$rocm_version.*}
    echo "missing: $need; trying pip install -e . ${hip_python:-hip-python} pytest onnxruntime" >&2
    "$PY" -m pip install -q --retries 0 --timeout 20 -e . "${hip_python:-hip-python}" pytest onnxruntime || true
    need=$(missing)
    if [ -n "$need" ]; then
        echo "still missing: $need (no package index here? carry their wheels in .whl/)" >&2
        exit 3
    fi
fi
command -v ld.lld-22 >/dev/null || command -v ld.lld >/dev/null || {
    echo "no ld.lld: apt-get install lld-22 (or put ROCm's llvm/bin on PATH)" >&2; exit 3; }

# The device's arch as HIP reports it (gfx90a, gfx942, ...), which the model is compiled for.
arch=$("$PY" - <<'PYEOF'
from hobbit.runtime.hip import device_arch, hip_module
hip = hip_module()
status = hip.hipInit(0)
status = status[0] if isinstance(status, tuple) else status
if status == hip.hipError_t.hipSuccess and hip.hipGetDeviceCount()[1] > 0:
    print(device_arch(str(hip.hipGetDeviceProperties(0)[1].gcnArchName)))
PYEOF
) || true
{ command -v rocm-smi >/dev/null && rocm-smi --showproductname; cat "$ROCM/.info/version" 2>/dev/null; \
  echo "arch: ${arch:-none found}"; } | tee "$OUTDIR/gpu.txt" || true
if [ -z "$arch" ]; then
    echo "HIP sees no AMD GPU here: the device tests would all skip" >&2
    exit 4
fi

status=0
"$PY" -m pytest -q -rs -p no:cacheprovider tests/runtime/test_hip_device.py tests/runtime/test_hip.py \
    tests/runtime/test_gpu_runtime.py 2>&1 | tee "$OUTDIR/tests.log" || status=1
if ! "$PY" -c "import torch, sys; sys.exit(0 if getattr(torch.version, 'hip', None) else 1)" 2>/dev/null; then
    echo "no PyTorch ROCm build: the benchmark is skipped (pip install torch --index-url" \
         "https://download.pytorch.org/whl/rocmX.Y)" | tee "$OUTDIR/bench.log" >&2
else
    timeout $(( ${BENCH_BUDGET:-240} + 120 )) "$PY" -m hobbit.bench.gpu --target "rocm:$arch" \
        --budget "${BENCH_BUDGET:-240}" --seconds 2 --out "$OUTDIR/gpu_bench_amd.md" 2>&1 \
        | tee "$OUTDIR/bench.log" || status=1
fi
exit $status
