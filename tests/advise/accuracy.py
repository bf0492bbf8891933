#!/usr/bin/env python3
"""Accuracy of `vramwatch advise` on the simulated GPU, over a matrix of workloads whose truth
is known.

Each workload is examples/train_sim.py with flags that set its truth (fixed memory, memory per
image, image size, a validation spike at twice the batch, fragmentation). A row of the matrix is
one workload run one way: with or without markers (vramwatch_mark, which real jobs do not call),
with the caching allocator or without a cache (--no-cache: one cudaMalloc per tensor), and with
its batch written in one command-line style (YOLO's --batch, Ultralytics' batch=, Hugging Face's
--per_device_train_batch_size, generic --bs or -b). The truth is measured per job as run, not
computed: the largest batch that runs to its end under the enforced limit of the card less the
headroom (B_head) and of the whole card (B_card), each found by the same bisection, for that
allocator and that style. Then the scenarios of docs/advice-accuracy.md:

  observe   one observe-mode run at a batch that does not fit: the run goes to its end, the
            advised command runs to its end on the card (fits first try), the advised batch is
            at least 85% of B_head, and the predicted peak is within 10% of the advised
            command's measured need (the smallest card it runs to its end on, by bisection)
  late-oom  one real OOM report written after at least one full training step: fits first try
            and at least 85% of B_head
  two       two reports of the job (runs that fit, failures, other image sizes): as observe, and
            the same advised batch with the reports given in the other order
  fitted    one run that fits: at least 85% of B_head, and it runs on the card (with markers,
            also the largest within the headroom give or take 5%)
  first-oom one OOM in the first step: basis "bound", no recommendation claims a fit, the note
            proposes `vramwatch fit`; `vramwatch fit` then finds at least 95% of B_head (with
            markers: B_head itself), a batch that runs on the card, in at most
            ceil(log2(batch)) + 2 trials. Without markers the job's steps take time, so that
            fit's trials are stopped after settling, as a real job's are

Real rows: the same scenarios on unchanged PyTorch jobs on the simulated card (tests/torch), a
workload each: examples/train_torch.py (YOLO-like, PyTorch alone; and with --multi-scale, its
third step at 1.5 x --img the one that fails), Ultralytics' `yolo train
model=yolov9c.yaml` over a dataset made here (tests/torch/yolo_data.py) and Hugging Face's
Trainer (examples/train_hf.py). Their markers are the companion's (model.train()/eval()), and
so are their steps (vramwatch_step after each optimizer step); each
report comes from `vramwatch run --sim` (observe mode: a card twice the size, `--limit` the
card); their truth is found with the library off, `vramwatch sim SIZE`, on a card of the size in
question, and a run completes when it exits 0 and never ran out of memory (Ultralytics catches
one in its first epoch and trains on at half the batch). `--torch-python` names the interpreter
with PyTorch; without it the real rows are not run, and say so.

A check that fails is reported with the row; a row that cannot be run says why and counts as
failed, never as passed. The figures are printed as one Markdown table (docs/advice-accuracy.md
holds the last one) and a summary of the rows that failed.

    accuracy.py --vramwatch BUILD/tools/vramwatch/vramwatch --sim BUILD/tools/simgpu
                --train-sim examples/train_sim.py [--torch-python PY] [--quick]
                [--markers yes|no|both] [--only NAME[,NAME...]] [--jobs N]

--quick is the reduced set the integration suite runs (about a minute on two cores); without it
the whole matrix runs (tests/bench registers it as the benchmark advise-accuracy-matrix).
"""
import argparse
import concurrent.futures
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

GiB = 1 << 30
CARD = 16 * GiB
HEADROOM = 0.10
MIN_SHARE = 0.85        # the advised batch, as a share of the largest within the headroom
FIT_SHARE = 0.95        # what fit finds, as a share of the same
PEAK_TOLERANCE = 0.10   # predicted peak against the advised command's measured need
EXPANDABLE = "expandable_segments:True"

# Without markers, fit's trials run a job whose steps take this long, and settle this soon: the
# peak is reached in the first step and an epoch's training lasts several times the settle time
# (a real epoch lasts minutes, fit's default settle is 20 s), so a trial whose peak settled in
# training would be stopped before it validates, as on a real job, unless fit waits for that
# phase (it does: docs/fit.md). The sleep changes no memory.
FIT_STEP_MS = 600
# Every run of a job without markers takes this long per training step, as a real step does
# (tens of milliseconds and more): the phases are found from call chains that appear after a
# quiet spell, and a job whose steps take no time at all has none. It changes no memory figure.
STEP_MS = 25  # an epoch's quiet spell (3 steps) stays well above a loaded machine's stalls
FIT_SETTLE_S = 1

# What each workload adds to train_sim's command line (docs/advice-accuracy.md says what it tests)
# What each workload holds whatever the batch (weights, optimizer state, EMA: --static-gib, else
# the yolov9-s figure of train_sim's CONFIGS), plus the simulated CUDA context: the truth of the
# model's static part, which the advice shows (checked within STATIC_TOLERANCE).
STATIC_GIB = {"yolov9-s": 3.0, "large-static": 7.0, "image-scaling": 3.0, "validation-spike": 3.0, "fragmentation": 3.0,
              "multi-scale": 3.0, "flush-validation": 3.0, "no-retry-validation": 3.0, "cached-validation": 3.0}
