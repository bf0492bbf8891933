#!/usr/bin/python3
"""The command line's conventions for report, advise and run (README, "Command line"): exit
status 0 done, 1 done and the report shows a run that did not fit, 2 bad usage or unreadable
input; colour by --color=auto|always|never, where auto colours a terminal only, NO_COLOR set to a
non-empty value turns it off and an empty NO_COLOR does not.

Usage: run_conventions.py --vramwatch EXE --data DIR GROUP
GROUP: exit, colour, grammar (advise's and report's options read with getopt_long and the
shared size grammar; run --limit against the library's own reading is tests/cli/grammar.py)
"""
import json
import argparse
import os
import pty
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import check, clean_env, run_group  # noqa: E402

ADVISE_DATA = os.path.join("..", "..", "advise", "data")

# (arguments, expected exit status, why); run from the cli data folder
EXIT = [
    (["report", "oom-pytorch.json"], 1, "an allocation ran out of memory"),
    (["report", "--json", "oom-pytorch.json"], 1, "the same as JSON: the status is the verdict's"),
    (["report", "--full", "oom-mixed.json"], 1, "out of memory, PyTorch's verdict too"),
    (["report", "exit-clean.json"], 0, "a run that fitted"),
    (["report", "pressure.json"], 0, "flushes a retry rescued: the run fitted"),
    (["report", os.path.join(ADVISE_DATA, "observe-b64.json")], 1,
     "observe mode, over the emulated limit: it would have failed there"),
    (["report", "job4-rank0.json", "job4-rank2.json"], 0, "a job whose ranks all fitted"),
    (["report", "job4-rank0.json", "job4-rank3.json"], 1, "a job with a rank out of memory"),
    (["advise", "oom-pytorch.json"], 1, "advice on an out-of-memory"),
    (["advise", "--json", "oom-pytorch.json"], 1, "the same as JSON"),
    (["advise", os.path.join(ADVISE_DATA, "run-b16.json")], 0, "advice on a run that fitted"),
    (["advise", "pressure.json"], 0, "advice on a run under pressure, which fitted"),
    (["report", "no-such-file.json"], 2, "unreadable input"),
    (["advise", "--bogus", "oom-pytorch.json"], 2, "bad usage"),
]


def env(extra=None, drop=()):
    e = clean_env(drop=drop, keep_preload=True)
    e.update(LC_ALL="C")
    e.update(extra or {})
    return e


def run(opts, args, environ, tty=False):
    """(exit status, stdout, stderr); on a pseudo-terminal as standard output when tty."""
    if not tty:
        r = subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=opts.data,
                           env=environ, timeout=60)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen([opts.vramwatch] + args, stdout=slave, stderr=subprocess.PIPE,
                         cwd=opts.data, env=environ)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = p.stderr.read()
    return p.wait(timeout=60), out, err


def group_exit(opts):
    for args, code, why in EXIT:
        got, out, err = run(opts, args, env({"NO_COLOR": "1", "TERM": "dumb"}))
        check(got == code, "%s: exit %d, expected %d (%s); stderr %r"
              % (" ".join(args), got, code, why, err[:300]))
        if code == 2:
            lines = err.decode().splitlines()
            check(out == b"" and len(lines) == 1 and lines[0].startswith("vramwatch: "),
                  "%s: expected one line on stderr: %r" % (" ".join(args), err))
        else:
            check(out and err == b"", "%s: printed nothing, or stderr %r" % (" ".join(args), err))
    # each --help says what 1 means
    for cmd in ("report", "advise"):
        code, out, _ = run(opts, [cmd, "--help"], env())
        text = out.decode()
        check(code == 0 and "did not fit" in text and "1 " in text,
              "%s --help does not say what exit status 1 means:\n%s" % (cmd, text))


def coloured(out):
    return b"\033[" in out


