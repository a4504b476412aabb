#!/usr/bin/env bash
# The GPU checks of the real backend in one run (< 8 minutes): installs CuPy for the driver's CUDA (12 or 13, from
# nvidia-smi) and its NCCL if missing, runs the tests marked `gpu`, then `bench_allreduce.py --gpu`. Results go to
# $OUT when set (else a fresh temporary folder, printed at the end). Run from anywhere: bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
RESULTS=${OUT:-$(mktemp -d)}
mkdir -p "$RESULTS"
if ! nvidia-smi >"$RESULTS/nvidia-smi.txt" 2>&1; then
    echo "gpu_check: nvidia-smi failed: no usable NVIDIA GPU here (see $RESULTS/nvidia-smi.txt)"
    exit 1
fi
cuda=$(sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' "$RESULTS/nvidia-smi.txt" | head -n 1)
suffix=$([ "${cuda:-12}" -ge 13 ] && echo 13 || echo 12)
echo "driver CUDA ${cuda:-unknown}: using cupy-cuda${suffix}x" | tee "$RESULTS/setup.txt"
"$PY" -c "import mirrorlab" 2>/dev/null || "$PY" -m pip install -q -e . 2>&1 | tail -n 3 | tee -a "$RESULTS/setup.txt"
if ! "$PY" -c "import cupy" 2>/dev/null; then
    timeout 240 "$PY" -m pip install -q "cupy-cuda${suffix}x" 2>&1 | tail -n 3 | tee -a "$RESULTS/setup.txt"
fi
if ! "$PY" -c "from cupy.cuda import nccl; assert nccl.available" 2>/dev/null; then
    timeout 120 "$PY" -m pip install -q "nvidia-nccl-cu${suffix}" 2>&1 | tail -n 3 | tee -a "$RESULTS/setup.txt"
fi
"$PY" - <<'PY' 2>&1 | tee -a "$RESULTS/setup.txt"
import cupy
from cupy.cuda import nccl
print("cupy", cupy.__version__, "GPUs", cupy.cuda.runtime.getDeviceCount(), "NCCL",
      nccl.get_version() if nccl.available else "missing")
PY
timeout 300 "$PY" -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_backend_gpu.py tests/test_device_arrays.py \
    2>&1 | tee "$RESULTS/gpu-tests.txt"
tests=${PIPESTATUS[0]}
(cd benchmarks && timeout 150 "$PY" bench_allreduce.py --gpu) 2>&1 | tee "$RESULTS/bench-gpu.txt"
bench=${PIPESTATUS[0]}
echo "gpu_check: tests exit $tests, benchmark exit $bench; results in $RESULTS"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
