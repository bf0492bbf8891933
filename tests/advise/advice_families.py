#!/usr/bin/env python3
"""Every command `vramwatch advise` proposes, for reports whose command lines are real ones of each
family, parsed with that family's real option list (tests/advise/parsers): it must be accepted,
and mean what the recommendation says (its batch, its accumulation, its switch, its GPU count).

    advice_families.py --vramwatch EXE --data DIR
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "parsers"))
import check_cmdline  # noqa: E402

# report (tests/advise/data) -> the family whose parser reads its command line
REPORTS = {
    "yolov9-oom-b64.json": "yolov9",            # train_dual.py, a first-step failure
    "static-large-oom.json": "yolov9",          # yolov9-e whose static part does not fit
    "yolov9-u-observe.json": "yolov9",          # python3 -u train_dual.py, observe mode
    "batch1-observe.json": "ultralytics",       # python3 /usr/local/bin/yolo train ... amp=False
    "hf-fp32-oom.json": "hf",                   # run_clm.py in fp32
    "hf-fragmented.json": "hf",                 # PyTorch's own verdict, fragmentation
    "static-large-observe.json": "generic",     # examples/train_torch.py --no-amp
    "yolov9-autobatch-oom.json": "yolov9",      # --batch -1: a fixed batch instead
    "ultralytics-autobatch-observe.json": "ultralytics",  # batch=0.7: the same
    "generic-script-observe.json": "generic",   # options read from the script's source
}

# what a recommendation's kind says its command sets, as check_cmdline names it
def expected(rec):
    kind, value = rec["kind"], rec["value"]
    if kind in ("batch",) and isinstance(value, int):
        return {"batch": value}
    if kind == "image_size" and isinstance(value, int):
        return {"imgsz": value}
    if kind == "accumulation" and isinstance(value, int):
        return {"accumulate": value}
    if kind == "multi_gpu" and isinstance(value, int):
        return {"world_size": value}
    return {}


def checkpointing_on(got):
    """--gradient_checkpointing (Hugging Face), --checkpoint (generic scripts such as
    examples/train_torch.py)."""
    return got.get("gradient_checkpointing") is True or got.get("checkpoint") is True


def amp_on(got):
    """Mixed precision as the family's parser reads it: amp=True (Ultralytics), --amp (generic),
    --fp16 or --bf16 (Hugging Face)."""
    return got.get("amp") is True or got.get("fp16") is True or got.get("bf16") is True


def strip_env(cmd):
    """`env VAR=V ... CMD`: the allocator recommendation's prefix; the parser sees CMD."""
    if cmd and cmd[0] == "env":
        i = 1
        while i < len(cmd) and "=" in cmd[i] and not cmd[i].startswith("-"):
            i += 1
        return cmd[i:]
    return cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    o = ap.parse_args()
    failed = checked = 0
    for name, family in REPORTS.items():
        # in the data folder, as the golden tests: a script named relative to it is read there
        p = subprocess.run([os.path.abspath(o.vramwatch), "advise", "--json", name], cwd=o.data,
                           capture_output=True, text=True, timeout=60)
        if p.returncode not in (0, 1):  # 1: advice for a run that did not fit
            print(f"FAIL {name}: advise exited {p.returncode}: {p.stderr.strip()}")
            failed += 1
            continue
        recs = json.loads(p.stdout)["recommendations"]
        for rec in recs:
            if not rec["command"]:
                continue
            checked += 1
            cmd = strip_env(rec["command"])
            try:
                got = check_cmdline.check(family, cmd)
            except check_cmdline.Refused as e:
                print(f"FAIL {name}: {rec['kind']}: the {family} parser refuses it ({e}): {' '.join(cmd)}")
                failed += 1
                continue
            bad = {k: (v, got.get(k)) for k, v in expected(rec).items() if got.get(k) != v}
            if rec["kind"] == "checkpointing" and not checkpointing_on(got):
                bad["checkpointing"] = (True, {k: got.get(k) for k in ("gradient_checkpointing", "checkpoint")})
            if rec["kind"] == "amp" and not amp_on(got):
                bad["amp"] = (True, {k: got.get(k) for k in ("amp", "fp16", "bf16")})
            if bad:
                print(f"FAIL {name}: {rec['kind']}: {' '.join(cmd)}: " +
                      ", ".join(f"{k} should be {w!r}, the parser reads {h!r}" for k, (w, h) in bad.items()))
                failed += 1
            else:
                print(f"ok   {name}: {rec['kind']}: {' '.join(cmd)}")
    if checked < 10:
        print(f"FAIL only {checked} commands checked")
        return 1
    print(f"{checked - failed} of {checked} advised commands accepted by their family's parser, meaning what they say")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