CONTEXT_BYTES = 300 << 20
STATIC_TOLERANCE = 0.10

WORKLOADS = {
    "yolov9-s": [],
    "large-static": ["--static-gib", "7", "--sample-mib", "150"],
    "image-scaling": ["--sample-mib", "300"],
    "validation-spike": ["--val-mem", "1.6"],
    "fragmentation": ["--keep-cache"],
    # the failing part comes after completed steps: a step at a larger image side (up to 1.5 x
    # --img, the job's own --multi-scale), or validation after the allocator flushed its cache
    # (its steps take time, as a real job's do: the completed ones are told from the failing one
    # by the pause between them, with markers too, which mark epochs, not steps)
    "multi-scale": ["--multi-scale", "--step-ms", str(STEP_MS)],
    "flush-validation": ["--val-mem", "1.3"],
    # validation that an allocator without a retry meets with training's cache still held
    "no-retry-validation": ["--val-mem", "2", "--no-retry"],
    # validation whose blocks are larger than training's cache, which it cannot reuse
    "cached-validation": ["--val-mem", "3"],
}


# Unchanged PyTorch jobs (the real rows), each built by real_job() in the style of its own script.
REAL_WORKLOADS = ("torch", "torch-multi-scale", "ultralytics-yolov9c", "hf-gpt2")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "torch"))
import yolo_job  # noqa: E402  (how a real job runs offline here, and when it completed)

sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from vwtest import SKIP, clean_env  # noqa: E402


class Job(list):
    """A command line; real: an unchanged PyTorch job, run on a simulated card of the size in
    question rather than under an emulated limit."""

    def __init__(self, argv, real=False):
        super().__init__(argv)
        self.real = real


def real_job(o, workload, batch, img, data):
    b, i = str(batch), str(img)
    if workload == "torch":
        return [o.torch_python, os.path.join(REPO, "examples", "train_torch.py"), "--batch", b, "--img", i,
                "--cfg", "s", "--steps", "2", "--val-steps", "1", "--workers", "0"]
    if workload == "torch-multi-scale":
        # four steps at 640, 480, 960 and 320: the step at 960 is the one that runs out
        return [o.torch_python, os.path.join(REPO, "examples", "train_torch.py"), "--batch", b, "--img", i,
                "--cfg", "s", "--steps", "4", "--val-steps", "1", "--workers", "0", "--multi-scale"]
    if workload == "ultralytics-yolov9c":
        yolo = os.path.join(os.path.dirname(o.torch_python), "yolo")
        return [yolo, "train"] + yolo_job.train_args(data, b, os.path.join(os.path.dirname(data), "runs"),
                                                     imgsz=i)
    if workload == "hf-gpt2":
        if img != 640:
            raise ValueError("Hugging Face's Trainer has no image-size flag")
        return [o.torch_python, os.path.join(REPO, "examples", "train_hf.py"), "--output_dir",
                os.path.join(os.path.dirname(data), "hf-out"), "--per_device_train_batch_size", b,
                "--max_steps", "2", "--report_to", "none", "--save_strategy", "no"]
    raise ValueError(f"unknown real workload {workload}")


def style_args(style, batch, img):
    """The batch and image size as each kind of training script spells them. Hugging Face's
    Trainer has no image-size flag: a row in that style at another size cannot be run."""
    b, i = str(batch), str(img)
    if style == "yolo":
        return ["--batch", b, "--img", i]
    if style == "ultralytics":
        return [f"batch={b}", f"imgsz={i}", "epochs=2"]
    if style in ("hf", "hf-dashed"):
        if img != 640:
            raise ValueError("Hugging Face's Trainer has no image-size flag")
        if style == "hf":
            return ["--per_device_train_batch_size", b, "--num_train_epochs", "2"]
        return ["--per-device-train-batch-size", b, "--num-train-epochs", "2"]
    if style == "generic":
        return ["--bs", b, "--image-size", i]
    if style == "generic-b":
        return ["-b", b, "--img_size", i]
    raise ValueError(f"unknown style {style}")


