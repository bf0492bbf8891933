#!/usr/bin/env bash
# The whole test suite, as CI runs it: a warnings-as-errors build with every suite, the same
# under AddressSanitizer + UndefinedBehaviorSanitizer, the unit and integration suites under
# ThreadSanitizer, the gauntlet's reduced form (tests/gauntlet/run.sh), then 60 s of fuzzing
# the command line's readers (tests/fuzz/run.sh, clang, counted as one test). The tests that run
# PyTorch use the venv of tools/torch-venv.sh (-Dtorch_python); where it could not be installed
# they are left out, and a line before the last says so. Ends with two lines: "K skipped" (a
# skipped test, exit 77, could not run here and said why: it is neither passed nor failed), then
# "N passed, M failed", the closing line a newcomer's check reads (it must end "0 failed").
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh --tests || exit 2
# Made by install-deps above, if it could be: this only finds it. Empty: python3, where it has
# PyTorch (meson's summary says whether the PyTorch tests are in).
torch_python=$(bash tools/torch-venv.sh --no-install 2>/dev/null | tail -n 1) || torch_python=

jobs=$(nproc 2>/dev/null || echo 2)
status=0
logs=()

# Benchmarks (tests/bench, companion_cost) are registered with benchmark(), so meson test never
# runs them here.
run_build() { # dir, suites-args, meson options...
  local dir=$1 suites=$2
  shift 2
  set -- "$@" -Dtorch_python="$torch_python"
  echo "== $dir: meson setup $*" >&2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --werror "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log" >&2; status=1; return; }
  else # a folder from an earlier run: the venv may have moved (VRAMWATCH_TORCH_VENV)
    meson configure "$dir" -Dtorch_python="$torch_python" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log" >&2; status=1; return; }
  fi
  ninja -C "$dir" >"$dir.build.log" 2>&1 || { tail -n 40 "$dir.build.log" >&2; status=1; return; }
  # shellcheck disable=SC2086
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs $suites || status=1
  logs+=("$dir/meson-logs/testlog.json")
}

# The gauntlet (load, processes, faults, cost; docs/reliability.md) in its reduced form, through
# its own script: the plain build runs every attack, the ThreadSanitizer build the load attack and fork under load.
run_gauntlet() { # dir
  [ -f "$1/build.ninja" ] || return
  bash tests/gauntlet/run.sh "$1" --logbase gauntlet || status=1
  logs+=("$1/meson-logs/gauntlet.json")
}

run_build build-test "--no-suite gauntlet"
run_gauntlet build-test
run_build build-asan "" -Db_sanitize=address,undefined -Db_lundef=false
run_build build-tsan "--suite unit --suite integration" -Db_sanitize=thread -Db_lundef=false
run_gauntlet build-tsan

# The readers under libFuzzer for a fixed budget; its line says how many executions ran.
fuzz_result=failed
echo "== tests/fuzz/run.sh 60" >&2
if bash tests/fuzz/run.sh 60; then
  fuzz_result=passed
else
  status=1
fi

[ -n "$torch_python" ] ||
  echo "run_all: no PyTorch venv (tools/torch-venv.sh could not install it; its line above says why): the tests that need PyTorch were left out" >&2
python3 - "$fuzz_result" "${logs[@]}" <<'PY'
import json, sys
passed = failed = skipped = 0
if sys.argv[1] == "passed":
    passed += 1
else:
    failed += 1
for path in sys.argv[2:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        r = json.loads(line)
        if r.get("result") in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r.get("result") == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{skipped} skipped (could not run here; each said why)")
print(f"{passed} passed, {failed} failed")
PY
exit $status
