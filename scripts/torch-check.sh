#!/usr/bin/env bash
# The real PyTorch check: torch 2.15 (which pins NVIDIA's CUPTI 13.2.86 beside libcudart.so.13) runs a
# CPU training loop with NVTX ranges and DataLoader workers (fork), bare and under
# LD_PRELOAD=libtprof.so, on this machine without a GPU or driver. Passes when the exit codes are 0,
# stdout is identical, stderr gains at most one tprof line, and the rings decode.
#   bash scripts/torch-check.sh           # installs torch into .venv-torch on first use (~5.3 GB)
# Not part of .ci/run (the install is 5 GB); the conformance tests cover the same path with a C
# program next to every real CUPTI (tests/e2e/tests/real_libraries.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=${TORCH_VERSION:-2.15.0}
if ! .venv-torch/bin/python -c "import torch" >/dev/null 2>&1; then
  python3 -m venv .venv-torch
  .venv-torch/bin/pip install --quiet --disable-pip-version-check "torch==$TORCH"
fi
[ -f target/release/libtprof.so ] || cargo build --release -p tprof-shim -p tprof-decoder
LIB=${TPROF_LIB:-$PWD/target/release/libtprof.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=.venv-torch/bin/python
echo "torch $($py -c 'import torch; print(torch.__version__)' 2>/dev/null), CUPTI $(ls .venv-torch/lib/python3*/site-packages/nvidia/*/lib/libcupti.so* 2>/dev/null | head -1)"
t0=$(date +%s.%N)
set +e
$py scripts/torch-check/cpu_loop.py >"$work/bare.out" 2>"$work/bare.err"; bare_rc=$?
t1=$(date +%s.%N)
TPROF_OUT="$work/rings" TPROF_RING_MB=8 LD_PRELOAD="$LIB" $py scripts/torch-check/cpu_loop.py >"$work/shim.out" 2>"$work/shim.err"; shim_rc=$?
t2=$(date +%s.%N)
set -e
fail=0
echo "bare: exit $bare_rc in $(echo "$t1 - $t0" | bc) s; under tprof: exit $shim_rc in $(echo "$t2 - $t1" | bc) s"
[ "$bare_rc" = 0 ] || { echo "FAIL: the loop fails without tprof"; cat "$work/bare.err"; fail=1; }
[ "$shim_rc" = "$bare_rc" ] || { echo "FAIL: exit code $shim_rc under tprof (bare $bare_rc)"; tail -20 "$work/shim.err"; fail=1; }
cmp -s "$work/bare.out" "$work/shim.out" || { echo "FAIL: stdout differs"; diff "$work/bare.out" "$work/shim.out" | head; fail=1; }
extra=$(grep -c '^tprof:' "$work/shim.err" || true)
[ "$extra" -le 1 ] || { echo "FAIL: $extra tprof lines on stderr"; grep '^tprof:' "$work/shim.err"; fail=1; }
grep '^tprof:' "$work/shim.err" || true
if ls "$work"/rings/*.tprof >/dev/null 2>&1; then
  target/release/tprof check "$work"/rings/*.tprof >/dev/null || { echo "FAIL: tprof check"; fail=1; }
  echo "rings: $(ls "$work"/rings/*.tprof | wc -l); NVTX ranges recorded: $(for r in "$work"/rings/*.tprof; do target/release/tprof info "$r" | awk '/nvtx_push/ {print $2}'; done | paste -sd+ | bc)"
fi
if [ $fail = 0 ]; then echo "torch check: PASS"; else echo "torch check: FAIL"; exit 1; fi
