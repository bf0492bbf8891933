#!/usr/bin/env python3
"""The command line's grammar: sizes and limits as the library reads them, options as every
command takes them.

Usage: grammar.py --vramwatch EXE --child EXE --stub SO --spellings FILE --data DIR GROUP

GROUP limits: every line of the shared table of limit spellings (tests/unit/lib/limit-spellings.txt,
also read by the library's unit test) is accepted or refused by `vramwatch run --limit`, spelled
"--limit V" and "--limit=V", exactly as the table says: a refusal is one line and exit 2, and the
command never runs.

GROUP percent: advise and fit take the same --headroom spellings ("5", "5%", "12.5%") and refuse
the same ones, in both forms.

GROUP options: every command `vramwatch --help` lists takes its options alike (getopt_long): its
--help prints its usage; an unknown option, a value given to an option that takes none, a value
missing ("--opt" last, or "--opt=") are each one line naming the option, and exit 2; and every
option that takes a value does the same with "--opt VALUE" as with "--opt=VALUE". The options
are read from each command's own --help, so a new one is checked without a change here.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The cli runner's helpers: one environment and one error check for every cli test.
from run_cli_tests import base_env, one_line_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed, check, run_group  # noqa: E402


def run(opts, args, env=None, cwd=None):
    return subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=cwd,
                          env=env or base_env(), timeout=60)


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
        # "--limit 16" is 16 bytes, most likely 16GiB: run and fit say so before running anything
        # (fit used to end "nothing fits: even --batch 1 does not (oom, peak 14 B)").
        marker = os.path.join(work, "ran")
        for cmd in (["run", "--limit", "16"], ["run", "--limit", "0:16,1:16GiB"],
                    ["fit", "--flag", "--bs", "--limit", "16"]):
            r = run(opts, cmd + ["--", opts.child, "env", marker, "--bs", "4"], env=env, cwd=work)
            line = one_line_error(r, " ".join(cmd))
            check(line.endswith("16 bytes is below 1 MiB: did you mean 16GiB?"), "%s: %s" % (" ".join(cmd), line))
            check(not os.path.exists(marker), "%s: the command ran anyway" % " ".join(cmd))
        # A limit the headroom takes below 1 MiB would leave fit's trials without any limit.
        r = run(opts, ["fit", "--flag", "--bs", "--limit", "1MiB", "--", opts.child, "env", marker, "--bs", "4"],
                env=env, cwd=work)
        line = one_line_error(r, "fit --limit 1MiB")
        check("less the 10% headroom is 943718: 943718 bytes is below 1 MiB" in line, "fit --limit 1MiB: " + line)
        check(not os.path.exists(marker), "fit --limit 1MiB: the command ran anyway")
        print("%d spellings, both forms, decided as the library decides them" % len(cases))
    finally:
        shutil.rmtree(work)


def help_options(text):
    """(name, takes_value) for each option line of a --help ("  -o, --output FILE", "  --json")."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^ {2,4}(?:-[A-Za-z], )?(--[a-z][a-z0-9-]*)([ =][A-Z]|\b)", line)
        if m:
            found.append((m.group(1), m.group(2).strip("= ") != ""))
    return found


def commands(opts):
    r = run(opts, ["--help"])
    out, inside, cmds = r.stdout.decode(), False, []
    for line in out.splitlines():
        if line.strip() == "Commands:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            cmds.append(line.split()[0])
    return cmds


