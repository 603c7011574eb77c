#!/usr/bin/env bash
# Decoder benchmark ("Performance"): events/s and peak RSS of `tprof summary`, `diagnose`, `report` and of every
# `tprof export` format on generated multi-rank jobs, and `tprof summary` vs Holistic Trace
# Analysis (load + temporal breakdown) on the same Kineto traces, side by side in one run.
#
#   scripts/bench-decode.sh                    # 10 M events (about 200 MB of ring files)
#   scripts/bench-decode.sh --events 10M,100M  # also 100 M (about 2 GB of rings; minutes, <= ~5 GB disk)
#   scripts/bench-decode.sh --no-exports --no-hta --events 100M
#   scripts/bench-decode.sh --previous /path/to/old/tprof --rounds 3   # a previous build side by side (best CPU of 3 each)
#   scripts/bench-decode.sh --ranks 4096 --events 81.92M --commands summary1,summary,diagnose --no-exports --no-hta
#                                              # multi-rank scale: 4096 ranks x 20k events (~2.4 GB of rings)
#
# Every argument goes to the bench binary (decoder/benches/decode.rs; its header lists them all:
# --events, --ranks, --dir, --exports, --no-exports, --hta-events, --no-hta, --keep,
# --max-export-bytes, --commands, --previous, --rounds). It generates the ring files with tprof_format::RingWriter under --dir
# (default $CARGO_TARGET_DIR/bench-decode), runs the release `tprof` binary as a child process on
# them (wall time, user+sys CPU time and peak RSS from /usr/bin/time -v, else VmHWM polling),
# prints one table, and deletes everything it generated (unless --keep).
# HTA comes from .venv (bash scripts/setup-python.sh, or .venv/bin/pip install HolisticTraceAnalysis);
# without it the comparison is skipped and said so. Goals (each row's note prints its goal and
# whether it was met): summary --threads 1 >= 20 M events per CPU-second, diagnose and report
# >= 10 M, peak RSS < 500 MB at 100 M events, >= 10x faster than HTA.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p tprof-decoder --bench decode -- "$@"
