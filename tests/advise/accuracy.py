#!/usr/bin/env python3
"""Accuracy of `vramwatch advise` on the simulated GPU, over a matrix of workloads whose truth
is known.

Each workload is examples/train_sim.py with flags that set its truth (fixed memory, memory per
image, image size, a validation spike at twice the batch, fragmentation). The truth is measured,
not computed: the largest batch that runs to its end under the enforced limit of the card less
the headroom (B_head) and of the whole card (B_card), each found by bisection. Then, per
workload, the scenarios of docs/advice-accuracy.md:

  observe   one observe-mode run at a batch that does not fit: the advised batch runs to its end
            on the card, and reaches 85% of B_head
  late-oom  one real OOM report written after at least one full training step: the same
  two       two reports of the job (runs that fit, failures, other image sizes): the same, and
            the predicted peak is within 10% of the advised command's measured need (the
            smallest card it runs to its end on, found by bisection)
  fitted    one run that fits: the advised batch is the largest that fits with the headroom
            (at least 85% of B_head, and it runs on the card)
  first-oom one OOM in the first step: basis "bound", no claim of a fit, the next run and the
            fit command proposed; `vramwatch fit` then finds B_head in at most
            ceil(log2(batch)) + 2 trials

The figures are printed as a Markdown table (docs/advice-accuracy.md holds the last one).

    accuracy.py --vramwatch BUILD/tools/vramwatch/vramwatch --sim BUILD/tools/simgpu
                --train-sim examples/train_sim.py [--only NAME]
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
CARD = 16 * GiB
HEADROOM = 0.10
MIN_SHARE = 0.85
PEAK_TOLERANCE = 0.10

# name: (train_sim flags, environment, scenarios as (kind, [batch or (batch, img)...]))
WORKLOADS = {
    "yolov9-s": ([], {}, [
        ("observe", [64]), ("two", [16, 32]), ("two", [32, 64]), ("fitted", [16]), ("first-oom", [64])]),
    "large-static": (["--static-gib", "7", "--sample-mib", "150"], {}, [
        ("observe", [96]), ("two", [16, 40]), ("fitted", [24]), ("first-oom", [64])]),
    "image-scaling": (["--sample-mib", "300"], {}, [
        ("observe", [(48, 640)]), ("two", [(16, 512), (16, 640)]), ("fitted", [(8, 800)])]),
    "validation-spike": (["--val-mem", "1.6"], {}, [
        ("observe", [64]), ("late-oom", [44]), ("two", [16, 44]), ("two", [40, 48]), ("fitted", [16]),
        ("first-oom", [64])]),
    "fragmentation": (["--keep-cache"], {}, [
        ("observe", [64]), ("late-oom", [52]), ("two", [16, 32]), ("fitted", [16])]),
}

failures = []
rows = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


class Runner:
    def __init__(self, o, tmp):
        self.o = o
        self.tmp = tmp
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = o.sim + (":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.env["SIMGPU_MEMORY"] = "64GiB"
        self.cache = {}

    def job(self, flags, batch, img=640):
        return [self.o.python, self.o.train_sim, "--batch", str(batch), "--img", str(img)] + flags

    def run(self, cmd, limit, env_extra, observe=False):
        """vramwatch run under the limit; (exit status, report path or None)."""
        d = tempfile.mkdtemp(dir=self.tmp)
        env = dict(self.env, **env_extra)
        p = subprocess.run([self.o.vramwatch, "run", "--dir", d, "--limit", str(limit)] + (["--observe"] if observe else [])
                           + ["--"] + cmd, env=env, capture_output=True, text=True, timeout=300)
        reports = glob.glob(os.path.join(d, "*.json"))
        return p.returncode, reports[0] if len(reports) == 1 else None

    def completes(self, cmd, limit, env_extra):
        key = (tuple(cmd), limit, tuple(sorted(env_extra.items())))
        if key not in self.cache:
            self.cache[key] = self.run(cmd, limit, env_extra)[0] == 0
        return self.cache[key]

    def largest_batch(self, flags, env_extra, limit, img=640):
        """Bisection over the batch: the largest that runs to its end under the limit."""
        lo, hi = 0, 1
        while self.completes(self.job(flags, hi, img), limit, env_extra):
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.completes(self.job(flags, mid, img), limit, env_extra):
                lo = mid
            else:
                hi = mid
        return lo

    def need(self, cmd, env_extra, guess):
        """The smallest card (to 0.5%) the command runs to its end on."""
        lo, hi = int(guess * 0.5), int(guess * 2)
        if not self.completes(cmd, hi, env_extra):
            return None
        while hi - lo > guess * 0.005:
            mid = (lo + hi) // 2
            if self.completes(cmd, mid, env_extra):
                hi = mid
            else:
                lo = mid
        return hi

    def advise(self, reports):
        p = subprocess.run([self.o.vramwatch, "advise", "--json"] + reports, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            return None, p.stderr.strip()
        return json.loads(p.stdout), None


def split(spec):
    return spec if isinstance(spec, tuple) else (spec, 640)


def as_job(r, cmd):
    return [r.o.python if c == "python3" else c for c in cmd]


def scenario(r, name, flags, env_extra, kind, specs, truth):
    b_head, b_card = truth
    label = f"{name} {kind} {specs}"
    reports = []
    for spec in specs:
        batch, img = split(spec)
        observe = kind == "observe"
        rc, rep = r.run(r.job(flags, batch, img), CARD, env_extra, observe=observe)
        if not check(rep is not None, f"{label}: batch {batch} left one report (exit {rc})"):
            return
        if kind in ("late-oom", "first-oom"):
            check(rc != 0, f"{label}: batch {batch} ran out of memory on the card")
        if kind == "fitted":
            check(rc == 0, f"{label}: batch {batch} fits the card")
        reports.append(rep)
    advice, err = r.advise(reports)
    if not check(advice is not None, f"{label}: advise answered ({err})"):
        return
    recs = advice["recommendations"]
    basis = advice["model"]["basis"]
    batch_recs = [x for x in recs if x["kind"] == "batch"]
    # the first recommendation is the run to do next: the batch, or the allocator setting with that
    # batch when the report shows fragmentation that a full card would suffer
    if not check(bool(batch_recs) and recs[0]["kind"] in ("batch", "allocator") and recs[0]["command"],
                 f"{label}: the first recommendation is a command with a batch ({[x['kind'] for x in recs]})"):
        return
    rec = recs[0]
    cmd = as_job(r, rec["command"])
    advised = batch_recs[0]["value"]
    if rec["kind"] == "allocator":
        check(cmd[:2] == ["env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"] and str(advised) in cmd,
              f"{label}: the allocator command sets expandable segments and batch {advised}")
    row = {"workload": name, "scenario": kind, "reports": ", ".join(str(s) for s in specs), "basis": basis,
           "first": rec["kind"],
           "advised": advised, "b_head": b_head, "b_card": b_card, "pred": rec["predicted_peak_bytes"],
           "need": None, "fits": rec["fits"], "trials": None}
    rows.append(row)
    if kind == "first-oom":
        check(basis == "bound", f"{label}: basis is bound ({basis})")
        check(rec["fits"] is not True, f"{label}: no claim of a fit ({rec['fits']})")
        check("vramwatch fit" in rec["note"], f"{label}: the note proposes vramwatch fit")
        start = specs[0]
        p = subprocess.run([r.o.vramwatch, "fit", "--json", "--limit", "16GiB", "--settle", "5", "--"] + r.job(flags, *split(start)),
                           env=dict(r.env, **env_extra), capture_output=True, text=True, timeout=900)
        if check(p.returncode == 0, f"{label}: fit exit {p.returncode}"):
            fit = json.loads(p.stdout)
            row["trials"] = len(fit["trials"])
            bound = math.ceil(math.log2(split(start)[0])) + 2
            check(fit["best_value"] == b_head, f"{label}: fit found {fit['best_value']}, the largest within the headroom is {b_head}")
            check(len(fit["trials"]) <= bound, f"{label}: fit took {len(fit['trials'])} trials (at most {bound})")
        return
    runs = r.completes(cmd, CARD, env_extra)
    check(runs, f"{label}: advised batch {advised} runs to its end on the card (largest: {b_card})")
    check(advised >= MIN_SHARE * b_head, f"{label}: advised {advised} >= {MIN_SHARE:.0%} of {b_head}")
    if kind == "fitted":
        if rec["kind"] == "allocator":
            # the largest within the headroom with the setting the advice comes with
            with_setting = dict(env_extra, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
            b_head = r.largest_batch(flags, with_setting, int(CARD * (1 - HEADROOM)))
            b_card = r.largest_batch(flags, with_setting, CARD)
            row["b_head"], row["b_card"] = f"{row['b_head']} ({b_head} with it)", f"{row['b_card']} ({b_card} with it)"
        check(b_head - max(1, b_head // 20) <= advised <= b_card,
              f"{label}: advised {advised} is the largest within the headroom ({b_head}), give or take 5%")
    if rec["predicted_peak_bytes"] is not None and runs:
        need = r.need(cmd, env_extra, rec["predicted_peak_bytes"])
        row["need"] = need
        if kind == "two" and check(need is not None, f"{label}: the advised command's need was measured"):
            err = abs(rec["predicted_peak_bytes"] - need) / need
            check(err <= PEAK_TOLERANCE, f"{label}: predicted {rec['predicted_peak_bytes'] / GiB:.2f} GiB, needs "
                                         f"{need / GiB:.2f} GiB ({err:.1%})")


def gib(v):
    return "" if v is None else f"{v / GiB:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", help="one workload")
    o = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="vw-advise-")
    try:
        r = Runner(o, tmp)
        for name, (flags, env_extra, scenarios) in WORKLOADS.items():
            if o.only and name != o.only:
                continue
            imgs = sorted({split(s)[1] for _, specs in scenarios for s in specs})
            truths = {}
            for img in imgs:
                truths[img] = (r.largest_batch(flags, env_extra, int(CARD * (1 - HEADROOM)), img),
                               r.largest_batch(flags, env_extra, CARD, img))
                print(f"{name} at image {img}: largest batch within the headroom {truths[img][0]}, on the card "
                      f"{truths[img][1]}", flush=True)
            for kind, specs in scenarios:
                # the advice is for the image size of the first report
                scenario(r, name, flags, env_extra, kind, specs, truths[split(specs[0])[1]])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| workload | scenario | reports (batch or batch, image) | basis | first | advised | largest within headroom | "
          "largest on the card | predicted GiB | needs GiB | fit trials |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for x in rows:
        print(f"| {x['workload']} | {x['scenario']} | {x['reports']} | {x['basis']} | {x['first']} | {x['advised']} | {x['b_head']} | "
              f"{x['b_card']} | {gib(x['pred'])} | {gib(x['need'])} | {x['trials'] or ''} |")
    if failures:
        print(f"\n{len(failures)} check(s) failed")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
