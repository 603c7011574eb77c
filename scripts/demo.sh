#!/usr/bin/env bash
# The main job (README): a simulated 4-rank data-parallel training run, profiled by tprof end to
# end, then summarised, diagnosed, exported and reported. No GPU needed.
#   bash scripts/demo.sh [OUT_DIR] [-- extra simtrain options]
# Default: rank 2 is a straggler (40 ms of extra host work per step), so the diagnosis has
# something to find. Try `bash scripts/demo.sh out/demo -- --no-overlap` or `-- --data-stall 50`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo}
shift || true
[ "${1:-}" = "--" ] && shift
SIMTRAIN_ARGS=("$@")
[ ${#SIMTRAIN_ARGS[@]} -gt 0 ] || SIMTRAIN_ARGS=(--straggler 2 --straggler-ms 40)

step() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

step "setup (first run only: Python wheels for the CUDA headers, the simulated GPU stack, tprof)"
[ -x .venv/bin/python ] || bash scripts/setup-python.sh
make -s -C tests/simgpu -j2 >/dev/null
make -s -C tests/programs -j2 >/dev/null
cargo build --release -q -p tprof-shim -p tprof-decoder
TPROF=target/release/tprof
[ -n "${CARGO_TARGET_DIR:-}" ] && TPROF=$CARGO_TARGET_DIR/release/tprof
# Absolute: LD_PRELOAD reaches every process of the job, some of them in other working directories.
LIB=$(realpath "$(dirname "$TPROF")/libtprof.so")

rm -rf "$OUT"
mkdir -p "$OUT"
RINGS=$OUT/rings

step "train: simtrain --ranks 4 --steps 60 ${SIMTRAIN_ARGS[*]} under LD_PRELOAD=libtprof.so"
TPROF_OUT=$RINGS TPROF_RING_MB=64 LD_PRELOAD=$LIB \
  scripts/simgpu.sh tests/programs/build/simtrain --ranks 4 --steps 60 --log-every 20 "${SIMTRAIN_ARGS[@]}"
ls -l "$RINGS"

step "check the ring files"
"$TPROF" check "$RINGS"/*.tprof

step "summary"
"$TPROF" summary "$RINGS" --top 10

step "diagnose"
"$TPROF" diagnose "$RINGS"

step "exports"
"$TPROF" export "$RINGS" --format perfetto -o "$OUT/trace.pftrace"
"$TPROF" export "$RINGS" --format chrome -o "$OUT/trace.json"
"$TPROF" export "$RINGS" --format flamegraph -o "$OUT/flame.svg"

step "report"
if "$TPROF" report --help >/dev/null 2>&1; then
  "$TPROF" report "$RINGS" -o "$OUT/report.html"
else
  echo "tprof report is not available in this build"
fi

step "done"
echo "rings:    $RINGS"
echo "timeline: $OUT/trace.pftrace (open in https://ui.perfetto.dev, offline-capable) or $OUT/trace.json (chrome://tracing)"
[ -f "$OUT/report.html" ] && echo "report:   $OUT/report.html (one self-contained file; open it in any browser)"
