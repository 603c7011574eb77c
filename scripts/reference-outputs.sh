#!/usr/bin/env bash
# Reference outputs for refactors that must not change behaviour: every analysis and export of a
# fixed set of inputs, written to OUT. Compare two builds with `diff -r`:
#   bash scripts/reference-outputs.sh /tmp/before target-before/release/tprof
#   bash scripts/reference-outputs.sh /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
# Inputs: simtrain rings recorded once (clean, no-overlap, data-stall, 2 and 4 ranks) and kept in
# target/reference-rings (delete it to record them again), and the real Kineto traces in
# ../shared/data/kineto. The report is compared without its generation timestamp.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: reference-outputs.sh OUTDIR [TPROF_BIN]}
TPROF=${2:-target/release/tprof}
LIB=$(realpath target/release/libtprof.so)
RINGS=target/reference-rings
KINETO=${TPROF_KINETO_DATA:-../shared/data/kineto}
if [ ! -d "$RINGS" ]; then
  make -s -C tests/simgpu -j2 >/dev/null
  make -s -C tests/programs -j2 >/dev/null
  for run in "clean:--ranks 2" "no-overlap:--ranks 4 --no-overlap" "data-stall:--ranks 2 --data-stall 30"; do
    name=${run%%:*}
    args=${run#*:}
    # shellcheck disable=SC2086
    TPROF_OUT="$RINGS/$name" TPROF_RING_MB=8 LD_PRELOAD=$LIB \
      scripts/simgpu.sh tests/programs/build/simtrain $args --steps 20 --quiet >/dev/null
  done
fi
rm -rf "$OUT"
mkdir -p "$OUT"
inputs=()
for d in "$RINGS"/*; do inputs+=("ring-$(basename "$d"):$(realpath "$d")"); done
for f in "$KINETO"/*.json.gz; do [ -e "$f" ] && inputs+=("kineto-$(basename "$f" .json.gz):$(realpath "$f")"); done
TPROF=$(realpath "$TPROF")
n=${#inputs[@]}
# Outputs are named relative to OUT, so file names written into them compare between runs.
cd "$OUT"
for entry in "${inputs[@]}"; do
  name=${entry%%:*}
  path=${entry#*:}
  o=$name
  mkdir -p "$o"
  "$TPROF" summary "$path" --json >"$o/summary.json" 2>"$o/summary.err" || echo "exit $?" >>"$o/summary.err"
  # (the closing line says how long decoding took: left out so two runs compare)
  "$TPROF" summary "$path" 2>&1 | grep -v '^tprof: summarized .* in [0-9.]* s$' >"$o/summary.txt" || true
  "$TPROF" diagnose "$path" --json >"$o/diagnose.json" 2>"$o/diagnose.err" || echo "exit $?" >>"$o/diagnose.err"
  "$TPROF" diagnose "$path" >"$o/diagnose.txt" 2>&1 || true
  for fmt in perfetto chrome folded flamegraph; do
    "$TPROF" export "$path" --format $fmt -o "$o/export.$fmt" >/dev/null 2>"$o/export.$fmt.err" || true
  done
  for fmt in kineto parquet; do
    "$TPROF" export "$path" --format $fmt -o "$o/export-$fmt" >/dev/null 2>"$o/export-$fmt.err" || true
  done
  "$TPROF" report "$path" -o "$o/report.html" 2>&1 >/dev/null | sed -E 's/ in [0-9.]+ s;/ in - s;/' >"$o/report.err" || true
  # The report names the time it was made: drop that line so two builds compare.
  [ -f "$o/report.html" ] && sed -i -E 's/(generated|Generated)[^<]*//g' "$o/report.html"
done
echo "reference outputs of $n inputs in $OUT"
