#!/usr/bin/env bash
# Installs what building and testing vramwatch needs, from Debian's packages. The CUDA headers
# come from the installed CUDA toolkit (CUDA_HOME, or /usr/local/cuda); nothing links libcuda.
#   tools/install-deps.sh          what the build and the quick start need
#   tools/install-deps.sh --tests  also what the whole suite needs (tests/run_all.sh): Chromium for
#                                  the timeline's rendering test, clang for the fuzzing step, and,
#                                  where the distribution has it, PyTorch for the CPU run of
#                                  examples/train_torch.py (without it that test is not registered)
set -euo pipefail
pkgs=(meson ninja-build gcc pkg-config libunwind-dev uthash-dev libcriterion-dev libcjson-dev
      python3 python3-jsonschema)
optional=()
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(chromium clang)
  optional+=(python3-torch)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
want_optional=()
for p in "${optional[@]+"${optional[@]}"}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || want_optional+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && { [ ${#want_optional[@]} -eq 0 ] || [ "$(id -u)" != 0 ]; }; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for p in "${want_optional[@]+"${want_optional[@]}"}"; do
  apt-get install -y -qq --no-install-recommends "$p" >/dev/null ||
    echo "install-deps: $p not installed; the tests that need it are left out (meson's summary says so)" >&2
done
