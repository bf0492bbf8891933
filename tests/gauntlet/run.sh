#!/usr/bin/env bash
# The gauntlet (docs/reliability.md): load, processes, faults and cost, as meson suite
# `gauntlet` of a build folder. Reduced sizes by default, as CI runs them from
# tests/run_all.sh; --long for the full ones (32 threads x 1 000 000 pairs, 200 kills, ...).
# usage: tests/gauntlet/run.sh [--long] [BUILD_DIR]   (default: build)
# Extra arguments after the build folder go to `meson test` (e.g. --logbase NAME).
set -uo pipefail
cd "$(dirname "$0")/../.."
long=0
if [ "${1:-}" = "--long" ]; then
  long=1
  shift
fi
b=${1:-build}
shift || true
if [ ! -f "$b/build.ninja" ]; then
  meson setup "$b" --werror >/dev/null || exit 2
fi
ninja -C "$b" >/dev/null || { ninja -C "$b" | tail -n 40; exit 2; }
if [ $long = 1 ]; then
  # Full sizes take minutes per attack: room for them, and the figures printed.
  GAUNTLET_LONG=1 exec meson test -C "$b" --suite gauntlet --num-processes 1 --timeout-multiplier 6 \
    --verbose "$@"
fi
exec meson test -C "$b" --suite gauntlet --num-processes 1 --print-errorlogs "$@"
