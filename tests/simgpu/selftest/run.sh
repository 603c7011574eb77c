#!/bin/sh
# run.sh BUILD_DIR: runs every selftest with a fresh SIMGPU_TRUTH dir; prints each test's summary line.
B="$1"
fail=0
for t in fidelity basics callbacks tsclock oom graph capture pinned driver vmm hang inject signals exit_truth \
         graph_api mempool symbols access profiler driver_apis nvcc_kernels; do
  bin="$B/selftest/$t"
  [ -x "$bin" ] || { [ "$t" = nvcc_kernels ] && continue; echo "missing $bin" >&2; fail=1; continue; }
  dir=$(mktemp -d "${TMPDIR:-/tmp}/simgpu-truth.XXXXXX")
  extra=""
  [ "$t" = oom ] && extra="SIMGPU_MEM_GB=4"
  if env $extra SIMGPU_TRUTH="$dir" SIMGPU_SESSION="selftest-$$" LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
     timeout 60 "$bin" "$dir"; then echo "PASS $t"; else echo "FAIL $t" >&2; fail=1; fi
  if [ "$t" = nvcc_kernels ]; then
    # the kernels must show up under their real mangled names
    g=$(cat "$dir"/truth-*.jsonl | grep -c '"name":"_Z17scale_elementwisePffi"')
    m=$(cat "$dir"/truth-*.jsonl | grep -c '"name":"_Z10tiled_gemmIfEvPKT_S2_PS0_i"')
    echo "nvcc_truth: scale_elementwise=$g tiled_gemm=$m"
    [ "$g" = 10 ] && [ "$m" = 10 ] || { echo "FAIL nvcc_kernels names" >&2; fail=1; }
  fi
  rm -rf "$dir"
done
exit $fail
