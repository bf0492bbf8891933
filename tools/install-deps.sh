#!/usr/bin/env bash
# Installs what building and testing vramwatch needs, from Debian's packages. The CUDA headers
# come from the installed CUDA toolkit (CUDA_HOME, or /usr/local/cuda); nothing links libcuda.
#   tools/install-deps.sh          what the build and the quick start need (python3-venv for the
#                                  venv with PyTorch, which the quick start makes itself)
#   tools/install-deps.sh --tests  also what the whole suite needs (tests/run_all.sh): g++ for the
#                                  C++ exception checks; Chromium for the timeline's rendering
#                                  test; clang with its sanitizer and fuzzer runtimes for the
#                                  fuzzing step; and PyTorch, in a venv of its own
#                                  (tools/torch-venv.sh, which needs python3-venv), for the tests
#                                  that run it; if pip cannot install it (no way to PyPI, say),
#                                  those tests are left out and a line says so
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tests=0
[ "${1:-}" = "--tests" ] && tests=1
pkgs=(meson ninja-build gcc pkg-config libunwind-dev uthash-dev libcriterion-dev libcjson-dev
      python3 python3-jsonschema python3-venv)
if [ $tests = 1 ]; then
  # tmux: `vramwatch top` is tested on a real terminal (tests/top/run_top_tty.py).
  # g++: without it c++ is clang++ once clang is in, and a sanitizer build's C++ test programs
  # get clang's runtime while the rest of the build (gcc) preloads gcc's.
  pkgs+=(g++ chromium clang tmux)
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# The package of clang's sanitizer and fuzzer runtimes (libclang_rt.*) for the clang this release
# installs: Debian 12's clang is clang-14, whose runtimes are libclang-rt-14-dev. Empty when apt
# does not know such a package (releases before the runtimes were split out of
# libclang-common-N-dev, which clang depends on).
clang_rt() {
  local v
  v=$(dpkg-query -W -f='${Depends}' clang 2>/dev/null | grep -o 'clang-[0-9]\+' | head -n 1 || true)
  [ -n "$v" ] || v=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: \(clang-[0-9]\+\)$/\1/p' | head -n 1 || true)
  [ -n "$v" ] && apt-cache show "libclang-rt-${v#clang-}-dev" >/dev/null 2>&1 && echo "libclang-rt-${v#clang-}-dev"
  return 0
}

missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
rt=
if [ $tests = 1 ] && installed clang; then
  rt=$(clang_rt)
  [ -z "$rt" ] || installed "$rt" || missing+=("$rt")
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if [ $tests = 1 ] && [ -z "$rt" ]; then # clang is to be installed: its runtimes with it
    rt=$(clang_rt)
    [ -z "$rt" ] || missing+=("$rt")
  fi
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $tests = 1 ]; then
  # Its own messages go to stderr, the reason for a failure with them; the python's path it
  # prints is for tests/run_all.sh, which finds it again.
  bash "$here/torch-venv.sh" >/dev/null ||
    echo "install-deps: PyTorch not installed (the line above says why): the tests that need it are left out" >&2
fi
