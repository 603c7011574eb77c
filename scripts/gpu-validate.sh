#!/usr/bin/env bash
# The real-GPU validation kit (docs/validation.md). On a machine with an NVIDIA GPU,
# PyTorch (CUDA, CUPTI, NCCL from pip) and nvcc -- no Rust toolchain, no network needed -- it checks
# tprof against reality in one short run (< 8 minutes):
#   1. a small PyTorch training (scripts/gpu-validate/train.py: transformer, bf16, 30 steps, NVTX
#      step ranges, one NCCL all_reduce per step on a single-rank group) three times: bare, under
#      tprof (LD_PRELOAD, TPROF_MODE=full) and under torch.profiler (Kineto); steps/s of each;
#   2. tprof `summary --json` vs the Kineto trace: kernel names, counts per step, GPU time per
#      kernel (within 2%); NVTX steps, NCCL calls, NVML counters; tprof's overhead vs bare and vs
#      torch.profiler; an nvcc program built with -cudart static (only CUPTI sees its kernels),
#      under LD_PRELOAD and under CUDA_INJECTION64_PATH;
#   3. one table (check, expected, measured, PASS/FAIL/SKIP) on stdout and in OUT/results.{md,json}.
# It never builds tprof: copy target/release/{tprof,libtprof.so} (x86-64) with the repository.
#
# --dry-run (automatic when `nvidia-smi -L` finds no GPU): checks the kit is complete (files,
# scripts parse, binaries found), runs the comparison code's self-check on fixtures (synthetic
# traces; tprof on a Kineto fixture; a simulated-GPU run when tests/simgpu is built; the real
# Kineto traces in /work/shared/data/kineto when present), compiles the nvcc program when nvcc is
# found, then skips the GPU steps with a message. Exit 0 unless the kit is broken.
#
# usage: bash scripts/gpu-validate.sh [--dry-run] [--out DIR] [--tprof-bin PATH] [--lib PATH]
#                                     [--python PATH] [--nvcc PATH]
# Environment: TPROF_BIN / TPROF_LIB (defaults for --tprof-bin / --lib), PYTHON, NVCC,
# GPU_VALIDATE_MAX_OVERHEAD_PCT (default 1: the project's goal for mode full),
# GPU_VALIDATE_TOLERANCE_PCT (default 2), GPU_VALIDATE_BUDGET_S (default 450),
# GPU_VALIDATE_KINETO_FIXTURES (default /work/shared/data/kineto).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KIT=$ROOT/scripts/gpu-validate
SELF=$ROOT/scripts/gpu-validate.sh

usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; }

