#!/usr/bin/env python3
"""Unchanged PyTorch on the simulated card, under vramwatch; one group per meson test.

Usage: run_torch_tests.py --vramwatch EXE --python PY --repo DIR GROUP

PY is an interpreter with PyTorch's CUDA wheel (tools/torch-venv.sh). Every group checks
vramwatch's figures against PyTorch's own accounting (the second witness):
max_memory_reserved() at the end of a run that fits, the figures in PyTorch's message at a
failure.

  card       torch on `vramwatch sim`: is_available, the card's size, a named card's properties
  fits       examples/train_torch.py completes; the report's reserved peak is PyTorch's
  oom        torch.OutOfMemoryError with PyTorch's message; the report holds that verdict, names
             the model's Python line, and its reserved figure is PyTorch's
  advise     the advised command, rerun without the library, fits
  fit        `vramwatch fit --sim` finds the largest batch that fits, equal to the truth found by
             bisection with the library off
  expandable expandable_segments:True (cuMemCreate/cuMemMap): tracked, PyTorch's verdict kept
  async      --tensors (backend:cudaMallocAsync): tracked, PyTorch's verdict kept
  observe    --limit 16GiB --observe on an 80 GiB card, and advice from two reports
  stubs      the committed long tail (tools/simgpu/stubs) is what tools/simgpu/stubgen.py
             writes from this PyTorch's import lists: nothing was written by hand
  ranks      torchrun --nproc_per_node 2 (DDP over the stand-in NCCL, two simulated devices):
             a report per rank, merged into one job view
  yolo       Ultralytics' `yolo train model=yolov9c.yaml ... batch=64` on the simulated V100,
             offline over a dataset made here (yolo_data.py): the report names Ultralytics'
             line and the rule that chose it, the advice speaks Ultralytics' batch=, and the
             advised command, rerun with the library off, fits
  yolo-api   the same through Python (yolo_api.py: YOLO("yolov9c.yaml").train(...), amp=False):
             the user's file only launches, and the report still names Ultralytics' line and
             says so; the advice's amp=True is on the launcher's own command line
  yolo-fit   `vramwatch fit --sim V100` on `yolo train`: the largest batch that fits, equal to
             the truth with the library off (Ultralytics' own halving counts as out of memory)
  hf         examples/train_hf.py (GPT-2 small, Hugging Face's Trainer) at batch 16 on 24 GiB: a
             real OOM, advice in Trainer's flags, the advised command fits with the library off,
             and the --gradient_checkpointing prediction is within 10% of a rerun with the flag

A group that cannot run here (no interpreter with torch) exits 77 and says why.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yolo_job

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP, Failed, Skipped, check, clean_env  # noqa: E402

GiB = 1 << 30
# train_torch.py --cfg s --img 640 runs out of memory on 16 GiB at this batch (it fits at 64).
OOM_BATCH = 128
HERE = os.path.dirname(os.path.abspath(__file__))


class Ctx:
    def __init__(self, a):
        self.vw = os.path.abspath(a.vramwatch)
        self.py = a.python
        self.repo = os.path.abspath(a.repo)
        self.train = os.path.join(self.repo, "examples", "train_torch.py")
        self.tmp = tempfile.mkdtemp(prefix="vw-torch-")

    def env(self, extra=None):
        env = clean_env(drop=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTHONPATH"),
                        drop_prefixes=("SIMGPU_",))
        env.update(LC_ALL="C", TERM="dumb", NO_COLOR="1", PYTHONUNBUFFERED="1")
        if extra:
            env.update(extra)
        return env

    def run(self, args, extra=None, cwd=None, timeout=600):
        p = subprocess.run(args, env=self.env(extra), cwd=cwd or self.tmp, capture_output=True,
                           text=True, timeout=timeout)
        return p

    def folder(self, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        return d

    def job(self, batch, steps=2, extra=()):
        # cfg s at 640: about 0.2 GiB of weights and 0.2 GiB of activations per image; two steps
        # and one validation step (at twice the batch) keep a run to a few seconds.
        return [self.py, self.train, "--batch", str(batch), "--img", "640", "--cfg", "s",
                "--steps", str(steps), "--val-steps", "1", "--workers", "0"] + list(extra)


def reports(d):
    out = []
    for p in sorted(glob.glob(os.path.join(d, "vramwatch-*.json"))):
        with open(p) as f:
            out.append((p, json.load(f)))
    return out


def one_report(d):
    rs = reports(d)
    check(len(rs) == 1, f"{d}: {len(rs)} reports, expected 1")
    return rs[0]


def device0(rep):
    devs = [d for d in rep.get("devices", []) if d.get("ordinal") == 0]
    check(devs, "report has no device 0")
    return devs[0]


def printed(out, key):
    m = re.search(r"\b%s (\d+)" % key, out)
    check(m, f"train_torch printed no {key}: {out[-400:]}")
    return int(m.group(1))


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size_of(text):
    num, unit = text.split()
    return float(num) * UNITS[unit]


def torch_message(err):
    """PyTorch's out-of-memory message, as it printed it."""
    m = re.search(r"torch\.OutOfMemoryError: ((?:CUDA out of memory|Allocation on device).*)", err)
    check(m, "no torch.OutOfMemoryError in the job's stderr: " + err[-600:])
    return m.group(1)


