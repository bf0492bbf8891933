#!/usr/bin/env bash
# The real-GPU check: builds the project on a machine with an NVIDIA GPU and runs every check
# of tests/gpu/checks.py against the real driver, PyTorch, CuPy and JAX, within about 8 minutes.
# Prints PASS/FAIL/SKIP per check and ends with "N passed, M failed, K skipped"; reports, the
# log and summary.md go to OUT_DIR.
#
# usage: tests/gpu/run.sh OUT_DIR
#
# Build dependencies: the usual -dev packages, or, on a machine without a package registry,
# Debian .deb files in .debs/ (apt-get download libunwind-dev libunwind8 uthash-dev
# libcjson-dev libcjson1 liblzma5), unpacked here into a private prefix.
set -uo pipefail
out=${1:?usage: tests/gpu/run.sh OUT_DIR}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/log.txt
: >"$log"
start=$(date +%s)

say() { echo "$*" | tee -a "$log"; }

say "vramwatch GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 || true
  python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -n 1 || true
  python3 -c 'import jax; print("jax", jax.__version__)' 2>&1 | tail -n 1 || true
} | tee -a "$log" | sed 's/^/  /'

if [ -d .debs ] && ls .debs/*.deb >/dev/null 2>&1; then
  prefix=/tmp/vramwatch-deps
  rm -rf "$prefix"
  for d in .debs/*.deb; do dpkg -x "$d" "$prefix"; done
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export PKG_CONFIG_LIBDIR=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  export CPATH=$prefix/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "dependencies unpacked from .debs into $prefix"
fi

build=build-gpu
if ! { meson setup "$build" -Dtests=disabled -Dbuildtype=release --wipe >>"$log" 2>&1 ||
       meson setup "$build" -Dtests=disabled -Dbuildtype=release >>"$log" 2>&1; } ||
   ! ninja -C "$build" lib/libvramwatch.so tools/vramwatch/vramwatch >>"$log" 2>&1; then
  say "FAIL build: see log.txt"
  tail -n 30 "$log"
  say "0 passed, 1 failed, 0 skipped"
  exit 1
fi
say "PASS build ($(( $(date +%s) - start ))s)"

echo "build and checks started at $start, the checks print their own tally" >>"$log"
python3 tests/gpu/checks.py --build "$build" --out "$out" 2>>"$log" | tee "$out/results.txt"
status=${PIPESTATUS[0]}
tar -C "$out" -czf "$out/reports.tar.gz" reports 2>/dev/null && rm -rf "$out/reports" "$out"/vwgpu-*
echo "total $(( $(date +%s) - start ))s" >>"$log"
exit $status
