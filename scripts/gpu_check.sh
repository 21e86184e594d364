#!/usr/bin/env bash
# The GPU backend's checks on a machine with an NVIDIA GPU, in one go (about 6-8 minutes on
# one H200 with 16 cores): the CUDA runtime's tests on the real device
# (tests/runtime/test_cuda_device.py, which skip everywhere else), then the zoo benchmark
# against PyTorch eager (hobbit.bench.gpu), its table written to OUTDIR/gpu_bench.md, and at
# batch 32 in TF32 (tensor cores) to OUTDIR/gpu_bench_tf32.md.
#
#   scripts/gpu_check.sh [OUTDIR]          # OUTDIR defaults to gpu-check/
#
# It needs python3 with PyTorch (CUDA build), cuda-python, onnx, onnxruntime, llvmlite >= 0.50,
# ml_dtypes and flatbuffers; ptxas (nvidia-cuda-nvcc, or a CUDA toolkit under $CUDA_HOME) is
# optional: without it the driver compiles the PTX. What is missing is installed with
# pip install -e '.[cuda]' where a package index is reachable; on a machine with none, put
# the missing wheels in .whl/ (python3 -m pip download --no-deps --only-binary=:all: ... -d .whl
# on a machine with one) and they are installed from there. BENCH_BUDGET (seconds, default 240)
# and TF32_BUDGET (default 90) bound the benchmarks: what is left past it is listed as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"

if compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

missing() {
    "$PY" - <<'EOF'
import importlib
missing = []
for name in ["numpy", "onnx", "onnxruntime", "llvmlite", "ml_dtypes", "flatbuffers", "cuda.bindings.driver", "torch",
             "pytest"]:
    try:
        module = importlib.import_module(name)
    except ImportError:
        missing.append(name)
        continue
    if name == "llvmlite" and tuple(int(p) for p in module.__version__.split(".")[:2]) < (0, 50):
        missing.append(f"llvmlite>=0.50 (found {module.__version__})")
print(" ".join(missing))
EOF
}
need=$(missing)
if [ -n "$need" ]; then
    echo "missing: $need; trying pip install -e '.[cuda]' torch" >&2
    "$PY" -m pip install -q --retries 0 --timeout 20 -e '.[cuda]' torch pytest onnxruntime || true
    need=$(missing)
    if [ -n "$need" ]; then
        echo "still missing: $need (no package index here? carry their wheels in .whl/)" >&2
        exit 3
    fi
fi

{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } \
    | tee "$OUTDIR/gpu.txt" || true
command -v ptxas >/dev/null && ptxas --version | tail -1 | tee -a "$OUTDIR/gpu.txt" || echo "no ptxas: PTX only" >&2

set -o pipefail
status=0
"$PY" -m pytest -q -rs -p no:cacheprovider tests/runtime/test_cuda_device.py tests/runtime/test_cuda.py \
    2>&1 | tee "$OUTDIR/tests.log" || status=1
timeout $(( ${BENCH_BUDGET:-240} + 120 )) "$PY" -m hobbit.bench.gpu --budget "${BENCH_BUDGET:-240}" --seconds 2 \
    --out "$OUTDIR/gpu_bench.md" 2>&1 | tee "$OUTDIR/bench.log" || status=1
# Tensor cores: hobbit precision="tf32" against PyTorch with TF32 allowed, at batch 32.
timeout $(( ${TF32_BUDGET:-90} + 90 )) "$PY" -m hobbit.bench.gpu --precision tf32 --batches 32 \
    --budget "${TF32_BUDGET:-90}" --seconds 2 --out "$OUTDIR/gpu_bench_tf32.md" 2>&1 | tee "$OUTDIR/bench_tf32.log" \
    || status=1
exit $status