def message_reserved(msg):
    """allocated + reserved-but-unallocated, from the message: PyTorch's reserved figure."""
    a = re.search(r"(\d+\.\d+ [KMGT]?i?B) is allocated by PyTorch", msg)
    r = re.search(r"(\d+\.\d+ [KMGT]?i?B) is reserved by PyTorch but unallocated", msg)
    check(a and r, "PyTorch's message lacks its allocated/reserved figures: " + msg)
    return size_of(a.group(1)) + size_of(r.group(1))


def close(a, b, tol, what):
    check(abs(a - b) <= tol, f"{what}: {a:.0f} vs {b:.0f} (tolerance {tol:.0f})")


# ---------------------------------------------------------------------------------------------

def g_card(c):
    probe = ("import torch; p = torch.cuda.get_device_properties(0); "
             "print(torch.cuda.is_available(), p.total_memory, p.name, p.major, p.minor, "
             "p.multi_processor_count, torch.cuda.is_bf16_supported(including_emulation=False))")
    p = c.run([c.vw, "sim", "16GiB", "--", c.py, "-c", probe])
    check(p.returncode == 0, f"sim 16GiB: exit {p.returncode}: {p.stderr[-800:]}")
    f = p.stdout.split()
    check(f[0] == "True", "torch.cuda.is_available() is False on the simulated card")
    check(int(f[1]) == 16 * GiB, f"total_memory {f[1]}, expected 16 GiB")
    p = c.run([c.vw, "sim", "V100", "--", c.py, "-c", probe])
    check(p.returncode == 0, f"sim V100: exit {p.returncode}: {p.stderr[-800:]}")
    check("V100" in p.stdout, "the V100's name is not reported: " + p.stdout)
    f = p.stdout.split()
    check(f[-4:-1] == ["7", "0", "80"], "V100: compute capability 7.0 and 80 SMs expected: " + p.stdout)
    check(f[-1] == "False", "V100: bf16 must be unsupported: " + p.stdout)
    # PyTorch's own per-card choice: the cuBLAS workspace it allocates at the first matmul is
    # 4096 KiB x 2 + 16 KiB x 8 below compute capability 9.0 and 4096 KiB x 8 from it on.
    ws = ("import torch; a = torch.zeros(64, 64, device='cuda'); b = torch.cuda.memory_allocated(); "
          "a @ a; print(torch.cuda.memory_allocated() - b)")
    for card, want in (("V100", 8320 << 10), ("H100", 32 << 20)):
        p = c.run([c.vw, "sim", card, "--", c.py, "-c", ws])
        check(p.returncode == 0, f"sim {card}: exit {p.returncode}: {p.stderr[-400:]}")
        check(int(p.stdout.split()[-1]) == want,
              f"{card}: cuBLAS workspace {p.stdout.strip()} bytes, PyTorch's choice for the card is {want}")
    # The library is not in a `sim` run.
    p = c.run([c.vw, "sim", "16GiB", "--", c.py, "-c",
               "import os; print(os.environ.get('LD_PRELOAD', ''))"])
    check("libvramwatch" not in p.stdout, "`vramwatch sim` preloads the library: " + p.stdout)