# The rows: (workload, markers, allocator, style, scenario, reports as [batch or (batch, img)],
# in the reduced set). The rows with markers are the matrix as it was first measured, unchanged;
# the rows without are jobs as users run them, both allocators, with the styles spread over the
# rows (each (allocator, style) pair has its own truth, so multiplying them all out would only
# repeat the same measurement at a much higher cost). The fragmentation workload is the caching
# allocator's (--keep-cache keeps its cache): without a cache it is yolov9-s again.
M, N = True, False
ROWS = [
    ("yolov9-s", M, "caching", "yolo", "observe", [64], True),
    ("yolov9-s", M, "caching", "yolo", "two", [16, 32], True),
    ("yolov9-s", M, "caching", "yolo", "two", [32, 64], False),
    ("yolov9-s", M, "caching", "yolo", "fitted", [16], True),
    ("yolov9-s", M, "caching", "yolo", "first-oom", [64], True),
    ("large-static", M, "caching", "yolo", "observe", [96], False),
    ("large-static", M, "caching", "yolo", "two", [16, 40], False),
    ("large-static", M, "caching", "yolo", "fitted", [24], False),
    ("large-static", M, "caching", "yolo", "first-oom", [64], False),
    ("image-scaling", M, "caching", "yolo", "observe", [(48, 640)], False),
    ("image-scaling", M, "caching", "yolo", "two", [(16, 512), (16, 640)], True),
    ("image-scaling", M, "caching", "yolo", "fitted", [(8, 800)], False),
    ("validation-spike", M, "caching", "yolo", "observe", [64], False),
    ("validation-spike", M, "caching", "yolo", "late-oom", [44], True),
    ("validation-spike", M, "caching", "yolo", "two", [16, 44], False),
    ("validation-spike", M, "caching", "yolo", "two", [40, 48], False),
    ("validation-spike", M, "caching", "yolo", "fitted", [16], False),
    ("validation-spike", M, "caching", "yolo", "first-oom", [64], False),
    ("fragmentation", M, "caching", "yolo", "observe", [64], False),
    ("fragmentation", M, "caching", "yolo", "late-oom", [52], True),
    ("fragmentation", M, "caching", "yolo", "two", [16, 32], False),
    ("fragmentation", M, "caching", "yolo", "fitted", [16], False),

    ("multi-scale", M, "caching", "yolo", "late-oom", [32], True),
    ("multi-scale", M, "caching", "yolo", "fitted", [16], False),
    ("flush-validation", M, "caching", "yolo", "late-oom", [52], True),
    ("flush-validation", M, "caching", "yolo", "fitted", [44], True),
    ("no-retry-validation", M, "caching", "yolo", "late-oom", [32], False),
    ("cached-validation", M, "caching", "yolo", "fitted", [8], False),

    ("yolov9-s", N, "caching", "yolo", "observe", [64], True),
    ("yolov9-s", N, "caching", "ultralytics", "two", [16, 32], False),
    ("yolov9-s", N, "caching", "hf", "two", [32, 64], True),
    ("yolov9-s", N, "caching", "generic", "fitted", [16], False),
    ("yolov9-s", N, "caching", "yolo", "first-oom", [64], True),
    ("yolov9-s", N, "none", "ultralytics", "observe", [64], True),
    ("yolov9-s", N, "none", "generic", "two", [16, 32], True),
    ("yolov9-s", N, "none", "yolo", "two", [32, 64], False),
    ("yolov9-s", N, "none", "hf", "fitted", [16], True),
    ("yolov9-s", N, "none", "generic-b", "first-oom", [64], False),
    ("large-static", N, "caching", "hf", "observe", [96], False),
    ("large-static", N, "caching", "yolo", "two", [16, 40], False),
    ("large-static", N, "caching", "ultralytics", "fitted", [24], False),
    ("large-static", N, "caching", "generic", "first-oom", [64], False),
    ("large-static", N, "none", "generic", "observe", [96], False),
    ("large-static", N, "none", "hf-dashed", "two", [16, 40], True),
    ("large-static", N, "none", "yolo", "fitted", [24], False),
    ("large-static", N, "none", "ultralytics", "first-oom", [64], False),
    ("image-scaling", N, "caching", "ultralytics", "observe", [(48, 640)], False),
    ("image-scaling", N, "caching", "yolo", "two", [(16, 512), (16, 640)], True),
    ("image-scaling", N, "caching", "generic", "fitted", [(8, 800)], False),
    ("image-scaling", N, "none", "generic", "observe", [(48, 640)], False),
    ("image-scaling", N, "none", "ultralytics", "two", [(16, 512), (16, 640)], False),
    ("image-scaling", N, "none", "yolo", "fitted", [(8, 800)], False),
    ("validation-spike", N, "caching", "generic", "observe", [64], True),
    ("validation-spike", N, "caching", "yolo", "late-oom", [44], True),
    ("validation-spike", N, "caching", "hf", "two", [16, 44], False),
    ("validation-spike", N, "caching", "ultralytics", "two", [40, 48], False),
    ("validation-spike", N, "caching", "yolo", "fitted", [16], False),
    ("validation-spike", N, "caching", "hf", "first-oom", [64], False),
    ("validation-spike", N, "none", "yolo", "observe", [64], False),
    ("validation-spike", N, "none", "ultralytics", "late-oom", [44], True),
    ("validation-spike", N, "none", "generic", "two", [16, 44], False),
    ("validation-spike", N, "none", "hf", "two", [40, 48], False),
    ("validation-spike", N, "none", "generic-b", "fitted", [16], False),
    ("validation-spike", N, "none", "yolo", "first-oom", [64], True),
    ("fragmentation", N, "caching", "ultralytics", "observe", [64], True),
    ("fragmentation", N, "caching", "generic", "late-oom", [52], False),
    ("fragmentation", N, "caching", "yolo", "two", [16, 32], False),
    ("fragmentation", N, "caching", "hf", "fitted", [16], False),
    ("multi-scale", N, "caching", "yolo", "late-oom", [32], True),
    ("multi-scale", N, "caching", "ultralytics", "fitted", [16], False),
    ("flush-validation", N, "caching", "yolo", "late-oom", [52], True),
    ("flush-validation", N, "caching", "generic", "fitted", [44], False),
    ("no-retry-validation", N, "caching", "yolo", "late-oom", [32], False),
    ("cached-validation", N, "caching", "yolo", "fitted", [8], False),

    # Unchanged PyTorch jobs (markers: the companion's; allocator: PyTorch's own)
    ("torch", N, "caching", "yolo", "observe", [128], True),
    ("torch", N, "caching", "yolo", "two", [16, 32], False),
    ("torch", N, "caching", "yolo", "fitted", [32], False),
    ("torch", N, "caching", "yolo", "first-oom", [128], True),
    ("torch-multi-scale", N, "caching", "yolo", "late-oom", [64], False),
    ("ultralytics-yolov9c", N, "caching", "ultralytics", "fitted", [16], False),
    ("ultralytics-yolov9c", N, "caching", "ultralytics", "first-oom", [64], False),
    ("hf-gpt2", N, "caching", "hf", "two", [2, 4], False),
    ("hf-gpt2", N, "caching", "hf", "first-oom", [16], False),
]


