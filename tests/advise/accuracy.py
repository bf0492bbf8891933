#!/usr/bin/env python3
"""Accuracy of `vramwatch advise` on the simulated GPU.

One observe-mode run of examples/train_sim.py at batch 64 on an emulated 16 GiB card (a 64 GiB
simulated card underneath, so the run completes), then `vramwatch advise --json` on its report.
The advised command must fit the emulated card (enforced), and the advised batch must reach at
least 85% of the largest batch that truly fits within the same headroom, found by bisection
over runs under the limit minus the headroom.

    accuracy.py --vramwatch BUILD/tools/vramwatch/vramwatch --sim BUILD/tools/simgpu
                --train-sim examples/train_sim.py
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

GiB = 1 << 30
LIMIT = 16 * GiB
HEADROOM = 0.10
MIN_SHARE = 0.85


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    o = ap.parse_args()

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = o.sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["SIMGPU_MEMORY"] = "64GiB"
    # the sanitizer preload (if any) is for the python we start, not for vramwatch's own checks
    tmp = tempfile.mkdtemp(prefix="vw-advise-")
    try:
        def train(batch, limit, observe=False, img=640):
            d = tempfile.mkdtemp(dir=tmp)
            cmd = [o.vramwatch, "run", "--dir", d, "--limit", str(limit)] + (["--observe"] if observe else []) + \
                  ["--", o.python, o.train_sim, "--batch", str(batch), "--img", str(img)]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            return p.returncode, d, p.stdout + p.stderr

        rc, d, out = train(64, "16GiB", observe=True)
        reports = glob.glob(os.path.join(d, "*.json"))
        if rc != 0 or len(reports) != 1:
            print(f"FAIL: the observe-mode run: exit {rc}, reports {reports}\n{out}")
            return 1
        p = subprocess.run([o.vramwatch, "advise", "--json"] + reports, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            print(f"FAIL: advise exit {p.returncode}: {p.stderr}")
            return 1
        advice = json.loads(p.stdout)
        print(f"model: {advice['model']}")
        recs = [r for r in advice["recommendations"] if r["kind"] == "batch"]
        if not recs or recs[0]["flag"] != "--batch" or advice["recommendations"][0]["kind"] != "batch":
            print(f"FAIL: no batch recommendation first: {advice['recommendations']}")
            return 1
        rec = recs[0]
        advised = rec["value"]
        cmd = rec["command"]
        if cmd[-4:] != ["--batch", str(advised), "--img", "640"]:
            print(f"FAIL: advised command {cmd}")
            return 1
        print(f"advised batch {advised}, predicted peak {rec['predicted_peak_bytes'] / GiB:.2f} GiB")

        # the advised command, as given, on the emulated card (enforced)
        d = tempfile.mkdtemp(dir=tmp)
        p = subprocess.run([o.vramwatch, "run", "--dir", d, "--limit", "16GiB", "--"] + [o.python if c == "python3" else c for c in cmd],
                           env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(f"FAIL: the advised command did not fit 16 GiB (exit {p.returncode})\n{p.stdout}{p.stderr}")
            return 1
        print("the advised command fits 16 GiB")

        # the truly largest batch within the same headroom: bisection on the card minus headroom
        usable = int(LIMIT * (1 - HEADROOM))
        lo, hi = 1, 256  # lo fits, hi does not
        rc, _, out = train(lo, usable)
        if rc != 0:
            print(f"FAIL: batch 1 does not fit {usable} bytes\n{out}")
            return 1
        rc, _, _ = train(hi, usable)
        if rc == 0:
            print("FAIL: batch 256 fits: the simulated job is not what this test expects")
            return 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            rc, _, _ = train(mid, usable)
            if rc == 0:
                lo = mid
            else:
                hi = mid
        share = advised / lo
        print(f"largest batch that fits {usable / GiB:.2f} GiB: {lo}; advised {advised} = {share:.0%} of it")
        if share < MIN_SHARE:
            print(f"FAIL: the advised batch reaches less than {MIN_SHARE:.0%} of the largest that fits")
            return 1
        print("ok")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