def g_fits(c):
    d = c.folder("fits")
    p = c.run([c.vw, "run", "--sim", "16GiB", "--dir", d, "--"] + c.job(8))
    check(p.returncode == 0, f"batch 8 on 16 GiB: exit {p.returncode}: {p.stderr[-800:]}")
    check("steps/s" in p.stdout, "train_torch did not finish its steps: " + p.stdout[-400:])
    want = printed(p.stdout, "max_memory_reserved")
    _, rep = one_report(d)
    check(not rep.get("failures"), "a run that fits reports failures")
    dev = device0(rep)
    got = dev["peak_reserved_bytes"]
    check(got == want, f"reserved peak {got} != PyTorch's max_memory_reserved() {want}")


def oom_run(c, name, batch, flags=(), extra=None):
    d = c.folder(name)
    p = c.run([c.vw, "run", "--sim", "16GiB", "--dir", d] + list(flags) + ["--"] + c.job(batch),
              extra=extra)
    check(p.returncode != 0, f"{name}: batch {batch} fitted on 16 GiB; expected an OOM")
    msg = torch_message(p.stderr)
    path, rep = one_report(d)
    return p, msg, path, rep


def check_async_verdict(rep, msg):
    """backend:cudaMallocAsync words its message otherwise: what PyTorch had allocated to tensors
    is the live memory at the failure, since every tensor is its own allocation."""
    check(rep.get("framework"), "the report holds no framework verdict")
    m = re.search(r"Currently allocated\s*: (\d+\.\d+ [KMGT]?i?B)", msg + "\n" + json.dumps(rep["framework"]))
    check(m, "PyTorch's message lacks 'Currently allocated': " + msg)
    unit = UNITS[m.group(1).split()[1]]
    close(final_failure(rep)["live_bytes_at_failure"], size_of(m.group(1)), 0.01 * unit,
          "live at the failure vs PyTorch's 'Currently allocated'")


def check_verdict(rep, msg):
    fw = rep.get("framework")
    check(fw, "the report holds no framework verdict")
    fw = fw[-1] if isinstance(fw, list) else fw
    text = json.dumps(fw)
    check("allocat" in text, "framework verdict lacks PyTorch's figures: " + text[:300])
    want = message_reserved(msg)
    # PyTorch prints two decimals of its unit: half a unit of the last digit each, twice.
    unit = UNITS[re.search(r"is reserved by PyTorch but unallocated", msg) and
                 re.search(r"(\d+\.\d+) ([KMGT]?i?B) is allocated", msg).group(2)]
    tol = 0.01 * unit
    dev = device0(rep)
    close(dev["reserved_bytes"], want, tol, "report's reserved vs PyTorch's (message)")


def final_failure(rep):
    """The failure that stood: the last one a retry did not rescue."""
    fails = [f for f in rep.get("failures", []) if f.get("retried") != "succeeded"]
    check(fails, "no failure that stood in the report")
    return fails[-1]


def failing_site_frames(rep):
    f = final_failure(rep)
    sites = {cs["id"]: cs for cs in rep.get("callsites", [])}
    check(f.get("callsite") in sites, f"failure's call site {f.get('callsite')} is not in the report")
    return json.dumps(sites[f["callsite"]]["frames"])


def g_oom(c):
    p, msg, path, rep = oom_run(c, "oom", OOM_BATCH)
    check(rep.get("failures"), "no failure in the report")
    check_verdict(rep, msg)
    site = failing_site_frames(rep)
    check("train_torch.py" in site, "the failing call site names no line of train_torch.py: " + site[:600])
    r = c.run([c.vw, "report", path])
    check(r.returncode == 1, f"report on an OOM exits {r.returncode}")
    check(re.search(r"train_torch\.py:\d+", r.stdout), "post-mortem names no model line")


def advised_command(c, paths):
    a = c.run([c.vw, "advise", "--json"] + paths)
    check(a.returncode in (0, 1), f"advise exit {a.returncode}: {a.stderr}")
    adv = json.loads(a.stdout)
    recs = adv.get("recommendations") or []
    for r in recs:
        cmd = r.get("command")
        if cmd and r.get("fits") is not False:
            return r, cmd
    raise Failed("advise gave no command: " + a.stdout[:600])


