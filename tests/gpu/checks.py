#!/usr/bin/env python3
"""The real-GPU checks, run by tests/gpu/run.sh after it has built the project.

Every check prints one line, PASS name / FAIL name: reason / SKIP name: reason, and the run
ends with "N passed, M failed, K skipped". Reports, logs and a summary go to OUT_DIR. Checks
that need a capability the project does not have yet say SKIP and name it.

usage: checks.py --build BUILD --out OUT_DIR [--only NAME,...]
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "train_torch.py")
GiB = 1 << 30

sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vwtest import Failed, Skipped, check, clean_env  # noqa: E402


class Ctx:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.out = os.path.abspath(args.out)
        self.lib = os.path.join(self.build, "lib", "libvramwatch.so")
        self.cli = os.path.join(self.build, "tools", "vramwatch", "vramwatch")
        self.log = open(os.path.join(self.out, "log.txt"), "a", encoding="utf-8")
        self.figures = {}
        self.reports_dir = os.path.join(self.out, "reports")
        os.makedirs(self.reports_dir, exist_ok=True)

    def run(self, cmd, env=None, timeout=240, name="run"):
        full = clean_env(env)
        full["PYTHONUNBUFFERED"] = "1"
        self.log.write(f"\n$ {' '.join(cmd)}\n  env: { {k: v for k, v in (env or {}).items()} }\n")
        self.log.flush()
        t0 = time.time()
        try:
            p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            self.log.write(f"  TIMEOUT after {timeout}s\n{e.stdout or ''}\n{e.stderr or ''}\n")
            raise Failed(f"{name}: timed out after {timeout}s")
        self.log.write(f"  exit {p.returncode} after {time.time() - t0:.1f}s\n--- stdout\n{p.stdout}"
                       f"--- stderr\n{p.stderr[-20000:]}\n")
        self.log.flush()
        return p

    def torch_run(self, extra, env=None, preload=False, tensors=False, report_dir=None, timeout=240,
                  name="train_torch"):
        """The example, plainly or under `vramwatch run`. Returns (process, reports)."""
        args = [sys.executable, EXAMPLE] + extra
        env = dict(env or {})
        d = report_dir or tempfile.mkdtemp(prefix="vwgpu-", dir=self.out)
        if preload:
            cmd = [self.cli, "run", "--dir", d] + (["--tensors"] if tensors else []) + ["--"] + args
        else:
            cmd = args
        p = self.run(cmd, env, timeout=timeout, name=name)
        # One report per process: the dump it asked for (--report-at-end, the moment its own
        # figures were printed), kept in a file of its own, else the report it left.
        chosen = {}
        for f in sorted(glob.glob(os.path.join(d, "vramwatch-*.json"))):
            key = re.sub(r"-request-\d+\.json$", ".json", f)
            if "-request-" in f or key not in chosen:
                chosen[key] = f
        reports = []
        for f in chosen.values():
            with open(f, encoding="utf-8") as fh:
                reports.append(json.load(fh))
            shutil.copy(f, os.path.join(self.reports_dir, f"{name}-{os.path.basename(f)}"))
        return p, reports


def torch_figures(stdout):
    m = re.search(r"memory_reserved (\d+) max_memory_reserved (\d+) memory_allocated (\d+)", stdout)
    rate = re.search(r"([0-9.]+) steps/s", stdout)
    return ({"reserved": int(m.group(1)), "max_reserved": int(m.group(2)),
             "allocated": int(m.group(3))} if m else None,
            float(rate.group(1)) if rate else None)


def dev0(report):
    devs = [d for d in report["devices"] if d["ordinal"] == 0]
    check(devs, "no device 0 in the report")
    return devs[0]


def one_report(reports):
    check(len(reports) == 1, f"{len(reports)} reports instead of 1")
    return reports[0]


def within(a, b, pct):
    return abs(a - b) <= pct / 100.0 * max(abs(b), 1)


_limit_emulation = None


def have_limit_emulation(ctx):
    """Capacity emulation exists once the library no longer says, at its first allocation,
    that it ignores VRAMWATCH_LIMIT."""
    global _limit_emulation
    if _limit_emulation is None:
        d = tempfile.mkdtemp(prefix="vwgpu-", dir=ctx.out)
        p = ctx.run([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda')"],
                    {"LD_PRELOAD": ctx.lib, "VRAMWATCH_LIMIT": "16GiB", "VRAMWATCH_DIR": d},
                    name="probe-limit")
        _limit_emulation = p.returncode == 0 and "emulation is not in this version" not in p.stderr
    return _limit_emulation


def python_frames_available(report):
    return report["vramwatch"].get("python") is True


# ---------------------------------------------------------------- checks

SMALL = ["--batch", "16", "--img", "640", "--cfg", "s", "--epochs", "1", "--steps", "6",
         "--val-every", "0"]


def check_oom_default(ctx):
    """Default allocator at a batch that does not fit: an OOM report with the failing API."""
    if have_limit_emulation(ctx):
        extra = ["--batch", "64", "--img", "640", "--cfg", "c", "--steps", "3", "--val-every", "0"]
        p, reps = ctx.torch_run(extra, preload=True, name="oom_default", env={"VRAMWATCH_LIMIT": "16GiB"})
        ctx.figures["oom_default"] = "--limit 16GiB, batch 64, cfg c"
    else:
        # No emulated 16 GiB card yet: measure two small batches and run one that needs 1.3 times
        # the real card (the slope gives bytes per image, the intercept the fixed part).
        base = ["--img", "640", "--cfg", "c", "--epochs", "1", "--steps", "2", "--val-every", "0"]
        figs = []
        for b in (4, 8):
            p, _ = ctx.torch_run(["--batch", str(b)] + base, name=f"oom_probe_b{b}")
            f, _ = torch_figures(p.stdout)
            check(p.returncode == 0 and f, f"probe at batch {b} failed (exit {p.returncode})")
            figs.append(f["max_reserved"])
        per_image = (figs[1] - figs[0]) / 4
        check(per_image > 0, f"probe figures do not grow with the batch: {figs}")
        total = int(subprocess.run([sys.executable, "-c",
                                    "import torch; print(torch.cuda.get_device_properties(0).total_memory)"],
                                   capture_output=True, text=True).stdout.strip() or 0)
        fixed = figs[0] - 4 * per_image
        batch = int(math.ceil((1.3 * total - fixed) / per_image))
        ctx.figures["oom_default"] = (f"real card {total / GiB:.1f} GiB; {per_image / GiB:.3f} GiB per "
                                      f"image, {fixed / GiB:.2f} GiB fixed (measured): batch {batch}")
        p, reps = ctx.torch_run(["--batch", str(batch)] + base, preload=True, name="oom_default",
                                timeout=300)
    check(p.returncode != 0, "the run did not fail")
    check("out of memory" in p.stderr.lower(), "PyTorch did not report out of memory")
    r = one_report(reps)
    ooms = [f for f in r["failures"] if f["oom"] and f["retried"] != "succeeded"]
    check(ooms, "no out-of-memory failure in the report")
    check(ooms[0]["api"] in ("cudaMalloc", "cuMemCreate"), f"failing API {ooms[0]['api']}")
    notes = [f"failing API {ooms[0]['api']} of {ooms[0]['size'] / GiB:.2f} GiB, "
             f"live at failure {ooms[0]['live_bytes_at_failure'] / GiB:.2f} GiB"]
    # Python 3.8-3.13 are read; a newer interpreter is a known gap, said rather than failed
    if python_frames_available(r) or sys.version_info[:2] <= (3, 13):
        check(python_frames_available(r), "Python frames are off on a supported interpreter")
        site = [c for c in r["callsites"] if c["id"] == ooms[0]["callsite"]][0]
        check(any(f["kind"] == "python" and f["file"].endswith("train_torch.py") for f in site["frames"]),
               "no train_torch.py line in the failing call site")
    else:
        notes.append(f"Python line: not read on Python {sys.version.split()[0]} (3.8-3.13 are)")
    check("framework" in r, "the report has no framework field")
    fw = r["framework"]
    check(fw and fw.get("message"), "no framework verdict: the c10::OutOfMemoryError throw was not seen")
    check(fw["message"][:60] in p.stderr, "the verdict's message is not the one PyTorch printed")
    check(fw["format"] is not None and fw["requested_bytes"] is not None and
           fw["reserved_unallocated_bytes"] is not None, f"the message was not read: {fw['message'][:200]!r}")
    notes.append(f"PyTorch's verdict ({fw['format']}): allocated {fw['allocated_bytes']}, "
                 f"reserved but unallocated {fw['reserved_unallocated_bytes']}")
    return "; ".join(notes)


def check_fits_reserved(ctx):
    """A run that fits: our reserved equals torch.cuda.memory_reserved() within 1%, peak within
    1% of max_memory_reserved()."""
    p, reps = ctx.torch_run(SMALL + ["--report-at-end"], preload=True, name="fits_reserved")
    check(p.returncode == 0, f"exit {p.returncode}")
    f, _ = torch_figures(p.stdout)
    check(f, "no memory figures printed")
    d = dev0(one_report(reps))
    ok = within(d["reserved_bytes"], f["reserved"], 1) and within(d["peak_reserved_bytes"], f["max_reserved"], 1)
    msg = (f"reserved {d['reserved_bytes']} vs torch {f['reserved']}, peak {d['peak_reserved_bytes']} vs "
           f"torch max {f['max_reserved']}, untracked {d['untracked_bytes']}")
    check(ok, msg)
    return msg


def check_expandable(ctx):
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    p, reps = ctx.torch_run(SMALL + ["--report-at-end"], env=env, preload=True, name="expandable")
    check(p.returncode == 0, f"exit {p.returncode}")
    f, _ = torch_figures(p.stdout)
    r = one_report(reps)
    vmm = [l for l in r["live"] if l["api"] == "cuMemCreate"]
    check(vmm, "no cuMemCreate allocations tracked")
    d = dev0(r)
    msg = (f"{len(vmm)} live cuMemCreate handles, live {d['live_bytes']} vs torch reserved "
           f"{f['reserved'] if f else '?'}, address space {d['va_reserved_bytes']}")
    check(f and within(d["live_bytes"], f["reserved"], 1), msg)
    check(have_limit_emulation(ctx), "capacity emulation (VRAMWATCH_LIMIT) is not working")
    return msg


def check_tensors(ctx):
    p, reps = ctx.torch_run(SMALL + ["--report-at-end"], preload=True, tensors=True, name="tensors")
    check(p.returncode == 0, f"exit {p.returncode}")
    r = one_report(reps)
    d = dev0(r)
    asyncs = [l for l in r["live"] if l["api"].startswith("cudaMallocAsync")]
    check(len(asyncs) > 20, f"only {len(asyncs)} cudaMallocAsync allocations live")
    check(d["reserved_bytes"] >= d["live_bytes"], "reserved < live")
    check(d["pool_cached_bytes"] is not None, "pool figures missing")
    return (f"{d['live_count']} live tensors, live {d['live_bytes']}, reserved {d['reserved_bytes']}, "
            f"pool cache {d['pool_cached_bytes']}")


def check_cupy(ctx):
    code = ("import cupy as cp\n"
            "a = cp.zeros((256, 1024, 1024), dtype=cp.float32)\n"
            "b = cp.ones(1 << 26, dtype=cp.float32)\n"
            "cp.cuda.Device().synchronize()\n"
            "print('cupy', cp.__version__)\n")
    probe = ctx.run([sys.executable, "-c", "import cupy"], name="cupy-import")
    if probe.returncode != 0:
        raise Skipped("cupy is not importable here")
    d = tempfile.mkdtemp(prefix="vwgpu-", dir=ctx.out)
    p = ctx.run([sys.executable, "-c", code], {"LD_PRELOAD": ctx.lib, "VRAMWATCH_DIR": d}, name="cupy")
    check(p.returncode == 0, f"exit {p.returncode}")
    reps = [json.load(open(f)) for f in glob.glob(os.path.join(d, "vramwatch-*.json"))]
    for f in glob.glob(os.path.join(d, "vramwatch-*.json")):
        shutil.copy(f, os.path.join(ctx.reports_dir, "cupy-" + os.path.basename(f)))
    r = one_report(reps)
    dv = dev0(r)
    apis = sorted({l["api"] for l in r["live"]})
    check(dv["live_bytes"] >= (1 << 30) + (1 << 28), f"live {dv['live_bytes']} < 1.25 GiB")
    check(any(a.startswith("cuMem") for a in apis), f"not through the driver: {apis}")
    return f"live {dv['live_bytes']} through {apis}"


def check_jax(ctx):
    probe = ctx.run([sys.executable, "-c", "import jax"], name="jax-import")
    if probe.returncode != 0:
        raise Skipped("jax is not importable here")
    code = ("import jax, jax.numpy as jnp\n"
            "x = jnp.ones((1 << 28,), dtype=jnp.float32)\n"
            "x.block_until_ready()\n"
            "print(jax.devices())\n")
    d = tempfile.mkdtemp(prefix="vwgpu-", dir=ctx.out)
    p = ctx.run([sys.executable, "-c", code],
                {"LD_PRELOAD": ctx.lib, "VRAMWATCH_DIR": d, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                name="jax")
    check(p.returncode == 0, f"exit {p.returncode}")
    files = glob.glob(os.path.join(d, "vramwatch-*.json"))
    for f in files:
        shutil.copy(f, os.path.join(ctx.reports_dir, "jax-" + os.path.basename(f)))
    reps = [json.load(open(f)) for f in files]
    check(reps, "no report")
    best = max((dev0(r)["peak_live_bytes"], sorted({l["api"] for l in r["live"]})) for r in reps)
    check(best[0] >= 1 << 30, f"peak live {best[0]} < 1 GiB")
    return f"peak live {best[0]} through {best[1]}"


def check_emulated_capacity(ctx):
    check(have_limit_emulation(ctx), "capacity emulation (VRAMWATCH_LIMIT) is not working")
    code = ("import torch\n"
            "print(torch.cuda.get_device_properties(0).total_memory, torch.cuda.mem_get_info()[1])\n")
    p = ctx.run([sys.executable, "-c", code], {"LD_PRELOAD": ctx.lib, "VRAMWATCH_LIMIT": "16GiB"},
                name="emulated_capacity")
    vals = [int(v) for v in p.stdout.split()]
    check(vals == [16 * GiB, 16 * GiB], f"saw {vals}")
    return "total_memory and mem_get_info report 16 GiB"


def check_advice(ctx):
    """One observe-mode run of a batch that does not fit an emulated 16 GiB card, then the advised
    command under the enforced limit: it must run to its end, and the prediction is compared with
    the run's peak (which holds the allocator's cache, so it is at least the need). After the
    first-step failure of oom_default the advice must say it is a bound."""
    p = ctx.run([ctx.cli, "advise", "--help"], name="advise-probe")
    if p.returncode != 0:
        raise Skipped("vramwatch advise is not in this build")
    if not have_limit_emulation(ctx):
        raise Skipped("needs the emulated 16 GiB card")
    notes = []
    files = sorted(glob.glob(os.path.join(ctx.reports_dir, "oom_default-vramwatch-*.json")))
    if files:
        p = ctx.run([ctx.cli, "advise", "--json", files[-1]], name="advise-bound")
        # 1: the advice is for a run that ran out of memory (README, exit status)
        check(p.returncode == 1, f"advise on oom_default exited {p.returncode}")
        a = json.loads(p.stdout)
        recs = a["recommendations"]
        check(recs and all(r["fits"] is not True for r in recs if a["model"]["basis"] == "bound"),
               "a fit claimed on a bound")
        notes.append(f"oom_default: basis {a['model']['basis']}, first {recs[0]['kind']} {recs[0]['value']}")
    extra = ["--batch", "64", "--img", "640", "--cfg", "c", "--epochs", "1", "--steps", "3", "--val-every", "1"]
    d = tempfile.mkdtemp(prefix="vwgpu-", dir=ctx.out)
    p = ctx.run([ctx.cli, "run", "--dir", d, "--limit", "16GiB", "--observe", "--", sys.executable, EXAMPLE] + extra,
                name="advice-observe", timeout=300)
    reps = sorted(glob.glob(os.path.join(d, "vramwatch-*.json")))
    check(p.returncode == 0 and len(reps) == 1, f"observe run: exit {p.returncode}, {len(reps)} reports")
    shutil.copy(reps[0], os.path.join(ctx.reports_dir, "advice_observe-" + os.path.basename(reps[0])))
    p = ctx.run([ctx.cli, "advise", "--json", reps[0]], name="advise-observe")
    # 1 when the observe-mode run went over the emulated limit (it did not fit there)
    check(p.returncode in (0, 1), f"advise exited {p.returncode}")
    advice = json.loads(p.stdout)
    first = advice["recommendations"][0] if advice["recommendations"] else None
    check(first and first["command"], f"no command to run first: {advice['recommendations']}")
    cmd = first["command"]
    i = next((k for k, c in enumerate(cmd) if c.endswith("train_torch.py")), None)
    check(i is not None, f"unexpected command {cmd}")
    env = {}  # an allocator recommendation comes as "env NAME=VALUE python3 ..."
    k = 1 if cmd[0] == "env" else 0
    while k and "=" in cmd[k]:
        name, value = cmd[k].split("=", 1)
        env[name] = value
        k += 1
    env["VRAMWATCH_LIMIT"] = "16GiB"
    p2, reps2 = ctx.torch_run(cmd[i + 1:], preload=True, name="advice_run", env=env, timeout=300)
    check(p2.returncode == 0, f"the advised {first['kind']} {first['flag']} {first['value']} failed on the 16 GiB "
                               f"card (exit {p2.returncode})")
    d2 = dev0(one_report(reps2))
    measured = d2["peak_reserved_bytes"] + max(d2["untracked_bytes"] or 0, 0)
    predicted = first["predicted_peak_bytes"]
    notes.append(f"observe at batch 64: basis {advice['model']['basis']}, advised {first['kind']} "
                 f"{first['flag']} {first['value']} ran on 16 GiB; predicted "
                 f"{(predicted or 0) / GiB:.2f} GiB, the run's peak {measured / GiB:.2f} GiB (cache included)")
    return "; ".join(notes)


def check_other_processes(ctx):
    """Another process holding 2 GiB of the card: the out-of-memory report names it (NVML)."""
    if not have_limit_emulation(ctx):
        raise Skipped("needs the emulated card to run out of memory quickly")
    holder = subprocess.Popen([sys.executable, "-c",
                               "import torch, time; x = torch.empty(2 << 30, dtype=torch.uint8, device='cuda'); "
                               "print('ready', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        check(holder.stdout.readline().strip() == "ready", "the holder process did not start")
        extra = ["--batch", "64", "--img", "640", "--cfg", "c", "--steps", "2", "--val-every", "0"]
        p, reps = ctx.torch_run(extra, preload=True, name="other_processes", env={"VRAMWATCH_LIMIT": "16GiB"})
    finally:
        holder.kill()
        holder.wait()
    check(p.returncode != 0, "the run did not fail")
    d = dev0(one_report(reps))
    procs = d.get("other_processes")
    check(procs is not None, "other_processes is null: NVML was not asked or not available")
    mine = [x for x in procs if x["pid"] == holder.pid]
    check(mine, f"the holder (pid {holder.pid}) is not listed: {procs}")
    used = mine[0]["used_bytes"]
    check(used is None or used >= 2 * GiB, f"the holder's memory {used}")
    return f"listed {len(procs)} other process(es); the holder as {mine[0]['name']} with {used} bytes"


def check_timeline(ctx):
    """The reports of this run drawn: SVG and HTML written, the terminal view printed."""
    files = sorted(glob.glob(os.path.join(ctx.reports_dir, "*.json")))
    if not files:
        raise Skipped("no report to draw")
    out = os.path.join(ctx.out, "timeline.html")
    p = ctx.run([ctx.cli, "timeline", "-o", out, files[0]], name="timeline")
    check(p.returncode == 0 and os.path.getsize(out) > 1000, f"timeline exit {p.returncode}")
    p = ctx.run([ctx.cli, "timeline", files[0]], name="timeline-term")
    check(p.returncode == 0 and "GiB" in p.stdout, f"terminal view exit {p.returncode}")
    return f"{os.path.basename(files[0])}: {os.path.getsize(out)} bytes of HTML"


def check_overhead(ctx):
    """Steps per second with and without the preload; the library may cost at most 10%."""
    extra = ["--batch", "32", "--img", "640", "--cfg", "s", "--epochs", "1", "--steps", "30",
             "--val-every", "0", "--seed", "1"]
    rates = {}
    for label, preload, tensors in (("plain", False, False), ("preload", True, False)):
        p, _ = ctx.torch_run(extra, preload=preload, tensors=tensors, name=f"overhead_{label}")
        check(p.returncode == 0, f"{label}: exit {p.returncode}")
        rates[label] = torch_figures(p.stdout)[1]
    env_async = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    p, _ = ctx.torch_run(extra, env=env_async, name="overhead_async_plain")
    rates["async_plain"] = torch_figures(p.stdout)[1]
    p, _ = ctx.torch_run(extra, preload=True, tensors=True, name="overhead_async_preload")
    rates["async_preload"] = torch_figures(p.stdout)[1]
    check(all(rates.values()), f"missing figures: {rates}")
    r1 = rates["preload"] / rates["plain"]
    r2 = rates["async_preload"] / rates["async_plain"]
    msg = (f"default allocator {rates['preload']:.2f}/{rates['plain']:.2f} steps/s = {r1:.3f}; "
           f"cudaMallocAsync {rates['async_preload']:.2f}/{rates['async_plain']:.2f} = {r2:.3f}")
    check(r1 >= 0.90 and r2 >= 0.90, msg)
    return msg


def check_viewers(ctx):
    """fits_reserved's report in the viewers' formats: PyTorch's snapshot loads in the installed
    PyTorch's _memory_viz with its segments adding up to the report's reserved memory (1%), and
    collapsed stacks and speedscope's JSON are written."""
    files = sorted(glob.glob(os.path.join(ctx.reports_dir, "fits_reserved-*.json")))
    if not files:
        raise Skipped("no report of fits_reserved")
    with open(files[0], encoding="utf-8") as fh:
        rep = json.load(fh)
    snap = os.path.join(ctx.out, "snap.pickle")
    p = ctx.run([ctx.cli, "timeline", "-o", snap, files[0]], name="torch-snapshot")
    check(p.returncode == 0, f"timeline -o snap.pickle exit {p.returncode}: {p.stderr[-300:]}")
    probe = ("import pickle, sys; from torch.cuda import _memory_viz as mv; "
             "s = pickle.load(open(sys.argv[1], 'rb')); mv.trace_plot(s); mv.segment_plot(s); "
             "print(len(s['segments']), sum(x['total_size'] for x in s['segments']), "
             "sum(len(t) for t in s['device_traces']))")
    p = ctx.run([sys.executable, "-c", probe, snap], name="memory_viz")
    check(p.returncode == 0, f"_memory_viz failed: {p.stderr[-300:]}")
    n, total, events = (int(x) for x in p.stdout.split())
    reserved = dev0(rep)["reserved_bytes"]
    check(within(total, reserved, 1), f"segments {total} vs the report's reserved {reserved}")
    for name in ("run.collapsed", "run.speedscope.json"):
        p = ctx.run([ctx.cli, "timeline", "--at=peak", "-o", os.path.join(ctx.out, name), files[0]],
                    name=name)
        check(p.returncode == 0, f"timeline -o {name} exit {p.returncode}: {p.stderr[-300:]}")
    return f"{n} segments, {total} bytes (reserved {reserved}), {events} trace entries"


