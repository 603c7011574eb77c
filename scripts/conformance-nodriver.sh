#!/usr/bin/env bash
# scripts/conformance-nodriver.sh: what NVIDIA's real libcupti and libcudart return on this machine
# (no driver), for every version scripts/setup-conformance.sh installed. Builds the probes of
# tests/conformance/ and prints their lines per library (the source of docs/conformance.md).
# With --mock, also prints the simulated stack's answers (SIMGPU_NO_DRIVER=1; make -C tests/simgpu).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONF="$ROOT/.venv/conformance"
MOCK=0
[ "${1:-}" = "--mock" ] && MOCK=1
[ -d "$CONF" ] || { echo "no $CONF: run scripts/setup-conformance.sh" >&2; exit 1; }

BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
for p in cupti_nodriver cudart_nodriver; do
  cc -std=c11 -Wall -Wextra -Werror -O1 -o "$BIN/$p" "$ROOT/tests/conformance/$p.c" -ldl
done

# The real libraries run with an empty environment: no LD_LIBRARY_PATH, so no simulated libcuda.so.1.
run_real() { env -i "$BIN/$1" "$2"; }

for so in $(find "$CONF"/nvidia-cuda-cupti* -name 'libcupti.so.*' | sort -V); do
  pkg=$(dirname "$(dirname "$so")")
  api=$(sed -n 's/^#define CUPTI_API_VERSION \([0-9]*\).*/\1/p' "$pkg/include/cupti_version.h")
  echo "== ${so#"$CONF"/} (CUPTI_API_VERSION $api)"
  run_real cupti_nodriver "$so"
  if [ "$MOCK" = 1 ]; then
    echo "-- simulated, SIMGPU_CUPTI_VERSION=$api"
    env -i SIMGPU_NO_DRIVER=1 SIMGPU_CUPTI_VERSION="$api" SIMGPU_SESSION="nodriver-$$" \
      "$BIN/cupti_nodriver" "$ROOT/tests/simgpu/build/libcupti.so.12"
  fi
done
for so in $(find "$CONF"/nvidia-cuda-runtime* -name 'libcudart.so.*' | sort -V); do
  echo "== ${so#"$CONF"/}"
  run_real cudart_nodriver "$so"
  if [ "$MOCK" = 1 ]; then
    echo "-- simulated $(basename "$so")"
    env -i SIMGPU_NO_DRIVER=1 SIMGPU_SESSION="nodriver-$$" "$BIN/cudart_nodriver" "$ROOT/tests/simgpu/build/$(basename "$so")"
  fi
done
rm -f "/dev/shm/simgpu-nodriver-$$"
