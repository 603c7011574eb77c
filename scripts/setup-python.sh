#!/usr/bin/env bash
# Creates .venv with the Python packages the tests need: NVIDIA's real CUDA 12 headers/libraries
# (CUPTI, runtime, NVTX), the CUDA 13 nvcc toolchain, and the external consumers that validate exports.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
pip install --quiet --disable-pip-version-check \
  nvidia-cuda-cupti-cu12 nvidia-cuda-runtime-cu12 nvidia-nvtx-cu12 \
  nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-crt nvidia-cuda-cccl \
  perfetto duckdb prometheus-client HolisticTraceAnalysis
# nvcc from the CUDA 13 wheels wants a plain libcudart.so beside libcudart.so.13
SP=$(python -c 'import site; print(site.getsitepackages()[0])')
CU13="$SP/nvidia/cu13"
if [ -d "$CU13/lib" ] && [ ! -e "$CU13/lib/libcudart.so" ]; then
  ln -s libcudart.so.13 "$CU13/lib/libcudart.so"
fi
echo "python env ready: $(pwd)/.venv (site-packages $SP)"
