#!/usr/bin/env bash
# Fuzzes the vramwatch command line's readers (report, advice, job files, and the views printed of
# them) with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer, for a fixed time.
#
#   bash tests/fuzz/run.sh [SECONDS]      (default 60; CI runs the default)
#
# Builds the target in build-fuzz/ (or $VRAMWATCH_FUZZ_BUILD) with clang (meson -Dfuzz=enabled,
# which compiles the command line's library for fuzzing there), replays the committed
# regressions (tests/fuzz/regressions: every input the fuzzer ever found a bug with), then fuzzes
# from the recorded reports of the test suites as seeds. Ends with one line:
#   "fuzz: N executions in S s without a finding"   (exit 0), or the finding and exit 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
here=tests/fuzz
build=${VRAMWATCH_FUZZ_BUILD:-build-fuzz}

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (Debian: apt-get install clang)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" --werror -Dfuzz=enabled -Db_lundef=false >"$build.setup.log" 2>&1 ||
    { cat "$build.setup.log" >&2; exit 2; }
else
  # A folder set up when fuzz was a boolean option comes back with the new default (disabled).
  meson setup --reconfigure "$build" -Dfuzz=enabled >"$build.setup.log" 2>&1 ||
    { cat "$build.setup.log" >&2; exit 2; }
fi
ninja -C "$build" tests/fuzz/fuzz-readers >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log" >&2; exit 2; }
fuzzer=$build/tests/fuzz/fuzz-readers

work=$(mktemp -d "${TMPDIR:-/tmp}/vramwatch-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
# Seeds that reach the several-report paths: two ranks of one job, two runs of one job.
sep=$'\n----\n'
{ cat tests/cli/data/job4-rank0.json; printf '%s' "$sep"; cat tests/cli/data/job4-rank1.json; } >"$work/corpus/job2"
{ cat tests/advise/data/run-b16.json; printf '%s' "$sep"; cat tests/advise/data/run-b32.json; } >"$work/corpus/runs2"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Not a finding-free run if a known bug came back.
if compgen -G "$here/regressions/*" >/dev/null &&
   ! "$fuzzer" -close_fd_mask=3 "$here"/regressions/* >"$work/replay.log" 2>&1; then
  tail -n 60 "$work/replay.log" >&2
  echo "fuzz: a committed regression input fails again (see above)" >&2
  exit 1
fi

# -close_fd_mask=2: the commands' one-line refusals would flood the log; libFuzzer and the
# sanitizers keep writing to a copy of stderr. -rss_limit_mb bounds memory as the readers promise.
start=$(date +%s)
nice -n 10 "$fuzzer" -max_total_time="$seconds" -close_fd_mask=3 -rss_limit_mb=2048 -timeout=20 \
  -max_len=262144 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus" tests/cli/data tests/advise/data tests/timeline/data $(compgen -G "$here/regressions") \
  >"$work/fuzz.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n 1)
if [ "$rc" != 0 ] || compgen -G "$work/artifacts/*" >/dev/null; then
  tail -n 80 "$work/fuzz.log" >&2
  mkdir -p "$build/findings"
  cp "$work"/artifacts/* "$build/findings/" 2>/dev/null
  echo "fuzz: FINDING after ${runs:-?} executions in ${elapsed} s; input kept in $build/findings/" >&2
  exit 1
fi
echo "fuzz: ${runs:-?} executions in ${elapsed} s without a finding"