def g_advise(c):
    _, _, path, _ = oom_run(c, "advise", OOM_BATCH)
    text = c.run([c.vw, "advise", path]).stdout
    # The measuring commands it names run on the card the report came from.
    check("vramwatch fit --sim 16GiB" in text, "the advised fit command is not on the simulated card")
    rec, cmd = advised_command(c, [path])
    argv = cmd if isinstance(cmd, list) else cmd.split()
    # The advised command names the script as it ran; rerun it on the same card, library off.
    r = c.run([c.vw, "sim", "16GiB", "--"] + argv)
    check(r.returncode == 0, f"advised command {argv} does not fit: exit {r.returncode}: {r.stderr[-400:]}")


def fits_bare(c, batch):
    r = c.run([c.vw, "sim", "16GiB", "--"] + c.job(batch))
    return r.returncode == 0


def g_fit(c):
    f = c.run([c.vw, "fit", "--sim", "16GiB", "--headroom", "0", "--json", "--"] + c.job(OOM_BATCH))
    check(f.returncode == 0, f"fit exit {f.returncode}: {f.stderr[-600:]}")
    res = json.loads(f.stdout)
    best = res.get("best_value")
    check(isinstance(best, int), "fit gave no value: " + f.stdout[:400])
    # The truth, with the library off: the largest batch that fits is the one that fits while
    # the next does not (memory grows with the batch, as bisection assumes too).
    check(fits_bare(c, best), f"fit's {best} does not fit with the library off")
    check(not fits_bare(c, best + 1), f"{best + 1} fits with the library off: fit's {best} is not the largest")


def g_expandable(c):
    extra = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    p, msg, path, rep = oom_run(c, "expandable", OOM_BATCH, extra=extra)
    dev = device0(rep)
    check(dev["va_reserved_bytes"] > 0, "no address space reserved: cuMemAddressReserve not seen")
    check_verdict(rep, msg)


def g_async(c):
    p, msg, path, rep = oom_run(c, "async", OOM_BATCH, flags=["--tensors"])
    check(final_failure(rep)["api"] == "cudaMallocAsync", "the failure was not a cudaMallocAsync")
    check_async_verdict(rep, msg)
    check("train_torch.py" in failing_site_frames(rep), "the failing call site names no model line")


# Ultralytics' YOLOv9-c at 640 runs out of memory on the simulated V100 (16 GiB) at this batch.
YOLO_BATCH = 64
YOLO_CARD = "V100"


def yolo_env(c):
    return yolo_job.offline_env(c.tmp)


def yolo_data(c):
    d = os.path.join(c.tmp, "yolo-data")
    if not os.path.exists(os.path.join(d, "data.yaml")):
        # one full batch of training pictures at YOLO_BATCH, and a validation set
        r = c.run([c.py, os.path.join(HERE, "yolo_data.py"), d, "--train", str(YOLO_BATCH),
                   "--val", "16"])
        check(r.returncode == 0, "yolo_data.py failed: " + r.stderr[-400:])
    return os.path.join(d, "data.yaml")


def yolo_args(c, name, batch, extra=()):
    return yolo_job.train_args(yolo_data(c), batch, os.path.join(c.tmp, "runs"), name, extra=extra)


def yolo_cmd(c, batch, name):
    yolo = os.path.join(os.path.dirname(c.py), "yolo")
    check(os.path.exists(yolo), f"no yolo command beside {c.py} (tools/torch-venv.sh installs Ultralytics)")
    return [yolo, "train"] + yolo_args(c, name, batch)


def needs_ultralytics(c):
    probe = subprocess.run([c.py, "-c", "import importlib.util as u; "
                            "raise SystemExit(u.find_spec('ultralytics') is None)"])
    if probe.returncode != 0:
        print(f"torch: {c.py} has no ultralytics (tools/torch-venv.sh installs it)", file=sys.stderr)
        raise Skipped()


def ran_out(r):
    return not yolo_job.completed(r.returncode, r.stdout + r.stderr)


def yolo_fits_bare(c, argv):
    r = c.run([c.vw, "sim", YOLO_CARD, "--"] + argv, extra=yolo_env(c))
    return not ran_out(r), r


