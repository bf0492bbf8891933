#!/usr/bin/env python3
"""CPU time per training step of examples/train_torch.py on the simulated card, with and without
the library, for the default caching allocator and for --tensors (backend:cudaMallocAsync).

Usage: bench_torch.py --vramwatch EXE --python PY --repo DIR [--runs N] [--instructions]

Per step is marginal: each configuration runs at S and 2S steps and the difference of the
child's CPU time (user + system) is divided by S, so start-up, imports and the exit report do
not count; the median of --runs pairs is printed. No kernel runs on the simulated card, so a
step's own CPU time is smaller than on a real GPU and the share printed here overstates what a
real run pays. Figures, not a check: goals (<= 1 % default, <= 5 % --tensors) are printed beside.

CPU time on a small shared machine varies by +/-10 % from run to run, more than the effect; with
--instructions each run is counted by callgrind instead (the same count for the same run, whatever
else the machine does; about 100 s a run), once per configuration and step count.
"""
import re
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP  # noqa: E402


def cpu_time(argv, env, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"bench_torch: {' '.join(argv[:6])}…: exit {p.returncode}: {p.stderr[-400:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(argv, env, cwd):
    out = os.path.join(cwd, "callgrind.out")
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"bench_torch: callgrind of {' '.join(argv[:4])}…: exit {p.returncode}: {p.stderr[-400:]}")
    os.unlink(out)
    return int(m.group(1))


def child_env(vramwatch, args, env, cwd):
    """The environment `vramwatch ARGS -- CMD` gives CMD, read by running `env` as CMD."""
    p = subprocess.run([vramwatch] + args + ["--", "env", "-0"], env=env, cwd=cwd,
                       capture_output=True)
    if p.returncode != 0:
        sys.exit(f"bench_torch: vramwatch {' '.join(args)} -- env: exit {p.returncode}")
    return dict(kv.split(b"=", 1) for kv in p.stdout.split(b"\0") if b"=" in kv)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--instructions", action="store_true")
    a = ap.parse_args()
    if not a.python:
        print("bench_torch: no interpreter with PyTorch (tools/torch-venv.sh makes one)", file=sys.stderr)
        return SKIP
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMWATCH_", "SIMGPU_"))}
    env.pop("LD_PRELOAD", None)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    # One CPU thread for PyTorch's own work: OpenMP's workers spin after each parallel region,
    # and how long they spin is the machine's load, not the library's cost.
    env["OMP_NUM_THREADS"] = "1"
    train = os.path.join(a.repo, "examples", "train_torch.py")
    cwd = tempfile.mkdtemp(prefix="vw-bench-torch-")

    def job(steps):
        return [a.python, train, "--batch", "8", "--img", "320", "--cfg", "s", "--steps",
                str(steps), "--val-every", "0", "--workers", "0"]

    if a.instructions:
        return count_instructions(a, env, cwd, job)
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


def count_instructions(a, env, cwd, job):
    steps = (2, 2 + a.steps)
    configs = [("default", "off", ["sim", "4GiB"]), ("default", "on", ["run", "--sim", "4GiB", "--dir", cwd]),
               ("--tensors", "off", ["sim", "4GiB"]),
               ("--tensors", "on", ["run", "--sim", "4GiB", "--tensors", "--dir", cwd])]
    per = {}
    for mode, lib, args in configs:
        e = {k.encode(): v.encode() for k, v in env.items()}
        if mode == "--tensors" and lib == "off":
            e[b"PYTORCH_CUDA_ALLOC_CONF"] = b"backend:cudaMallocAsync"
        e = child_env(a.vramwatch, args, {k.decode(): v.decode() for k, v in e.items()}, cwd)
        e = {k.decode(): v.decode() for k, v in e.items()}
        # The same string hashes in every run, so two runs differ only by what they do.
        e["PYTHONHASHSEED"] = "0"
        n = [instructions(job(s), e, cwd) for s in steps]
        per[(mode, lib)] = (n[1] - n[0]) / a.steps
    # A 4 GiB card: valgrind's address space is smaller than a 16 GiB card's ranges need.
    print("train_torch.py --batch 8 --img 320 --cfg s on the simulated 4 GiB card, instructions per "
          "step (callgrind, marginal over %d steps)" % a.steps)
    print("%-10s %14s %14s %9s %6s" % ("allocator", "without", "with", "added", "goal"))
    for mode, goal in (("default", "1%"), ("--tensors", "5%")):
        off, on = per[(mode, "off")], per[(mode, "on")]
        print("%-10s %12.1f M %12.1f M %+8.2f%% %6s" % (mode, off / 1e6, on / 1e6, (on - off) / off * 100, goal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
