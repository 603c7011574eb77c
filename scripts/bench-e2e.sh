#!/usr/bin/env bash
# scripts/bench-e2e.sh [STEPS] [ROUNDS]: end-to-end cost of tprof on simtrain --ranks 2 (simulated GPU).
#
# Runs simtrain bare and under `tprof run` in each mode, interleaved round by round (so machine noise
# hits every configuration alike), and prints per mode: steps/s (median over rounds of the slower
# rank), the slowdown against bare, bytes written into the rings per step (committed chunks x chunk
# size, both ranks, averaged over the whole run) and the ring size one rank needs for 1000 steps.
# Needs `cargo build --release -p tprof-shim -p tprof-decoder` (CARGO_TARGET_DIR or target/), the
# simulated stack (make -C tests/simgpu) and simtrain (make -C tests/programs).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REL="${CARGO_TARGET_DIR:-$ROOT/target}/release"
TPROF="${TPROF_BIN:-$REL/tprof}"
LIB="${TPROF_LIB:-$REL/libtprof.so}"
SIMTRAIN="${SIMGPU_PROGRAMS_DIR:-$ROOT/tests/programs/build}/simtrain"
STEPS="${1:-200}"
ROUNDS="${2:-3}"
for f in "$TPROF" "$LIB" "$SIMTRAIN"; do
  [ -e "$f" ] || { echo "bench-e2e: $f missing (cargo build --release -p tprof-shim -p tprof-decoder; make -C tests/programs)" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tprof-bench-e2e.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset TPROF_MODE TPROF_STEPS TPROF_SAMPLE TPROF_OUT TPROF_RING_MB TPROF_METRICS_FILE LD_PRELOAD NVTX_INJECTION64_PATH
MODES="bare full steps sample flight metrics"
mode_args() {
  case "$1" in
    full) echo "--mode full --ring-mb 512" ;;
    steps) echo "--mode steps --steps 100-110 --ring-mb 512" ;;
    sample) echo "--mode sample --sample 2s/60s --ring-mb 512" ;;
    flight) echo "--mode flight --ring-mb 512" ;;
    metrics) echo "--mode metrics --metrics-file $WORK/metrics-%r.prom --ring-mb 16" ;;
  esac
}
echo "simtrain --ranks 2 --steps $STEPS, $ROUNDS rounds; $(nproc) CPUs"
for round in $(seq 1 "$ROUNDS"); do
  for m in $MODES; do
    out="$WORK/$m-$round"
    if [ "$m" = bare ]; then
      "$ROOT/scripts/simgpu.sh" "$SIMTRAIN" --ranks 2 --steps "$STEPS" --quiet >"$out.log" 2>&1
    else
      # shellcheck disable=SC2046
      TPROF_QUIET=1 "$ROOT/scripts/simgpu.sh" "$TPROF" run --out "$out" --lib "$LIB" $(mode_args "$m") -- \
        "$SIMTRAIN" --ranks 2 --steps "$STEPS" --quiet >"$out.log" 2>&1
      for r in "$out"/*.tprof; do
        "$TPROF" info "$r" >"$r.info" 2>&1 || true
        rm -f "$r"
      done
    fi
  done
done
python3 - "$WORK" "$STEPS" "$ROUNDS" $MODES <<'EOF'
import glob, os, re, statistics, sys
work, steps, rounds, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def sps(log):
    v = [float(x) for x in re.findall(r"steps_per_s=([0-9.]+)", open(log).read())]
    return min(v) if len(v) == 2 else float("nan")
def ring_bytes(d):
    total, events = 0, 0
    for f in glob.glob(os.path.join(d, "*.info")):
        t = open(f).read()
        m = re.search(r"ring:\s+(\d+) chunks x (\d+) bytes \((\d+) intact", t)
        e = re.search(r"records:\s+(\d+)", t)
        if m and e and "rank:        -" not in t:
            total += int(m.group(3)) * int(m.group(2))
            events += int(e.group(1))
    return total, events
rows = {m: statistics.median([sps(f"{work}/{m}-{r}.log") for r in range(1, rounds + 1)]) for m in modes}
bare = rows["bare"]
print(f"{'mode':<9} {'steps/s':>9} {'slower':>8} {'bytes/step':>11} {'events/step':>12} {'ring for 1000 steps/rank':>25}   per round")
for m in modes:
    per = " ".join(f"{sps(f'{work}/{m}-{r}.log'):.2f}" for r in range(1, rounds + 1))
    if m == "bare":
        print(f"{m:<9} {bare:>9.2f} {'':>8} {'':>11} {'':>12} {'':>25}   {per}")
        continue
    b, e = ring_bytes(f"{work}/{m}-{rounds}")
    bps, eps = b / steps, e / steps
    need = bps / 2 * 1000 / 2**20
    print(f"{m:<9} {rows[m]:>9.2f} {100 * (1 - rows[m] / bare):>7.2f}% {bps:>11.0f} {eps:>12.0f} {need:>20.1f} MiB   {per}")
print("goals: full <= 1% slower; sample and flight <= 0.2% slower")
print("bytes/step: committed 64 KiB chunks of both ranks over the run (steps mode: 11 of the steps; sample: 2 s of every 60 s)")
EOF
