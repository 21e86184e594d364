#!/usr/bin/env bash
# The GPU backend's checks on a machine with an NVIDIA GPU, in one go, each stage under its own
# time limit and all of them within TOTAL_BUDGET seconds (default 480: a lent GPU machine has
# 15 minutes in all and runs one command for at most 10, so this leaves time to start the machine
# and to rerun one stage). Results: ONE JSON, OUTDIR/gpu_check.json, and ONE markdown summary,
# OUTDIR/gpu_check.md (hobbit.bench.gpu_check_report), rewritten after every stage so that a
# run cut short still returns what it did; each stage's log beside them.
#
#   scripts/gpu_check.sh [OUTDIR]          # OUTDIR defaults to gpu-check/
#
# Stages, in order (STAGES=tests,sanitize,bench picks some):
#   prebuild  (in the background from the start, PREBUILD_LIMIT s, PREBUILD_JOBS processes) compiles
#             every benchmark model, batch and precision into hobbit's compile cache, so that the
#             benchmark's minutes go to measuring (hobbit.bench.gpu_prebuild);
#   tests     (TEST_LIMIT s) tests/runtime/test_cuda_device.py on the device: one model per kernel
#             family (GEMM/conv, tensor cores tf32 and bf16, depthwise, pool, reduce, norm,
#             element-wise, tensor ops; tests/runtime/device_families.py) against onnxruntime on the
#             host, graph and plain launches, torch tensors in and out, export and load; then the
#             fake-driver tests of the CUDA runtime (tests/runtime/test_cuda.py);
#   sanitize  (SANITIZE_LIMIT s) compute-sanitizer --tool racecheck and --tool memcheck on one run
#             of each family with HOBBIT_CUDA_GRAPH=0, one launch per kernel (hobbit.bench.
#             gpu_sanitize). compute-sanitizer is part of the CUDA toolkit; on PyPI only the CUDA 13
#             wheel nvidia-cuda-sanitizer-api (>=13, ~14 MB) ships the executable
#             (nvidia/cu13/bin/compute-sanitizer); the CUDA 12 wheel nvidia-cuda-sanitizer-api-cu12
#             holds only the sanitizer API's libraries. It is used from $COMPUTE_SANITIZER, PATH,
#             $CUDA_HOME/bin, /usr/local/cuda/bin or an installed wheel; where there is none the
#             report says "not available (reason)" and the stage does not fail. On a machine with no
#             package index carry the wheel in .whl/ (below);
#   bench     hobbit.bench.gpu at batch 1 and 32 (BATCHES), fp32 and tf32 (PRECISIONS), on MODELS
#             (the zoo's five CNNs), against PyTorch eager and PyTorch replaying a CUDA graph; a row
#             whose outputs disagree is not timed. Its budget is BENCH_BUDGET s or what TOTAL_BUDGET
#             leaves, whichever is less: the rest is listed as skipped.
#
# It needs python3 with PyTorch (CUDA build), cuda-python, onnx, onnxruntime, llvmlite >= 0.50,
# ml_dtypes, flatbuffers and pytest (pytest-xdist is used where present); ptxas (nvidia-cuda-nvcc,
# or a CUDA toolkit under $CUDA_HOME) is optional: without it the driver compiles the PTX. What is
# missing is installed with pip install -e '.[cuda]' where a package index is reachable; on a
# machine with none, put the missing wheels in .whl/ (python3 -m pip download --no-deps
# --only-binary=:all: PACKAGE -d .whl on a machine with one; for the sanitizer
# 'nvidia-cuda-sanitizer-api>=13') and they are installed from there.
# HOBBIT_TEST_FAKE_CUDA=1 runs the Python stages on the fake CUDA driver (tests/runtime/fake_cuda.py):
# how tests/bench/test_gpu_check.py drives this script on a machine with no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/stages.tsv "$OUTDIR"/tests.xml "$OUTDIR"/sanitizer.json "$OUTDIR"/bench.json
export PYTHONUNBUFFERED=1
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
# Every benchmark entry at batch 1 and 32 in both precisions, VGG-16's weights in each: more than
# the cache's default 4 GiB, and an evicted entry is a compile the benchmark pays for again.
export HOBBIT_CACHE_MAX_BYTES=${HOBBIT_CACHE_MAX_BYTES:-$((24 << 30))}

