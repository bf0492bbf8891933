#!/usr/bin/env python3
"""The layout of the advice and of the post-mortem's first lines, for people (issue 26, items 6-8):
the answer first (what to change, the command to run next and the fit command, each command on a
line of its own, within the first 10 lines of advise and of run), prose wrapped to $COLUMNS and
never inside a word, commands and code never wrapped, --brief printing the answer alone, code
snippets of the current API on lines of their own naming the job's own script, the phase of a
failure in the report's first lines, and one figure called "peak" in report and advise.

    layout.py --vramwatch BUILD/tools/vramwatch/vramwatch --data tests/advise/data
              [--train-sim examples/train_sim.py --python PYTHON] {advise,report,run}

advise and report read recorded reports (tests/advise/data); run runs the README's quick start on
the simulated GPU (vramwatch run --sim 16GiB).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import vwtest  # noqa: E402
from vwtest import check  # noqa: E402

QUICK = "quickstart-oom-b64.json"
# The lines that are commands or code, which are never wrapped: they may be longer than the width.
COMMAND_START = ("vramwatch ", "python3 ", "env ", "torchrun ", "accelerate ", "deepspeed ", "/")


def vw_env(columns):
    env = vwtest.clean_env({"LC_ALL": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1"}, keep_preload=True)
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    return env


def vw(o, args, cwd=None, columns="80"):
    p = vwtest.run([o.vramwatch] + args, env=vw_env(columns), cwd=cwd or o.data, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def is_command_or_code(line, code_lines):
    s = line.strip()
    return s.startswith(COMMAND_START) or s.startswith("vramwatch advise: ") or s in code_lines


def code_lines_of(text):
    """The lines of code blocks: those after a line ending with ':' that are indented deeper than
    it and are not prose (they hold '(' or '=' or start with a Python keyword)."""
    out = set()
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"^(with |for |if |else:|return |scaler|loss|x = )", s):
            out.add(s)
    return out


def check_width(text, what, width=80):
    code = code_lines_of(text)
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > width and not is_command_or_code(line, code):
            raise vwtest.Failed(f"{what}: line {n} is {len(line)} columns, over {width}, and not a "
                                f"command: {line!r}")


def first_command_line(text, needle):
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(COMMAND_START) and needle in line and not line.startswith("vramwatch advise:"):
            return n
    return None


def advise_group(o):
    rc, out, err = vw(o, ["advise", QUICK])
    check(rc == 1 and not err, f"advise {QUICK}: exit {rc}, stderr {err!r}")
    head = "\n".join(out.splitlines()[:10])
    n = first_command_line(out, "--batch 32")
    check(n is not None and n <= 10, f"the command to run next is within the first 10 lines (line {n}):\n{head}")
    f = first_command_line(out, "vramwatch fit ")
    check(f is not None and f <= 10, f"the fit command is within the first 10 lines (line {f}):\n{head}")
    check(out.splitlines()[f - 1].strip().startswith("vramwatch fit "),
          "the fit command stands on a line of its own")
    check_width(out, "advise with COLUMNS=80")
    # no word broken: the same words, in the same order, at any width
    _, wide, _ = vw(o, ["advise", QUICK], columns="1000")
    check(out.split() == wide.split(), "the words at COLUMNS=80 are those at COLUMNS=1000 (none broken)")
    check(max(len(x) for x in wide.splitlines()) > 80, "at COLUMNS=1000 the prose is not wrapped to 80")
    # without a terminal and without COLUMNS: 80
    _, plain, _ = vw(o, ["advise", QUICK], columns=None)
    check(plain == out, "without COLUMNS, the width is 80")
    # --brief: the answer alone, as it opens the full advice
    rc, brief, err = vw(o, ["advise", "--brief", QUICK])
    check(rc == 1 and not err, f"advise --brief: exit {rc}, stderr {err!r}")
    check(out.startswith(brief.rstrip("\n")), f"--brief prints the block the advice opens with:\n{brief}")
    check("Recommendations" not in brief and "Model" not in brief and len(brief.splitlines()) <= 10,
          f"--brief prints only the block:\n{brief}")
    check(first_command_line(brief, "--batch 32") and first_command_line(brief, "vramwatch fit "),
          f"--brief names the command and the fit command:\n{brief}")
    # the checkpointing note names the job's own script
    ckpt = out[out.index("checkpointing"):]
    check("examples/train_sim.py" in ckpt and "train_torch.py" not in out,
          f"the checkpointing note names the report's script, examples/train_sim.py:\n{ckpt}")
    check("torch.cuda.amp" not in out, "no torch.cuda.amp (deprecated) in the advice")
    # float16 (a card without bfloat16): GradScaler of the current API, on a line of its own
    with tempfile.TemporaryDirectory() as d:
        r = json.load(open(os.path.join(o.data, QUICK)))
        r["devices"][0]["name"] = "Tesla V100-SXM2-16GB"
        with open(os.path.join(d, "v100.json"), "w") as fh:
            json.dump(r, fh)
        rc, v100, err = vw(o, ["advise", "v100.json"], cwd=d)
        _, v100_json, _ = vw(o, ["advise", "--json", "v100.json"], cwd=d)
    lines = [x.strip() for x in v100.splitlines()]
    check(any(x.startswith('scaler = torch.amp.GradScaler("cuda")') for x in lines),
          f'torch.amp.GradScaler("cuda") on a line of its own:\n{v100}')
    check('with torch.autocast("cuda", dtype=torch.float16):' in lines and "scaler.update()" in lines,
          f"the float16 snippet is multi-line:\n{v100}")
    check("torch.cuda.amp" not in v100 and "torch.cuda.amp" not in v100_json, "no torch.cuda.amp")
    check_width(v100, "advise (float16 card) with COLUMNS=80")
    # the peak: the report's figure, the context apart
    rc, rep, _ = vw(o, ["report", QUICK])
    peak = re.search(r"^  peak +(\d+\.\d\d [KMGT]?i?B)", rep, re.M)
    check(peak is not None, f"report prints a peak row:\n{rep}")
    obs = re.search(r"peak (\d+\.\d\d [KMGT]?i?B) \(\+ ([^)]*) CUDA context", " ".join(out.split()))
    check(obs is not None and obs.group(1) == peak.group(1),
          f"advise's peak is the report's {peak.group(1)}, the context apart: {obs and obs.group(0)}")
    check(f"peak {peak.group(1)} (+ {obs.group(2)} CUDA context and libraries)" in " ".join(rep.split()),
          "report names the context apart from the peak as advise does")


def report_group(o):
    for name in ("val-oom-b44.json", "val-oom-b44-nomarkers.json"):
        rc, out, err = vw(o, ["report", name])
        check(rc == 1 and not err, f"report {name}: exit {rc}, stderr {err!r}")
        first = "\n".join(out.splitlines()[:8])
        check('"epoch 0 val"' in first and "validation" in first,
              f"report {name}: the first lines name the phase of the failure (validation):\n{first}")
        check_width(first, f"report {name}: its first lines")
    rc, out, _ = vw(o, ["report", QUICK])
    first = "\n".join(out.splitlines()[:8])
    check('"epoch 0 train"' in first, f"report {QUICK}: names the training phase:\n{first}")


def run_group(o):
    if not o.train_sim:
        raise vwtest.Skipped("no --train-sim given")
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.dirname(os.path.abspath(o.train_sim)), os.path.join(d, "examples"))
        # stdout and stderr as a terminal shows them: the program's lines, the library's, run's
        p = subprocess.run([o.vramwatch, "run", "--dir", os.path.join(d, "r"), "--sim", "16GiB", "--",
                            o.python, "examples/train_sim.py", "--batch", "64", "--img", "640"],
                           cwd=d, env=vw_env("80"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
    rc, out = p.returncode, p.stdout
    check(rc == 1, f"the quick start runs out of memory: exit {rc}\n{out}")
    head = "\n".join(out.splitlines()[:10])
    n = first_command_line(out, "--batch 32")
    check(n is not None and n <= 10, f"run: the command to run next is within the first 10 lines "
          f"(line {n}):\n{head}")
    f = first_command_line(out, "vramwatch fit ")
    check(f is not None and f <= 10, f"run: the fit command is within the first 10 lines (line {f}):\n{head}")
    advice = out[out.index("Recommendations"):]
    check_width(advice, "run's advice with COLUMNS=80")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--train-sim")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("group", choices=["advise", "report", "run"])
    o = ap.parse_args()
    o.vramwatch = os.path.abspath(o.vramwatch)  # the commands run in other folders
    return vwtest.run_group({"advise": advise_group, "report": report_group, "run": run_group}, o)


if __name__ == "__main__":
    sys.exit(main())
