#!/usr/bin/env python3
"""CPU time per training step of examples/train_torch.py on the simulated card, with and without
the library, for the default caching allocator and for --tensors (backend:cudaMallocAsync).

Usage: bench_torch.py --vramwatch EXE --python PY --repo DIR [--runs N]

Per step is marginal: each configuration runs at S and 2S steps and the difference of the
child's CPU time (user + system) is divided by S, so start-up, imports and the exit report do
not count; the median of --runs pairs is printed. No kernel runs on the simulated card, so a
step's own CPU time is smaller than on a real GPU and the share printed here overstates what a
real run pays. Figures, not a check: goals (<= 1 % default, <= 5 % --tensors) are printed beside.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

SKIP = 77


def cpu_time(argv, env, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"bench_torch: {' '.join(argv[:6])}…: exit {p.returncode}: {p.stderr[-400:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if not a.python:
        print("bench_torch: no interpreter with PyTorch (tools/torch-venv.sh makes one)", file=sys.stderr)
        return SKIP
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMWATCH_", "SIMGPU_"))}
    env.pop("LD_PRELOAD", None)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    train = os.path.join(a.repo, "examples", "train_torch.py")
    cwd = tempfile.mkdtemp(prefix="vw-bench-torch-")

    def job(steps):
        return [a.python, train, "--batch", "8", "--img", "320", "--cfg", "s", "--steps",
                str(steps), "--val-every", "0", "--workers", "0"]

    rows = []
    for mode, flags, extra in (("default", [], {}),
                               ("--tensors", ["--tensors"],
                                {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})):
        per = {}
        for lib in ("off", "on"):
            samples = []
            for _ in range(a.runs):
                t = []
                for steps in (a.steps, 2 * a.steps):
                    if lib == "off":
                        argv = [a.vramwatch, "sim", "16GiB", "--"] + job(steps)
                        e = dict(env, **extra)
                    else:
                        argv = [a.vramwatch, "run", "--sim", "16GiB", "--dir", cwd] + flags + \
                               ["--"] + job(steps)
                        e = env
                    t.append(cpu_time(argv, e, cwd))
                samples.append((t[1] - t[0]) / a.steps)
            per[lib] = statistics.median(samples)
        share = (per["on"] - per["off"]) / per["off"] * 100
        rows.append((mode, per["off"], per["on"], share))
    print("train_torch.py --batch 8 --img 320 --cfg s on the simulated 16 GiB card, "
          "CPU time per step (marginal, median of %d)" % a.runs)
    print("%-10s %12s %12s %9s %6s" % ("allocator", "without", "with", "added", "goal"))
    for (mode, off, on, share), goal in zip(rows, ("1%", "5%")):
        print("%-10s %10.2f ms %10.2f ms %+8.2f%% %6s" % (mode, off * 1e3, on * 1e3, share, goal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