def split(spec):
    return spec if isinstance(spec, tuple) else (spec, 640)


class Row:
    """One row of the matrix: what it ran, what the advice said, and each check with a short tag
    for the table."""

    def __init__(self, spec):
        self.workload, self.markers, self.allocator, self.style, self.kind, self.specs, self.quick = spec
        self.lines = []           # the row's log, printed together (rows run in parallel)
        self.failed = []          # short tags of the checks that failed
        self.not_run = None       # why the row could not be run
        self.basis = self.first = self.advised = self.pred = self.need = None
        self.static = None
        self.b_head = self.b_card = None
        self.trials = ""

    @property
    def real(self):
        return self.workload in REAL_WORKLOADS

    @property
    def label(self):
        return (f"{'markers' if self.markers else 'no markers'}, {self.allocator}, {self.workload} {self.kind} "
                f"{self.specs} ({self.style})")

    def log(self, text):
        self.lines.append(text)

    def check(self, cond, what, tag):
        self.log(("ok    " if cond else "FAIL  ") + f"{self.label}: {what}")
        if not cond:
            self.failed.append(tag)
        return cond

    def cannot(self, why):
        self.log(f"FAIL  {self.label}: cannot run: {why}")
        self.not_run = why

    @property
    def result(self):
        if self.not_run:
            return f"not run: {self.not_run}"
        return "ok" if not self.failed else "FAIL: " + "; ".join(self.failed)


