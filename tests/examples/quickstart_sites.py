#!/usr/bin/env python3
"""The quick start's call-site table: examples/train_sim.py at batch 64 on a simulated 16 GiB card,
run under `vramwatch run --sim` and read back with `vramwatch report`. Its weights and its
activations come from two lines of main() through one caching allocator written in Python; the
table names each by its own line (two rows), not both by the allocator's cudaMalloc line, and
the leading line names the activations' line and says why.

usage: quickstart_sites.py --vramwatch EXE --example TRAIN_SIM_PY [--python PY]
"""
import argparse
import glob
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed, check, clean_env, run  # noqa: E402


def line_of(path, text):
    """The number of the one line of path that holds text."""
    with open(path, encoding="utf-8") as f:
        found = [n for n, line in enumerate(f, 1) if text in line]
    check(len(found) == 1, "%s: expected one line with %r, found %s" % (path, text, found))
    return found[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    vw, example = os.path.abspath(a.vramwatch), os.path.abspath(a.example)
    tmp = tempfile.mkdtemp(prefix="vramwatch-quickstart-")
    try:
        weights = line_of(example, "model = [alloc.malloc(")
        acts = line_of(example, "acts.append(alloc.malloc(")
        env = clean_env(dict(LC_ALL="C", TERM="dumb", NO_COLOR="1"), keep_preload=True)
        d = os.path.join(tmp, "reports")
        r = run([vw, "run", "--dir", d, "--sim", "16GiB", "--", a.python, example, "--batch", "64",
                 "--img", "640"], env=env, text=True, timeout=120)
        check(r.returncode == 1, "run: exit %d (the job should run out of memory): %s"
              % (r.returncode, r.stderr[-800:]))
        reports = glob.glob(os.path.join(d, "vramwatch-*.json"))
        check(len(reports) == 1, "expected one report, found %s" % reports)
        r = run([vw, "report"] + reports, env=env, text=True, timeout=60)
        check(r.returncode == 1 and r.stderr == "", "report: exit %d: %s" % (r.returncode, r.stderr))
        out = r.stdout
        table = out.split("Top call sites by live bytes", 1)[-1]
        rows = re.findall(r"^\s+\S+ \S+\s+\S+%\s+\d+\s+(\S+:\d+ in \S+)", table, re.M)
        want = {"train_sim.py:%d" % weights, "train_sim.py:%d" % acts}
        got = {re.sub(r"^.*/", "", row.split(" in ")[0]) for row in rows}
        check(len(rows) == 2 and got == want,
              "the table's rows are %r; expected the weights' line %d and the activations' line %d"
              % (rows, weights, acts))
        # the headline's block as one line of words: the rule is prose, wrapped to the terminal
        lead = " ".join(out.split("\nOut of memory at ", 1)[-1].split("\n\n", 1)[0].split())
        check(re.match(r"\S*train_sim\.py:%d in main (in phase \"[^\"]*\": [^)]*\) )?named by the line "
                       r"that calls \S+ in "
                       r"CachingAllocator\.malloc, which only allocates for the lines that call it"
                       % acts, lead),
              "the leading line does not name the activations' line and its rule:\n" + out[:1500])
    except Failed as e:
        print("FAIL: %s" % e, file=sys.stderr)
        print("(files kept in %s)" % tmp, file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("the quick start's table: weights at line %d, activations at line %d" % (weights, acts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
