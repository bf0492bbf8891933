#!/usr/bin/env python3
"""What the companion costs (docs/companion.md): 10,000 model.train() calls, the start-up of a
Python process and `import torch`, with libvramwatch preloaded, without and with the companion.
A figure, not pass/fail (exit 77 without torch).

The calls are timed in one process where the companion has patched torch, alternating rounds
with the original Module.train put back and with the wrapper, so both see the same machine
load; each figure is the best round. Start-up times alternate runs the same way."""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP  # noqa: E402

CALLS = 10000
ROUNDS = 15

TIMER = r"""
import json, time
import torch.nn as nn

wrapped = nn.Module.__dict__["train"]
assert getattr(wrapped, "vramwatch_companion_wrapped", False), "the companion did not patch torch"
original = wrapped.__wrapped__

def sequential():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))

def detector(blocks=80):
    # about the module count of a YOLO-sized model: conv, norm and activation per block, nested
    return nn.Sequential(*[nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), nn.SiLU())
                           for _ in range(blocks)])

def same(m):
    for _ in range(CALLS):
        m.train()

def switching(m):
    for _ in range(CALLS // 2):
        m.eval()
        m.train()

res = {}
for name, model in (("sequential", sequential()), ("detector", detector())):
    res[name + "_modules"] = sum(1 for _ in model.modules())
    for kind, fn in (("train", same), ("switch", switching)):
        best = {"without": None, "with": None}
        for _ in range(ROUNDS if name == "sequential" else ROUNDS // 3):
            for side, train in (("without", original), ("with", wrapped)):
                nn.Module.train = train
                t = time.perf_counter()
                fn(model)
                dt = time.perf_counter() - t
                if best[side] is None or dt < best[side]:
                    best[side] = dt
        nn.Module.train = wrapped
        res[name + "_" + kind] = best
print(json.dumps(res))
""".replace("CALLS", str(CALLS)).replace("ROUNDS", str(ROUNDS))


def start_times(envs, code, rounds=ROUNDS):
    """Best wall time of `python3 -c code` under each environment, alternating, in ms."""
    best = [None] * len(envs)
    for _ in range(rounds):
        for i, env in enumerate(envs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
            dt = (time.perf_counter() - t) * 1000
            best[i] = dt if best[i] is None or dt < best[i] else best[i]
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--companion", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        print("cannot run (skipped, exit 77): %s cannot import torch" % sys.executable, file=sys.stderr)
        return SKIP
    base = dict(os.environ)
    base.pop("PYTHONPATH", None)
    # No simulated GPU is needed: nothing here allocates device memory, so no report is written.
    base["LD_PRELOAD"] = ":".join(filter(None, [base.get("LD_PRELOAD"), args.lib]))
    with_env = dict(base, PYTHONPATH=args.companion)
    p = subprocess.run([sys.executable, "-c", TIMER], env=with_env, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        return 1
    res = json.loads(p.stdout)
    print("%d model.train() calls (best round), libvramwatch preloaded, %s:" % (CALLS, sys.executable))
    for name in ("sequential", "detector"):
        n = res[name + "_modules"]
        for kind, what in (("train", "train(), no switch"), ("switch", "eval()/train() in turn, a marker each")):
            a, b = res[name + "_" + kind]["without"], res[name + "_" + kind]["with"]
            print("  %-10s %3d modules  %-38s without %8.1f ms  with %8.1f ms  %+6.2f us per call  "
                  "%+5.0f ns per module" % (name, n, what, a * 1e3, b * 1e3, (b - a) / CALLS * 1e6,
                                            (b - a) / CALLS / n * 1e9))
    for label, code in (("python3 -c pass", "pass"), ("python3 -c 'import torch'", "import torch")):
        a, b = start_times([base, with_env], code, ROUNDS if code == "pass" else 5)
        print("  %-27s without %8.1f ms  with %8.1f ms  %+6.1f ms" % (label, a, b, b - a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
