#!/usr/bin/env python3
"""Every command `vramwatch advise` proposes, for reports whose command lines are real ones of each
family, read by that family's parser (tests/advise/parsers/check_cmdline.py: the package's own
parser where it is installed in the interpreter running this, else the family's option list): it
must be accepted, and mean what the recommendation says (its batch, its accumulation, its switch,
its GPU count).

    advice_families.py --vramwatch EXE --data DIR [--real PY]

With --real PY it runs under the interpreter PY, where Ultralytics', Hugging Face's, torchrun's,
accelerate's and the scripts' own parsers must be the ones consulted (exit 77, and why, when PY is
empty or lacks one of the packages), the option lists must read each command the same way, and a
misspelt advised flag must be refused. deepspeed and yolov9 keep their option lists (not on PyPI
with the test interpreter: parsers/real_parsers.py says why).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "parsers"))
import check_cmdline  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import vwtest  # noqa: E402

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


def misspelt(cmd):
    """The command with the last option the advice may have written (a key=value pair, or a
    --flag) misspelt: 'batch=8' -> 'bacth=8', '--batch' -> '--bacth'; None when it has none."""
    for i in range(len(cmd) - 1, 0, -1):
        a = cmd[i]
        name = a.split("=", 1)[0] if "=" in a and not a.startswith("-") else (a if a.startswith("--") else None)
        if name and len(name.lstrip("-")) >= 4:
            bare = name.lstrip("-")
            wrong = name[:len(name) - len(bare)] + bare[0] + bare[2] + bare[1] + bare[3:] + "xq"
            return cmd[:i] + [wrong + a[len(name):]] + cmd[i + 1:]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--real", metavar="PY")
    o = ap.parse_args()
    if o.real is not None:
        rc = check_cmdline.require_real(o.real)
        if rc is not None:
            return rc
        check_cmdline.MODE = "real"
    check_cmdline.real_parsers.SCRIPT_DIRS[:] = [os.path.abspath(o.data)]  # advise reads them there
    print(check_cmdline.parsers_line())
    failed = checked = misspelt_refused = 0
    for name, family in REPORTS.items():
        # in the data folder, as the golden tests: a script named relative to it is read there
        p = vwtest.run([os.path.abspath(o.vramwatch), "advise", "--json", name],
                       env=vwtest.clean_env(keep_preload=True), cwd=o.data, text=True)
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
            bad.update(check_cmdline.real_mode_problems(family, cmd, got, expected(rec)))
            if check_cmdline.MODE == "real":
                # the same command with its first option misspelt: the parser must refuse it
                wrong = misspelt(cmd)
                if wrong:
                    misspelt_refused += 1
                    try:
                        check_cmdline.check(family, wrong)
                        bad["misspelt"] = ("refused", f"accepted: {' '.join(wrong)}")
                    except check_cmdline.Refused:
                        pass
            if rec["kind"] == "checkpointing" and not checkpointing_on(got):
                bad["checkpointing"] = (True, {k: got.get(k) for k in ("gradient_checkpointing", "checkpoint")})
            if rec["kind"] == "amp" and not amp_on(got):
                bad["amp"] = (True, {k: got.get(k) for k in ("amp", "fp16", "bf16")})
            if bad:
                print(f"FAIL {name}: {rec['kind']}: {' '.join(cmd)}: " +
                      ", ".join(f"{k} should be {w!r}, the parser reads {h!r}" for k, (w, h) in bad.items()))
                failed += 1
            else:
                print(f"ok   {name}: {rec['kind']}: {' '.join(cmd)} ({' + '.join(got['read_by'])})")
    if checked < 10:
        print(f"FAIL only {checked} commands checked")
        return 1
    if check_cmdline.MODE == "real" and misspelt_refused < 10:
        print(f"FAIL only {misspelt_refused} misspelt commands tried")
        return 1
    print(f"{checked - failed} of {checked} advised commands accepted by their family's parser, meaning what they say" +
          (f" (real parsers; each also refused with an option misspelt: {misspelt_refused})"
           if check_cmdline.MODE == "real" else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
