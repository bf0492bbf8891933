#!/usr/bin/env python3
"""Ultralytics' YOLOv9 on the simulated cards, unchanged: the tables of docs/advice-accuracy.md.

    yolo_tables.py --vramwatch EXE --python PY [--cards V100,RTX3090,A100-80GB]
                   [--models yolov9c.yaml,yolov9s.yaml] autobatch
    yolo_tables.py --vramwatch EXE --python PY seed

autobatch  For each card and model: AutoBatch's pick (batch=-1, Ultralytics' default 60%, and
           batch=0.9), `vramwatch fit`'s pick (--headroom 0) and the truth, each with the share
           of the card PyTorch reserved (its own memory_reserved(), which Ultralytics prints as
           GPU_mem) and whether an epoch, validation included, completed. The truth is the
           largest batch that completes with the library off (`vramwatch sim`): fit's pick and
           the batch above it are checked, and the search goes on by bisection where they are
           not the boundary. Nothing is tuned to AutoBatch's figures: they are as it printed them.
seed       The seed's V100 table (YOLOv9, 640, 16 GB) beside Ultralytics' YOLOv9-c on the
           simulated V100 at 16, 32 (with and without AMP) and 64: PyTorch's
           max_memory_reserved() (printed by yolo_peak.py, a launcher) and vramwatch's report
           (the reserved peak, or the need it gives when the run failed), and for the rows with
           checkpointing, which Ultralytics has no setting for, vramwatch's prediction.

A run "completes" when it exits 0 and never ran out of memory: Ultralytics catches an
out-of-memory in its first epoch, halves the batch and trains on, so the exit status alone would
call a batch that failed a fit. Every run is offline over a dataset made here (tests/torch/
yolo_data.py), large enough that no batch tried is capped by it (train) and that validation runs
at twice the batch (val). Exits 77 without an interpreter that has Ultralytics.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP  # noqa: E402
GiB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
DATA_TOOL = os.path.join(HERE, "..", "torch", "yolo_data.py")
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import yolo_job  # noqa: E402  (tests/torch: how Ultralytics runs offline here, and is judged)
PEAK_TOOL = os.path.join(HERE, "yolo_peak.py")
# The most any batch reaches on each card, for the dataset's size (a batch larger than the
# training set would be capped by it, and validation runs at twice the batch).
CARD_DATA = {"V100": 160, "RTX3090": 256, "A100-80GB": 1100}
# Capacities of the named cards (tools/simgpu/cards.def), for the shares.
SEED = [  # the seed's table: Tesla V100 16 GB, 640x640 (../shared/seeds, article 000)
    ("batch 64, AMP", 64, True, False, 15.8),
    ("batch 32, AMP", 32, True, False, 9.6),
    ("batch 32, no AMP", 32, False, False, 12.1),
    ("batch 32, AMP, checkpointing", 32, True, True, 6.8),
    ("batch 16, AMP, checkpointing", 16, True, True, 4.3),
    # not in the seed: the largest power of two that fits here, as the common ground
    ("batch 16, AMP", 16, True, False, None),
    ("batch 16, no AMP", 16, False, False, None),
]


class Bench:
    def __init__(self, a):
        self.vw = os.path.abspath(a.vramwatch)
        self.py = a.python
        self.yolo = os.path.join(os.path.dirname(a.python), "yolo")
        self.tmp = tempfile.mkdtemp(prefix="vw-yolo-bench-")
        self.data = {}
        self.runs = 0

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMWATCH_", "SIMGPU_"))}
        for k in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF", "PYTHONPATH"):
            env.pop(k, None)
        env.update(LC_ALL="C", TERM="dumb", NO_COLOR="1", PYTHONUNBUFFERED="1")
        env.update(yolo_job.offline_env(self.tmp))
        return env

    def run(self, argv, timeout=3600):
        self.runs += 1
        return subprocess.run(argv, env=self.env(), cwd=self.tmp, capture_output=True, text=True,
                              timeout=timeout)

    def dataset(self, n):
        if n not in self.data:
            d = os.path.join(self.tmp, f"data-{n}")
            r = self.run([self.py, DATA_TOOL, d, "--train", str(n), "--val", str(2 * n)])
            if r.returncode != 0:
                raise SystemExit("yolo_data.py failed: " + r.stderr[-400:])
            self.data[n] = os.path.join(d, "data.yaml")
        return self.data[n]

    def args(self, model, data, batch, name, amp=True):
        return yolo_job.train_args(data, batch, os.path.join(self.tmp, "runs"), name, model=model,
                                   extra=[f"amp={amp}"])

    def bare(self, card, argv):
        """Runs argv on the card with the library off: (completed, PyTorch's largest GPU_mem in
        bytes or None, the output)."""
        r = self.run([self.vw, "sim", card, "--"] + argv)
        out = r.stdout + r.stderr
        return yolo_job.completed(r.returncode, out), gpu_mem(out), out


def gpu_mem(out):
    """The largest GPU_mem Ultralytics printed (torch.cuda.memory_reserved(), in GiB)."""
    vals = [float(v) for v in re.findall(r"\s\d+/\d+\s+(\d+(?:\.\d+)?)G\s", out)]
    return int(max(vals) * GiB) if vals else None


def capacity(b, card):
    r = b.run([b.vw, "sim", card, "--", b.py, "-c",
               "import torch; print(torch.cuda.get_device_properties(0).total_memory)"])
    return int(r.stdout.split()[-1])


def share(x, cap):
    return f"{100.0 * x / cap:.0f}%" if x else "?"


def truth_search(b, card, model, data, start):
    """The largest batch that completes with the library off, from a first guess: the guess and
    the batch above it, then bisection between what completed and what did not."""
    memo = {}

    def ok(n):
        if n not in memo:
            memo[n] = b.bare(card, [b.yolo, "train"] + b.args(model, data, n, f"truth-{n}"))
        return memo[n][0]

    lo, hi = (start, None) if ok(start) else (0, start)
    if hi is None:
        step = 1
        while ok(lo + step):
            lo += step
            step *= 2
        hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, (memo[lo][1] if lo in memo else None)


def autobatch_pick(out):
    m = re.search(r"AutoBatch: .*?Using batch-size (\d+) for \S+ ([\d.]+)G/([\d.]+)G \((\d+)%\)", out)
    if m:
        return int(m.group(1)), f"{m.group(4)}% predicted"
    m = re.search(r"AutoBatch: .*?using default batch-size (\d+)", out)
    return (int(m.group(1)), "fell back") if m else (None, "no pick printed")


def table_autobatch(b, cards, models):
    rows = []
    for card in cards:
        cap = capacity(b, card)
        data = b.dataset(CARD_DATA.get(card, 256))
        for model in models:
            row = {"card": card, "model": model, "capacity": cap}
            for label, value in (("autobatch", -1), ("autobatch_0.9", 0.9)):
                done, mem, out = b.bare(card, [b.yolo, "train"]
                                        + b.args(model, data, value, f"ab-{value}"))
                pick, said = autobatch_pick(out)
                row[label] = {"batch": pick, "said": said, "completes": done, "reserved": mem}
            f = b.run([b.vw, "fit", "--sim", card, "--headroom", "0", "--json", "--", b.yolo,
                       "train"] + b.args(model, data, 16, "fit"))
            try:
                fit = json.loads(f.stdout)
            except ValueError:
                fit = {}
            best = fit.get("best_value")
            row["fit"] = {"batch": best, "reserved": fit.get("best_peak_bytes"),
                          "trials": len(fit.get("trials", []))}
            if isinstance(best, int):
                done, mem, _ = b.bare(card, [b.yolo, "train"] + b.args(model, data, best, "fitcheck"))
                row["fit"]["completes"] = done
            t, tmem = truth_search(b, card, model, data, best if isinstance(best, int) else 16)
            row["truth"] = {"batch": t, "reserved": tmem}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"Ultralytics {version(b)} on the simulated cards, imgsz=640, epochs=1 (train and "
          f"validation at twice the batch), measured {datetime.date.today()}\n")
    print("| card | model | AutoBatch (60%) | AutoBatch batch=0.9 | vramwatch fit | truth | fit / truth |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    def cell(x, cap):
        if not x or x.get("batch") is None:
            return "none"
        s = f"{x['batch']} ({share(x.get('reserved'), cap)}"
        if "said" in x:
            s += f"; {x['said']}"
        s += ")"
        if "completes" in x:
            s += " completes" if x["completes"] else " **fails**"
        return s

    for r in rows:
        cap = r["capacity"]
        ratio = (f"{100.0 * r['fit']['batch'] / r['truth']['batch']:.0f}%"
                 if r["fit"].get("batch") and r["truth"].get("batch") else "?")
        print(f"| {r['card']} ({cap / GiB:.1f} GiB) | {r['model'].replace('.yaml', '')} | "
              f"{cell(r['autobatch'], cap)} | {cell(r['autobatch_0.9'], cap)} | "
              f"{cell(r['fit'], cap)} | {cell(r['truth'], cap)} | {ratio} |")
    print(f"\n{b.runs} runs. Shares are PyTorch's reserved memory over the card's capacity: the "
          "largest GPU_mem Ultralytics printed for AutoBatch's runs and the truth, fit's trial "
          "peak (reserved plus the context) for fit.")
    bad = [r for r in rows if not r["fit"].get("completes")
           or (r["truth"]["batch"] and r["fit"]["batch"] < 0.95 * r["truth"]["batch"])]
    return 1 if bad else 0


def version(b):
    r = b.run([b.py, "-c", "from importlib import metadata; print(metadata.version('ultralytics'))"])
    return r.stdout.strip()


def table_seed(b):
    card = "V100"
    cap = capacity(b, card)
    data = b.dataset(CARD_DATA[card])
    print(f"The seed's table (YOLOv9 on a 16 GB Tesla V100, 640x640) beside Ultralytics {version(b)}'s "
          f"YOLOv9-c on the simulated V100 ({cap / GiB:.2f} GiB), measured {datetime.date.today()}\n")
    print("| configuration | seed (GB) | PyTorch max_memory_reserved() | vramwatch | note |")
    print("| --- | --- | --- | --- | --- |")
    reports32 = None
    for label, batch, amp, ckpt, seed_gb in SEED:
        if ckpt:
            pred = predict_checkpointing(b, reports32, batch)
            print(f"| {label} | {seed_gb} | not measurable | {pred} | Ultralytics has no setting "
                  "for checkpointing: vramwatch's prediction from the batch-32 report |")
            continue
        d = os.path.join(b.tmp, f"seed-{batch}-{amp}")
        os.makedirs(d, exist_ok=True)
        argv = [b.py, PEAK_TOOL] + b.args("yolov9c.yaml", data, batch, f"seed-{batch}-{amp}", amp)
        r = b.run([b.vw, "run", "--sim", card, "--dir", d, "--"] + argv)
        out = r.stdout + r.stderr
        m = re.search(r"max_memory_reserved (\d+)", out)
        torch_peak = int(m.group(1)) if m else None
        oom = "out of memory" in out.lower()
        reps = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json"))
        vw = vw_figure(b, reps, oom)
        if batch == 32 and amp:
            reports32 = reps
        note = ("out of memory: Ultralytics halved the batch and trained on, so PyTorch's peak "
                "is the failed attempt's" if oom else "one epoch and validation completed")
        print(f"| {label} | {seed_gb or 'not in the seed'} | {gb(torch_peak)} | {vw} | {note} |")
    print("\nGB here are the seed's unit (10^9 bytes) for its column and GiB for ours, as each "
          "tool prints them.")
    return 0


def gb(x):
    return f"{x / GiB:.2f} GiB" if x else "?"


def vw_figure(b, reps, oom):
    if not reps:
        return "no report"
    with open(reps[0]) as f:
        rep = json.load(f)
    dev = [d for d in rep["devices"] if d.get("ordinal") == 0][0]
    peak = dev["peak_reserved_bytes"]
    if not oom:
        return f"{gb(peak)} reserved peak"
    a = b.run([b.vw, "advise", "--json"] + reps)
    try:
        need = json.loads(a.stdout)["observed"]["need_lower_bound_bytes"]
        return f"needs at least {gb(need)}"
    except (ValueError, KeyError, TypeError):
        return f"{gb(peak)} reserved peak (out of memory)"


def predict_checkpointing(b, reports, batch):
    if not reports:
        return "no report"
    a = b.run([b.vw, "advise", "--json"] + reports)
    try:
        adv = json.loads(a.stdout)
    except ValueError:
        return "advise failed"
    for rec in adv.get("recommendations", []):
        if rec.get("kind") == "checkpointing" and rec.get("predicted_peak_bytes"):
            # the prediction is at the report's batch (32); at 16 it is not made
            return f"{gb(rec['predicted_peak_bytes'])} predicted at batch 32" if batch == 32 else \
                "not predicted at 16 (the advice predicts at the report's batch)"
    return "no checkpointing recommendation"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--cards", default="V100,RTX3090,A100-80GB")
    ap.add_argument("--models", default="yolov9c.yaml,yolov9s.yaml")
    ap.add_argument("table", choices=["autobatch", "seed"])
    a = ap.parse_args()
    if not a.python or subprocess.run([a.python, "-c", "import ultralytics"],
                                      capture_output=True, env={**os.environ, "YOLO_OFFLINE": "1",
                                      "YOLO_CONFIG_DIR": tempfile.gettempdir()}).returncode != 0:
        print("yolo_tables: no interpreter with Ultralytics (tools/torch-venv.sh makes one)",
              file=sys.stderr)
        return SKIP
    b = Bench(a)
    try:
        if a.table == "autobatch":
            return table_autobatch(b, a.cards.split(","), a.models.split(","))
        return table_seed(b)
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
