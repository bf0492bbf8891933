#!/usr/bin/env python3
"""Records the reports in tests/advise/data from examples/train_sim.py on the simulated GPU, with
the command line rewritten to the training script it stands for (the advice reads the flags).
Rerun it when the simulated job or the report changes, then update the goldens with
VRAMWATCH_UPDATE_GOLDEN=1 and read the differences.

    make_data.py --vramwatch BUILD/tools/vramwatch/vramwatch --sim BUILD/tools/simgpu
                 --train-sim examples/train_sim.py --out tests/advise/data

hf-fragmented.json is not made here: it holds PyTorch's own verdict, recorded from a real
PyTorch message (see tests/integration).

With --torch-python (an interpreter with PyTorch's CUDA wheel), torch-first-step-oom.json is
recorded too: unchanged PyTorch (examples/train_torch.py --batch 128) on a simulated 16 GiB card,
run by `vramwatch run --sim`, whose companion promises a vramwatch_step after every step. Its
first step runs out of memory after a pause within itself that the timeline alone reads as a
step that ended (the simulated card computes each layer on the CPU, before the next layer's
memory is asked for, and the first stages take 450-550 ms against about 250 ms for the next:
in about one run in three here the longest was more than twice the next: the run is repeated,
on one CPU thread, up to 40 times until one shows it, or --torch-report names a recording of
that command, made with `vramwatch run --sim 16GiB`, to trim instead); the report is trimmed to
what the advice reads (no trace, 20 live allocations, Python frames and the three innermost
native ones).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

YOLO = ["python3", "train_dual.py", "--workers", "8", "--device", "0", "--batch", "64", "--data", "data.yaml",
        "--img", "640", "--cfg", "models/detect/yolov9-s.yaml", "--epochs", "20"]
HF = ["python3", "run_clm.py", "--model_name_or_path", "gpt2", "--per_device_train_batch_size", "16",
      "--gradient_accumulation_steps", "2", "--output_dir", "out"]

# name: (train_sim flags, vramwatch run options, argv written into the report, drop markers)
REPORTS = {
    "run-b16": (["--batch", "16"], [], ["python3", "train.py", "--batch-size=16", "--imgsz", "640", "--cfg", "s"], False),
    "run-b32": (["--batch", "32"], [], ["python3", "train.py", "--batch-size=32", "--imgsz", "640", "--cfg", "s"], False),
    "oom-b64": (["--batch", "64"], ["--limit", "16GiB"], ["python3", "train.py", "--batch-size=64", "--imgsz", "640",
                                                          "--cfg", "s"], False),
    "other-job-b32": (["--batch", "32", "--cfg", "m"], [], ["python3", "train.py", "--batch-size=32", "--imgsz", "640",
                                                              "--cfg", "m"], False),
    "observe-b64": (["--batch", "64"], ["--limit", "16GiB", "--observe"],
                    ["python3", "train_sim.py", "--batch", "64", "--img", "640"], False),
    "yolov9-oom-b64": (["--batch", "64"], ["--limit", "16GiB"], YOLO, False),
    "yolov9-oom-b64-nomarkers": (["--batch", "64"], ["--limit", "16GiB"], YOLO, True),
    "val-oom-b44": (["--batch", "44", "--val-mem", "1.6"], ["--limit", "16GiB"],
                    YOLO[:7] + ["44"] + YOLO[8:], False),
    "fragmented-b16": (["--batch", "16", "--keep-cache"], [], ["python3", "train.py", "--batch-size=16", "--imgsz", "640",
                                                               "--cfg", "s"], False),
    "hf-fp32-oom": (["--batch", "16", "--img", "640", "--static-gib", "5", "--sample-mib", "900", "--epochs", "1"],
                    ["--limit", "16GiB"], HF, False),
    # 256 MiB kept per epoch: the out-of-memory arrives at epoch 16
    "leak-oom": (["--batch", "40", "--epochs", "30", "--leak-mib-per-epoch", "256"], ["--limit", "16GiB"],
                 ["python3", "train.py", "--batch-size=40", "--imgsz", "640", "--epochs", "30"], False),
    # another process holds 3 GiB of a real 16 GiB card: validation runs out of memory
    "other-process-oom": (["--batch", "32", "--val-mem", "1.6"], [], YOLO[:7] + ["32"] + YOLO[8:], False,
                          {"SIMGPU_MEMORY": "16GiB", "SIMGPU_OTHER_BYTES": "3GiB", "OTHER": "1"}),
    # a large model on a 7 GiB laptop card: weights and optimizer state (6.5 GiB) alone are more
    # than the 6.3 GiB usable; the first step fails, so only the static level is measured
    "static-large-oom": (["--batch", "4", "--static-gib", "6.5", "--epochs", "1"], ["--limit", "7GiB"],
                         YOLO[:7] + ["4"] + YOLO[8:12] + ["--cfg", "models/detect/yolov9-e.yaml"] + YOLO[14:],
                         False),
    # the same static part measured whole in observe mode, in a generic fp32 script with --amp/--no-amp
    "static-large-observe": (["--batch", "4", "--static-gib", "6.5", "--epochs", "1"], ["--limit", "7GiB", "--observe"],
                             ["python3", "train_torch.py", "--batch", "4", "--img", "640", "--no-amp"], False),
    # the static part fits but not one sample more: Ultralytics' largest model in fp32 (amp=False)
    "batch1-observe": (["--batch", "2", "--static-gib", "5.2", "--sample-mib", "1200", "--epochs", "1"],
                       ["--limit", "7GiB", "--observe"],
                       ["python3", "/usr/local/bin/yolo", "train", "model=yolov8x.pt", "data=coco.yaml", "batch=2",
                        "imgsz=640", "amp=False"], False),
    # one process whose weights and optimizer state (9 GiB) are most of a 16 GiB card, at batch 24
    "static-heavy-oom": (["--batch", "24", "--static-gib", "9", "--sample-mib", "300"], ["--limit", "16GiB"],
                         ["python3", "train.py", "--batch-size", "24", "--model", "vit_large"], False),
    # failures after completed steps: a multi-scale step at 1.5 x --img (steps take 25 ms, as a
    # real job's do, so the completed ones are told apart), and validation that an allocator
    # without a retry meets with training's cache still held
    "multiscale-oom-b32": (["--batch", "32", "--multi-scale", "--step-ms", "25"], ["--limit", "16GiB"],
                           YOLO[:7] + ["32"] + YOLO[8:] + ["--multi-scale"], False),
    # the same step at 1.5 x --img with steps that take no time: only the steps the job said had
    # ended (vramwatch_step) tell the completed ones apart
    "multiscale-steps-oom-b32": (["--batch", "32", "--multi-scale"], ["--limit", "16GiB"],
                                 YOLO[:7] + ["32"] + YOLO[8:] + ["--multi-scale"], False),
    "noretry-val-oom-b32": (["--batch", "32", "--val-mem", "2", "--no-retry"], ["--limit", "16GiB"],
                            YOLO[:7] + ["32"] + YOLO[8:], False),
    # a run that fitted because validation made the allocator flush training's cache
    "flush-val-b44": (["--batch", "44", "--val-mem", "1.3"], ["--limit", "16GiB"], YOLO[:7] + ["44"] + YOLO[8:], False),
    # the quick start of the README (vramwatch run --sim 16GiB -- python3 examples/train_sim.py ...)
    "quickstart-oom-b64": (["--batch", "64", "--img", "640"], ["--sim", "16GiB"],
                           ["python3", "examples/train_sim.py", "--batch", "64", "--img", "640"], False),
    # val-oom-b44 without markers: the phases are found from the call sites
    "val-oom-b44-nomarkers": (["--batch", "44", "--val-mem", "1.6", "--no-markers", "--step-ms", "25"],
                              ["--limit", "16GiB"], YOLO[:7] + ["44"] + YOLO[8:], False),
}

# The two ranks of one job whose weights and optimizer state take most of a 16 GiB card.
ZERO_RANKS = (["--batch", "8", "--static-gib", "10", "--sample-mib", "250"],
              ["python3", "train.py", "--batch-size=8", "--imgsz", "640"])
# The two ranks of one job on cards of different sizes: rank 0 on 16 GiB, rank 1 on 12 GiB.
CARD_RANKS = (["--batch", "24"], ["python3", "train.py", "--batch-size=24", "--imgsz", "640"], ("16GiB", "12GiB"))


def neutral(r, repo):
    """The report as it would read on a user's machine: this checkout and this interpreter's
    prefix replaced by neutral paths, so the recorded files say nothing of where they were made."""
    text = json.dumps(r)
    text = text.replace(repo, "/home/user/job").replace(sys.prefix, "/usr").replace(sys.base_prefix, "/usr")
    return json.loads(text)


def as_users(r, argv, repo):
    """The report as a user's job would leave it: the command line it stands for, a neutral
    folder, none of the variables this recording set, and no path of this machine."""
    r["process"]["argv"] = argv
    r["process"]["cwd"] = "/home/user/job"
    r["process"]["env"] = {k: v for k, v in r["process"]["env"].items() if k not in ("VRAMWATCH_DIR", "VRAMWATCH_STATUS")}
    return neutral(r, repo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--torch-python", help="an interpreter with PyTorch: also record torch-first-step-oom.json")
    ap.add_argument("--torch-report", help="a recording of that run to trim instead of recording one")
    ap.add_argument("--only", action="append",
                    help="record only these reports (repeatable; zero-ranks and cards-ranks: those ranks)")
    o = ap.parse_args()
    env = dict(os.environ, LD_LIBRARY_PATH=o.sim, SIMGPU_MEMORY="64GiB")
    for name, (flags, opts, argv, drop_markers, *extra) in REPORTS.items():
        if o.only and name not in o.only:
            continue
        run_env = dict(env, **(extra[0] if extra else {}))
        other = None
        if run_env.pop("OTHER", None):
            other = subprocess.Popen(["sleep", "300"])
            run_env["SIMGPU_OTHER_PID"] = str(other.pid)
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([o.vramwatch, "run", "--dir", d] + opts + ["--", sys.executable, o.train_sim] + flags,
                           env=run_env, capture_output=True, text=True, timeout=300)
            if other:
                other.kill()
                other.wait()
            found = glob.glob(os.path.join(d, "*.json"))
            if len(found) != 1:
                sys.exit(f"make_data: {name}: expected one report, found {found}")
            r = json.load(open(found[0]))
        r = as_users(r, argv, os.path.dirname(os.path.dirname(os.path.abspath(o.train_sim))))
        if drop_markers:
            r["markers"] = []
        for dev in r["devices"]:
            for p in dev.get("other_processes") or []:
                p["pid"] = 4242  # stable for the goldens: another user's trainer
                p["name"] = "python3"
        with open(os.path.join(o.out, name + ".json"), "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
        print(f"{name}: {r['reason']}, peak {r['devices'][0]['peak_reserved_bytes']}")
    for stem, (flags, argv, cards) in (("zero-rank", ZERO_RANKS + (("16GiB", "16GiB"),)), ("cards-rank", CARD_RANKS)):
        if not o.only or stem + "s" in o.only:
            ranks(o, env, stem, flags, argv, cards)
    if o.torch_python and (not o.only or "torch-first-step-oom" in o.only):
        torch_first_step(o)


def pause_stands_out(r):
    """Whether the longest pause between the last marker before the failure and the failure is
    one the timeline alone reads as the end of a step (docs/advice.md): at least four buckets and
    5 ms, and more than twice every other pause."""
    t = r["timeline"]["devices"][0]
    width, until = t["bucket_ns"], r["failures"][-1]["time_unix_ns"]
    since = max(m["time_unix_ns"] for m in r["markers"] if m["time_unix_ns"] <= until)
    b = [x["t"] for x in t["buckets"] if x["t"] + width > since and x["t"] <= until]
    gaps = sorted((b[k] - b[k - 1] - width for k in range(1, len(b))), reverse=True) + [0, 0]
    return gaps[0] >= max(4 * width, 5_000_000) and gaps[0] >= 2 * gaps[1]


def torch_first_step(o):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(o.train_sim)))
    argv = ["examples/train_torch.py", "--batch", "128", "--img", "640", "--cfg", "s", "--steps", "2",
            "--val-steps", "1", "--workers", "0"]

    def shows_pause(r):
        return r["failures"] and r["markers"] and r["process"].get("steps_reported") and pause_stands_out(r)

    if o.torch_report:
        r = json.load(open(o.torch_report))
        if not shows_pause(r):
            sys.exit(f"make_data: {o.torch_report}: not a first-step failure with a pause read as a step")
        origin = f"from {o.torch_report}"
    else:
        for attempt in range(1, 41):
            with tempfile.TemporaryDirectory() as d:
                subprocess.run([o.vramwatch, "run", "--dir", d, "--sim", "16GiB", "--", o.torch_python] + argv,
                               cwd=repo, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                               text=True, timeout=600)
                found = glob.glob(os.path.join(d, "*.json"))
                if len(found) != 1:
                    sys.exit(f"make_data: torch-first-step-oom: expected one report, found {found}")
                r = json.load(open(found[0]))
            if shows_pause(r):
                break
        else:
            sys.exit("make_data: torch-first-step-oom: no run in 40 paused within its first step "
                     "(record more with vramwatch run and give one with --torch-report)")
        origin = f"after {attempt} run(s)"
    r.pop("trace", None)
    r["live_truncated"] += max(0, len(r["live"]) - 20)
    r["live"] = r["live"][:20]
    for cs in r["callsites"]:
        native = [i for i, f in enumerate(cs["frames"]) if f["kind"] == "native"][:3]
        cs["frames"] = [f for i, f in enumerate(cs["frames"]) if f["kind"] == "python" or i in native]
    r["process"]["exe"] = "/usr/bin/python3.11"
    venv = os.path.dirname(os.path.dirname(o.torch_python))
    # PyTorch's message is cut at a length of its own, maybe within a path of this machine
    home = os.path.expanduser("~").rstrip("/") + "/"
    r = json.loads(json.dumps(r).replace(venv, "/home/user/venv").replace(home, "/home/user/"))
    r = as_users(r, ["python3"] + argv, repo)
    with open(os.path.join(o.out, "torch-first-step-oom.json"), "w") as f:
        json.dump(r, f, indent=1)
        f.write("\n")
    print(f"torch-first-step-oom: {len(r['failures'])} failures, {origin}")


def ranks(o, env, stem, flags, argv, cards):
    """The ranks of one job, each on its own card, as reports stem0.json, stem1.json."""
    for rank, card in enumerate(cards):
        with tempfile.TemporaryDirectory() as d:
            renv = dict(env, SIMGPU_MEMORY=card, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
            subprocess.run([o.vramwatch, "run", "--dir", d, "--", sys.executable, o.train_sim] + flags,
                           env=renv, capture_output=True, text=True, timeout=300)
            found = glob.glob(os.path.join(d, "*.json"))
            if len(found) != 1:
                sys.exit(f"make_data: {stem}{rank}: expected one report, found {found}")
            r = json.load(open(found[0]))
        r = as_users(r, argv, os.path.dirname(os.path.dirname(os.path.abspath(o.train_sim))))
        with open(os.path.join(o.out, f"{stem}{rank}.json"), "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