def check_ultralytics_site(c, out, launcher=None):
    # the headline's block (the phase, then the rule, which is prose wrapped to the terminal)
    # as one line of words
    block = out.split("\nOut of memory at ", 1)[-1].split("\n\n", 1)[0]
    m = re.match(r"(\S+):(\d+) in (\S+)(?: in phase \"[^\"]*\": [^)]*\))? named by (.*)",
                 " ".join(block.split()))
    check("\nOut of memory at " in out and m, "the post-mortem names no line with its rule: " + out[:1200])
    check(m.group(1).startswith("ultralytics/"), "the failing line is not Ultralytics': " + m.group(0))
    rule = m.group(4)
    check(rule.startswith("the innermost line outside PyTorch, in ultralytics"), "rule: " + rule)
    if launcher:
        check(re.search(r"your \S*%s:\d+ in \S+ only calls into it" % re.escape(launcher), rule),
              f"the rule does not name the launcher {launcher}: " + rule)
    else:
        check("no line of your own code" in rule, "rule: " + rule)


def g_yolo(c):
    needs_ultralytics(c)
    d = c.folder("yolo")
    r = c.run([c.vw, "run", "--sim", YOLO_CARD, "--dir", d, "--"] + yolo_cmd(c, YOLO_BATCH, "oom"),
              extra=yolo_env(c))
    check(ran_out(r), "yolov9c at batch 64 did not run out of memory on the V100")
    path, rep = one_report(d)
    check(any(f.get("oom") and f.get("retried") != "succeeded" for f in rep.get("failures", [])),
          "the report holds no out-of-memory that stood")
    check_ultralytics_site(c, r.stdout)
    text = c.run([c.vw, "advise", path]).stdout
    check("Ultralytics halved the batch itself" in text,
          "the advice does not say that Ultralytics went on at a smaller batch: " + text[-1500:])
    rec, cmd = advised_command(c, [path])
    argv = cmd if isinstance(cmd, list) else cmd.split()
    batch = [a for a in argv if a.startswith("batch=")]
    check(len(batch) == 1 and batch[0] != f"batch={YOLO_BATCH}",
          f"the advised command sets no other batch= in Ultralytics' syntax: {argv}")
    check(not any(a.startswith("--") for a in argv[argv.index("train") + 1:]),
          f"the advised command has an option Ultralytics does not spell so: {argv}")
    ok, rr = yolo_fits_bare(c, argv)
    check(ok, f"the advised command {batch[0]} runs out of memory with the library off: "
          + (rr.stdout + rr.stderr)[-600:])


def g_yolo_api(c):
    needs_ultralytics(c)
    d = c.folder("yolo-api")
    launcher = os.path.join(HERE, "yolo_api.py")
    # in fp32 (amp=False), so that the advice also speaks of Ultralytics' amp=
    argv = [c.py, launcher] + yolo_args(c, "api", YOLO_BATCH, extra=["amp=False"])
    r = c.run([c.vw, "run", "--sim", YOLO_CARD, "--dir", d, "--"] + argv, extra=yolo_env(c))
    check(ran_out(r), "yolov9c at batch 64 through YOLO().train() did not run out of memory")
    check_ultralytics_site(c, r.stdout, launcher="yolo_api.py")
    path, _ = one_report(d)
    a = c.run([c.vw, "advise", "--json", path])
    recs = {x["kind"]: x for x in json.loads(a.stdout).get("recommendations") or []}
    amp = recs.get("amp", {}).get("command") or []
    check("amp=True" in amp and "amp=False" not in amp and amp[:2] == argv[:2],
          f"no amp=True advice on the launcher's own command line: {recs.get('amp')}")


def g_yolo_fit(c):
    needs_ultralytics(c)
    f = c.run([c.vw, "fit", "--sim", YOLO_CARD, "--headroom", "0", "--json", "--"]
              + yolo_cmd(c, YOLO_BATCH, "fit"), extra=yolo_env(c), timeout=1500)
    check(f.returncode == 0, f"fit exit {f.returncode}: {f.stderr[-600:]}")
    best = json.loads(f.stdout).get("best_value")
    check(isinstance(best, int), "fit gave no value: " + f.stdout[:400])
    ok, r = yolo_fits_bare(c, yolo_cmd(c, best, "truth"))
    check(ok, f"fit's batch={best} runs out of memory with the library off: " + (r.stdout + r.stderr)[-400:])
    ok, _ = yolo_fits_bare(c, yolo_cmd(c, best + 1, "truth"))
    check(not ok, f"batch={best + 1} fits with the library off: fit's {best} is not the largest")


