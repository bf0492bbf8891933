#!/usr/bin/python3
"""Leaks found by themselves, in real runs of examples/train_sim.py under the preload on the
simulated GPU: 64 MiB kept per epoch is reported by `vramwatch report` (from the markers, and
without markers from the run itself) with the right rate and the line that allocates it; the same
run without the leak gives no finding. Every report must carry a timeline and match the schema.

usage: leak_check.py --vramwatch EXE --lib LIB --sim DIR --example TRAIN_SIM --validator PY
                     [--preload-first SANITIZER_RT]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed, check, clean_env  # noqa: E402


def leak_line(example):
    with open(example, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if "args.leak_mib_per_epoch * MiB" in line:
                return n
    raise Failed("no leaking line in " + example)


def record(args, folder, extra):
    env = clean_env()
    env["LD_PRELOAD"] = ":".join(filter(None, [args.preload_first, args.lib]))
    if args.preload_first:
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    env.update(VRAMWATCH_DIR=folder, LD_LIBRARY_PATH=args.sim, SIMGPU_MEMORY="16GiB")
    cmd = ["/usr/bin/python3", args.example, "--batch", "16", "--epochs", "6", "--step-ms", "10"] + extra
    p = subprocess.run(cmd, env=env, cwd=folder, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s exited %d: %s" % (cmd, p.returncode, p.stderr))
    found = glob.glob(os.path.join(folder, "vramwatch-*.json"))
    check(len(found) == 1, "expected one report in %s, found %s" % (folder, found))
    v = subprocess.run(["/usr/bin/python3", args.validator, found[0]], capture_output=True, text=True)
    check(v.returncode in (0, 77), "schema: " + v.stdout + v.stderr)
    with open(found[0], encoding="utf-8") as f:
        doc = json.load(f)
    tl = doc.get("timeline", {}).get("devices", [])
    check(len(tl) == 1 and tl[0]["buckets"] and tl[0]["events"] > 0, "the report has no timeline")
    out = subprocess.run([args.vramwatch, "report", found[0]], capture_output=True, text=True,
                         env={"LC_ALL": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "PATH": os.environ.get("PATH", "")})
    check(out.returncode == 0, "report exited %d: %s" % (out.returncode, out.stderr))
    return out.stdout


def main():
    ap = argparse.ArgumentParser()
    for a in ("--vramwatch", "--lib", "--sim", "--example", "--validator"):
        ap.add_argument(a, required=True)
    ap.add_argument("--preload-first")
    args = ap.parse_args()
    # Meson passes build targets relative to the build folder; the runs happen elsewhere.
    for a in ("vramwatch", "lib", "sim", "example", "validator"):
        setattr(args, a, os.path.abspath(getattr(args, a)))
    line = leak_line(args.example)
    tmp = tempfile.mkdtemp(prefix="vramwatch-leak-")
    try:
        cases = [("marked leak", ["--leak-mib-per-epoch", "64"], 'per "epoch # train" (6 phases'),
                 ("unmarked leak", ["--leak-mib-per-epoch", "64", "--no-markers"], "per iteration (6 iterations found"),
                 ("marked, no leak", [], None),
                 ("unmarked, no leak", ["--no-markers"], None)]
        for i, (name, extra, expect) in enumerate(cases):
            folder = os.path.join(tmp, str(i))
            os.mkdir(folder)
            out = record(args, folder, extra)
            leaks = [l for l in out.splitlines() if l.startswith("Leak: ")]
            check("Live memory over the run, device 0" in out, "%s: no sparkline:\n%s" % (name, out))
            if expect is None:
                check(not leaks, "%s: a leak was reported in a run without one: %s" % (name, leaks))
                continue
            check(len(leaks) == 1, "%s: expected one leak line, got:\n%s" % (name, out))
            l = leaks[0]
            check(l.startswith("Leak: live memory grows 64.00 MiB " + expect.split(" (")[0]) and expect in l,
                  "%s: wrong finding: %s" % (name, l))
            check("train_sim.py:%d in main" % line in l, "%s: not the leaking line %d: %s" % (name, line, l))
            check("card is full in" in l, "%s: no projection: %s" % (name, l))
            print("ok: %s: %s" % (name, l))
    except Failed as e:
        print("FAIL:", e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
