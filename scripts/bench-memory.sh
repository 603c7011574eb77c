#!/usr/bin/env bash
# Memory bound of each command (README "Memory of each command"): peak RSS of every `tprof` command on
# two generated jobs of the same shape and different sizes, side by side, so the growth per input unit
# is read off one run. The jobs come from the decode bench's generator (decoder/benches/decode.rs,
# tprof_format::RingWriter; ~1,300 events per step, 200 kernel names, NVTX ranges, NCCL), 8 ranks.
#
#   scripts/bench-memory.sh                     # 2 M and 8 M events (40 MB and 154 MB of rings)
#   scripts/bench-memory.sh --events 4M,16M --ranks 16
#
# Peak RSS is /usr/bin/time's maximum resident set: it includes the ring files' mapped pages
# (file-backed; the kernel reclaims them under pressure), which the "ring" column shows per file.
# Everything generated is deleted at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
events=2M,8M
ranks=8
while [ $# -gt 0 ]; do
  case "$1" in
    --events) events=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    *) echo "usage: $0 [--events A,B] [--ranks N]" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "bench-memory: needs /usr/bin/time (apt install time)" >&2; exit 1; }
cargo build --release -q -p tprof-decoder --bin tprof
bin=$PWD/target/release/tprof
dir=$(mktemp -d "${TMPDIR:-/tmp}/tprof-bench-memory.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cargo bench -q -p tprof-decoder --bench decode -- --events "$events" --ranks "$ranks" --dir "$dir/jobs" \
  --commands none --no-exports --no-hta --kineto-mb 0 --keep >/dev/null

peak() { # peak RSS in MB of "$@" (stdout discarded)
  /usr/bin/time -f '%M' -o "$dir/time" "$@" >/dev/null 2>"$dir/err" || true
  awk '{printf "%.0f", $1 / 1024}' "$dir/time"
}

formats=$("$bin" export --help | sed -n 's/.*possible values: \(.*\)\]/\1/p' | tr -d ' ' | tr ',' ' ')
printf '| %-34s |' "command (8 ranks unless noted)"
jobs=()
for j in "$dir"/jobs/job-*; do jobs+=("$j"); done
for j in "${jobs[@]}"; do
  n=$(basename "$j" | sed 's/job-//')
  mb=$(du -sm "$j" | cut -f1)
  ring=$(ls -l "$j" | awk 'NR==2{printf "%.0f", $5 / 1048576}')
  printf ' %s events, %s MB (%s MB/ring) |' "$n" "$mb" "$ring"
done
echo
printf '|%s|' "------------------------------------"; for _ in "${jobs[@]}"; do printf '%s|' "-------------------------------"; done; echo
row() { # row LABEL -- args with JOB and OUT placeholders
  local label=$1; shift
  printf '| %-34s |' "$label"
  for j in "${jobs[@]}"; do
    local first; first=$(ls "$j"/*.tprof | head -1)
    local args=()
    for a in "$@"; do
      case "$a" in JOB) args+=("$j") ;; RING) args+=("$first") ;; OUT) args+=("$dir/out") ;; *) args+=("$a") ;; esac
    done
    printf ' %26s MB |' "$(peak "$bin" "${args[@]}")"
    rm -rf "$dir/out"
  done
  echo
}
row "check (one ring)" check RING
row "info (one ring)" info RING
row "dump (one ring)" dump RING
row "dump --json (one ring)" dump --json RING
row "check (every ring)" check JOB
row "summary --threads 1" summary JOB --threads 1
row "summary --threads 2" summary JOB --threads 2
row "diagnose --threads 1" diagnose JOB --threads 1
row "diagnose --threads 2" diagnose JOB --threads 2
row "report --threads 1" report JOB --threads 1 -o OUT
row "report --threads 2" report JOB --threads 2 -o OUT
for f in $formats; do
  row "export --format $f" export JOB --format "$f" -o OUT
done
