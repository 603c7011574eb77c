#!/bin/sh
# nccl_run.sh BUILD_DIR: the mock NCCL / NVML selftests (make check), each with a fresh SIMGPU_TRUTH dir.
B="$1"
fail=0
run() { # name, command...
  name="$1"; shift
  dir=$(mktemp -d "${TMPDIR:-/tmp}/simgpu-truth.XXXXXX")
  if SIMGPU_TRUTH="$dir" SIMGPU_SESSION="nnselftest-$$" LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
     timeout 60 "$@" >"$dir/out.txt" 2>&1; then
    echo "PASS $name: $(tail -n 1 "$dir/out.txt")"
  else
    echo "FAIL $name" >&2; cat "$dir/out.txt" >&2; fail=1
  fi
  rm -rf "$dir"
}
run nccl_basic "$B/selftest/nccl_basic"
run nccl_ranks_allreduce "$B/selftest/nccl_ranks" --ranks 4 --bytes 268435456 --iters 3 --stagger-us 1000 --check
run nccl_ranks_mixed "$B/selftest/nccl_ranks" --ranks 3 --op mixed --bytes 1048576 --iters 6 --stagger-us 300 --check
run nccl_ranks_sendrecv "$B/selftest/nccl_ranks" --ranks 4 --op sendrecv --bytes 65536 --iters 4 --check
for t in "$B"/selftest/nvml_*; do
  [ -x "$t" ] && run "$(basename "$t")" "$t"
done
rm -f /dev/shm/simgpu-nnselftest-$$ 2>/dev/null
exit $fail