def group_options(opts):
    check(opts.data, "the options group needs --data")
    work = tempfile.mkdtemp(prefix="vramwatch-options-")
    try:
        env = base_env({"VRAMWATCH_LIB": os.path.realpath(opts.stub)})
        report = os.path.join(opts.data, "oom-pytorch.json")
        cmds = commands(opts)
        check(len(cmds) >= 6, "vramwatch --help lists %r" % cmds)
        wrong, checked = [], 0

        def expect_line(args, what, words):
            nonlocal checked
            checked += 1
            r = run(opts, args, env=env, cwd=work)
            try:
                line = one_line_error(r, what)
                for w in words:
                    check(w in line, "%s: the line does not say %r: %s" % (what, w, line))
            except Failed as e:
                wrong.append(str(e))

        for cmd in cmds:
            r = run(opts, [cmd, "--help"], env=env, cwd=work)
            text = r.stdout.decode()
            if r.returncode != 0 or not text.startswith("usage: vramwatch " + cmd):
                wrong.append("%s --help: exit %d, %r" % (cmd, r.returncode, text[:80]))
                continue
            listed = help_options(text)
            if ("--help", False) not in listed:
                wrong.append("%s --help does not list --help as an option line" % cmd)
            # What follows the options: a wrapped command, or a report.
            tail = ["--", opts.child, "exit", "0"] if cmd in ("run", "fit") else [report]
            if cmd == "merge":
                tail = [report, "-o", os.path.join(work, "merged.json")]
            if cmd == "sim":  # a card, then the wrapped command
                tail = ["1GiB", "--", opts.child, "exit", "0"]
            expect_line([cmd, "--no-such-option"] + tail, "%s --no-such-option" % cmd,
                        [cmd + ":", "--no-such-option"])
            for name, valued in listed:
                if name == "--help":
                    continue
                if not valued:
                    expect_line([cmd, name + "=1"] + tail, "%s %s=1" % (cmd, name), [name])
                    continue
                expect_line([cmd] + tail[:1] + [name] if cmd not in ("run", "fit") else [cmd, name],
                            "%s %s without its value" % (cmd, name), [name, "needs a value"])
                expect_line([cmd, name + "="] + tail, "%s %s= (empty)" % (cmd, name),
                            [name, "needs a value"])
                # The two spellings of one value: the same outcome, the same words.
                outcomes = []
                for form in ([name, "1x2y"], [name + "=1x2y"]):
                    for leftover in os.listdir(work):
                        p = os.path.join(work, leftover)
                        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
                    r = run(opts, [cmd] + form + tail, env=env, cwd=work)
                    outcomes.append((r.returncode, r.stderr.decode().replace(name + "=1x2y", name + " 1x2y")))
                checked += 1
                if outcomes[0] != outcomes[1]:
                    wrong.append("%s: '%s 1x2y' and '%s=1x2y' differ: %r" % (cmd, name, name, outcomes))
        check(not wrong, "%d of %d checks failed:\n  %s" % (len(wrong), checked, "\n  ".join(wrong)))
        print("%d commands, %d checks of their options" % (len(cmds), checked))
    finally:
        shutil.rmtree(work)


# Headroom spellings: advise and fit must decide each alike (they once differed on "5%" and on
# "--headroom=5").
HEADROOMS = [(True, v) for v in ("0", "5", "5%", "12.5", "12.5%", "99.9", "10 %")] + \
            [(False, v) for v in ("100", "100%", "101", "-5", "5%%", "abc", "1e1", "5.%", ".5", "5GiB")]


def group_percent(opts):
    check(opts.data, "the percent group needs --data")
    work = tempfile.mkdtemp(prefix="vramwatch-percent-")
    try:
        env = base_env({"VRAMWATCH_LIB": os.path.realpath(opts.stub)})
        report = os.path.join(opts.data, "oom-pytorch.json")
        wrong = []
        for accept, value in HEADROOMS:
            for form in (["--headroom", value], ["--headroom=" + value]):
                for cmd, tail in (("advise", [report]), ("fit", ["--", opts.child, "exit", "0"])):
                    r = run(opts, [cmd] + form + tail, env=env, cwd=work)
                    err = r.stderr.decode()
                    refused = r.returncode == 2 and "--headroom" in err
                    if refused != (not accept):
                        wrong.append("%s %r: %s (exit %d: %s)" % (cmd, form, "refused" if refused else "accepted",
                                                                 r.returncode, err.strip()[:200]))
                    elif refused:
                        try:
                            one_line_error(r, "%s %r" % (cmd, form))
                        except Failed as e:
                            wrong.append(str(e))
        check(not wrong, "%d headroom decisions wrong:\n  %s" % (len(wrong), "\n  ".join(wrong)))
        print("%d headroom spellings, both forms, decided alike by advise and fit" % len(HEADROOMS))
    finally:
        shutil.rmtree(work)


GROUPS = {"limits": group_limits, "options": group_options, "percent": group_percent}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--child", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--spellings", required=True)
    ap.add_argument("--data", help="the recorded reports (tests/cli/data), for the options group")
    ap.add_argument("group", choices=sorted(GROUPS))
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    opts.child = os.path.abspath(opts.child)
    return run_group(GROUPS, opts)


if __name__ == "__main__":
    sys.exit(main())