TOTAL_BUDGET=${TOTAL_BUDGET:-480}
STAGES=${STAGES:-tests,sanitize,bench}
MODELS=${MODELS:-squeezenet1_1,mobilenet_v2,resnet18,resnet50,vgg16}
BATCHES=${BATCHES:-1,32}
PRECISIONS=${PRECISIONS:-fp32,tf32}
TESTS=${TESTS:-tests/runtime/test_cuda_device.py tests/runtime/test_cuda.py}
TEST_LIMIT=${TEST_LIMIT:-150}
TEST_WORKERS=${TEST_WORKERS:-6}
SANITIZE_LIMIT=${SANITIZE_LIMIT:-120}
SANITIZE_JOBS=${SANITIZE_JOBS:-4}
SANITIZE_FAMILIES=${SANITIZE_FAMILIES:-}
PREBUILD_LIMIT=${PREBUILD_LIMIT:-240}
PREBUILD_JOBS=${PREBUILD_JOBS:-6}
BENCH_BUDGET=${BENCH_BUDGET:-300}
BENCH_SECONDS=${BENCH_SECONDS:-1}
REPORT_RESERVE=30  # seconds kept for the last report past the benchmark's limit

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
    >"$OUTDIR/gpu.txt" 2>&1 || echo "no nvidia-smi" >"$OUTDIR/gpu.txt"
if command -v ptxas >/dev/null; then ptxas --version | tail -1 >>"$OUTDIR/gpu.txt"; else echo "no ptxas: PTX only" >>"$OUTDIR/gpu.txt"; fi
cat "$OUTDIR/gpu.txt" >&2

# How the benchmark is started: through the fake driver when the tests ask for it.
if [ "${HOBBIT_TEST_FAKE_CUDA:-0}" = 1 ]; then PYM=("$PY" -m tests.runtime.with_fake_cuda); else PYM=("$PY" -m); fi
report() { "$PY" -m hobbit.bench.gpu_check_report "$OUTDIR" >/dev/null 2>"$OUTDIR/report.log" || true; }
record() {  # record NAME RC SECONDS LIMIT
    printf '%s\t%d\t%d\t%d\n' "$1" "$2" "$3" "$4" >>"$OUTDIR/stages.tsv"
    echo "== stage $1: exit $2 after $3 s (limit $4 s)" >&2
    report
}
# stage NAME LIMIT LOG COMMAND...: COMMAND under `timeout LIMIT`, its output in OUTDIR/LOG and on stderr.
stage() {
    local name=$1 limit=$2 log=$3 t0=$SECONDS rc
    shift 3
    set +e
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUTDIR/$log" >&2
    rc=${PIPESTATUS[0]}
    set -e
    record "$name" "$rc" $((SECONDS - t0)) "$limit"
}
wants() { [[ ",$STAGES," == *",$1,"* ]]; }

prebuild_pid=""
if wants bench; then
    prebuild_t0=$SECONDS
    timeout --kill-after=10 "$PREBUILD_LIMIT" "$PY" -m hobbit.bench.gpu --prebuild --jobs "$PREBUILD_JOBS" \
        --models "$MODELS" --batches "$BATCHES" --precision "$PRECISIONS" >"$OUTDIR/prebuild.log" 2>&1 &
    prebuild_pid=$!
fi

if wants tests; then
    workers=()
    if [ "$TEST_WORKERS" -gt 1 ] && "$PY" -c "import xdist" 2>/dev/null; then workers=(-n "$TEST_WORKERS"); fi
    # shellcheck disable=SC2086  # TESTS is a list of paths
    stage tests "$TEST_LIMIT" tests.log "$PY" -m pytest -q -rs -p no:cacheprovider "${workers[@]}" \
        --junitxml="$OUTDIR/tests.xml" $TESTS
fi

if wants sanitize; then
    stage sanitize "$SANITIZE_LIMIT" sanitize.log "$PY" -m hobbit.bench.gpu_sanitize \
        --module tests.runtime.device_families --families "$SANITIZE_FAMILIES" --jobs "$SANITIZE_JOBS" \
        --budget $((SANITIZE_LIMIT - 15)) --timeout 90 --out "$OUTDIR/sanitizer.json"
fi

if wants bench; then
    set +e
    wait "$prebuild_pid"
    rc=$?
    set -e
    record prebuild "$rc" $((SECONDS - prebuild_t0)) "$PREBUILD_LIMIT"
    left=$((TOTAL_BUDGET - SECONDS - 45 - REPORT_RESERVE))
    budget=$(( left < BENCH_BUDGET ? left : BENCH_BUDGET ))
    budget=$(( budget < 20 ? 20 : budget ))
    stage bench $((budget + 45)) bench.log "${PYM[@]}" hobbit.bench.gpu --models "$MODELS" --batches "$BATCHES" \
        --precision "$PRECISIONS" --budget "$budget" --seconds "$BENCH_SECONDS" --runs 50 \
        --json "$OUTDIR/bench.json"
fi

report
cat "$OUTDIR/gpu_check.md"
echo "total: $SECONDS s; results in $OUTDIR/gpu_check.json and $OUTDIR/gpu_check.md" >&2
"$PY" -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['ok'] else 1)" "$OUTDIR/gpu_check.json"