def g_observe(c):
    d = c.folder("observe")
    r = c.run([c.vw, "run", "--sim", "80GiB", "--limit", "16GiB", "--observe", "--dir", d, "--"]
              + c.job(OOM_BATCH))
    check(r.returncode == 0, f"observe run on 80 GiB failed: exit {r.returncode}: {r.stderr[-400:]}")
    path, rep = one_report(d)
    _, cmd = advised_command(c, [path])
    argv = cmd if isinstance(cmd, list) else cmd.split()
    r = c.run([c.vw, "sim", "16GiB", "--"] + argv)
    check(r.returncode == 0, f"observe-mode advice {argv} does not fit 16 GiB: {r.stderr[-400:]}")
    # Two reports of one job: a run that fits and one that does not.
    d2 = c.folder("two")
    c.run([c.vw, "run", "--sim", "16GiB", "--dir", d2, "--"] + c.job(8))
    c.run([c.vw, "run", "--sim", "16GiB", "--dir", d2, "--"] + c.job(OOM_BATCH))
    paths = [p for p, _ in reports(d2)]
    check(len(paths) == 2, f"{len(paths)} reports for two runs")
    _, cmd = advised_command(c, paths)
    argv = cmd if isinstance(cmd, list) else cmd.split()
    r = c.run([c.vw, "sim", "16GiB", "--"] + argv)
    check(r.returncode == 0, f"two-report advice {argv} does not fit: {r.stderr[-400:]}")


def g_ranks(c):
    d = c.folder("ranks")
    torchrun = os.path.join(os.path.dirname(c.py), "torchrun")
    check(os.path.exists(torchrun), "no torchrun beside " + c.py)
    job = os.path.join(HERE, "ddp_job.py")
    r = c.run([c.vw, "run", "--sim", "16GiB", "--dir", d, "--", torchrun, "--standalone",
               "--nproc_per_node", "2", job, "--batch", "4"],
              extra={"SIMGPU_DEVICES": "2"}, timeout=900)
    check(r.returncode == 0, f"torchrun: exit {r.returncode}: {r.stderr[-1200:]}")
    reps = [(p, rep) for p, rep in reports(d) if any(dv.get("peak_live_bytes", 0) for dv in rep.get("devices", []))]
    check(len(reps) == 2, f"{len(reps)} reports with device memory, expected one per rank")
    ords = sorted(dv["ordinal"] for _, rep in reps for dv in rep["devices"] if dv.get("peak_live_bytes"))
    check(ords == [0, 1], f"ranks on devices {ords}, expected 0 and 1")
    for _, rep in reps:
        m = re.findall(r"max_memory_reserved (\d+)", r.stdout)
        check(m, "ddp_job printed no max_memory_reserved")
    job_file = os.path.join(d, "job.json")
    m = c.run([c.vw, "merge"] + [p for p, _ in reps] + ["-o", job_file])
    check(m.returncode == 0, f"merge: {m.stderr}")
    v = c.run([c.vw, "report", job_file])
    check(v.returncode == 0, f"job view: exit {v.returncode}: {v.stderr}")
    check("rank" in v.stdout.lower(), "the job view names no rank")


def g_stubs(c):
    site = c.run([c.py, "-c", "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"])
    check(site.returncode == 0, "cannot find torch's site-packages: " + site.stderr)
    out = c.folder("stubs")
    gen = os.path.join(c.repo, "tools", "simgpu", "stubgen.py")
    r = subprocess.run([sys.executable, gen, site.stdout.strip(), "--out", out], capture_output=True,
                       text=True, timeout=600)
    check(r.returncode == 0, f"stubgen: exit {r.returncode}: {r.stderr[-400:]}")
    committed = os.path.join(c.repo, "tools", "simgpu", "stubs")
    have, want = sorted(os.listdir(committed)), sorted(os.listdir(out))
    check(have == want, f"stub files differ: committed {have}, generated {want}")
    for name in want:
        with open(os.path.join(committed, name)) as a, open(os.path.join(out, name)) as b:
            check(a.read() == b.read(), f"tools/simgpu/stubs/{name} is not what stubgen.py writes "
                  "from this PyTorch: rerun it (docs/simgpu.md)")


# examples/train_hf.py (GPT-2 small, sequence 1024, fp32 AdamW) runs out of memory on 24 GiB at
# this batch (about 1.7 GiB per sample); --gradient_checkpointing at the same batch fits.
HF_BATCH = 16


