#!/usr/bin/env bash
# Installs the Debian packages the tests need (Chromium renders the HTML report headless).
# Idempotent; does nothing when everything is present.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
  echo "system packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${need[*]} (run as root: apt-get install -y ${need[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
echo "installed: ${need[*]}"