def check_top_gpu(ctx):
    """vramwatch top names the physical GPU as nvidia-smi does: index and bus id."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise Skipped("nvidia-smi is not installed")
    q = ctx.run([smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"], name="nvidia-smi")
    gpus = [tuple(x.strip() for x in line.split(",")) for line in q.stdout.splitlines() if "," in line]
    check(gpus, f"nvidia-smi listed no GPU: {q.stdout!r}")
    d = tempfile.mkdtemp(prefix="vwgpu-top-", dir=ctx.out)
    holder = subprocess.Popen([sys.executable, "-c",
                               "import torch, time; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); "
                               "print('ready', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(clean_env({}), LD_PRELOAD=ctx.lib, VRAMWATCH_DIR=d))
    try:
        check(holder.stdout.readline().strip() == "ready", "the holder process did not start")
        time.sleep(2.5)  # the live-state file is written every second
        p = ctx.run([ctx.cli, "top", "--once", d], name="top")
    finally:
        holder.kill()
        holder.wait()
    check(p.returncode == 0, f"top exit {p.returncode}: {p.stderr[-300:]}")
    seen = [(i, b) for i, b in gpus if re.search(r"\b%s\b" % re.escape(b), p.stdout, re.I)]
    check(seen, f"no bus id of nvidia-smi's ({gpus}) in top's view:\n{p.stdout[-1500:]}")
    return f"top shows GPU {seen[0][0]} at {seen[0][1]}"


CHECKS = [
    ("oom_default", check_oom_default),
    ("fits_reserved", check_fits_reserved),
    ("expandable_segments", check_expandable),
    ("tensors", check_tensors),
    ("cupy", check_cupy),
    ("jax", check_jax),
    ("emulated_capacity", check_emulated_capacity),
    ("advice", check_advice),
    ("other_processes", check_other_processes),
    ("timeline", check_timeline),
    ("viewers", check_viewers),
    ("top_gpu", check_top_gpu),
    ("overhead", check_overhead),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ctx = Ctx(args)
    only = set(filter(None, args.only.split(",")))
    results = []
    for name, fn in CHECKS:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            detail = fn(ctx) or ""
            line, status = f"PASS {name}" + (f": {detail}" if detail else ""), "PASS"
        except Skipped as e:
            line, status = f"SKIP {name}: {e}", "SKIP"
        except Failed as e:
            line, status = f"FAIL {name}: {e}", "FAIL"
        except Exception as e:  # a bug in the check itself is a failure, never a crash
            line, status = f"FAIL {name}: {type(e).__name__}: {e}", "FAIL"
        print(line + f" ({time.time() - t0:.0f}s)", flush=True)
        results.append((name, status, line))
    passed = sum(s == "PASS" for _, s, _ in results)
    failed = sum(s == "FAIL" for _, s, _ in results)
    skipped = sum(s == "SKIP" for _, s, _ in results)
    with open(os.path.join(args.out, "summary.md"), "w", encoding="utf-8") as f:
        f.write("# vramwatch GPU check\n\n")
        for k, v in ctx.figures.items():
            f.write(f"- {k}: {v}\n")
        f.write("\n" + "\n".join(f"- {line}" for _, _, line in results) + "\n")
        f.write(f"\n{passed} passed, {failed} failed, {skipped} skipped\n")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