def group_colour(opts):
    args = ["report", "oom-pytorch.json"]
    cases = [
        # (extra options, environment, on a terminal, coloured, why)
        ([], {"TERM": "xterm"}, True, True, "a terminal, NO_COLOR unset"),
        ([], {"TERM": "xterm", "NO_COLOR": ""}, True, True, "an empty NO_COLOR does not count"),
        ([], {"TERM": "xterm", "NO_COLOR": "1"}, True, False, "NO_COLOR=1"),
        ([], {"TERM": "dumb"}, True, False, "TERM=dumb"),
        ([], {"TERM": "xterm"}, False, False, "not a terminal"),
        (["--color=always"], {"TERM": "dumb", "NO_COLOR": "1"}, False, True,
         "--color=always wins over NO_COLOR and a pipe"),
        (["--color", "always"], {"TERM": "xterm"}, False, True, "--color always"),
        (["--color=never"], {"TERM": "xterm"}, True, False, "--color=never on a terminal"),
        (["--color=auto"], {"TERM": "xterm", "NO_COLOR": ""}, True, True, "--color=auto"),
        (["--color=always", "--json"], {"TERM": "xterm"}, False, False, "JSON is never coloured"),
    ]
    for extra, environ, tty, want, why in cases:
        code, out, err = run(opts, [args[0]] + extra + args[1:], env(environ, drop=("NO_COLOR",)),
                             tty=tty)
        check(code in (0, 1) and out, "%s: exit %d %r" % (why, code, err))
        check(coloured(out) == want, "%s: %s" % (why, "no colour" if want else "coloured"))
    for cmd in (["report", "--color=sometimes", "oom-pytorch.json"],
                ["report", "--color", "oom-pytorch.json"]):
        code, out, err = run(opts, cmd, env({"NO_COLOR": "1"}))
        lines = err.decode().splitlines()
        check(code == 2 and out == b"" and len(lines) == 1 and "--color" in lines[0],
              "%s: exit %d, %r" % (" ".join(cmd), code, err))
    for cmd in ("report", "run"):
        code, out, _ = run(opts, [cmd, "--help"], env())
        check(code == 0 and b"--color=WHEN" in out, cmd + " --help does not list --color=WHEN")


def group_grammar(opts):
    quiet = env({"NO_COLOR": "1", "TERM": "dumb"})

    def advice(args):
        code, out, err = run(opts, ["advise", "--json"] + args, quiet)
        check(code in (0, 1) and err == b"", "advise %s: exit %d %r" % (" ".join(args), code, err))
        return json.loads(out)

    fixture = os.path.join(ADVISE_DATA, "run-b16.json")
    base = advice(["--headroom", "5", fixture])
    for spelled in (["--headroom=5"], ["--headroom", "5%"], ["--headroom=5%"], ["--head=5"],
                    [fixture, "--headroom", "5"]):
        args = spelled + ([] if fixture in spelled else [fixture])
        check(advice(args) == base, "advise %s differs from --headroom 5" % " ".join(spelled))
    check(advice(["--target=16GiB", fixture]) == advice(["--target", "16GiB", fixture]),
          "--target=16GiB and --target 16GiB differ")
    a = advice(["--target", "14.4GiB", fixture])
    check(a["device"]["capacity_bytes"] == int(14.4 * (1 << 30)),
          "--target 14.4GiB: capacity %r" % a["device"]["capacity_bytes"])
    for bad, must in ((["--headroom=100"], "--headroom 100"), (["--headroom="], "--headroom"),
                      (["--target=0"], "--target 0"), (["--target", "8 parsecs"], "--target"),
                      (["--json=yes"], "--json")):
        code, out, err = run(opts, ["advise"] + bad + [fixture], quiet)
        lines = err.decode().splitlines()
        check(code == 2 and out == b"" and len(lines) == 1 and must in lines[0],
              "advise %s: exit %d, %r" % (" ".join(bad), code, err))
    # report: options anywhere, "--" ends them
    _, first, _ = run(opts, ["report", "--json", "exit-clean.json"], quiet)
    _, last, _ = run(opts, ["report", "exit-clean.json", "--json"], quiet)
    check(first == last and first.startswith(b"{"), "report FILE --json differs from --json FILE")
    code, out, err = run(opts, ["report", "--", "--json"], quiet)
    check(code == 2 and b"--json" in err, "report -- --json: the file --json, not the option")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    groups = {"exit": group_exit, "colour": group_colour, "grammar": group_grammar}
    ap.add_argument("group", choices=sorted(groups))
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    return run_group(groups, opts)


if __name__ == "__main__":
    sys.exit(main())