DRY=0
OUT=./gpu-validate-out
TPROF=${TPROF_BIN:-}
LIB=${TPROF_LIB:-}
TORCH_PY=${PYTHON:-}
NVCC_BIN=${NVCC:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --out=*) OUT=${1#--out=} ;;
    --tprof-bin) TPROF=${2:?--tprof-bin needs a path}; shift ;;
    --tprof-bin=*) TPROF=${1#--tprof-bin=} ;;
    --lib) LIB=${2:?--lib needs a path}; shift ;;
    --lib=*) LIB=${1#--lib=} ;;
    --python) TORCH_PY=${2:?--python needs a path}; shift ;;
    --python=*) TORCH_PY=${1#--python=} ;;
    --nvcc) NVCC_BIN=${2:?--nvcc needs a path}; shift ;;
    --nvcc=*) NVCC_BIN=${1#--nvcc=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-validate: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

MAX_OVERHEAD=${GPU_VALIDATE_MAX_OVERHEAD_PCT:-1}
TOLERANCE=${GPU_VALIDATE_TOLERANCE_PCT:-2}
BUDGET=${GPU_VALIDATE_BUDGET_S:-450}
KINETO_FIXTURES=${GPU_VALIDATE_KINETO_FIXTURES:-/work/shared/data/kineto}
STEPS=30
WARMUP=5

PY3=$(command -v python3 || true)
if [ -z "$PY3" ]; then
  echo "gpu-validate: python3 not found on PATH (the kit's comparison scripts need Python 3.10+)" >&2
  exit 2
fi
if ! command -v timeout >/dev/null; then
  echo "gpu-validate: 'timeout' (coreutils) not found on PATH" >&2
  exit 2
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The output never shows up in `git status` (the default is inside the repository).
[ -e "$OUT/.gitignore" ] || printf '# written by scripts/gpu-validate.sh\n*\n' >"$OUT/.gitignore"
LOGS=$OUT/logs
RESULTS=$OUT/results.jsonl
rm -rf "$LOGS" "$OUT/selfcheck" "$RESULTS" "$OUT/results.md" "$OUT/results.json" "$OUT/selfcheck.json"
mkdir -p "$LOGS" "$OUT/selfcheck"
export PYTHONDONTWRITEBYTECODE=1 PYTHONPYCACHEPREFIX=$OUT/pycache PYTHONUNBUFFERED=1
START=$SECONDS

say() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
elapsed() { echo $((SECONDS - START)); }

# record CHECK EXPECTED MEASURED STATUS [DETAIL]
record() {
  "$PY3" "$KIT/results.py" add --results "$RESULTS" --check "$1" --expected "$2" --measured "$3" \
    --status "$4" --detail "${5:-}"
  printf '   [%s] %s: %s\n' "$4" "$1" "$3"
}

# step NAME TIMEOUT_S CMD...: runs CMD with a timeout, output to $LOGS/NAME.log; returns its status
# (124 = timed out). Never fails the script.
step() {
  local name=$1 limit=$2
  shift 2
  local log=$LOGS/$name.log t0=$SECONDS rc=0
  timeout -k 10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "$name: timed out after ${limit}s (log: $log)"
  elif [ "$rc" -ne 0 ]; then
    note "$name: exit $rc after $((SECONDS - t0))s; last lines of $log:"
    tail -n 12 "$log" | sed 's/^/     | /'
  else
    note "$name: ok in $((SECONDS - t0))s"
  fi
  return "$rc"
}

# budget NEED_S: true when NEED_S more seconds fit in the run's time budget.
budget() { [ $(($(elapsed) + $1)) -le "$BUDGET" ]; }

is_x86_64_elf() {
  "$PY3" - "$1" <<'EOF'
import sys
with open(sys.argv[1], "rb") as f:
    h = f.read(20)
sys.exit(0 if h[:4] == b"\x7fELF" and h[4] == 2 and int.from_bytes(h[18:20], "little") == 62 else 1)
EOF
}

# --------------------------------------------------------------------------------------------
say "tprof GPU validation kit ($(date -u +%FT%TZ)); output: $OUT"

REASON=""
if [ "$DRY" = 1 ]; then
  REASON="--dry-run"
elif ! command -v nvidia-smi >/dev/null; then
  REASON="nvidia-smi not found"
elif ! GPUS=$(timeout 30 nvidia-smi -L 2>/dev/null) || ! grep -q '^GPU ' <<<"$GPUS"; then
  REASON="nvidia-smi -L found no GPU"
fi
[ -n "$REASON" ] && DRY=1
if [ "$DRY" = 1 ]; then note "mode: dry run ($REASON)"; else note "mode: GPU ($(head -n1 <<<"$GPUS"))"; fi

# --------------------------------------------------------------------------------------------
say "kit: files and syntax"
FILES=(scripts/gpu-validate.sh scripts/gpu-validate/train.py scripts/gpu-validate/compare.py
  scripts/gpu-validate/results.py scripts/gpu-validate/static_kernels.cu
  scripts/gpu-validate/fixtures/kineto_small.json docs/validation.md)
missing=()
for f in "${FILES[@]}"; do [ -s "$ROOT/$f" ] || missing+=("$f"); done
KIT_OK=1
if [ ${#missing[@]} -eq 0 ]; then
  record "kit: files" "${#FILES[@]} files present" "all present" PASS
else
  KIT_OK=0
  record "kit: files" "${#FILES[@]} files present" "missing: ${missing[*]}" FAIL
fi
perr=()
bash -n "$SELF" 2>"$LOGS/bash-n.log" || perr+=("gpu-validate.sh: $(head -n1 "$LOGS/bash-n.log")")
for f in train.py compare.py results.py; do
  [ -f "$KIT/$f" ] || continue
  "$PY3" -m py_compile "$KIT/$f" 2>"$LOGS/py_compile-$f.log" || perr+=("$f: $(tail -n1 "$LOGS/py_compile-$f.log")")
done
"$PY3" -c 'import json,sys; json.load(open(sys.argv[1]))' "$KIT/fixtures/kineto_small.json" 2>/dev/null ||
  perr+=("fixtures/kineto_small.json: not JSON")
if [ ${#perr[@]} -eq 0 ]; then
  record "kit: scripts parse" "bash -n, py_compile, JSON" "ok ($("$PY3" -V 2>&1))" PASS
else
  KIT_OK=0
  record "kit: scripts parse" "bash -n, py_compile, JSON" "${perr[*]}" FAIL
fi

# --------------------------------------------------------------------------------------------
say "kit: tprof and libtprof.so (prebuilt; this script never builds them)"
pick() { for p in "$@"; do [ -n "$p" ] && [ -e "$p" ] && { echo "$p"; return; }; done; echo "${1:-}"; }
TD=${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/release}
# Like the tests: $CARGO_TARGET_DIR/release when set (and built), else target/release.
[ -n "$TPROF" ] || TPROF=$(pick ${TD:+"$TD/tprof"} "$ROOT/target/release/tprof")
[ -n "$LIB" ] || LIB=$(pick ${TD:+"$TD/libtprof.so"} "$ROOT/target/release/libtprof.so")
BUILD_HINT="build it on a machine with Rust: cargo build --release -p tprof-decoder -p tprof-shim, then copy target/release/{tprof,libtprof.so}"
MISSING_STATUS=FAIL
[ "$DRY" = 1 ] && MISSING_STATUS=SKIP
HAVE_TPROF=0
HAVE_LIB=0
if [ ! -x "$TPROF" ]; then
  record "kit: tprof CLI" "x86-64 executable" "MISSING: $TPROF" $MISSING_STATUS "$BUILD_HINT"
  echo "gpu-validate: tprof not found at $TPROF -- $BUILD_HINT (or pass --tprof-bin PATH)" >&2
elif ! is_x86_64_elf "$TPROF"; then
  record "kit: tprof CLI" "x86-64 executable" "not an x86-64 ELF: $TPROF" FAIL "$BUILD_HINT"
elif ! V=$("$TPROF" --version 2>&1); then
  record "kit: tprof CLI" "x86-64 executable" "does not run: $V" FAIL
else
  HAVE_TPROF=1
  TPROF=$(cd "$(dirname "$TPROF")" && pwd)/$(basename "$TPROF")
  record "kit: tprof CLI" "x86-64 executable" "$V ($TPROF)" PASS
fi
if [ ! -f "$LIB" ]; then
  record "kit: libtprof.so" "x86-64 shared library" "MISSING: $LIB" $MISSING_STATUS "$BUILD_HINT"
  echo "gpu-validate: libtprof.so not found at $LIB -- $BUILD_HINT (or pass --lib PATH)" >&2
elif ! is_x86_64_elf "$LIB"; then
  record "kit: libtprof.so" "x86-64 shared library" "not an x86-64 ELF: $LIB" FAIL "$BUILD_HINT"
elif ! grep -aq InitializeInjection "$LIB"; then
  record "kit: libtprof.so" "x86-64 shared library" "no InitializeInjection symbol: $LIB" FAIL
else
  HAVE_LIB=1
  LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
  record "kit: libtprof.so" "x86-64 shared library" "$LIB ($(($(stat -c %s "$LIB") / 1048576)) MiB)" PASS
fi

# --------------------------------------------------------------------------------------------
say "kit: Python with PyTorch, nvcc"
find_torch_python() {
  local c
  for c in "$TORCH_PY" python3 python "$ROOT/.venv/bin/python" /usr/bin/python3 /opt/conda/bin/python; do
    [ -n "$c" ] || continue
    c=$(command -v "$c" 2>/dev/null) || continue
    if timeout 90 "$c" -c 'import torch' >/dev/null 2>&1; then echo "$c"; return 0; fi
  done
  return 1
}
HAVE_TORCH=0
if TORCH_PY=$(find_torch_python); then
  TV=$(timeout 90 "$TORCH_PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available" if torch.cuda.is_available() else "no-device")' 2>/dev/null | tail -n1)
  HAVE_TORCH=1
  record "kit: python with torch" "import torch works" "$TORCH_PY: torch $TV" PASS
else
  TORCH_PY=""
  record "kit: python with torch" "import torch works" "no python on PATH imports torch" $MISSING_STATUS \
    "tried \$PYTHON, python3, python, .venv/bin/python; pass --python PATH"
fi
SITE=""
[ -n "$TORCH_PY" ] && SITE=$("$TORCH_PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null || true)
find_nvcc() {
  local c
  for c in "$NVCC_BIN" nvcc /usr/local/cuda/bin/nvcc ${SITE:+"$SITE/nvidia/cu13/bin/nvcc"} \
      ${SITE:+"$SITE/nvidia/cuda_nvcc/bin/nvcc"} "$ROOT"/.venv/lib/python3*/site-packages/nvidia/cu13/bin/nvcc; do
    [ -n "$c" ] || continue
    c=$(command -v "$c" 2>/dev/null) || continue
    [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}
HAVE_NVCC=0
if NVCC_BIN=$(find_nvcc); then
  HAVE_NVCC=1
  NVCC_V=$("$NVCC_BIN" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n1)
  note "nvcc: $NVCC_BIN ($NVCC_V)"
else
  NVCC_BIN=""
  note "nvcc: not found (tried \$NVCC, PATH, /usr/local/cuda/bin, pip nvidia/cu13, .venv)"
fi
# The toolkit's lib dir (pip wheels: nvidia/cu13/lib holds libcudart_static.a).
NVCC_LIBDIR=""
if [ -n "$NVCC_BIN" ]; then
  for d in "$(dirname "$NVCC_BIN")/../lib" "$(dirname "$NVCC_BIN")/../lib64"; do
    [ -e "$d/libcudart_static.a" ] && { NVCC_LIBDIR=$(cd "$d" && pwd); break; }
  done
fi

# compile_static ARCH...: builds $OUT/static_kernels with -cudart static; the first arch that works.
compile_static() {
  local arch
  for arch in "$@"; do
    if step "nvcc-$arch" 180 "$NVCC_BIN" -cudart static "-arch=$arch" -O2 -o "$OUT/static_kernels" \
        "$KIT/static_kernels.cu" ${NVCC_LIBDIR:+-L"$NVCC_LIBDIR"}; then
      echo "$arch" >"$OUT/static_kernels.arch"
      return 0
    fi
  done
  return 1
}
check_static_binary() {
  if "$PY3" - "$OUT/static_kernels" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
sys.exit(1 if b"libcudart.so" in data else 0)
EOF
  then return 0; else return 1; fi
}

# --------------------------------------------------------------------------------------------
say "comparison self-check (the comparison code on fixtures, no GPU needed)"
SC=$OUT/selfcheck
# fixture NAME STATUS MEASURED
FIXTURES_JSON=()
fixture() {
  record "self-check: $1" "comparisons agree on known data" "$3" "$2"
  FIXTURES_JSON+=("$("$PY3" -c 'import json,sys; print(json.dumps({"name": sys.argv[1], "status": sys.argv[2], "measured": sys.argv[3]}))' "$1" "$2" "$3")")
}
tally() { "$PY3" "$KIT/results.py" tally --results "$1" 2>/dev/null || true; }
tally_status() { local t; t=$(tally "$1"); echo "${t%%:*}"; }

# 1. The comparison logic on synthetic traces (good ones pass, broken ones fail).
if step selftest 120 "$PY3" "$KIT/compare.py" selftest; then
  fixture "synthetic traces" PASS "$(tail -n1 "$LOGS/selftest.log")"
else
  fixture "synthetic traces" FAIL "$(tail -n1 "$LOGS/selftest.log")"
fi

# 2. tprof's Kineto import vs compare.py's own parsing, on the committed fixture.
if [ "$HAVE_TPROF" = 1 ]; then
  R=$SC/kineto-fixture.jsonl
  if step fixture-summary 60 bash -c '"$1" summary "$2" --json >"$3"' _ "$TPROF" "$KIT/fixtures/kineto_small.json" "$SC/fixture-summary.json" &&
     step fixture-export 60 "$TPROF" export "$KIT/fixtures/kineto_small.json" --format kineto -o "$SC/fixture-kineto"; then
    step fixture-compare 60 "$PY3" "$KIT/compare.py" kernels --summary "$SC/fixture-summary.json" \
      --kineto "$KIT/fixtures/kineto_small.json" --tprof-kineto "$SC/fixture-kineto" --warmup 1 --expect-steps 4 \
      --tolerance-pct 0.01 --results "$R" --prefix "kineto fixture: " || true
    fixture "Kineto fixture" "$(tally_status "$R")" "tprof summary/export vs compare.py: $(tally "$R")"
  else
    fixture "Kineto fixture" FAIL "tprof summary or export failed on fixtures/kineto_small.json"
  fi
else
  fixture "Kineto fixture" SKIP "needs the tprof CLI"
fi

# 3. (dry run) a simulated-GPU training run recorded by libtprof.so: the same checks as on a GPU.
SIM_LIBS=${SIMGPU_LIB_DIR:-$ROOT/tests/simgpu/build}
SIMTRAIN=${SIMGPU_PROGRAMS_DIR:-$ROOT/tests/programs/build}/simtrain
if [ "$DRY" = 0 ]; then
  :
elif [ "$HAVE_TPROF" = 1 ] && [ "$HAVE_LIB" = 1 ] && [ -x "$SIMTRAIN" ] && [ -e "$SIM_LIBS/libcudart.so.12" ]; then
  R=$SC/sim.jsonl
  rm -rf "$SC/sim-rings" "$SC/sim-kineto"
  if step sim-train 120 env SIMGPU_LIB_DIR="$SIM_LIBS" SIMGPU_NO_BUILD=1 TPROF_OUT="$SC/sim-rings" TPROF_MODE=full \
      TPROF_RING_MB=32 TPROF_GPU_METRICS_HZ=10 LD_PRELOAD="$LIB" bash "$ROOT/scripts/simgpu.sh" "$SIMTRAIN" --ranks 1 --steps 40 \
      --layers 2 --buckets 2 --bucket-mb 4 --quiet &&
     step sim-check 60 bash -c '"$1" check "$2"/*.tprof' _ "$TPROF" "$SC/sim-rings" &&
     step sim-summary 60 bash -c '"$1" summary "$2" --json >"$3"' _ "$TPROF" "$SC/sim-rings" "$SC/sim-summary.json" &&
     step sim-export 60 "$TPROF" export "$SC/sim-rings" --format kineto -o "$SC/sim-kineto"; then
    step sim-compare 60 "$PY3" "$KIT/compare.py" kernels --summary "$SC/sim-summary.json" --kineto "$SC/sim-kineto" \
      --tprof-kineto "$SC/sim-kineto" --warmup 2 --expect-steps 40 --tolerance-pct 0.01 \
      --results "$R" --prefix "sim: " || true
    step sim-run-checks 60 "$PY3" "$KIT/compare.py" run --summary "$SC/sim-summary.json" --expect-steps 40 \
      --expect-allreduce 80 --counters --results "$R" --prefix "sim: " || true
    fixture "simulated GPU run" "$(tally_status "$R")" "simtrain under libtprof.so, summary vs kineto export: $(tally "$R")"
  else
    fixture "simulated GPU run" FAIL "simtrain under libtprof.so or tprof check/summary/export failed (logs in $LOGS)"
  fi
else
  fixture "simulated GPU run" SKIP "needs tprof, libtprof.so, $SIMTRAIN and $SIM_LIBS (make -C tests/simgpu; make -C tests/programs)"
fi

# 4. Real Kineto traces recorded by others: tprof's import vs compare.py's parsing.
if [ "$HAVE_TPROF" = 1 ] && [ -d "$KINETO_FIXTURES" ] && ls "$KINETO_FIXTURES"/*.json* >/dev/null 2>&1; then
  R=$SC/real-kineto.jsonl
  n=0
  for f in "$KINETO_FIXTURES"/*.json "$KINETO_FIXTURES"/*.json.gz; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    b=$(basename "$f")
    if step "real-summary-$n" 120 bash -c '"$1" summary "$2" --json >"$3"' _ "$TPROF" "$f" "$SC/real-$n-summary.json"; then
      step "real-compare-$n" 120 "$PY3" "$KIT/compare.py" kernels --summary "$SC/real-$n-summary.json" --kineto "$f" \
        --tolerance-pct 0.1 --results "$R" --prefix "$b: " || true
    else
      "$PY3" "$KIT/results.py" add --results "$R" --check "$b" --expected "tprof summary reads it" \
        --measured "tprof summary failed" --status FAIL
    fi
  done
  fixture "real Kineto traces" "$(tally_status "$R")" "$n traces in $KINETO_FIXTURES: $(tally "$R")"
else
  fixture "real Kineto traces" SKIP "needs tprof and traces in $KINETO_FIXTURES"
fi

SC_STATUS=PASS
for j in "${FIXTURES_JSON[@]}"; do grep -q '"status": "FAIL"' <<<"$j" && SC_STATUS=FAIL; done
printf '{"status": "%s", "fixtures": [%s]}\n' "$SC_STATUS" "$(IFS=,; echo "${FIXTURES_JSON[*]}")" >"$OUT/selfcheck.json"
echo "comparison self-check: $SC_STATUS (${#FIXTURES_JSON[@]} fixtures; $OUT/selfcheck.json)"

# --------------------------------------------------------------------------------------------
ENV_JSON=$OUT/env.json
write_env() {
  "$PY3" - "$ENV_JSON" "$@" <<'EOF'
import json, sys
out, kv = sys.argv[1], sys.argv[2:]
env = dict(zip(kv[0::2], kv[1::2]))
json.dump({k: v for k, v in env.items() if v}, open(out, "w"), indent=1)
EOF
}
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)

if [ "$DRY" = 1 ]; then
  say "dry run: the nvcc program"
  if [ "$HAVE_NVCC" = 1 ]; then
    if compile_static sm_90 && check_static_binary; then
      record "kit: nvcc -cudart static" "static_kernels.cu builds, no libcudart.so" "built for sm_90 with $NVCC_BIN" PASS
    else
      KIT_OK=0
      record "kit: nvcc -cudart static" "static_kernels.cu builds, no libcudart.so" "build failed (logs in $LOGS)" FAIL
    fi
  else
    record "kit: nvcc -cudart static" "static_kernels.cu builds, no libcudart.so" "nvcc not found" SKIP
  fi
  write_env date "$(date -u +%F)" mode "dry run ($REASON)" host "$(hostname)" commit "$COMMIT" \
    python "$("$PY3" -V 2>&1)" tprof "${V:-missing}"
  say "skipping GPU steps ($REASON): training runs, tprof vs Kineto, overhead, static cudart, CUDA_INJECTION64_PATH, NVML"
  echo "gpu-validate: skipping GPU steps (dry run: $REASON)"
  record "GPU steps" "run on a GPU machine" "skipped: $REASON" SKIP
  say "results"
  "$PY3" "$KIT/results.py" render --results "$RESULTS" --out "$OUT" --env "$ENV_JSON" \
    --title "tprof GPU validation (dry run)" || true
  if [ "$KIT_OK" = 1 ] && [ "$SC_STATUS" = PASS ]; then
    if [ "$HAVE_TPROF" = 1 ] && [ "$HAVE_LIB" = 1 ]; then
      echo "gpu-validate: dry run ok: the kit is complete (GPU steps skipped)"
    else
      echo "gpu-validate: dry run ok, but tprof and/or libtprof.so are not built: the GPU run needs them ($BUILD_HINT)"
    fi
    exit 0
  fi
  echo "gpu-validate: dry run FAILED: the kit is incomplete or its self-check failed (see above)" >&2
  exit 1
fi

# ============================================================================================
# GPU steps
GPU_NAME=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1 || true)
write_env date "$(date -u +%F)" host "$(hostname)" gpu "$GPU_NAME" gpus "$(grep -c '^GPU ' <<<"$GPUS")" \
  commit "$COMMIT" tprof "${V:-missing}" torch "${TV:-missing}" python "${TORCH_PY:-missing}" nvcc "${NVCC_V:-missing}" \
  cpu "$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
note "GPU: $GPU_NAME"

CAN_TRAIN=1
if [ "$HAVE_TORCH" = 0 ] || [ "$HAVE_TPROF" = 0 ] || [ "$HAVE_LIB" = 0 ]; then
  CAN_TRAIN=0
  echo "gpu-validate: the GPU steps need python with torch, tprof and libtprof.so (see the kit checks above)" >&2
fi
TRAIN=("$TORCH_PY" "$KIT/train.py" --steps "$STEPS" --warmup "$WARMUP")
# Every tprof run: mode full (the default, set explicitly), its own output directory.
TENV=(TPROF_MODE=full)

# summarize NAME RINGS: tprof check (status in CHECK_RC) + summary --json into $OUT/NAME-summary.json
CHECK_RC=0
summarize() {
  local name=$1 rings=$2
  ls "$rings"/*.tprof >/dev/null 2>&1 || { note "$name: no ring files in $rings"; return 1; }
  CHECK_RC=0
  step "$name-check" 120 bash -c '"$1" check "$2"/*.tprof' _ "$TPROF" "$rings" || CHECK_RC=$?
  step "$name-summary" 180 bash -c '"$1" summary "$2" --json >"$3"' _ "$TPROF" "$rings" "$OUT/$name-summary.json"
}

# train_facts RESULT.json: "12.345 steps/s, median step 81.00 ms, loss 9.1 -> 7.2"
train_facts() {
  "$PY3" - "$1" <<'EOF' 2>/dev/null || echo "no result in $1"
import json, sys
r = json.load(open(sys.argv[1]))
print("%.3f steps/s, median step %.2f ms, loss %.3f -> %.3f"
      % (r["steps_per_s"], r["median_step_ms"], r["first_loss"], r["last_loss"]))
EOF
}

say "train: bare"
BARE_OK=0 TP_OK=0 KN_OK=0
if [ "$CAN_TRAIN" = 1 ]; then
  if step train-bare 150 "${TRAIN[@]}" --mode bare --result "$OUT/train-bare.json"; then
    BARE_OK=1
    record "train: bare" "30 steps complete" "$(train_facts "$OUT/train-bare.json")" PASS
  else
    record "train: bare" "30 steps complete" "failed (logs/train-bare.log)" FAIL
  fi
else
  record "train: bare" "30 steps complete" "not run: missing python/torch, tprof or libtprof.so" FAIL
fi

say "train: under tprof (LD_PRELOAD, TPROF_MODE=full)"
if [ "$CAN_TRAIN" = 1 ]; then
  rm -rf "$OUT/rings-train"
  if step train-tprof 150 env "${TENV[@]}" TPROF_OUT="$OUT/rings-train" LD_PRELOAD="$LIB" "${TRAIN[@]}" --mode tprof \
      --result "$OUT/train-tprof.json"; then
    TP_OK=1
    record "train: tprof" "30 steps complete, ring files" "$(train_facts "$OUT/train-tprof.json"); $(ls "$OUT"/rings-train/*.tprof 2>/dev/null | wc -l) ring files; $(grep -c '^tprof' "$LOGS/train-tprof.log" || true) tprof lines on stderr" PASS \
      "$(grep '^tprof' "$LOGS/train-tprof.log" | head -n 5 | tr '\n' ' ')"
    if summarize tprof "$OUT/rings-train"; then
      if [ "$CHECK_RC" = 0 ]; then
        record "tprof: rings intact" "tprof check exit 0" "exit 0" PASS
      else
        record "tprof: rings intact" "tprof check exit 0" "exit $CHECK_RC: $(tail -n1 "$LOGS/tprof-check.log")" FAIL
      fi
      step tprof-export 180 "$TPROF" export "$OUT/rings-train" --format kineto -o "$OUT/tprof-kineto" || true
    else
      TP_OK=0
      record "tprof: summary" "tprof summary --json" "failed (logs/tprof-summary.log)" FAIL
    fi
  else
    record "train: tprof" "30 steps complete, ring files" "failed (logs/train-tprof.log)" FAIL
  fi
fi

say "train: under torch.profiler (Kineto)"
if [ "$CAN_TRAIN" = 1 ]; then
  mkdir -p "$OUT/kineto"
  if step train-kineto 200 "${TRAIN[@]}" --mode kineto --trace "$OUT/kineto/trace.json" --result "$OUT/train-kineto.json"; then
    KN_OK=1
    record "train: torch.profiler" "30 steps complete, Chrome trace" "$(train_facts "$OUT/train-kineto.json"); $(du -h "$OUT/kineto/trace.json" | cut -f1) trace" PASS
  else
    record "train: torch.profiler" "30 steps complete, Chrome trace" "failed (logs/train-kineto.log)" FAIL
  fi
fi

say "compare: tprof vs Kineto, run facts, overhead"
if [ "$TP_OK" = 1 ] && [ "$KN_OK" = 1 ]; then
  TK=()
  [ -d "$OUT/tprof-kineto" ] && TK=(--tprof-kineto "$OUT/tprof-kineto")
  step compare-kernels 120 "$PY3" "$KIT/compare.py" kernels --summary "$OUT/tprof-summary.json" \
    --kineto "$OUT/kineto/trace.json" "${TK[@]}" --warmup "$WARMUP" --expect-steps "$STEPS" \
    --tolerance-pct "$TOLERANCE" --report "$OUT" --results "$RESULTS" || true
  [ -d "$OUT/tprof-kineto" ] || record "kernels: counts per step" "equal per kernel" "tprof export --format kineto failed: whole-run counts compared instead" FAIL
else
  record "kernels: tprof vs Kineto" "names, counts per step, GPU time within ${TOLERANCE}%" "not compared: a profiled run failed" FAIL
fi
if [ "$TP_OK" = 1 ]; then
  step compare-run 60 "$PY3" "$KIT/compare.py" run --summary "$OUT/tprof-summary.json" --expect-steps "$STEPS" \
    --expect-allreduce "$STEPS" --counters --results "$RESULTS" || true
fi
if [ "$BARE_OK" = 1 ] && [ "$TP_OK" = 1 ]; then
  KA=()
  [ "$KN_OK" = 1 ] && KA=(--kineto "$OUT/train-kineto.json")
  step compare-overhead 60 "$PY3" "$KIT/compare.py" overhead --bare "$OUT/train-bare.json" --tprof "$OUT/train-tprof.json" \
    "${KA[@]}" --max-overhead-pct "$MAX_OVERHEAD" --results "$RESULTS" || true
else
  record "overhead: tprof vs bare" "<= ${MAX_OVERHEAD}% slower" "not measured: a training run failed" FAIL
fi

say "nvcc program with -cudart static (only CUPTI sees its kernels)"
# libcupti for a CUDA 13 program that loads no CUDA library tprof could search beside.
CUPTI=""
for c in ${SITE:+"$SITE/nvidia/cu13/lib/libcupti.so.13"} ${SITE:+"$SITE/nvidia/cuda_cupti/lib/libcupti.so.13"} \
    "$(dirname "${NVCC_BIN:-/x}")/../extras/CUPTI/lib64/libcupti.so" /usr/local/cuda/extras/CUPTI/lib64/libcupti.so \
    ${SITE:+"$SITE/nvidia/cuda_cupti/lib/libcupti.so.12"}; do
  [ -e "$c" ] && { CUPTI=$c; break; }
done
note "libcupti for the static program: ${CUPTI:-not found (tprof searches itself)}"
STATIC_OK=0
STATIC_SKIP=""
if [ "$HAVE_NVCC" = 0 ]; then
  record "static cudart: build" "nvcc -cudart static" "nvcc not found (pass --nvcc PATH)" FAIL
elif ! budget 120; then
  STATIC_SKIP="skipped: time budget (${BUDGET}s) spent"
  record "static cudart: build" "nvcc -cudart static" "$STATIC_SKIP" SKIP
elif compile_static native sm_90 && check_static_binary; then
  if step static-bare 60 "$OUT/static_kernels"; then
    STATIC_OK=1
    record "static cudart: build and run" "builds, runs, no libcudart.so" "arch $(cat "$OUT/static_kernels.arch"); $(tail -n1 "$LOGS/static-bare.log")" PASS
  else
    record "static cudart: build and run" "builds, runs, no libcudart.so" "runs bare: failed (logs/static-bare.log)" FAIL
  fi
else
  record "static cudart: build and run" "builds, runs, no libcudart.so" "build failed (logs/nvcc-*.log)" FAIL
fi
STATIC_WANT=(--kernel tprof_validate_saxpy=200 --kernel tprof_validate_scale=100)
if [ "$STATIC_OK" = 1 ] && [ "$HAVE_TPROF" = 1 ] && [ "$HAVE_LIB" = 1 ]; then
  rm -rf "$OUT/rings-static"
  if step static-tprof 90 env "${TENV[@]}" TPROF_OUT="$OUT/rings-static" ${CUPTI:+TPROF_CUPTI_PATH="$CUPTI"} LD_PRELOAD="$LIB" \
      "$OUT/static_kernels" && summarize static "$OUT/rings-static"; then
    step static-present 60 "$PY3" "$KIT/compare.py" present --summary "$OUT/static-summary.json" "${STATIC_WANT[@]}" \
      --check "static cudart: kernels via CUPTI (LD_PRELOAD)" --results "$RESULTS" || true
  else
    record "static cudart: kernels via CUPTI (LD_PRELOAD)" "saxpy x200, scale x100" "run or summary failed (logs/static-*.log)" FAIL
  fi
  rm -rf "$OUT/rings-inject"
  if step inject-static 90 env "${TENV[@]}" TPROF_OUT="$OUT/rings-inject" ${CUPTI:+TPROF_CUPTI_PATH="$CUPTI"} \
      CUDA_INJECTION64_PATH="$LIB" "$OUT/static_kernels" && summarize inject "$OUT/rings-inject"; then
    step inject-present 60 "$PY3" "$KIT/compare.py" present --summary "$OUT/inject-summary.json" "${STATIC_WANT[@]}" \
      --check "CUDA_INJECTION64_PATH: kernels (static program)" --results "$RESULTS" || true
  else
    record "CUDA_INJECTION64_PATH: kernels (static program)" "saxpy x200, scale x100" "run or summary failed (logs/inject-*.log)" FAIL
  fi
else
  why="not run: the static program did not build or run bare" st=FAIL
  [ "$STATIC_OK" = 1 ] && why="not run: tprof or libtprof.so missing"
  [ -n "$STATIC_SKIP" ] && why=$STATIC_SKIP st=SKIP
  record "static cudart: kernels via CUPTI (LD_PRELOAD)" "saxpy x200, scale x100" "$why" $st
  record "CUDA_INJECTION64_PATH: kernels (static program)" "saxpy x200, scale x100" "$why" $st
fi

say "train: under CUDA_INJECTION64_PATH (no LD_PRELOAD)"
if [ "$CAN_TRAIN" = 1 ] && budget 180; then
  rm -rf "$OUT/rings-inject-train"
  if step train-inject 180 env "${TENV[@]}" TPROF_OUT="$OUT/rings-inject-train" CUDA_INJECTION64_PATH="$LIB" "${TRAIN[@]}" \
      --mode tprof --result "$OUT/train-inject.json" && summarize inject-train "$OUT/rings-inject-train"; then
    WANT=$("$PY3" -c 'import json,sys; print(max(1, int(0.95 * sum(k["count"] for k in json.load(open(sys.argv[1]))["kernels"]))))' "$OUT/tprof-summary.json" 2>/dev/null || echo 1)
    GOT=$("$PY3" -c 'import json,sys; print(sum(k["count"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$OUT/inject-train-summary.json" 2>/dev/null || echo 0)
    if [ "$GOT" -ge "$WANT" ]; then st=PASS; else st=FAIL; fi
    record "CUDA_INJECTION64_PATH: training kernels" ">= $WANT launches (95% of the LD_PRELOAD run)" "$GOT kernel launches" $st
  else
    record "CUDA_INJECTION64_PATH: training kernels" "kernels recorded" "run or summary failed (logs/train-inject.log)" FAIL
  fi
elif [ "$CAN_TRAIN" = 1 ]; then
  record "CUDA_INJECTION64_PATH: training kernels" "kernels recorded" "skipped: time budget (${BUDGET}s) spent" SKIP
fi

say "results ($(elapsed)s)"
rc=0
"$PY3" "$KIT/results.py" render --results "$RESULTS" --out "$OUT" --env "$ENV_JSON" \
  --title "tprof GPU validation ($(date -u +%F), ${GPU_NAME%%,*})" || rc=$?
echo "gpu-validate: done in $(elapsed)s; paste $OUT/results.md into docs/validation.md"
exit "$rc"
