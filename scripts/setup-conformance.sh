#!/usr/bin/env bash
# Installs NVIDIA's real libraries and headers from PyPI, one wheel per folder, as the judges of the
# conformance tests: .venv/conformance/<distribution>-<version>/ (pip --no-deps --target).
# Idempotent: a folder that is already there is skipped. Prints one line per package.
#
# The versions are pinned (newest at the time of writing, plus the ones PyTorch wheels pin):
# CUPTI 12.8, 12.9 and every 13.x minor (13.2.86 is torch 2.15's), the runtimes and crt headers that the
# CUPTI headers include, NCCL for CUDA 12 and 13, NVTX for CUDA 12 and 13.
#
#   bash scripts/setup-conformance.sh            # install what is missing
#   bash scripts/setup-conformance.sh --list     # print the folders it would fill, install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  nvidia-cuda-cupti-cu12==12.8.90
  nvidia-cuda-cupti-cu12==12.9.79
  nvidia-cuda-cupti==13.0.85
  nvidia-cuda-cupti==13.1.115
  nvidia-cuda-cupti==13.2.23
  nvidia-cuda-cupti==13.2.75
  nvidia-cuda-cupti==13.2.86
  nvidia-cuda-cupti==13.3.75
  nvidia-cuda-cupti==13.4.92
  nvidia-cuda-cupti==13.5.25
  nvidia-cuda-runtime-cu12==12.9.79
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-runtime==13.2.86
  nvidia-cuda-runtime==13.5.37
  nvidia-cuda-crt==13.5.37
  nvidia-nccl-cu12==2.32.3
  nvidia-nccl-cu13==2.32.3
  nvidia-nvtx-cu12==12.9.79
  nvidia-nvtx==13.5.25
)

PIP=${PIP:-}
if [ -z "$PIP" ]; then
  if [ -x .venv/bin/pip ]; then PIP=.venv/bin/pip; else PIP="python3 -m pip"; fi
fi
ROOT=${CONFORMANCE_DIR:-.venv/conformance}

if [ "${1:-}" = "--list" ]; then
  for spec in "${PACKAGES[@]}"; do echo "$ROOT/${spec%%==*}-${spec##*==}"; done
  exit 0
fi

mkdir -p "$ROOT"
failed=0
for spec in "${PACKAGES[@]}"; do
  dist=${spec%%==*}
  version=${spec##*==}
  dest="$ROOT/$dist-$version"
  if [ -d "$dest" ] && compgen -G "$dest/*.dist-info" >/dev/null; then
    echo "present   $dist $version  $dest"
    continue
  fi
  # Install beside the final folder and rename, so an interrupted or concurrent run never leaves a
  # half-filled folder under the final name.
  tmp="$dest.partial.$$"
  rm -rf "$tmp"
  t0=$(date +%s)
  if $PIP install --quiet --disable-pip-version-check --no-deps --no-compile --target "$tmp" "$spec" \
      >"$tmp.log" 2>&1; then
    if [ -d "$dest" ]; then
      rm -rf "$tmp"          # another run finished it meanwhile
    else
      mv "$tmp" "$dest"
    fi
    rm -f "$tmp.log"
    echo "installed $dist $version  $dest  ($(du -sh "$dest" | cut -f1), $(($(date +%s) - t0)) s)"
  else
    echo "FAILED    $dist $version  (pip: $(tail -n 1 "$tmp.log"))"
    rm -rf "$tmp" "$tmp.log"
    failed=1
  fi
done
exit $failed
