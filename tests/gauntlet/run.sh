#!/usr/bin/env bash
# The gauntlet (docs/reliability.md): load, processes, faults and cost, as meson suite
# `gauntlet` of a build folder. Reduced sizes by default, as CI runs them from
# tests/run_all.sh; --long for the full ones (32 threads x 1 000 000 pairs, 200 kills, ...), and
# then the cost attack's time targets (the benchmark gauntlet-cost-timed) at the full size too.
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
  st=0
  GAUNTLET_LONG=1 meson test -C "$b" --suite gauntlet --num-processes 1 --timeout-multiplier 6 \
    --verbose "$@" || st=1
  # (not in a sanitizer build, where the cost attack is not registered)
  if meson test -C "$b" --benchmark --list 2>/dev/null | grep -q 'gauntlet-cost-timed$'; then
    GAUNTLET_LONG=1 meson test -C "$b" --benchmark --timeout-multiplier 6 --verbose "$@" \
      gauntlet-cost-timed || st=1
  fi
  exit $st
fi
exec meson test -C "$b" --suite gauntlet --num-processes 1 --print-errorlogs "$@"
