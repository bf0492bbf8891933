#!/usr/bin/env python3
"""The command line's grammar: sizes and limits as the library reads them, options as every
command takes them.

Usage: grammar.py --vramwatch EXE --child EXE --stub SO --spellings FILE GROUP

GROUP limits: every line of the shared table of limit spellings (tests/unit/limit-spellings.txt,
also read by the library's unit test) is accepted or refused by `vramwatch run --limit`, spelled
"--limit V" and "--limit=V", exactly as the table says: a refusal is one line and exit 2, and the
command never runs.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMWATCH_")}
    for k in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env.pop(k, None)
    env.update(LC_ALL="C", TERM="dumb", NO_COLOR="1")
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    if extra:
        env.update(extra)
    return env


def run(opts, args, env=None, cwd=None):
    return subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=cwd,
                          env=env or base_env(), timeout=60)


def one_line_error(r, what, code=2):
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == code, "%s: exit %d, expected %d; stderr: %s" % (what, r.returncode, code, err))
    check(r.stdout == b"", "%s: printed on stdout: %r" % (what, r.stdout[:200]))
    lines = err.splitlines()
    check(len(lines) == 1 and lines[0].startswith("vramwatch: "),
          "%s: expected one 'vramwatch: ' line on stderr, got: %r" % (what, err))
    return lines[0]


def spellings(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or "\t" not in line:
                continue
            verdict, value = line.split("\t", 1)
            cases.append((verdict == "accept", value))
    return cases


def group_limits(opts):
    work = tempfile.mkdtemp(prefix="vramwatch-grammar-")
    try:
        env = base_env({"VRAMWATCH_LIB": os.path.realpath(opts.stub)})
        cases = spellings(opts.spellings)
        check(len(cases) > 40, "the table has %d cases" % len(cases))
        wrong = []
        for accept, value in cases:
            for form in (["--limit", value], ["--limit=" + value]):
                marker = os.path.join(work, "ran")
                if os.path.exists(marker):
                    os.unlink(marker)
                r = run(opts, ["run"] + form + ["--", opts.child, "env", marker], env=env, cwd=work)
                if accept:
                    if r.returncode != 0 or not os.path.exists(marker):
                        wrong.append("%r refused: %s" % (form, r.stderr.decode().strip()))
                else:
                    try:
                        line = one_line_error(r, "run %r" % form)
                        check("--limit" in line and value in line, "the error names the option and value: " + line)
                        check(not os.path.exists(marker), "%r: the command ran anyway" % form)
                    except Failed as e:
                        wrong.append(str(e))
        check(not wrong, "%d of %d decided unlike the library's table:\n  %s" %
              (len(wrong), 2 * len(cases), "\n  ".join(wrong)))
        print("%d spellings, both forms, decided as the library decides them" % len(cases))
    finally:
        shutil.rmtree(work)


GROUPS = {"limits": group_limits}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--child", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--spellings", required=True)
    ap.add_argument("group", choices=sorted(GROUPS))
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    opts.child = os.path.abspath(opts.child)
    try:
        status = GROUPS[opts.group](opts)
    except Failed as e:
        print("FAIL:", e)
        return 1
    if status == SKIP:
        return SKIP
    print("ok:", opts.group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