class Runner:
    def __init__(self, o, tmp):
        self.o = o
        self.tmp = tmp
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = o.sim + (":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        # a card larger than the emulated one, so that observe mode can go over the limit
        self.env["SIMGPU_MEMORY"] = "64GiB"
        self.cache = {}     # (command, limit, environment): whether it ran to its end
        self.truths = {}    # (command but the batch, image): a future of (B_head, B_card)
        self.truths_lock = threading.Lock()
        # the real jobs' environment: `vramwatch run --sim` and `vramwatch sim` set the card,
        # offline, with the frameworks' own files in the run's folder
        self.real_env = clean_env(drop=("PYTHONPATH",), drop_prefixes=("SIMGPU_",))
        self.real_env.update(yolo_job.offline_env(tmp))
        self.real_env.update(TRANSFORMERS_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf-home"), PYTHONUNBUFFERED="1")
        self.data = None
        self.data_lock = threading.Lock()

    def yolo_data(self):
        with self.data_lock:
            if self.data is None:
                d = os.path.join(self.tmp, "yolo-data")
                subprocess.run([self.o.torch_python, os.path.join(REPO, "tests", "torch", "yolo_data.py"), d,
                                "--train", "128", "--val", "256"], env=self.real_env, check=True,
                               capture_output=True, timeout=300)
                self.data = os.path.join(d, "data.yaml")
            return self.data

    def job(self, row, batch, img=640, extra=()):
        if row.real:
            data = self.yolo_data() if row.workload.startswith("ultralytics") else os.path.join(self.tmp, "x")
            return Job(real_job(self.o, row.workload, batch, img, data), real=True)
        flags = WORKLOADS[row.workload] + ([] if row.markers else ["--no-markers"]) + \
            (["--no-cache"] if row.allocator == "none" else [])
        if row.style == "ultralytics":  # its own spelling of the switch
            flags = ["multi_scale=True" if f == "--multi-scale" else f for f in flags]
        if not row.markers and "--step-ms" not in extra:
            extra = ("--step-ms", str(STEP_MS)) + tuple(extra)
        return [self.o.python, self.o.train_sim] + style_args(row.style, batch, img) + flags + list(extra)

    def run(self, cmd, limit, env_extra, observe=False):
        """vramwatch run under the limit: (exit status, report path or None, the job's output).
        A real job runs on a simulated card of the limit's size, or in observe mode on one twice
        that size with the limit emulated."""
        d = tempfile.mkdtemp(dir=self.tmp)
        if getattr(cmd, "real", False):
            card = ["--sim", str(2 * limit if observe else limit)] + (["--limit", str(limit), "--observe"] if observe else [])
            p = subprocess.run([self.o.vramwatch, "run", "--dir", d] + card + ["--"] + cmd,
                               env=dict(self.real_env, **env_extra), capture_output=True, text=True, timeout=900)
            reports = glob.glob(os.path.join(d, "*.json"))
            return p.returncode, reports[0] if len(reports) == 1 else None, p.stdout + p.stderr
        env = dict(self.env, **env_extra)
        p = subprocess.run([self.o.vramwatch, "run", "--dir", d, "--limit", str(limit)] + (["--observe"] if observe else [])
                           + ["--"] + cmd, env=env, capture_output=True, text=True, timeout=300)
        reports = glob.glob(os.path.join(d, "*.json"))
        return p.returncode, reports[0] if len(reports) == 1 else None, p.stdout + p.stderr

    def completes(self, cmd, limit, env_extra):
        key = (tuple(cmd), limit, tuple(sorted(env_extra.items())))
        if key not in self.cache and getattr(cmd, "real", False):
            # the truth of a real job: the library off, on a card of that size
            p = subprocess.run([self.o.vramwatch, "sim", str(limit), "--"] + cmd, env=dict(self.real_env, **env_extra),
                               capture_output=True, text=True, timeout=900)
            self.cache[key] = yolo_job.completed(p.returncode, p.stdout + p.stderr)
        if key not in self.cache:
            rc, rep, _ = self.run(cmd, limit, env_extra)
            if rep:
                shutil.rmtree(os.path.dirname(rep), ignore_errors=True)
            self.cache[key] = rc == 0
        return self.cache[key]

    def largest_batch(self, row, env_extra, limit, img=640):
        """Bisection over the batch: the largest that runs to its end under the limit. A real
        job starts at 8, its runs take seconds each."""
        lo, hi = 0, 8 if row.real else 1
        while self.completes(self.job(row, hi, img), limit, env_extra):
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.completes(self.job(row, mid, img), limit, env_extra):
                lo = mid
            else:
                hi = mid
        return lo

    def truth(self, row, img, env_extra=None):
        """(B_head, B_card) of this row's job as run: its allocator, its style, its markers.
        Found once per job: rows of the same job that run at the same time (a real job's observe
        and first-oom rows) wait for the one that finds it instead of finding it again, and its
        two bisections run side by side."""
        env_extra = env_extra or {}
        key = (tuple(self.job(row, 0, img)), img, tuple(sorted(env_extra.items())))
        with self.truths_lock:
            found = self.truths.get(key)
            mine = found is None
            if mine:
                found = self.truths[key] = concurrent.futures.Future()
        if mine:
            try:
                with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                    head = pool.submit(self.largest_batch, row, env_extra, int(CARD * (1 - HEADROOM)), img)
                    card = pool.submit(self.largest_batch, row, env_extra, CARD, img)
                    found.set_result((head.result(), card.result()))
            except BaseException as e:  # the waiting rows see the same failure
                found.set_exception(e)
                raise
        return found.result()

    def need(self, cmd, env_extra, guess):
        """The smallest card (to 0.5% of the guess) the command runs to its end on; None when it
        does not run even on twice the guess."""
        lo, hi = int(guess * 0.5), int(guess * 2)
        if not self.completes(cmd, hi, env_extra):
            return None
        # a prediction far too high must not read as a need at half of it
        while lo > GiB // 4 and self.completes(cmd, lo, env_extra):
            hi, lo = lo, lo // 2
        while hi - lo > guess * 0.005:
            mid = (lo + hi) // 2
            if self.completes(cmd, mid, env_extra):
                hi = mid
            else:
                lo = mid
        return hi

    def advise(self, reports):
        p = subprocess.run([self.o.vramwatch, "advise", "--json"] + reports, capture_output=True, text=True, timeout=60)
        if p.returncode not in (0, 1):  # 1: advice for a run that did not fit
            why = p.stderr.strip() or f"exit {p.returncode}"
            for i, rep in enumerate(reports):  # the temporary paths say nothing in a table
                why = why.replace(rep, f"report {i + 1}")
            return None, why
        try:
            return json.loads(p.stdout), None
        except ValueError as e:
            return None, f"not JSON: {e}"


def as_job(r, cmd, real=False):
    return Job([r.o.python if c == "python3" and not real else c for c in cmd], real=real)


def steps_before_oom(output):
    """The training steps train_sim finished before it ran out of memory (None: no OOM line)."""
    m = re.search(r"train_sim: max reserved .* after (\d+) steps", output)
    return int(m.group(1)) if m else None


def batch_value(advice):
    recs = [x for x in advice["recommendations"] if x["kind"] == "batch"]
    return recs[0]["value"] if recs else None


def scenario(r, row):
    kind, specs = row.kind, row.specs
    try:
        r.job(row, *split(specs[0]))
    except ValueError as e:
        row.cannot(str(e))
        return
    # the advice is for the image size of the first report
    row.b_head, row.b_card = r.truth(row, split(specs[0])[1])
    row.log(f"      {row.label}: largest batch within the headroom {row.b_head}, on the card {row.b_card}")
    reports = []
    for spec in specs:
        batch, img = split(spec)
        rc, rep, out = r.run(r.job(row, batch, img), CARD, {}, observe=kind == "observe")
        if rep is None:
            row.cannot(f"batch {batch} left no single report (exit {rc})")
            return
        if kind == "observe":
            row.check(rc == 0, f"the observe-mode run at batch {batch} ran to its end (exit {rc})",
                      f"observe run exit {rc}")
        if row.real and kind in ("late-oom", "first-oom"):
            # the report says where it failed; the setup only needs the job to have failed
            row.check(not yolo_job.completed(rc, out), f"batch {batch} ran out of memory (exit {rc})",
                      "setup: no OOM")
        elif kind == "late-oom":
            steps = steps_before_oom(out)
            row.check(rc != 0 and steps is not None and steps >= 1,
                      f"batch {batch} ran out of memory after a full step (exit {rc}, {steps} steps)",
                      "setup: no late OOM")
        elif kind == "first-oom":
            steps = steps_before_oom(out)
            row.check(rc != 0 and steps == 0, f"batch {batch} ran out of memory in the first step (exit {rc}, {steps} steps)",
                      "setup: no first-step OOM")
        if kind == "fitted":
            row.check(rc == 0, f"batch {batch} fits the card", "setup: does not fit")
        reports.append(rep)
    advice, err = r.advise(reports)
    # advise refusing the reports is the advice failing, not the row: it counts as a failed check
    if not row.check(advice is not None, f"advise answered ({err})", f"advise refused: {err}"):
        return
    recs = advice["recommendations"]
    row.basis = advice["model"]["basis"]
    row.static = advice["model"]["static_bytes"]
    if row.basis in ("timeline", "runs") and row.workload in STATIC_GIB:
        truth = STATIC_GIB[row.workload] * GiB + CONTEXT_BYTES
        err = (row.static - truth) / truth
        row.check(abs(err) <= STATIC_TOLERANCE, f"static part {row.static / GiB:.2f} GiB, truth {truth / GiB:.2f} GiB "
                                                f"({err:+.1%})", f"static {err:+.0%}")
    advised = batch_value(advice)
    # the first recommendation is the run to do next: the batch, or the allocator setting with that
    # batch when the report shows fragmentation that a full card would suffer
    if not row.check(advised is not None and recs[0]["kind"] in ("batch", "allocator") and recs[0]["command"],
                     f"the first recommendation is a command with a batch ({[x['kind'] for x in recs]})",
                     "no batch command first"):
        row.first = recs[0]["kind"] if recs else None
        return
    rec = recs[0]
    row.first, row.advised, row.pred = rec["kind"], advised, rec["predicted_peak_bytes"]
    cmd = as_job(r, rec["command"], row.real)
    if rec["kind"] == "allocator":
        row.check(cmd[:2] == ["env", f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}"] and str(advised) in " ".join(cmd),
                  f"the allocator command sets expandable segments and batch {advised}", "allocator command")
    if kind == "first-oom":
        first_oom(r, row, advice, rec)
        return
    runs = r.completes(cmd, CARD, {})
    row.check(runs, f"advised batch {advised} runs to its end on the card (largest: {row.b_card})",
              f"advised {advised} does not run")
    row.check(advised >= MIN_SHARE * row.b_head, f"advised {advised} >= {MIN_SHARE:.0%} of {row.b_head}",
              f"advised {advised} is {advised / max(row.b_head, 1):.0%} of {row.b_head}")
    if kind == "two":
        reversed_order(r, row, reports, advised)
    if kind == "fitted" and rec["kind"] == "allocator":
        # the largest within the headroom with the setting the advice comes with
        b_head, b_card = r.truth(row, split(specs[0])[1], {"PYTORCH_CUDA_ALLOC_CONF": EXPANDABLE})
        if row.markers:
            row.check(b_head - max(1, b_head // 20) <= advised <= b_card,
                      f"advised {advised} is the largest within the headroom with the setting ({b_head}), give or take 5%",
                      f"advised {advised}, not {b_head} +/- 5%")
        row.b_head, row.b_card = f"{row.b_head} ({b_head} with it)", f"{row.b_card} ({b_card} with it)"
    elif kind == "fitted" and row.markers:
        row.check(row.b_head - max(1, row.b_head // 20) <= advised <= row.b_card,
                  f"advised {advised} is the largest within the headroom ({row.b_head}), give or take 5%",
                  f"advised {advised}, not {row.b_head} +/- 5%")
    if rec["predicted_peak_bytes"] is not None and runs:
        # The allocator setting can only lower what the batch needs: its predicted peak is the
        # batch's, so it is compared with the need of the batch's own command.
        batch_rec = next((x for x in recs if x["kind"] == "batch" and x["command"]), None)
        need_cmd = as_job(r, batch_rec["command"], row.real) if rec["kind"] == "allocator" and batch_rec else cmd
        if need_cmd is not cmd and not r.completes(need_cmd, CARD, {}):
            need_cmd = cmd  # the batch alone does not run on the card: the setting's need then
        row.need = r.need(need_cmd, {}, rec["predicted_peak_bytes"])
    if kind in ("observe", "two"):
        if rec["predicted_peak_bytes"] is None:
            row.check(False, "a predicted peak is given", "no predicted peak")
        elif row.check(row.need is not None, "the advised command's need was measured", "need not measured"):
            err = (rec["predicted_peak_bytes"] - row.need) / row.need
            row.check(abs(err) <= PEAK_TOLERANCE, f"predicted {rec['predicted_peak_bytes'] / GiB:.2f} GiB, needs "
                                                  f"{row.need / GiB:.2f} GiB ({err:+.1%})", f"peak {err:+.0%}")


def reversed_order(r, row, reports, advised):
    """The same reports in the other order. At one image size that must change nothing. Over two
    image sizes the advice is for the first report's, so the other order is advice for the other
    size: it is judged against that size's truth, as the first order is against its own."""
    back, err = r.advise(reports[::-1])
    other = batch_value(back) if back else None
    imgs = [split(s)[1] for s in row.specs]
    if imgs[0] == imgs[-1]:
        row.check(other == advised, f"the reports in the other order advise the same batch ({other}{', ' + err if err else ''})",
                  f"reversed advises {other}")
        return
    b_head, b_card = r.truth(row, imgs[-1])
    row.log(f"      {row.label}: at image {imgs[-1]}, largest batch within the headroom {b_head}, on the card {b_card}")
    if not row.check(other is not None, f"the reports in the other order advise a batch ({err or 'none'})",
                     f"reversed: no batch{' (' + err + ')' if err else ''}"):
        return
    cmd = as_job(r, back["recommendations"][0]["command"] or [], row.real)
    runs = bool(cmd) and r.completes(cmd, CARD, {})
    row.check(runs and other >= MIN_SHARE * b_head,
              f"in the other order, the advised batch {other} at image {imgs[-1]} runs on the card and is >= "
              f"{MIN_SHARE:.0%} of {b_head}", f"reversed advises {other} at {imgs[-1]}: "
              + (f"{other / max(b_head, 1):.0%} of {b_head}" if runs else "does not run"))


def first_oom(r, row, advice, rec):
    row.check(row.basis == "bound", f"basis is bound ({row.basis})", f"basis {row.basis}")
    claims = [x["kind"] for x in advice["recommendations"] if x["fits"] is True]
    row.check(not claims, f"no recommendation claims a fit ({claims})", f"claims a fit: {', '.join(claims)}")
    row.check("vramwatch fit" in (rec["note"] or ""), "the note proposes vramwatch fit", "no fit proposed")
    start, img = split(row.specs[0])
    if row.markers:
        settle, extra = 5, ()
    else:
        settle, extra = FIT_SETTLE_S, ("--step-ms", str(FIT_STEP_MS))
    if row.real:
        # the card itself, less the headroom, as a user on that card runs fit
        p = subprocess.run([r.o.vramwatch, "fit", "--json", "--sim", str(CARD), "--"] + r.job(row, start, img),
                           env=r.real_env, capture_output=True, text=True, timeout=1800)
    else:
        p = subprocess.run([r.o.vramwatch, "fit", "--json", "--limit", "16GiB", "--settle", str(settle), "--"]
                           + r.job(row, start, img, extra), env=r.env, capture_output=True, text=True, timeout=900)
    if not row.check(p.returncode == 0, f"fit exit {p.returncode}", f"fit exit {p.returncode}"):
        row.log("      " + p.stderr.strip().replace("\n", "\n      "))
        return
    fit = json.loads(p.stdout)
    best, n = fit["best_value"], len(fit["trials"])
    settled = p.stderr.count("(stopped after settling)")
    row.trials = f"{n}" if row.markers else f"{n} ({settled} settled)"
    row.advised = f"{row.advised}, fit {best}"
    bound = math.ceil(math.log2(start)) + 2
    if row.markers:
        row.check(best == row.b_head, f"fit found {best}, the largest within the headroom is {row.b_head}",
                  f"fit found {best}, not {row.b_head}")
    else:
        row.check(best is not None and best >= FIT_SHARE * row.b_head,
                  f"fit found {best} >= {FIT_SHARE:.0%} of {row.b_head}",
                  f"fit found {best}" + (f", {best / max(row.b_head, 1):.0%} of {row.b_head}" if best else ""))
        # settling is what this row is about: a trial that fits must have been stopped, not run out
        # (a real job's few steps end on their own)
        if not row.real:
            row.check(settled > 0, f"{settled} trial(s) stopped after settling", "setup: no trial settled")
    if best:
        row.check(r.completes(r.job(row, best, img), CARD, {}), f"fit's batch {best} runs to its end on the card",
                  f"fit's {best} does not run")
    row.check(n <= bound, f"fit took {n} trials (at most {bound})", f"fit took {n} trials (> {bound})")


def gib(v):
    return "" if v is None else f"{v / GiB:.2f}"


def share(x):
    if not isinstance(x.advised, int) or not isinstance(x.b_head, int) or not x.b_head:
        return ""
    return f"{x.advised / x.b_head:.0%}"


def error(x):
    if x.pred is None or not x.need:
        return ""
    return f"{(x.pred - x.need) / x.need:+.1%}"


def run_group(r, rows):
    """The rows of one workload, allocator and markers, one after the other: their truths are
    shared, and their logs come out together."""
    for row in rows:
        try:
            scenario(r, row)
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError, KeyError, ValueError) as e:
            row.cannot(f"{type(e).__name__}: {e}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--torch-python", default="", help="an interpreter with PyTorch's CUDA wheel, Ultralytics "
                    "and transformers (tools/torch-venv.sh): the real rows")
    ap.add_argument("--only", help="workloads, comma-separated")
    ap.add_argument("--markers", choices=("yes", "no", "both"), default="both",
                    help="the rows with markers, those without (jobs as users run them), or both")
    ap.add_argument("--quick", action="store_true", help="the reduced set the integration suite runs")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="groups of rows run at the same time")
    o = ap.parse_args()
    only = set(o.only.split(",")) if o.only else None
    known = list(WORKLOADS) + list(REAL_WORKLOADS)
    if only and only - set(known):
        ap.error(f"--only: unknown workload(s) {', '.join(sorted(only - set(known)))}; known: {', '.join(known)}")
    rows = [Row(s) for s in ROWS
            if (not only or s[0] in only) and (o.markers == "both" or s[1] == (o.markers == "yes")) and (s[6] or not o.quick)]
    if not o.torch_python:
        left = [x for x in rows if x.real]
        rows = [x for x in rows if not x.real]
        if left:
            print(f"{len(left)} real rows (unchanged PyTorch) not run: no --torch-python "
                  "(an interpreter with PyTorch, tools/torch-venv.sh)", flush=True)
        if not rows:
            print("accuracy: nothing to run without --torch-python", file=sys.stderr)
            return SKIP
    groups = {}
    for row in rows:
        groups.setdefault((row.markers, row.workload, row.allocator), []).append(row)
    print(f"{len(rows)} rows in {len(groups)} groups ({'reduced set' if o.quick else 'whole matrix'}), "
          f"{o.jobs} at a time", flush=True)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="vw-advise-")
    try:
        r = Runner(o, tmp)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, o.jobs)) as pool:
            # the groups that wait longest start first (fit's trials that settle are mostly sleep,
            # a bisection per image size is work), so that the last to end is a short one; their
            # logs still come out in the order of the matrix
            def weight(g):
                return sum(len(x.specs) + (6 if x.kind == "first-oom" else 0) for x in g)
            futures = {}
            for key in sorted(groups, key=lambda k: -weight(groups[k])):
                futures[key] = pool.submit(run_group, r, groups[key])
            for key in groups:
                for row in futures[key].result():
                    print("\n".join(row.lines), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    secs = time.time() - t0
    print()
    print("| markers | allocator | workload | style | scenario | reports (batch or batch, image) | basis | first | advised | "
          "largest within headroom | largest on the card | advised / largest | predicted GiB | needs GiB | error | "
          "static GiB | fit trials | result |")
    print("| --- " * 18 + "|")
    for x in rows:
        print(f"| {'companion' if x.real else 'yes' if x.markers else 'no'} | {x.allocator} | {x.workload} | {x.style} | {x.kind} | "
              f"{', '.join(str(s) for s in x.specs)} | {x.basis or ''} | {x.first or ''} | "
              f"{'' if x.advised is None else x.advised} | {'' if x.b_head is None else x.b_head} | "
              f"{'' if x.b_card is None else x.b_card} | {share(x)} | {gib(x.pred)} | {gib(x.need)} | {error(x)} | "
              f"{gib(x.static)} | {x.trials} | {x.result} |")
    bad = [x for x in rows if x.result != "ok"]
    print()
    for name, part in (("with markers", [x for x in rows if x.markers and not x.real]),
                       ("without markers", [x for x in rows if not x.markers and not x.real]),
                       ("unchanged PyTorch", [x for x in rows if x.real])):
        if part:
            print(f"{name}: {sum(x.result == 'ok' for x in part)} of {len(part)} rows "
                  f"passed, {sum(bool(x.not_run) for x in part)} could not be run")
    print(f"{secs:.0f} s")
    if bad:
        print(f"\n{sum(len(x.failed) for x in bad)} check(s) failed and {sum(bool(x.not_run) for x in bad)} row(s) "
              f"could not be run, in {len(bad)} of {len(rows)} rows")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
