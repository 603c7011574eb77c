#!/usr/bin/env bash
# The test command (README): builds everything a fresh machine needs and runs every test.
#   bash scripts/test.sh
# Steps: Python wheels (NVIDIA headers/libs, nvcc, validators) -> NVIDIA's libraries of every
# version for the conformance tests -> system packages (Chromium for the
# report test) -> the simulated GPU stack and the test programs -> the Rust workspace -> all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== setup: python wheels =="
bash scripts/setup-python.sh
echo "== setup: NVIDIA's real libraries (conformance judges) =="
t_conf=$SECONDS
bash scripts/setup-conformance.sh
echo "conformance wheels ready in $((SECONDS - t_conf)) s"
echo "== setup: system packages =="
bash scripts/setup-system.sh
echo "== build: simulated GPU stack and test programs =="
make -C tests/simgpu -j2
make -C tests/programs -j2
echo "== build: tprof (release) =="
cargo build --release --workspace --all-targets
# Every test stage runs even after a failure, so one run shows everything that is wrong.
failed=()
# Each stage has a time limit, so a hang fails its stage, named, instead of running out CI's clock.
limit() { local secs=$1; shift; timeout --kill-after=30 "$secs" "$@"; }
echo "== test: unit and crate tests =="
limit 1200 cargo test --release --workspace --exclude tprof-e2e --no-fail-fast || failed+=("unit and crate tests")
echo "== test: simulated GPU self-tests =="
limit 600 make -C tests/simgpu check || failed+=("simulated GPU self-tests")
echo "== test: conformance with NVIDIA's real libraries =="
# Real CUPTI headers (constants, record layouts), cudaTypedefs.h (driver entry-point ABIs), real
# CUDA 12/13 runtimes, CUPTI 12.8-13.5, NCCL and NVTX loaded without a driver; see README.
t_conf=$SECONDS
limit 900 cargo test --release -p tprof-e2e --test real_libraries --no-fail-fast || failed+=("conformance with NVIDIA's real libraries")
echo "conformance tests ran in $((SECONDS - t_conf)) s"
echo "== test: end to end under the simulated GPU =="
# Two at a time: the multi-rank runs are real processes on a 2-core machine.
limit 2400 cargo test --release -p tprof-e2e --no-fail-fast -- --test-threads=2 --skip conformance_ || failed+=("end-to-end tests")
echo "== validation kit (dry run: no GPU here) =="
if [ -f scripts/gpu-validate.sh ]; then
  limit 600 bash scripts/gpu-validate.sh --dry-run --out target/gpu-validate-dry-run || failed+=("validation kit dry run")
fi
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "all tests passed"