def hf_job(c, batch, extra=()):
    # Trainer's own flags; two steps, nothing saved, no logger: a run takes seconds.
    return [c.py, os.path.join(c.repo, "examples", "train_hf.py"), "--output_dir", c.folder("hf-out"),
            "--per_device_train_batch_size", str(batch), "--max_steps", "2", "--report_to", "none",
            "--save_strategy", "no", "--dataloader_num_workers", "0"] + list(extra)


def g_hf(c):
    """Hugging Face's Trainer, offline: a real OOM, advice in Trainer's flags, the advised
    command fits with the library off, and the checkpointing prediction holds (10%)."""
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": c.folder("hf-home")}
    d = c.folder("hf")
    p = c.run([c.vw, "run", "--sim", "24GiB", "--dir", d, "--"] + hf_job(c, HF_BATCH), extra=offline)
    check(p.returncode != 0, f"batch {HF_BATCH} fitted on 24 GiB; expected an OOM")
    torch_message(p.stderr)
    path, rep = one_report(d)
    check(final_failure(rep).get("oom"), "the report's failure is not an out-of-memory")
    a = c.run([c.vw, "advise", "--json", path])
    check(a.returncode == 1, f"advise on an OOM exits {a.returncode}: {a.stderr}")
    recs = {r["kind"]: r for r in json.loads(a.stdout).get("recommendations") or []}
    # The size-only card is the simulator's default device, compute capability 9.0: bfloat16.
    want = {"batch": "--per_device_train_batch_size", "accumulation": "--gradient_accumulation_steps",
            "amp": "--bf16", "checkpointing": "--gradient_checkpointing"}
    for kind, flag in want.items():
        check(kind in recs, f"no {kind} advice: {sorted(recs)}")
        check(recs[kind].get("flag") == flag and flag in (recs[kind].get("command") or []),
              f"{kind} advice is not in Trainer's {flag}: {recs[kind]}")
    _, cmd = advised_command(c, [path])
    r = c.run([c.vw, "sim", "24GiB", "--"] + cmd, extra=offline)
    check(r.returncode == 0 and "OutOfMemoryError" not in r.stderr,
          f"advised command {cmd} does not fit: exit {r.returncode}: {r.stderr[-400:]}")
    # The checkpointing prediction against a rerun with the flag, measured as advise counts a
    # need: the reserved peak plus the untracked memory (the context).
    ck = recs["checkpointing"]
    d2 = c.folder("hf-ckpt")
    r = c.run([c.vw, "run", "--sim", "24GiB", "--dir", d2, "--"] + ck["command"], extra=offline)
    check(r.returncode == 0, f"--gradient_checkpointing at batch {HF_BATCH}: exit {r.returncode}: "
          + r.stderr[-400:])
    dev = device0(one_report(d2)[1])
    need = dev["peak_reserved_bytes"] + dev.get("untracked_bytes", 0)
    pred = ck["predicted_peak_bytes"]
    check(abs(pred - need) <= 0.10 * need,
          f"checkpointing predicted {pred / GiB:.2f} GiB, a rerun needs {need / GiB:.2f} GiB "
          f"({(pred - need) / need:+.0%}, more than 10% off)")


GROUPS = {"hf": g_hf, "card": g_card, "fits": g_fits, "oom": g_oom, "advise": g_advise, "fit": g_fit,
          "expandable": g_expandable, "async": g_async, "observe": g_observe, "ranks": g_ranks, "stubs": g_stubs,
          "yolo": g_yolo, "yolo-api": g_yolo_api, "yolo-fit": g_yolo_fit}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--repo", required=True)
    ap.add_argument("group", choices=sorted(GROUPS))
    a = ap.parse_args()
    if not a.python:
        print("torch: no interpreter with PyTorch (tools/torch-venv.sh makes one)", file=sys.stderr)
        return SKIP
    probe = subprocess.run([a.python, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"torch: {a.python} cannot import torch: {probe.stderr.strip()[-200:]}", file=sys.stderr)
        return SKIP
    c = Ctx(a)
    try:
        GROUPS[a.group](c)
    except Skipped:
        shutil.rmtree(c.tmp, ignore_errors=True)
        return SKIP
    except Failed as e:
        print(f"FAIL torch/{a.group}: {e}", file=sys.stderr)
        print(f"(files kept in {c.tmp})", file=sys.stderr)
        return 1
    shutil.rmtree(c.tmp, ignore_errors=True)
    print(f"ok torch/{a.group}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
