#!/usr/bin/env bash
# Installs what building and testing vramwatch needs, from Debian's packages. The CUDA headers
# come from the installed CUDA toolkit (CUDA_HOME, or /usr/local/cuda); nothing links libcuda.
set -euo pipefail
pkgs=(meson ninja-build gcc pkg-config libunwind-dev uthash-dev libcriterion-dev libcjson-dev
      python3 python3-jsonschema)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
