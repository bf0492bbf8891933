#!/usr/bin/env python3
"""Tests of `vramwatch fit` on the simulated GPU (no real GPU needed).

- examples/train_sim.py at batch 64 on an emulated 16 GiB card (a 64 GiB simulated card
  underneath): the value found fits when rerun under `vramwatch run --limit 16GiB`, one more
  does not fit within the 10% headroom (by its trial and by a run of its own), and the search
  takes at most ceil(log2 64) + 2 = 8 trials; the text output names the command to use.
- A job that never ends but reports its memory through VRAMWATCH_STATUS: trials are stopped
  after --settle and judged at the peak they reached.
- A command that fails at its own value: exit 1, outcome "error".
- Bad usage: exit 2 with one line on stderr and nothing on stdout.

    run_fit_tests.py --vramwatch BUILD/tools/vramwatch/vramwatch --sim BUILD/tools/simgpu
                     --train-sim examples/train_sim.py
"""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

GiB = 1 << 30
LIMIT = 16 * GiB
HEADROOM = 0.10

# A job that holds "value" GiB as far as the status file says, then waits to be stopped.
FAKE_JOB = r'''
import os, sys, time
v = int(sys.argv[sys.argv.index("--bs") + 1])
path = os.environ["VRAMWATCH_STATUS"]
peak = v << 30
while True:
    with open(path + ".tmp", "w") as f:
        f.write("vramwatch-status peak_live_bytes=%-20d live_bytes=%-20d time_unix_ns=%d oom=0\n"
                % (peak, peak, time.time_ns()))
    os.replace(path + ".tmp", path)
    time.sleep(0.05)
'''

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)
    return cond


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    o = ap.parse_args()
    o.vramwatch = os.path.abspath(o.vramwatch)

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = o.sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["SIMGPU_MEMORY"] = "64GiB"
    tmp = tempfile.mkdtemp(prefix="vw-fit-")
    env["TMPDIR"] = tmp
    job = [o.python, o.train_sim, "--batch", "64", "--img", "640"]

    def vw(args, timeout=300):
        return subprocess.run([o.vramwatch] + args, env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=tmp)

    def need_of(batch, limit="16GiB"):
        """Exit status of a run at this batch under the emulated card, and its need."""
        d = tempfile.mkdtemp(dir=tmp)
        p = vw(["run", "--dir", d, "--limit", limit, "--", o.python, o.train_sim, "--batch", str(batch),
                "--img", "640"])
        need = 0
        for rep in glob.glob(os.path.join(d, "vramwatch-*.json")):
            with open(rep) as f:
                r = json.load(f)
            for dev in r["devices"]:
                need = max(need, dev["peak_reserved_bytes"] + (dev.get("untracked_bytes") or 0))
        return p.returncode, need

    try:
        # ---- the search on train_sim ----
        p = vw(["fit", "--json", "--limit", "16GiB", "--"] + job)
        sys.stderr.write(p.stderr)
        if check(p.returncode == 0, "fit --json exits 0 (exit %d)" % p.returncode):
            res = json.loads(p.stdout)
            check(res["schema"] == "vramwatch.fit/1", "schema vramwatch.fit/1")
            check(res["flag"] == "--batch", "flag as spelled: %r" % res["flag"])
            best = res["best_value"]
            trials = res["trials"]
            check(isinstance(best, int) and 1 <= best < 64, "best_value %r" % best)
            check(len(trials) <= math.ceil(math.log2(64)) + 2, "%d trials, at most 8" % len(trials))
            check(trials[0]["value"] == 64, "starts at the command's own value")
            check(all(t["outcome"] in ("fits", "oom", "error") and isinstance(t["peak_bytes"], int)
                      for t in trials), "trial records")
            check(len(p.stderr.strip().splitlines()) == len(trials), "one progress line per trial")
            by_value = {t["value"]: t for t in trials}
            check(by_value.get(best, {}).get("outcome") == "fits", "the best value's trial fits")
            over = by_value.get(best + 1)
            check(over is not None and over["outcome"] != "fits", "best + 1 was tried and does not fit")
            # "Fits with the headroom" is measured on a card reduced by the headroom: the best
            # value runs there, the next one does not, and the best one also runs on the card.
            reduced = str(int(LIMIT * (1 - HEADROOM)))
            rc, need = need_of(best)
            check(rc == 0, "best %d runs under vramwatch run --limit 16GiB (exit %d)" % (best, rc))
            rc, need = need_of(best, reduced)
            check(rc == 0 and 0 < need <= LIMIT * (1 - HEADROOM),
                  "best %d runs on the card less the headroom, needing %d (exit %d)" % (best, need, rc))
            rc, need = need_of(best + 1, reduced)
            check(rc != 0, "best + 1 does not run on the card less the headroom (exit %d)" % rc)

            # text output: the best value and the full command, spelled as given
            p = vw(["fit", "--limit", "16GiB", "--"] + job)
            lines = p.stdout.strip().splitlines()
            check(p.returncode == 0 and len(lines) == 2 and lines[0].startswith("best: --batch %d " % best),
                  "text output names the best value: %r" % p.stdout)
            check(lines[-1].endswith("--batch %d --img 640" % best), "text output gives the command: %r" % lines[-1])

        # ---- trials that never end are stopped after settling ----
        fake = os.path.join(tmp, "fake_job.py")
        with open(fake, "w") as f:
            f.write(FAKE_JOB)
        p = vw(["fit", "--json", "--limit", "16GiB", "--settle", "0.5", "--flag", "--bs", "--",
                o.python, fake, "--bs", "64"], timeout=120)
        sys.stderr.write(p.stderr)
        if check(p.returncode == 0, "settling job: exit 0 (exit %d)" % p.returncode):
            res = json.loads(p.stdout)
            # 14 GiB fits 16 GiB less 10%, 15 GiB does not
            check(res["best_value"] == 14, "settling job: best 14, got %r" % res["best_value"])
            check(len(res["trials"]) <= 8, "settling job: %d trials" % len(res["trials"]))
            check(all(t["peak_bytes"] == t["value"] << 30 for t in res["trials"]),
                  "settling job: peaks from the status file")
            check("settling" in p.stderr, "settling job: the progress says it was stopped")
        # nothing fits a 1 GiB card with 10% headroom: halving stops at 1
        p = vw(["fit", "--json", "--limit", "1GiB", "--settle", "0.3", "--flag", "--bs", "--",
                o.python, fake, "--bs", "64"], timeout=120)
        ok = check(p.returncode == 1 and "nothing fits" in p.stderr, "nothing fits: exit 1 (exit %d)" % p.returncode)
        if ok:
            res = json.loads(p.stdout)
            check(res["best_value"] is None and [t["value"] for t in res["trials"]] == [64, 32, 16, 8, 4, 2, 1],
                  "nothing fits: halved down to 1: %r" % res["trials"])
        check(not glob.glob(os.path.join(tmp, "vramwatch-fit-*")), "trial folders removed")

        # ---- a command that fails at its own value ----
        p = vw(["fit", "--json", "--limit", "16GiB", "--", o.python, "-c", "import sys; sys.exit(3)",
                "--batch", "8"], timeout=60)
        ok = check(p.returncode == 1, "failing command: exit 1 (exit %d)" % p.returncode)
        if ok:
            res = json.loads(p.stdout)
            check(res["best_value"] is None and [t["outcome"] for t in res["trials"]] == ["error"],
                  "failing command: best null, one error trial: %r" % res)

        # ---- bad usage ----
        for args, what in [
            (["fit"], "no command"),
            (["fit", "--limit", "16GiB"], "options but no command"),
            (["fit", "--", o.python, "train.py", "--epochs", "3"], "no batch flag"),
            (["fit", "--flag", "--bs", "--"] + job, "--flag not in the command"),
            (["fit", "--limit", "16XB", "--"] + job, "a bad size"),
            (["fit", "--headroom", "150", "--"] + job, "a bad headroom"),
            (["fit", "--settle", "0", "--"] + job, "a bad settle"),
            (["fit", "--bogus", "--"] + job, "an unknown option"),
            (["fit", "--limit"], "an option without its value"),
            (["fit", "--", "/nonexistent/vw-fit-prog", "--batch", "4"], "a command that cannot start"),
        ]:
            p = vw(args, timeout=60)
            check(p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1,
                  "bad usage, %s: exit %d, stderr %r" % (what, p.returncode, p.stderr))
        p = vw(["fit", "--help"])
        check(p.returncode == 0 and p.stdout.startswith("usage: vramwatch fit"), "fit --help")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
