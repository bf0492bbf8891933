#!/usr/bin/python3
"""Golden and behaviour tests of the vramwatch command line; one group per meson test.

Usage: run_cli_tests.py --vramwatch EXE --data DIR --golden DIR [--child EXE --stub SO]
                        [--validator PY] [--docs MD] [--libvramwatch SO]
                        [--sim SIMGPU_DIR --sim-job EXE] GROUP

GROUP: golden, malformed, json, usage, run, schema, merge, outputs, inputs, values, sim, secrets. Every command
runs with LC_ALL=C TERM=dumb NO_COLOR=1 and no VRAMWATCH_* variables from outside. VRAMWATCH_UPDATE_GOLDEN=1 rewrites the
golden files instead of comparing (tests/lib/vwtest.py; then read the diff before committing it).

A group that cannot run here (no --child/--stub, no --validator, no jsonschema module) exits 77,
skipped, and says why on stderr. A check inside a group that cannot run (a device node needs
root; the job schema needs jsonschema) is named on stderr and the group then exits 77 too, not 0,
after everything else in it has run: a failure still fails, but a pass means every check ran.
"""
import argparse
import fcntl
import fnmatch
import glob
import json
import os
import pty
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP, Failed, check, clean_env, compare_or_update, run_group  # noqa: E402

# golden file, then the arguments of vramwatch (run from the data folder)
GOLDEN = [
    ("oom-pytorch.txt", ["report", "oom-pytorch.json"]),
    ("oom-pytorch-full.txt", ["report", "--full", "oom-pytorch.json"]),
    ("oom-mixed.txt", ["report", "oom-mixed.json"]),
    ("oom-mixed-full.txt", ["report", "--full", "oom-mixed.json"]),
    ("exit-clean.txt", ["report", "exit-clean.json"]),
    ("two-devices.txt", ["report", "two-devices.json"]),
    ("unknowns.txt", ["report", "unknowns.json"]),
    ("job.txt", ["report", "two-devices.json", "rank0-oom.json"]),
    ("job.json", ["report", "--json", "rank0-oom.json", "two-devices.json"]),
    # four ranks on two shared GPUs, given out of order: rank 0 holds 30% more, rank 3 fails first
    ("job4.txt", ["report", "job4-rank3.json", "job4-rank1.json", "job4-rank0.json", "job4-rank2.json"]),
    # written when a cache flush and its retry rescued the first failure: pressure, not an OOM
    ("pressure.txt", ["report", "pressure.json"]),
    # a run that fitted, whose report gives what was live at the peak: the table is of the peak
    ("fit-at-peak.txt", ["report", "fit-at-peak.json"]),
]
JOB4 = ["job4-rank%d.json" % i for i in range(4)]
# unknowns.json holds a device whose ordinal is null, as libraries before 2026-12-01 wrote for
# calls they could put on no device: the CLI still reads it (its golden), the schema no longer
# allows it (those calls are "unattributed" now).
GOOD = ["oom-pytorch.json", "exit-clean.json", "two-devices.json", "rank0-oom.json",
        "oom-mixed.json", "pressure.json"] + ["job4-rank%d.json" % i for i in range(4)]
LATER = []  # every command of the contract is available


def base_env(extra=None):
    env = clean_env(drop=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
    # COLUMNS: the width the post-mortem and the advice wrap their prose to, pinned
    env.update(LC_ALL="C", TERM="dumb", NO_COLOR="1", COLUMNS="80")
    # A preloaded library comes before the sanitizer runtime in a sanitized build; that is fine here.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    if extra:
        env.update(extra)
    return env


def run(opts, args, env=None, cwd=None, timeout=60):
    return subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=cwd or opts.data,
                          env=env or base_env(), timeout=timeout)


def one_line_error(r, what, code=2):
    """Exit status code, nothing on stdout, exactly one 'vramwatch: ' line on stderr."""
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == code, "%s: exit %d, expected %d; stderr: %s" % (what, r.returncode, code, err))
    check(r.stdout == b"", "%s: printed on stdout: %r" % (what, r.stdout[:200]))
    lines = err.splitlines()
    check(len(lines) == 1 and lines[0].startswith("vramwatch: "),
          "%s: expected one 'vramwatch: ' line on stderr, got: %r" % (what, err))
    return lines[0]


def did_not_fit(doc):
    """The rule of report's and advise's exit status 1 (README), told from the JSON alone: a run
    out of memory for good (in a report written at a rescued retry, only a retry known to have
    failed), PyTorch's out-of-memory error, or observe mode over the emulated limit."""
    if doc.get("schema") == "vramwatch.job/1":
        return any(did_not_fit(p["report"]) for p in doc["processes"])
    if doc.get("framework") or doc.get("limit_crossings"):
        return True
    pressure = doc.get("reason") == "pressure"
    return any(f.get("oom") and (f.get("retried") == "failed" if pressure else f.get("retried") != "succeeded")
               for f in doc.get("failures", []))


def status_of(opts, args, cwd=None):
    """The exit status report or advise must give for these arguments when they print: 1 when a
    report named shows a run that did not fit, else 0."""
    for a in args[1:]:
        if a.startswith("-"):
            continue
        path = a if os.path.isabs(a) else os.path.join(cwd or opts.data, a)
        if os.path.isfile(path):
            with open(path) as f:
                if did_not_fit(json.load(f)):
                    return 1
    return 0


def compare_golden(opts, name, actual):
    msg = compare_or_update(os.path.join(opts.golden, name), actual, "golden/" + name)
    if msg:
        raise Failed(msg)


def not_checked(opts, why):
    """A check that cannot run here: said on stderr now, and the group ends with exit 77
    (skipped) instead of a pass once everything else in it has passed."""
    if why not in opts.not_checked:
        opts.not_checked.append(why)
        print("not checked: " + why, file=sys.stderr)


# ---- groups ----

def group_golden(opts):
    for name, args in GOLDEN:
        r = run(opts, args)
        want = status_of(opts, args)
        check(r.returncode == want, "%s: exit %d, expected %d: %s" % (name, r.returncode, want, r.stderr.decode()))
        check(r.stderr == b"", "%s: stderr: %s" % (name, r.stderr.decode()))
        compare_golden(opts, name, r.stdout)
    group_golden_variants(opts)
    group_golden_pressure(opts)
    group_golden_capacity(opts)
    group_golden_peak(opts)


def group_golden_peak(opts):
    """Call sites at the peak stand in only for a run that fitted: a report of an out-of-memory
    keeps the sites live at the failure, and a report without the field reads as before."""
    with open(os.path.join(opts.data, "oom-pytorch.json")) as f:
        oom = json.load(f)
    plain = report_of(opts, oom)[1]
    for cs in oom["callsites"]:
        cs["live_bytes_at_peak"] = 2 * cs["live_bytes"] + 1
    code, out, err = report_of(opts, oom)
    check(code == 0 and out == plain and "at the peak" not in out,
          "an out-of-memory with live_bytes_at_peak: the table changed:\n" + out)
    with open(os.path.join(opts.data, "fit-at-peak.json")) as f:
        fit = json.load(f)
    for cs in fit["callsites"]:
        del cs["live_bytes_at_peak"]
    code, out, err = report_of(opts, fit)
    check(code == 0 and "Top call sites by live bytes: nothing was live" in out,
          "a report without live_bytes_at_peak:\n" + out)


def report_of(opts, doc):
    """vramwatch report on a changed copy of a fixture: (exit status, stdout, stderr); the status
    checked against the rule (did_not_fit), and given as 0 when it follows it."""
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    try:
        json.dump(doc, tmp)
        tmp.close()
        r = run(opts, ["report", tmp.name])
        code = r.returncode
        if code in (0, 1):
            check(code == int(did_not_fit(doc)), "report: exit %d against the rule" % code)
            code = 0
        return code, r.stdout.decode(), r.stderr.decode()
    finally:
        os.unlink(tmp.name)


def group_golden_variants(opts):
    """What the golden files cannot show: PyTorch's verdict missing, moot, or alone."""
    with open(os.path.join(opts.data, "oom-mixed.json")) as f:
        mixed = json.load(f)
    with open(os.path.join(opts.golden, "oom-mixed.txt")) as f:
        golden = f.read()
    verdict = [l for l in golden.splitlines(True) if l.startswith("  PyTorch said") or l.startswith("    ")
               and l.split()[0] in ("requested", "in", "allowed", "allocated", "fragmentation")]
    hint = [l for l in golden.splitlines(True) if "expandable_segments:True" in l]
    check(len(verdict) == 6 and len(hint) == 1, "oom-mixed.txt: verdict rows %r, hint %r" % (verdict, hint))

    # A report written before "framework" existed reads as one without a verdict.
    old = json.loads(json.dumps(mixed))
    del old["framework"]
    code, out, err = report_of(opts, old)
    check(code == 0 and err == "", "no framework field: exit %d %s" % (code, err))
    check(out == "".join(l for l in golden.splitlines(True) if l not in verdict and l not in hint),
          "no framework field: the output is not the golden one less the verdict:\n" + out)
    old["framework"] = None
    check(report_of(opts, old)[1] == out, "framework null reads like no framework field")

    # Expandable segments already on: no hint.
    on = json.loads(json.dumps(mixed))
    on["process"]["env"]["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:64,expandable_segments:True"
    code, out, err = report_of(opts, on)
    check(code == 0 and "expandable_segments" not in out and "PyTorch said" in out, "hint with the option on:\n" + out)

    # PyTorch's own limit with no CUDA failure: the verdict leads.
    alone = json.loads(json.dumps(mixed))
    alone["failures"] = []
    code, out, err = report_of(opts, alone)
    check(code == 0 and "\nOut of memory in PyTorch: tried to allocate 1.88 GiB on GPU 0\n" in out and
          "What failed: PyTorch ran out of memory; no CUDA allocation failed for good\n" in out and
          "    fragmentation      3.25 GiB  reserved by PyTorch but unallocated\n" in out,
          "verdict without a failure:\n" + out)


def advise_of(opts, doc, json_out=False):
    """vramwatch advise on a changed copy of a fixture: (exit status, stdout, stderr)."""
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    try:
        json.dump(doc, tmp)
        tmp.close()
        r = run(opts, ["advise"] + (["--json"] if json_out else []) + [tmp.name])
        code = r.returncode
        if code in (0, 1):
            check(code == int(did_not_fit(doc)), "advise: exit %d against the rule" % code)
            code = 0
        return code, r.stdout.decode(), r.stderr.decode()
    finally:
        os.unlink(tmp.name)


def group_golden_pressure(opts):
    """A run whose failures a cache flush and a retry all rescued fitted: report and advise say
    so, whether the report was written at the rescue (reason "pressure") or at exit."""
    with open(os.path.join(opts.data, "pressure.json")) as f:
        pressure = json.load(f)
    lead = ("\nUnder memory pressure: 2 cache flushes, each rescued by its retry (the most one released: "
            "2.50 GiB);\n  no allocation ran out of memory for good\n")
    at_exit = json.loads(json.dumps(pressure))
    at_exit["reason"] = "exit"
    # The library writes "succeeded" when the retry comes; a report that says pressure says no
    # failure was final even where a failure's retry is not known.
    unknown = json.loads(json.dumps(pressure))
    unknown["failures"][1]["retried"] = None
    for what, doc in (("reason pressure", pressure), ("an exit report", at_exit),
                      ("reason pressure, a retry not known", unknown)):
        code, out, err = report_of(opts, doc)
        check(code == 0 and err == "", "%s: report exit %d %s" % (what, code, err))
        check(lead in out and "Out of memory" not in out and "What failed: no allocation ran out of memory for good\n" in out,
              "%s: the post-mortem does not say pressure:\n%s" % (what, out))
        code, out, err = advise_of(opts, doc)
        check(code == 0 and err == "", "%s: advise exit %d %s" % (what, code, err))
        check("out of memory" not in out.lower() and "needs at least" not in out,
              "%s: advise speaks of an out-of-memory:\n%s" % (what, out))
        code, out, err = advise_of(opts, doc, json_out=True)
        adv = json.loads(out)
        # a run that fitted: measured, not a bound (below its batch, with no phase found, the need
        # is only known to be at most the run's own, so "may fit" is honest too)
        check(code == 0 and adv["model"]["basis"] != "bound" and adv["recommendations"][0]["fits"] in (True, None)
              and adv["model"]["lower_bound"] is False,
              "%s: advise --json: %r" % (what, adv["model"]))
    # A failure that is not rescued is still the out-of-memory, in an exit report.
    final = json.loads(json.dumps(at_exit))
    final["failures"][1]["retried"] = None
    code, out, err = report_of(opts, final)
    check(code == 0 and "\nOut of memory at " in out and "Under memory pressure" not in out,
          "an exit report with an unrescued failure:\n" + out)
    # The reason reads as what it is in the header.
    code, out, err = report_of(opts, pressure)
    # (its prose wrapped to the width: the header's paragraph with its lines joined)
    header = " ".join(out.split("\n\n")[0].split())
    check(header.endswith(": an allocation failed and its retry succeeded (memory pressure)"),
          "the header's reason: %r" % header)


def group_golden_capacity(opts):
    """Several reports of one job give advise the same card in any order: the smallest emulated
    limit among them (a run on a 64 GiB card without one, and an OOM under a 16 GiB limit)."""
    adv = os.path.join("..", "..", "advise", "data")
    pair = [os.path.join(adv, "run-b16.json"), os.path.join(adv, "oom-b64.json")]
    seen = []
    for order in (pair, pair[::-1]):
        r = run(opts, ["advise", "--json"] + order)
        want = status_of(opts, ["advise"] + order)
        check(r.returncode == want, "advise %s: exit %d %s" % (order, r.returncode, r.stderr.decode()))
        a = json.loads(r.stdout)
        batch = [x for x in a["recommendations"] if x["kind"] == "batch"]
        seen.append((a["device"]["capacity_bytes"], batch[0]["value"] if batch else None))
        r = run(opts, ["advise"] + order)
        check("capacity 16.00 GiB (the emulated limit)" in r.stdout.decode(), "advise %s: the text names the card" % order)
    check(seen[0] == seen[1] == (16 << 30, 51), "the card and the batch in both orders: %r" % seen)
    # --target wins; without limits, the smallest card.
    r = run(opts, ["advise", "--json", "--target", "24GiB"] + pair[::-1])
    check(json.loads(r.stdout)["device"]["capacity_bytes"] == 24 << 30, "--target wins over the limits")
    tmp = tempfile.mkdtemp(prefix="vramwatch-cli-capacity-")
    try:
        paths = []
        for name, total in (("run-b16.json", 64 << 30), ("oom-b64.json", 24 << 30)):
            with open(os.path.join(opts.data, adv, name)) as f:
                doc = json.load(f)
            for d in doc["devices"]:
                d["limit_bytes"] = None
                d["total_bytes"] = total
            paths.append(os.path.join(tmp, name))
            write_json(paths[-1], doc)
        for order in (paths, paths[::-1]):
            r = run(opts, ["advise", "--json"] + order)
            check(r.returncode == status_of(opts, ["advise"] + order) and
                  json.loads(r.stdout)["device"]["capacity_bytes"] == 24 << 30,
                  "without limits, the smallest card, in either order: %s" % r.stdout.decode()[:300])
    finally:
        shutil.rmtree(tmp)


def mutations(doc, rng, count):
    """Type and range changes at random places of a good report, as JSON text."""
    replacements = [None, True, "text", -1, 1.5, 2 ** 63, -2 ** 63 - 1, 10 ** 30, [], {}, [1, [2]],
                    {"kind": "native"}, "", 0]

    def places(node, path):
        yield path
        if isinstance(node, dict):
            for k, v in node.items():
                yield from places(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from places(v, path + [i])

    all_places = list(places(doc, []))[1:]
    for _ in range(count):
        d = json.loads(json.dumps(doc))
        path = rng.choice(all_places)
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(replacements)
        yield json.dumps(d).encode()


def big_file_refused(opts, tmp):
    """A 1 GB file (sparse: made here, never committed) is refused by every reader at once, from
    its size, without reading it: well under a second and a few MiB each."""
    big = os.path.join(tmp, "big.json")
    with open(big, "wb") as f:
        f.truncate(1000 * 1000 * 1000)
    for args in (["report", big], ["report", "--json", big], ["advise", big], ["timeline", big],
                 ["merge", big, "-o", os.path.join(tmp, "big-out.json")]):
        outs = [tempfile.TemporaryFile() for _ in range(2)]
        start = time.monotonic()
        p = subprocess.Popen([opts.vramwatch] + args, stdout=outs[0], stderr=outs[1], env=base_env())
        _, status, usage = os.wait4(p.pid, 0)
        took = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        for f in outs:
            f.seek(0)
        r = subprocess.CompletedProcess(args, p.returncode, outs[0].read(), outs[1].read())
        line = one_line_error(r, "a 1 GB file: " + args[0])
        check(line.endswith("larger than 256 MiB: not a vramwatch report"), "a 1 GB file: %s" % line)
        # ru_maxrss is in KiB; sanitizer builds carry their own runtime, hence the margin.
        check(usage.ru_maxrss < 256 * 1024, "a 1 GB file: %s took %d KiB" % (args[0], usage.ru_maxrss))
        timed_check(opts, took, "a 1 GB file: " + args[0])
        print("1 GB file, %s: refused in %.3f s, max RSS %d KiB" % (" ".join(args[:-1] if args[0] != "merge" else args[:1]),
                                                                took, usage.ru_maxrss))
    check(not os.path.exists(os.path.join(tmp, "big-out.json")), "a 1 GB file: merge wrote its output")


def group_malformed(opts):
    lines = []
    for name in sorted(f for f in os.listdir(opts.data) if f.startswith("bad-")):
        r = run(opts, ["report", name])
        lines.append(one_line_error(r, name))
        r = run(opts, ["report", "--json", name])
        one_line_error(r, name + " with --json")
    r = run(opts, ["report", "no-such-file.json"])
    lines.append(one_line_error(r, "a missing file"))
    r = run(opts, ["report", "."])
    lines.append(one_line_error(r, "a folder"))
    compare_golden(opts, "malformed.txt", ("\n".join(lines) + "\n").encode())

    # Every reader refuses the same files the same way: advise, timeline and merge (whose -o file
    # must then not be written) give one line and exit 2 too.
    tmp = tempfile.mkdtemp(prefix="vramwatch-cli-bad-")
    try:
        out = os.path.join(tmp, "out.json")
        for name in sorted(f for f in os.listdir(opts.data) if f.startswith("bad-")):
            for args in (["advise", name], ["advise", "--json", name], ["timeline", name],
                         ["timeline", "-o", os.path.join(tmp, "t.svg"), name], ["merge", name, "-o", out],
                         ["merge", "job4-rank0.json", name, "-o", out]):
                one_line_error(run(opts, args), " ".join(args))
                check(not os.path.exists(out), "%s: merge wrote its output" % name)
                check(not os.path.exists(os.path.join(tmp, "t.svg")), "%s: timeline wrote its output" % name)
        big_file_refused(opts, tmp)
    finally:
        shutil.rmtree(tmp)

    # Random damage to good reports: never a crash; either a post-mortem or one line and exit 2.
    rng = random.Random(20241130)
    tmp = tempfile.mkdtemp(prefix="vramwatch-cli-damaged-")
    try:
        n = 0
        for name in GOOD:
            with open(os.path.join(opts.data, name), "rb") as f:
                raw = f.read()
            cases = list(mutations(json.loads(raw), rng, 40))
            for _ in range(10):  # byte-level damage too
                b = bytearray(raw)
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                cases.append(bytes(b))
            for case in cases:
                path = os.path.join(tmp, "m%d.json" % n)
                n += 1
                with open(path, "wb") as f:
                    f.write(case)
                for args in (["report", path], ["report", "--full", path], ["report", "--json", path]):
                    r = run(opts, args)
                    if r.returncode in (0, 1):  # 1: printed, for a run that did not fit
                        check(r.stderr == b"", "%s: exit %d with stderr %r" % (path, r.returncode, r.stderr[:300]))
                    else:
                        one_line_error(r, "%s (%s)" % (path, case[:200]))
        shutil.rmtree(tmp)
    except Failed:
        print("damaged inputs kept in", tmp)
        raise


def group_json(opts):
    for name in GOOD:
        with open(os.path.join(opts.data, name), "rb") as f:
            original = json.loads(f.read())
        r = run(opts, ["report", "--json", name])
        check(r.returncode == status_of(opts, ["report", name]) and r.stderr == b"",
              "%s --json: exit %d %s" % (name, r.returncode, r.stderr))
        # Python reads integers exactly: nanosecond times beyond 2**53 must survive.
        check(json.loads(r.stdout) == original, "%s: --json does not give the same report back" % name)
        tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
        try:
            tmp.write(r.stdout)
            tmp.close()
            again = run(opts, ["report", "--json", tmp.name])
            check(again.stdout == r.stdout, "%s: --json of the --json output differs" % name)
        finally:
            os.unlink(tmp.name)
    r = run(opts, ["report", "--json", "two-devices.json", "rank0-oom.json"])
    check(r.returncode == status_of(opts, ["report", "two-devices.json", "rank0-oom.json"]),
          "job --json: exit %d" % r.returncode)
    job = json.loads(r.stdout)
    check(job["schema"] == "vramwatch.job/1", "job schema")
    check([p["rank"] for p in job["processes"]] == [0, 1], "job processes in rank order")
    with open(os.path.join(opts.data, "rank0-oom.json")) as f:
        check(job["processes"][0]["report"] == json.load(f), "job: the report is not carried whole")
    check(job["first_failure"]["pid"] == 7001, "job: first_failure")
    r = run(opts, ["report", "--json", "exit-clean.json", "two-devices.json"])
    check(json.loads(r.stdout)["first_failure"] is None, "job without an out-of-memory: first_failure null")


def pty_output(opts, args, env):
    """stdout of vramwatch when it is a terminal."""
    master, slave = pty.openpty()
    p = subprocess.Popen([opts.vramwatch] + args, stdout=slave, stderr=subprocess.PIPE, cwd=opts.data, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=30)
    os.close(master)
    return out


def group_usage(opts):
    one_line_error(run(opts, []), "no command")
    one_line_error(run(opts, ["frobnicate"]), "an unknown command")
    r = run(opts, ["--help"])
    check(r.returncode == 0 and b"report" in r.stdout and b"run" in r.stdout, "--help")
    for later in LATER:
        check(later.encode() in r.stdout, "--help lists %s" % later)
        line = one_line_error(run(opts, [later, "x.json"]), later)
        check("not yet available" in line, "%s: says it is not yet available: %s" % (later, line))
        one_line_error(run(opts, [later, "--help"]), later + " --help")
    r = run(opts, ["--version"])
    check(r.returncode == 0 and r.stdout.startswith(b"vramwatch "), "--version: %r" % r.stdout)
    for cmd in ("report", "run", "advise", "fit", "merge", "timeline", "sim"):
        r = run(opts, [cmd, "--help"])
        check(r.returncode == 0 and r.stdout.startswith(b"usage: vramwatch " + cmd.encode()), cmd + " --help")
    one_line_error(run(opts, ["report"]), "report without a file")
    one_line_error(run(opts, ["report", "--bogus", "oom-pytorch.json"]), "report with an unknown option")
    r = run(opts, ["report", "oom-pytorch.json", "--json"])
    check(r.returncode == 1 and r.stdout.startswith(b"{"), "options after the file")

    # Colour: a terminal, unless NO_COLOR is set or TERM is dumb.
    env = base_env()
    del env["NO_COLOR"]
    env["TERM"] = "xterm-256color"
    check(b"\033[" in pty_output(opts, ["report", "oom-pytorch.json"], env), "colour on a terminal")
    check(b"\033[" not in run(opts, ["report", "oom-pytorch.json"], env=env).stdout, "no colour into a pipe")
    check(b"\033[" not in pty_output(opts, ["report", "oom-pytorch.json"], dict(env, NO_COLOR="1")),
          "no colour with NO_COLOR")
    check(b"\033[" not in pty_output(opts, ["report", "oom-pytorch.json"], dict(env, TERM="dumb")),
          "no colour with TERM=dumb")


def read_env_file(path):
    values = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                values[k] = v
    return values


def group_run(opts):
    if not opts.child or not opts.stub:
        print("cannot run: the run group needs --child and --stub", file=sys.stderr)
        return SKIP
    stub = os.path.realpath(opts.stub)
    work = tempfile.mkdtemp(prefix="vramwatch-cli-run-")
    try:
        env = base_env({"VRAMWATCH_LIB": stub})

        def vw(args, extra=None, cwd=work):
            return run(opts, args, env=dict(env, **(extra or {})), cwd=cwd)

        # The child's status is passed through; a signal N gives 128+N.
        for args, code in ((["exit", "0"], 0), (["exit", "3"], 3), (["signal", "9"], 137),
                           (["signal", "15"], 143)):
            r = vw(["run", "--", opts.child] + args)
            check(r.returncode == code, "run %s: exit %d, expected %d" % (args, r.returncode, code))
            check(b"no report: the program made no device allocation" in r.stderr, "run %s: no-report line" % args)

        # Variables: LD_PRELOAD first, kept entries after; VRAMWATCH_DIR absolute; limit and mode.
        envfile = os.path.join(work, "env.txt")
        r = vw(["run", "--dir", "reports", "--limit", "8GiB", "--", opts.child, "env", envfile],
               {"LD_PRELOAD": "libm.so.6"})
        check(r.returncode == 0, "run env: exit %d %s" % (r.returncode, r.stderr))
        e = read_env_file(envfile)
        check(e.get("LD_PRELOAD") == stub + ":libm.so.6", "LD_PRELOAD: %r" % e.get("LD_PRELOAD"))
        check(e.get("preloaded") == "1", "the library was not preloaded")
        check(e.get("VRAMWATCH_DIR") == os.path.join(work, "reports"), "VRAMWATCH_DIR: %r" % e.get("VRAMWATCH_DIR"))
        check(e.get("VRAMWATCH_LIMIT") == "8GiB" and e.get("VRAMWATCH_LIMIT_MODE") == "enforce", "limit: %r" % e)
        check("PYTORCH_CUDA_ALLOC_CONF" not in e, "PYTORCH_CUDA_ALLOC_CONF set without --tensors")

        r = vw(["run", "--limit=0:16GiB,1:8000MB", "--observe", "--", opts.child, "env", envfile],
               {"VRAMWATCH_DIR": "rel"})
        e = read_env_file(envfile)
        check(e.get("VRAMWATCH_LIMIT") == "0:16GiB,1:8000MB" and e.get("VRAMWATCH_LIMIT_MODE") == "observe",
              "observe: %r" % e)
        check(e.get("VRAMWATCH_DIR") == os.path.join(work, "rel"), "VRAMWATCH_DIR from the environment: %r" % e)
        check(e.get("LD_PRELOAD") == stub, "LD_PRELOAD without earlier entries: %r" % e.get("LD_PRELOAD"))

        r = vw(["run", "--", opts.child, "env", envfile])
        e = read_env_file(envfile)
        check(e.get("VRAMWATCH_DIR") == work, "VRAMWATCH_DIR defaults to the current folder: %r" % e)
        check("VRAMWATCH_LIMIT" not in e and "VRAMWATCH_LIMIT_MODE" not in e, "no limit unless asked: %r" % e)

        # --tensors merges backend:cudaMallocAsync into what is there, and says so in one line.
        r = vw(["run", "--tensors", "--", opts.child, "env", envfile],
               {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,backend:native"})
        e = read_env_file(envfile)
        check(e.get("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True,backend:cudaMallocAsync",
              "--tensors merge: %r" % e.get("PYTORCH_CUDA_ALLOC_CONF"))
        said = [l for l in r.stderr.decode().splitlines() if "--tensors" in l]
        check(len(said) == 1 and said[0].startswith("vramwatch: --tensors: PYTORCH_CUDA_ALLOC_CONF=") and
              "not cache segments" in said[0], "--tensors line: %r" % said)
        r = vw(["run", "--tensors", "--", opts.child, "env", envfile], {"PYTORCH_ALLOC_CONF": "max_split_size_mb:128"})
        e = read_env_file(envfile)
        check(e.get("PYTORCH_CUDA_ALLOC_CONF") == "backend:cudaMallocAsync", "--tensors alone: %r" % e)
        check(e.get("PYTORCH_ALLOC_CONF") == "max_split_size_mb:128,backend:cudaMallocAsync",
              "--tensors and PYTORCH_ALLOC_CONF: %r" % e)

        # Bad usage: one line, exit 2, and the command never runs.
        os.unlink(envfile)
        for args, what in ((["--limit", "16XB"], "a bad unit"), (["--limit", "0"], "a zero limit"),
                           (["--limit", "GiB"], "no number"), (["--limit", "0:8G,0:4G"], "a device twice"),
                           (["--limit", "99999999999999999999"], "a huge limit"), (["--observe"], "--observe alone"),
                           (["--bogus"], "an unknown option")):
            line = one_line_error(vw(["run"] + args + ["--", opts.child, "env", envfile]), what)
            check(not os.path.exists(envfile), "%s: the command ran anyway" % what)
        one_line_error(vw(["run"]), "no command")
        one_line_error(vw(["run", "--dir"]), "--dir without a value")
        one_line_error(vw(["run", "--dir=", "--", opts.child, "exit", "0"]), "--dir with an empty value")
        line = one_line_error(vw(["run", "--", "/no/such/program"]), "a command that does not exist")
        check("/no/such/program" in line, "names the command: %s" % line)
        line = one_line_error(run(opts, ["run", "--", opts.child, "exit", "0"],
                                  env=dict(env, VRAMWATCH_LIB="/no/such/lib.so"), cwd=work), "a missing VRAMWATCH_LIB")

        # A report folder the library refuses (lib/base/safefile.c) is refused before the job runs:
        # the job used to run whole, then "no report: the program made no device allocation".
        open_dir = os.path.join(work, "world")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        afile = os.path.join(work, "a-file")
        open(afile, "w").close()
        bad = [(open_dir, "anyone may write to it", None), (os.path.join(open_dir, "new", "deeper"),
               "anyone may write to it", None), (afile, "not a folder", None)]
        if os.geteuid() == 0:
            theirs = os.path.join(work, "theirs")
            os.mkdir(theirs, 0o755)
            os.chown(theirs, 65534, 65534)
            bad.append((theirs, "theirs", None))
            link = os.path.join(work, "their-link")
            os.symlink(work, link)
            os.lchown(link, 65534, 65534)
            bad.append((os.path.join(link, "r"), "their-link", None))
        else:
            not_checked(opts, "run --dir refuses a folder or link of another user (needs root)")
        for d, words, _ in bad:
            for args in (["run", "--dir", d], ["run"]):
                extra = {"VRAMWATCH_DIR": d} if args == ["run"] else None
                line = one_line_error(vw(args + ["--", opts.child, "env", envfile], extra), "run, folder %s" % d)
                check(words in line and not os.path.exists(envfile), "report folder %s: %s" % (d, line))
        check(not os.path.exists(os.path.join(open_dir, "new")), "nothing made in a refused folder")
        os.chmod(open_dir, 0o1777)  # with the sticky bit, as /tmp: accepted
        r = vw(["run", "--dir", os.path.join(open_dir, "mine"), "--", opts.child, "env", envfile])
        check(r.returncode == 0 and os.path.exists(envfile), "a sticky world-writable folder: exit %d %r" %
              (r.returncode, r.stderr))

        # Reports: the child's own, one written by a grandchild (a shell in between), none, stale ones.
        host = socket.gethostname()
        rdir = os.path.join(work, "r1")
        r = vw(["run", "--dir", rdir, "--", opts.child, "report"])
        check(r.returncode == 0, "run report: exit %d %s" % (r.returncode, r.stderr))
        # the run did not fit: the advice's answer first, then the post-mortem
        check(r.stdout.startswith(b"Answer: ") and b"\n\nvramwatch report: cli-child report\n" in r.stdout,
              "the answer, then the post-mortem: %r" % r.stdout[:300])
        check(b"What failed: cudaMalloc of 1.00 MiB on device 0" in r.stdout, "post-mortem failure: %r" % r.stdout)
        rdir2 = os.path.join(work, "r2")
        os.mkdir(rdir2)
        stale = os.path.join(rdir2, "vramwatch-%s-1.json" % host)
        with open(os.path.join(opts.data, "exit-clean.json")) as f:
            doc = json.load(f)
        doc["process"]["host"] = host
        with open(stale, "w") as f:
            json.dump(doc, f)
        old = time.time() - 3600
        os.utime(stale, (old, old))
        r = vw(["run", "--dir", rdir2, "--", "sh", "-c", '"$0" report; exit 4', opts.child])
        check(r.returncode == 4, "through a shell: exit %d %s" % (r.returncode, r.stderr))
        check(r.stdout.count(b"vramwatch report: ") == 1 and b"saxpy" not in r.stdout,
              "through a shell: one report, not the stale one: %r" % r.stdout[:300])
        r = vw(["run", "--dir", rdir2, "--", opts.child, "exit", "0"])
        check(r.stdout == b"" and b"no report" in r.stderr, "a stale report is not this run's")
        r = vw(["run", "--dir", rdir2, "--", "sh", "-c", '"$0" report; "$0" report', opts.child])
        # Two runs of the child one after the other, from one shell: two runs, not one job.
        check(r.stdout.startswith(b"vramwatch: 2 separate runs in 2 reports"),
              "two reports, one after the other: two runs: %r" % r.stdout[:200])
        # A dump on request beside the process's own report: one process, its latest report.
        rdir3 = os.path.join(work, "r3")
        r = vw(["run", "--dir", rdir3, "--", opts.child, "dump-report"])
        dumps = glob.glob(os.path.join(rdir3, "vramwatch-*-request-1.json"))
        check(len(dumps) == 1 and b"separate runs" not in r.stdout and b"What failed: cudaMalloc" in r.stdout,
              "a dump and the report of one process: one process: %r" % r.stdout[:300])
        check(r.stderr.count(b"earlier reports of the same process") == 1 and
              os.path.basename(dumps[0]).encode() in r.stderr,
              "the dump left out, said once: %r" % r.stderr)
        r = vw(["report", dumps[0]])
        check(r.returncode != 2 and b"Out of memory at write_report" in r.stdout,
              "report reads a dump like any other: %r" % r.stdout[:300])

        # Signals sent to vramwatch reach the command.
        ready = os.path.join(work, "ready")
        p = subprocess.Popen([opts.vramwatch, "run", "--", opts.child, "wait", ready], cwd=work, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(300):
            if os.path.exists(ready):
                break
            time.sleep(0.05)
        check(os.path.exists(ready), "the waiting child did not start")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        check(p.returncode == 128 + signal.SIGTERM, "SIGTERM forwarded: exit %d %s" % (p.returncode, err))

        # Without VRAMWATCH_LIB: the library next to the executable, else the build tree's
        # BUILD/lib beside BUILD/tools/vramwatch, else the install libdir. The stub stands in for
        # the library, copied into those places, so this holds whatever the real library does.
        layout = os.path.join(work, "layout")
        exe_dir = os.path.join(layout, "tools", "vramwatch")
        os.makedirs(exe_dir)
        os.makedirs(os.path.join(layout, "lib"))
        exe = os.path.join(exe_dir, "vramwatch")
        shutil.copy2(opts.vramwatch, exe)
        in_tree = os.path.join(layout, "lib", "libvramwatch.so")
        shutil.copy2(stub, in_tree)
        no_lib_env = base_env()

        def found(executable):
            if os.path.exists(envfile):
                os.unlink(envfile)
            r = subprocess.run([executable, "run", "--", opts.child, "env", envfile], env=no_lib_env, cwd=work,
                               capture_output=True, timeout=60)
            return r, read_env_file(envfile) if os.path.exists(envfile) else {}

        r, e = found(exe)
        check(e.get("LD_PRELOAD") == in_tree and e.get("preloaded") == "1", "build tree library: %r %r" % (e, r.stderr))
        # A build folder set up before the soname has only BUILD/lib/libvramwatch.so.0 after a
        # rebuild: found by that name.
        os.rename(in_tree, in_tree + ".0")
        r, e = found(exe)
        check(e.get("LD_PRELOAD") == in_tree + ".0", "build tree library by its soname: %r %r" % (e, r.stderr))
        os.rename(in_tree + ".0", in_tree)
        beside = os.path.join(exe_dir, "libvramwatch.so")
        shutil.copy2(stub, beside)
        r, e = found(exe)
        check(e.get("LD_PRELOAD") == beside, "library next to the executable: %r" % e)
        bare = os.path.join(work, "bare")
        os.mkdir(bare)
        shutil.copy2(opts.vramwatch, os.path.join(bare, "vramwatch"))
        r, e = found(os.path.join(bare, "vramwatch"))
        if r.returncode == 2:
            line = one_line_error(r, "no library anywhere")
            check("cannot find libvramwatch.so" in line and "VRAMWATCH_LIB" in line, "no library: %s" % line)
        else:  # an installed copy in the libdir
            check(not e.get("LD_PRELOAD", "").startswith(bare), "no library: %r" % e)

        # The build really has that layout (checked by path: the real library is not run here).
        if opts.libvramwatch:
            tree = os.path.join(os.path.dirname(opts.vramwatch), "..", "..", "lib")
            names = [n for n in ("libvramwatch.so", "libvramwatch.so.0") if os.path.exists(os.path.join(tree, n))]
            check(names and os.path.realpath(os.path.join(tree, names[0])) == os.path.realpath(opts.libvramwatch),
                  "libvramwatch is not at BUILD/lib/libvramwatch.so (or .so.0): %s" % opts.libvramwatch)
        shutil.rmtree(work)
    except Failed:
        print("files kept in", work)
        raise


def standins(folder):
    """The stand-ins run --sim preloads from folder, as the rule says: every regular file (not a
    symbolic link) named lib*.so.*, in the order of their names."""
    folder = os.path.realpath(folder)
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))
            if fnmatch.fnmatchcase(n, "lib*.so.*") and not os.path.islink(os.path.join(folder, n))
            and os.path.isfile(os.path.join(folder, n))]


def group_sim(opts):
    """The simulated card: run --sim, fit --sim and sim build one environment (the library, then
    every stand-in, in LD_PRELOAD; the folder first on LD_LIBRARY_PATH; SIMGPU_MEMORY for a size,
    SIMGPU_CARD for a name); a job whose RPATH names another libcudart.so.13 gets the simulated
    card all the same; run --sim leaves a report of that card; sim leaves nothing of vramwatch."""
    if not (opts.child and opts.stub and opts.sim and opts.sim_job):
        print("cannot run: the sim group needs --child, --stub, --sim and --sim-job", file=sys.stderr)
        return SKIP
    stub = os.path.realpath(opts.stub)
    sim = os.path.realpath(opts.sim)
    libs = standins(sim)
    check(os.path.join(sim, "libcudart.so.13") in libs and os.path.join(sim, "libcuda.so.1") in libs,
          "the simulator's folder holds its runtime and driver: %r" % libs)
    work = tempfile.mkdtemp(prefix="vramwatch-cli-sim-")
    try:
        env = base_env({"VRAMWATCH_LIB": stub})
        for k in list(env):
            if k.startswith("SIMGPU_") or k in ("LD_LIBRARY_PATH", "PYTHONPATH"):
                del env[k]
        envfile = os.path.join(work, "env.txt")

        def vw(args, extra=None, cwd=work, timeout=60):
            if os.path.exists(envfile):
                os.unlink(envfile)
            return run(opts, args, env=dict(env, **(extra or {})), cwd=cwd, timeout=timeout)

        def child_env(args, extra=None, code=0):
            r = vw(args + [opts.child, "env", envfile], extra)
            check(r.returncode == code, "%s: exit %d, expected %d: %s" % (" ".join(args), r.returncode, code,
                                                                         r.stderr.decode()))
            check(os.path.exists(envfile), "%s: the command did not run" % " ".join(args))
            return read_env_file(envfile), r

        # ---- run --sim: the library, then every stand-in, before what LD_PRELOAD held ----
        e, _ = child_env(["run", "--sim", "8GiB", "--"],
                         {"LD_PRELOAD": "libm.so.6", "LD_LIBRARY_PATH": "/opt/x", "SIMGPU_CARD": "H100"})
        check(e.get("LD_PRELOAD") == ":".join([stub] + libs + ["libm.so.6"]),
              "run --sim 8GiB: LD_PRELOAD is the library, the stand-ins, then the rest: %r" % e.get("LD_PRELOAD"))
        check(e.get("preloaded") == "1", "run --sim: the library was not preloaded")
        check(e.get("LD_LIBRARY_PATH") == sim + ":/opt/x",
              "run --sim: the folder first on LD_LIBRARY_PATH: %r" % e.get("LD_LIBRARY_PATH"))
        check(e.get("SIMGPU_MEMORY") == str(8 << 30) and "SIMGPU_CARD" not in e,
              "run --sim 8GiB: SIMGPU_MEMORY in bytes, SIMGPU_CARD unset: %r" % e)
        check(e.get("VRAMWATCH_DIR") == work and "VRAMWATCH_LIMIT" not in e, "run --sim: the rest as before: %r" % e)
        # the option's other spellings, and CMD without "--"
        for args in (["run", "--sim=8GiB"], ["run", "--sim", "8G"], ["run", "--sim", "8589934592"]):
            e2, _ = child_env(args)
            check(e2.get("SIMGPU_MEMORY") == str(8 << 30) and e2.get("LD_PRELOAD") == ":".join([stub] + libs),
                  "%s: %r" % (" ".join(args), e2))
        e, _ = child_env(["run", "--sim", "1.5GiB", "--limit", "1GiB", "--"], {"LD_LIBRARY_PATH": sim})
        check(e.get("SIMGPU_MEMORY") == str(3 << 29) and e.get("VRAMWATCH_LIMIT") == "1GiB",
              "run --sim 1.5GiB --limit 1GiB: %r" % e)
        check(e.get("LD_LIBRARY_PATH") == sim, "the folder once on LD_LIBRARY_PATH: %r" % e.get("LD_LIBRARY_PATH"))

        # a card's name, in any case: SIMGPU_CARD, and SIMGPU_MEMORY unset
        for given, key in (("h100", "H100"), ("H200", "H200"), ("a100_80gb", "A100-80GB"), ("V100", "V100")):
            e, _ = child_env(["run", "--sim", given, "--"], {"SIMGPU_MEMORY": "64GiB"})
            check(e.get("SIMGPU_CARD") == key and "SIMGPU_MEMORY" not in e,
                  "run --sim %s: SIMGPU_CARD=%s, SIMGPU_MEMORY unset: %r" % (given, key, e))
            check(e.get("LD_PRELOAD") == ":".join([stub] + libs), "run --sim %s: LD_PRELOAD %r" % (given, e))

        # ---- fit --sim: every trial on the card, the library first ----
        # (cli-child leaves no report: the trial is an error, and fit exits 1 after it)
        r = vw(["fit", "--sim", "1.5GiB", "--flag", "--bs", "--", opts.child, "env", envfile, "--bs", "4"])
        check(r.returncode == 1 and os.path.exists(envfile), "fit --sim: exit %d: %s" % (r.returncode, r.stderr))
        e = read_env_file(envfile)
        check(e.get("LD_PRELOAD") == ":".join([stub] + libs) and e.get("LD_LIBRARY_PATH") == sim
              and e.get("SIMGPU_MEMORY") == str(3 << 29) and e.get("VRAMWATCH_LIMIT") == "90%",
              "fit --sim 1.5GiB: the trial's environment: %r" % e)
        r = vw(["fit", "--sim", "t4", "--flag", "--bs", "--", opts.child, "env", envfile, "--bs", "4"])
        check(read_env_file(envfile).get("SIMGPU_CARD") == "T4", "fit --sim t4: SIMGPU_CARD=T4")

        # ---- sim: the same card with nothing of vramwatch ----
        comp = os.path.join(work, "companion")
        os.mkdir(comp)
        open(os.path.join(comp, "vramwatch_companion.py"), "w").close()
        # a library exported by hand (the stub, under the library's name: found if it stays)
        exported = os.path.join(work, "vw", "libvramwatch.so")
        os.mkdir(os.path.dirname(exported))
        shutil.copy2(stub, exported)
        outside = {"LD_PRELOAD": exported + " libm.so.6", "PYTHONPATH": comp + ":/opt/py",
                   "LD_LIBRARY_PATH": "/opt/my libs", "SIMGPU_CARD": "T4"}
        e, r = child_env(["sim", "8GiB", "--"], outside)
        check(r.stdout == b"" and r.stderr == b"", "sim: says nothing of its own: %r %r" % (r.stdout, r.stderr))
        check(e.get("LD_PRELOAD") == ":".join(libs + ["libm.so.6"]) and e.get("preloaded") == "0",
              "sim: the stand-ins alone, libvramwatch.so taken out: %r" % e)
        check(e.get("PYTHONPATH") == "/opt/py", "sim: the companion out of PYTHONPATH: %r" % e.get("PYTHONPATH"))
        check(e.get("LD_LIBRARY_PATH") == sim + ":/opt/my libs" and e.get("SIMGPU_MEMORY") == str(8 << 30)
              and "SIMGPU_CARD" not in e, "sim: the card: %r" % e)
        e_no_dashes, _ = child_env(["sim", "8GiB"], outside)
        check(e_no_dashes == e, "sim CARD CMD without --: %r" % e_no_dashes)

        # sim --env: the same variables as shell lines, for eval
        r = vw(["sim", "--env", "8GiB"], outside)
        text = r.stdout.decode()
        check(r.returncode == 0 and r.stderr == b"", "sim --env: exit %d %r" % (r.returncode, r.stderr))
        check(all(l.startswith("export ") or l.startswith("unset ") for l in text.splitlines())
              and "unset SIMGPU_CARD\n" in text and "export LD_LIBRARY_PATH='" in text,
              "sim --env: export and unset lines, quoted where needed:\n" + text)
        shell = subprocess.run(["sh", "-c", 'eval "$1"; exec "$2" env "$3"', "sh", text, opts.child, envfile],
                               env=dict(env, **outside), capture_output=True, timeout=60)
        check(shell.returncode == 0 and read_env_file(envfile) == e,
              "eval \"$(vramwatch sim --env 8GiB)\" gives what sim gives: %r" % read_env_file(envfile))
        r = vw(["sim", "--env", "H100"])
        check(r.returncode == 0 and "unset" not in r.stdout.decode() and "export SIMGPU_CARD=H100\n" in r.stdout.decode(),
              "sim --env H100, nothing to unset:\n" + r.stdout.decode())

        # exit status: CMD's own, a signal as a signal (sim becomes CMD)
        for args, code in ((["exit", "0"], 0), (["exit", "3"], 3), (["signal", "9"], -9)):
            r = vw(["sim", "1GiB", "--", opts.child] + args)
            check(r.returncode == code and r.stderr == b"", "sim %s: exit %d, expected %d" % (args, r.returncode, code))

        # ---- a job that finds another libcudart.so.13 through its RPATH ----
        job = [opts.sim_job, "256", "8"]
        bare = subprocess.run(job, env=dict(env, LD_LIBRARY_PATH=sim), capture_output=True, timeout=60)
        check(bare.returncode == 4 and b"total=12345 " in bare.stdout,
              "sim-job with only LD_LIBRARY_PATH: its RPATH's decoy wins (exit %d): %r" % (bare.returncode, bare.stdout))
        jobdir = os.path.join(work, "job")
        os.mkdir(jobdir)
        truth = dict(env)
        if opts.libvramwatch:  # a library exported by hand is taken out too
            truth.update(LD_PRELOAD=os.path.realpath(opts.libvramwatch), VRAMWATCH_DIR=jobdir)
        r = run(opts, ["sim", "1GiB", "--"] + job, env=truth, cwd=jobdir)
        check(r.returncode == 3 and b"total=%d " % (1 << 30) in r.stdout and b"error=2\n" in r.stdout,
              "sim 1GiB: the job runs out of memory on a 1 GiB simulated card (exit %d): %r" % (r.returncode, r.stdout))
        check(os.listdir(jobdir) == [], "sim: no report, nothing left: %r" % os.listdir(jobdir))
        if not opts.libvramwatch:
            not_checked(opts, "run --sim with the real library (no --libvramwatch)")
        else:
            rdir = os.path.join(work, "reports")
            r = run(opts, ["run", "--sim", "1GiB", "--dir", rdir, "--"] + job,
                    env=dict(env, VRAMWATCH_LIB=os.path.realpath(opts.libvramwatch)), cwd=work)
            check(r.returncode == 3 and b"total=%d " % (1 << 30) in r.stdout,
                  "run --sim 1GiB: the job's status and its card (exit %d): %r" % (r.returncode, r.stdout[:300]))
            reports = [f for f in os.listdir(rdir) if f.startswith("vramwatch-") and f.endswith(".json")]
            check(len(reports) == 1, "run --sim: one report: %r" % reports)
            with open(os.path.join(rdir, reports[0])) as f:
                doc = json.load(f)
            dev = doc["devices"][0]
            check(dev["total_bytes"] == 1 << 30 and dev["limit_bytes"] is None,
                  "run --sim 1GiB: the report's capacity is 1 GiB: %r" % dev)
            check(doc["failures"] and doc["failures"][0]["oom"] and doc["failures"][0]["size"] == 256 << 20,
                  "run --sim: the failure is the job's 256 MiB: %r" % doc["failures"][:1])
            check(b"What failed: cudaMalloc of 256.00 MiB on device 0" in r.stdout, "run --sim: the post-mortem: %r"
                  % r.stdout[-600:])
            # a named card: the report's capacity is what the job sees on that card without vramwatch
            r = run(opts, ["sim", "v100", "--", opts.sim_job, "1", "1"], env=env, cwd=jobdir)
            truth = [l for l in r.stdout.decode().splitlines() if l.startswith("total=")]
            check(r.returncode == 0 and truth and truth[0] != "total=%d error=0" % (16 << 30),
                  "sim v100: the job sees the V100's memory, not the default 16 GiB: %r" % r.stdout)
            rdir = os.path.join(work, "reports-v100")
            r = run(opts, ["run", "--sim", "v100", "--dir", rdir, "--", opts.sim_job, "1", "1"],
                    env=dict(env, VRAMWATCH_LIB=os.path.realpath(opts.libvramwatch)), cwd=work)
            reports = glob.glob(os.path.join(rdir, "vramwatch-*.json"))
            check(r.returncode == 0 and len(reports) == 1, "run --sim v100: exit %d, reports %r" % (r.returncode, reports))
            with open(reports[0]) as f:
                dev = json.load(f)["devices"][0]
            check(truth and truth[0] == "total=%d error=0" % dev["total_bytes"],
                  "run --sim v100: the report's capacity %d is the card's: %r" % (dev["total_bytes"], truth))
            # its name as sim --help lists it: "  V100   15.78 GiB  Tesla V100-SXM2-16GB"
            listed = [l.split(None, 3)[3] for l in vw(["sim", "--help"]).stdout.decode().splitlines()
                      if l.startswith("  V100 ")]
            check(listed and dev["name"] == listed[0],
                  "run --sim v100: the report's device is the card: %r, listed %r" % (dev["name"], listed))

        if opts.libvramwatch:
            # A warning is one line whatever it quotes: VRAMWATCH_LOG holding a newline and an
            # ESC gave a forged second "vramwatch: " line and a raw ESC (library, lib/base/log.c).
            forged = "debug\n\x1b[31mvramwatch: forged \x7f\xff"
            rdir = os.path.join(work, "reports-log")
            r = run(opts, ["run", "--sim", "1GiB", "--dir", rdir, "--", opts.sim_job, "1", "1"],
                    env=dict(env, VRAMWATCH_LIB=os.path.realpath(opts.libvramwatch),
                             VRAMWATCH_LOG=forged.encode("latin-1")), cwd=work)
            lines = r.stderr.split(b"\n")
            warned = [l for l in lines if l.startswith(b"vramwatch: VRAMWATCH_LOG=")]
            check(b"\x1b" not in r.stderr and b"\x7f" not in r.stderr and b"\xff" not in r.stderr,
                  "VRAMWATCH_LOG forged: a raw control byte on stderr: %r" % r.stderr)
            check(not any(l.startswith(b"vramwatch: forged") for l in lines),
                  "VRAMWATCH_LOG forged: a forged line: %r" % r.stderr)
            check(warned == [b"vramwatch: VRAMWATCH_LOG=debug\\n\\e[31mvramwatch: forged \\x7f\\xff is not quiet, "
                             b"warn, info or debug; using warn"],
                  "VRAMWATCH_LOG forged: one escaped warning: %r" % r.stderr)
        if opts.libvramwatch:
            # A job that allocated, whose report folder became unusable while it ran (the
            # library refuses it, one warning): run says so, never "made no device allocation".
            rdir = os.path.join(work, "reports-unusable")
            os.mkdir(rdir, 0o700)
            r = run(opts, ["run", "--sim", "1GiB", "--dir", rdir, "--", "sh", "-c", 'chmod 777 "$1" && exec "$0" 1 1',
                           opts.sim_job, rdir], env=dict(env, VRAMWATCH_LIB=os.path.realpath(opts.libvramwatch)),
                    cwd=work)
            err = r.stderr.decode()
            check(r.returncode == 0 and "made no device allocation" not in err and
                  ("vramwatch: no report was written, though the program allocated device memory (peak 1.00 MiB): "
                   "the report folder %s became unusable: anyone may write to it" % rdir) in err,
                  "a folder made unusable during the run: exit %d %r" % (r.returncode, err))
        # The command's own messages: a file name holding a newline, an ESC, DEL and a byte
        # that is not UTF-8 is named on one line, escaped the same way (util_err).
        r = vw(["report", b"a\nvramwatch: forged\x1b[31m\x7f\xff.json"])
        line = one_line_error(r, "a file name with control bytes")
        check(line == "vramwatch: a\\nvramwatch: forged\\e[31m\\x7f\\xff.json: cannot open: No such file or directory",
              "a file name with control bytes: %r" % line)

        # ---- mistakes: one line, exit 2, and the command never runs ----
        def refused(args, words, extra=None):
            r = vw(args + [opts.child, "env", envfile] + (["--bs", "4"] if args[0] == "fit" else []), extra)
            line = one_line_error(r, " ".join(args))
            check(not os.path.exists(envfile), "%s: the command ran anyway" % " ".join(args))
            for w in words:
                check(w in line, "%s: the line does not say %r: %s" % (" ".join(args), w, line))

        for pre in (["run", "--sim"], ["fit", "--flag", "--bs", "--sim"], ["sim"]):
            refused(pre + ["Z100", "--"], ["Z100", "V100", "H100", "A100-80GB"])
            refused(pre + ["16", "--"], ["did you mean 16GiB?"])
            refused(pre + ["0.5KiB", "--"], ["at least 1 MiB"])
            refused(pre + ["0", "--"], ["16GiB"])
            refused(pre + ["17TiB", "--"], ["16 TiB"])
            refused(pre + ["16XB", "--"], ["16XB", "unit"])
            refused(pre + ["1GiB", "--"], ["VRAMWATCH_SIMGPU_DIR=/no/such/folder", "no such folder"],
                    {"VRAMWATCH_SIMGPU_DIR": "/no/such/folder"})
            empty = os.path.join(work, "empty")
            os.makedirs(empty, exist_ok=True)
            refused(pre + ["1GiB", "--"], ["no stand-in library"], {"VRAMWATCH_SIMGPU_DIR": empty})
        one_line_error(vw(["sim", "--env", "/no/card"]), "sim --env with a bad card")
        one_line_error(vw(["sim"]), "sim without a card")
        one_line_error(vw(["sim", "1GiB"]), "sim without a command")
        one_line_error(vw(["sim", "1GiB", "--"]), "sim with -- and no command")
        one_line_error(vw(["sim", "--env", "1GiB", "--", opts.child]), "sim --env with a command")
        line = one_line_error(vw(["sim", "1GiB", "--", "/no/such/program"]), "sim: a command that does not exist")
        check("/no/such/program" in line, "names the command: %s" % line)

        # ---- which files stand in: regular lib*.so.* files, in the order of their names ----
        fake = os.path.join(work, "fake")
        os.mkdir(fake)
        for n in ("libnvidia-ml.so.1", "libcudart.so.13", "libcuda.so.1"):
            shutil.copy2(os.path.join(sim, n), os.path.join(fake, n))
        os.symlink("libcuda.so.1", os.path.join(fake, "libcuda.so"))
        os.symlink("libcuda.so.1", os.path.join(fake, "libzz.so.9"))
        os.mkdir(os.path.join(fake, "libcuda.so.1.p"))
        open(os.path.join(fake, "libfoo.so"), "w").close()
        open(os.path.join(fake, "README"), "w").close()
        want = [os.path.join(fake, n) for n in ("libcuda.so.1", "libcudart.so.13", "libnvidia-ml.so.1")]
        check(standins(fake) == want, "the rule of the test itself: %r" % standins(fake))
        e, _ = child_env(["run", "--sim", "2GiB", "--"], {"VRAMWATCH_SIMGPU_DIR": "fake"})
        check(e.get("LD_PRELOAD") == ":".join([stub] + want) and e.get("LD_LIBRARY_PATH") == fake,
              "VRAMWATCH_SIMGPU_DIR=fake: its regular lib*.so.* files, sorted, by absolute path: %r" % e)

        # ---- where the folder is found: the build tree beside the program, else the install ----
        layout = os.path.join(work, "layout")
        exe_dir = os.path.join(layout, "tools", "vramwatch")
        tree = os.path.join(layout, "tools", "simgpu")
        os.makedirs(exe_dir)
        shutil.copytree(fake, tree, symlinks=True)
        shutil.copy2(opts.vramwatch, os.path.join(exe_dir, "vramwatch"))
        r = subprocess.run([os.path.join(exe_dir, "vramwatch"), "sim", "--env", "1GiB"], env=env,
                           capture_output=True, timeout=60)
        check(r.returncode == 0 and ("export LD_LIBRARY_PATH=%s\n" % tree).encode() in r.stdout,
              "the build tree's tools/simgpu beside tools/vramwatch: %r %r" % (r.stdout, r.stderr))
        bare_dir = os.path.join(work, "bare")
        os.mkdir(bare_dir)
        shutil.copy2(opts.vramwatch, os.path.join(bare_dir, "vramwatch"))
        r = subprocess.run([os.path.join(bare_dir, "vramwatch"), "sim", "--env", "1GiB"], env=env,
                           capture_output=True, timeout=60)
        if r.returncode == 2:
            line = one_line_error(r, "no simulator anywhere")
            check("no simulated GPU" in line and "VRAMWATCH_SIMGPU_DIR" in line, "no simulator: %s" % line)
        else:  # an installed copy
            check(r.returncode == 0 and bare_dir.encode() not in r.stdout, "no build tree: %r" % r.stdout)

        # ---- the help ----
        r = vw(["sim", "--help"])
        check(r.returncode == 0 and b"\nCards:\n" in r.stdout and b"  H100 " in r.stdout, "sim --help lists the cards")
        for cmd in ("run", "fit"):
            r = vw([cmd, "--help"])
            check(b"  --sim CARD " in r.stdout, "%s --help lists --sim CARD" % cmd)
        shutil.rmtree(work)
    except Failed:
        print("files kept in", work)
        raise


def group_schema(opts):
    if not opts.validator:
        print("cannot run: the schema group needs --validator", file=sys.stderr)
        return SKIP
    py = sys.executable
    good = [os.path.join(opts.data, f) for f in GOOD]
    r = subprocess.run([py, opts.validator] + good, capture_output=True)
    if r.returncode == SKIP:
        print("cannot run: " + r.stderr.decode().strip(), file=sys.stderr)
        return SKIP
    lines = r.stdout.decode().splitlines()
    check(r.returncode == 0 and len(lines) == len(good) and all(l.endswith(": valid") for l in lines),
          "good fixtures: exit %d\n%s%s" % (r.returncode, r.stdout.decode(), r.stderr.decode()))
    r = subprocess.run([py, opts.validator, os.path.join(opts.data, "unknowns.json")], capture_output=True)
    check(r.returncode == 1 and b"ordinal" in r.stdout, "a device without an ordinal passes the schema: %s" % r.stdout)
    for name in sorted(f for f in os.listdir(opts.data) if f.startswith("bad-")):
        r = subprocess.run([py, opts.validator, os.path.join(opts.data, name)], capture_output=True)
        check(r.returncode == 1 and b": invalid: " in r.stdout, "%s passes the schema: %s" % (name, r.stdout))
    # The example in docs/report-format.md is a valid report, and the output shown under it is real.
    if opts.docs:
        import re
        with open(opts.docs) as f:
            md = f.read()
        example = md[md.index("## Example"):]
        blocks = re.findall(r"```(json)?\n(.*?)```", example, re.S)
        check(len(blocks) >= 2 and blocks[0][0] == "json", "docs: the example and its output")
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        try:
            tmp.write(blocks[0][1])
            tmp.close()
            r = subprocess.run([py, opts.validator, tmp.name], capture_output=True)
            check(r.returncode == 0, "docs example: %s" % r.stdout.decode())
            r = run(opts, ["report", tmp.name])
            check(r.returncode == status_of(opts, ["report", tmp.name]),
                  "docs example: vramwatch report exit %d" % r.returncode)
            check(r.stdout.decode().startswith(blocks[1][1]),
                  "docs: the output shown differs from:\n" + r.stdout.decode()[:len(blocks[1][1])])
        finally:
            os.unlink(tmp.name)
    # What --json prints is a report too.
    tmp = tempfile.mkdtemp(prefix="vramwatch-cli-schema-")
    try:
        for name in GOOD:
            out = os.path.join(tmp, name)
            with open(out, "wb") as f:
                f.write(run(opts, ["report", "--json", name]).stdout)
            r = subprocess.run([py, opts.validator, out], capture_output=True)
            check(r.returncode == 0, "--json output of %s: %s" % (name, r.stdout))
    finally:
        shutil.rmtree(tmp)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)


def group_merge(opts):
    """merge writes the job document report --json prints, report reads it back, and reports of
    different jobs, or bad files, are refused with one line and exit 2, writing nothing."""
    tmp = tempfile.mkdtemp(prefix="vw-merge-")
    try:
        for name in GOOD + ["bad-not-json.json", "bad-truncated.json"]:
            shutil.copy(os.path.join(opts.data, name), tmp)
        # The merged file is the document report --json prints for the same reports.
        r = run(opts, ["merge", "rank0-oom.json", "two-devices.json", "-o", "job.json"], cwd=tmp)
        check(r.returncode == 0 and r.stderr == b"", "merge: exit %d: %s" % (r.returncode, r.stderr.decode()))
        check(r.stdout == b"merged 2 processes into job.json; first out of memory: rank 0, pid 7001 on node-a\n",
              "merge: its line: %r" % r.stdout)
        check(os.stat(os.path.join(tmp, "job.json")).st_mode & 0o777 == 0o600, "merge: the file's mode is 0600")
        with open(os.path.join(tmp, "job.json"), "rb") as f:
            merged = f.read()
        compare_golden(opts, "job.json", merged)
        # report reads a merged file back: the same view and the same document as from the reports.
        r = run(opts, ["report", "job.json"], cwd=tmp)
        with open(os.path.join(opts.golden, "job.txt"), "rb") as f:
            check(r.returncode == status_of(opts, ["report", "job.json"], tmp) and r.stdout == f.read(),
                  "report of the merged file: %s" % r.stderr.decode())
        r = run(opts, ["report", "--json", "job.json"], cwd=tmp)
        check(r.returncode == status_of(opts, ["report", "job.json"], tmp) and r.stdout == merged,
              "report --json of the merged file")
        # A merged file merges again, and with more reports; the four-rank job gives its golden view.
        r = run(opts, ["merge", "job4-rank0.json", "job4-rank1.json", "-o", "half.json"], cwd=tmp)
        check(r.returncode == 0, "merge of two ranks: %s" % r.stderr.decode())
        r = run(opts, ["merge", "half.json", "job4-rank3.json", "job4-rank2.json", "-o", "all.json"], cwd=tmp)
        check(r.returncode == 0, "merge of a merged file: %s" % r.stderr.decode())
        r = run(opts, ["report", "all.json"], cwd=tmp)
        with open(os.path.join(opts.golden, "job4.txt"), "rb") as f:
            check(r.returncode == status_of(opts, ["report", "all.json"], tmp) and r.stdout == f.read(),
                  "report of a merge of a merge: %s" % r.stderr.decode())
        with open(os.path.join(tmp, "all.json")) as f:
            job = json.load(f)
        check([p["rank"] for p in job["processes"]] == [0, 1, 2, 3], "job4: rank order")
        check(job["first_failure"]["rank"] == 3 and job["first_failure"]["pid"] == 8104, "job4: first failure")
        check([(x["kind"], x["rank"], x.get("excess_pct")) for x in job["findings"]] ==
              [("rank0_extra", 0, 30), ("shared_gpu", 0, None), ("shared_gpu", 1, None)],
              "job4: findings %r" % job["findings"])
        check([p["device_ids"] for p in job["processes"]] ==
              [["GPU-5f1c0a2e-0000-4000-8000-00000000000%d" % g] for g in (0, 1, 0, 1)], "job4: device_ids")
        check([g["processes"] for g in job["gpus"]] == [[0, 2], [1, 3]], "job4: who is on which GPU")
        if opts.validator:
            schema = os.path.join(os.path.dirname(opts.docs), "job.schema.json")
            r = subprocess.run([sys.executable, opts.validator, "--schema", schema, os.path.join(tmp, "all.json"),
                                os.path.join(tmp, "job.json")], capture_output=True)
            if r.returncode == SKIP:
                not_checked(opts, "merged job files against docs/job.schema.json: " + r.stderr.decode().strip())
            else:
                check(r.returncode == 0, "job files against docs/job.schema.json: %s" % r.stdout.decode())
        else:
            not_checked(opts, "merged job files against docs/job.schema.json: no --validator given")
        # DeepSpeed gives each rank --local_rank=N: still one job.
        for i, name in enumerate(JOB4[:2]):
            with open(os.path.join(tmp, name)) as f:
                doc = json.load(f)
            doc["process"]["argv"].insert(3, "--local_rank=%d" % i)
            write_json(os.path.join(tmp, "ds-%d.json" % i), doc)
        r = run(opts, ["merge", "ds-0.json", "ds-1.json", "-o", "ds.json"], cwd=tmp)
        check(r.returncode == 0, "--local_rank differs between ranks: %s" % r.stderr.decode())

        # Refusals: fixtures made here, so the golden lines name stable files.
        with open(os.path.join(tmp, "job4-rank2.json")) as f:
            rank2 = json.load(f)
        again = json.loads(json.dumps(rank2))
        again["process"]["pid"] = 9103
        write_json(os.path.join(tmp, "rank2-again.json"), again)
        world = json.loads(json.dumps(rank2))
        world["process"]["world_size"] = 8
        write_json(os.path.join(tmp, "rank2-world8.json"), world)
        for name, change in (("job-empty.json", lambda j: j.update(processes=[])),
                             ("job-no-report.json", lambda j: j["processes"][1].pop("report")),
                             ("job-bad-report.json", lambda j: j["processes"][1]["report"]["devices"][0].update(live_bytes="1")),
                             ("job-wrong-pid.json", lambda j: j["processes"][0].update(pid=1)),
                             ("job-not-list.json", lambda j: j.update(processes={}))):
            doc = json.loads(merged)
            change(doc)
            write_json(os.path.join(tmp, name), doc)
        refusals = [
            ["merge", "bad-not-json.json", "job4-rank0.json", "-o", "out.json"],
            ["merge", "job4-rank0.json", "bad-truncated.json", "-o", "out.json"],
            ["merge", "job4-rank0.json", "oom-pytorch.json", "-o", "out.json"],
            ["merge", "job4-rank2.json", "rank2-again.json", "-o", "out.json"],
            ["merge", "job4-rank1.json", "rank2-world8.json", "-o", "out.json"],
            ["merge", "job-empty.json", "-o", "out.json"],
            ["merge", "job-no-report.json", "-o", "out.json"],
            ["merge", "job-bad-report.json", "-o", "out.json"],
            ["merge", "job-wrong-pid.json", "-o", "out.json"],
            ["merge", "job-not-list.json", "-o", "out.json"],
            ["merge", "job4-rank0.json"],
            ["merge", "-o", "out.json"],
            ["merge", "job4-rank0.json", "-o"],
            ["merge", "--frobnicate", "job4-rank0.json", "-o", "out.json"],
            ["merge", "job4-rank0.json", "-o", "no-such-folder/out.json"],
            ["report", "job-wrong-pid.json"],
        ]
        # One process's reports twice (a dump on request beside the report, or one file given
        # twice) are one process: its latest report, the others left out in one line.
        for args, procs in ((["job4-rank0.json", "job4-rank0.json"], 1), (["all.json", "job4-rank3.json"], 4)):
            r = run(opts, ["merge"] + args + ["-o", "out.json"], cwd=tmp)
            check(r.returncode == 0 and r.stderr.count(b"earlier reports of the same process") == 1,
                  "merge %s: %d %r" % (args, r.returncode, r.stderr))
            with open(os.path.join(tmp, "out.json")) as f:
                check(len(json.load(f)["processes"]) == procs, "merge %s: %d processes" % (args, procs))
            os.remove(os.path.join(tmp, "out.json"))
        lines = []
        for args in refusals:
            line = one_line_error(run(opts, args, cwd=tmp), " ".join(args))
            check(not os.path.exists(os.path.join(tmp, "out.json")), "%s: wrote a file" % " ".join(args))
            lines.append("$ vramwatch %s\n%s\n" % (" ".join(args), line))
        leftovers = [f for f in os.listdir(tmp) if ".tmp-" in f]
        check(leftovers == [], "temporary files left: %r" % leftovers)
        compare_golden(opts, "merge-refusals.txt", "".join(lines).encode())
    finally:
        shutil.rmtree(tmp)


def run_bounded(opts, args, what, cwd=None, timeout=20):
    """run(), with a hang turned into a failure of the test rather than of the runner."""
    try:
        return run(opts, args, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed("%s: still running after %d s (a hang)" % (what, timeout))


def timed_check(opts, took, what, limit=5):
    """With --timed (the benchmarks cli-*-timed): an input refused at once, well within
    LIMIT seconds. The tests leave durations out: on a busy machine they measure the machine."""
    if opts.timed:
        check(took < limit, "%s took %.1f s (at most %d s)" % (what, took, limit))


def measured(opts, args, cwd=None):
    """run() with the peak memory of the command from wait4: (CompletedProcess, seconds, KiB)."""
    outs = [tempfile.TemporaryFile() for _ in range(2)]
    start = time.monotonic()
    p = subprocess.Popen([opts.vramwatch] + args, stdout=outs[0], stderr=outs[1], env=base_env(), cwd=cwd)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.monotonic() - start
    for f in outs:
        f.seek(0)
    r = subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(status), outs[0].read(), outs[1].read())
    return r, took, usage.ru_maxrss


def big_report(fixture, sites, frames, live):
    """A fixture grown as large as the library's reports get: SITES call sites of FRAMES frames,
    LIVE live entries (the library lists at most 1000)."""
    with open(fixture) as f:
        doc = json.load(f)
    doc["callsites"] = [{"id": i + 1, "live_bytes": (sites - i) * 4096, "live_count": 1, "alloc_calls": 3,
                         "alloc_bytes_total": (sites - i) * 12288,
                         "frames": [{"kind": "native", "module": "/usr/lib/libtorch_cuda.so",
                                     "symbol": "at::native::op%d(c10::TensorOptions const&)" % j,
                                     "offset": 4096 * j + i, "symbol_offset": 16} for j in range(frames)]}
                        for i in range(sites)]
    doc["live"] = [{"address": "0x%x" % (0x7f0000000000 + i * 0x100000), "size": (sites - i) * 4096, "device": 0,
                    "api": "cudaMalloc", "callsite": i + 1, "time_unix_ns": 1732935100223456789 + i,
                    "kind": "device"} for i in range(live)]
    doc["live_truncated"] = 100000 - live
    return doc


def group_outputs(opts):
    """merge -o and timeline -o write their file whole to a new file beside the target and
    rename it over the target: a hard link's other name keeps its contents, and a symbolic link
    (dangling or not), a device, a FIFO or a folder at the name is refused with one line and
    exit 2 and left as it was, nothing written through it and no temporary file left."""
    old_umask = os.umask(0o022)
    tmp = tempfile.mkdtemp(prefix="vw-outputs-")
    try:
        for name in ("job4-rank0.json", "job4-rank1.json"):
            shutil.copy(os.path.join(opts.data, name), tmp)
        shutil.copy(os.path.join(os.path.dirname(opts.data), "..", "timeline", "data", "oom-b64.json"), tmp)
        writers = [("merge", lambda out: ["merge", "job4-rank0.json", "job4-rank1.json", "-o", out], ".json", 0o600),
                   # the picture holds the command line: 0600 as reports (it was 0644 under umask 022)
                   ("timeline svg", lambda out: ["timeline", "-o", out, "oom-b64.json"], ".svg", 0o600),
                   ("timeline html", lambda out: ["timeline", "-o", out, "oom-b64.json"], ".html", 0o600),
                   ("timeline trace", lambda out: ["timeline", "-o", out, "oom-b64.json"], ".trace.json", 0o600)]
        victim = os.path.join(tmp, "victim")

        def leftovers():
            return [f for f in os.listdir(tmp) if ".tmp-" in f]

        for what, args_of, ext, mode in writers:
            with open(victim, "w") as f:
                f.write("victim\n")
            target = "out" + ext
            path = os.path.join(tmp, target)
            # A new file, then one replaced: a hard link to the victim is replaced, not written through.
            for case in ("new", "hard link"):
                if case == "hard link":
                    os.unlink(path)
                    os.link(victim, path)
                r = run_bounded(opts, args_of(target), "%s -o to a %s" % (what, case), cwd=tmp)
                check(r.returncode == 0 and r.stderr == b"", "%s -o to a %s: exit %d: %s" %
                      (what, case, r.returncode, r.stderr.decode()))
                st = os.lstat(path)
                check(st.st_mode & 0o170000 == 0o100000 and st.st_mode & 0o777 == mode,
                      "%s -o to a %s: mode %o, expected a regular file of mode %o" % (what, case, st.st_mode, mode))
                check(os.path.getsize(path) > 1000, "%s -o to a %s: the output is written" % (what, case))
            with open(victim) as f:
                check(f.read() == "victim\n", "%s: written through a hard link" % what)
            os.unlink(path)
            # Names that are not regular files: refused, and left as they were.
            specials = [("a symbolic link", lambda p: os.symlink("victim", p)),
                        ("a dangling symbolic link", lambda p: os.symlink("created-through-link" + ext, p)),
                        ("a FIFO", os.mkfifo),
                        ("a folder", os.mkdir)]
            if os.geteuid() == 0:
                specials.append(("a device", lambda p: os.mknod(p, 0o600 | 0o020000, os.makedev(1, 3))))
            else:
                not_checked(opts, "-o naming a device node is refused (making one needs root)")
            for kind, make in specials:
                make(path)
                before = os.lstat(path)
                line = one_line_error(run_bounded(opts, args_of(target), "%s -o %s" % (what, kind), cwd=tmp),
                                      "%s -o %s" % (what, kind))
                check("cannot write " + target in line and "not a regular file: not replaced" in line,
                      "%s -o %s: %s" % (what, kind, line))
                after = os.lstat(path)
                check((after.st_ino, after.st_mode) == (before.st_ino, before.st_mode),
                      "%s -o %s: it was replaced" % (what, kind))
                with open(victim) as f:
                    check(f.read() == "victim\n", "%s -o %s: written through" % (what, kind))
                check(not os.path.exists(os.path.join(tmp, "created-through-link" + ext)),
                      "%s -o %s: a file was created through the link" % (what, kind))
                check(leftovers() == [], "%s -o %s: temporary files left: %r" % (what, kind, leftovers()))
                if kind == "a folder":
                    os.rmdir(path)
                else:
                    os.unlink(path)
            print("%s -o: new file and hard link replaced (mode %o); %s refused" %
                  (what, mode, ", ".join(k for k, _ in specials)))
        killed_writers(opts, tmp)
    finally:
        os.umask(old_umask)
        shutil.rmtree(tmp)


def killed_writers(opts, tmp):
    """timeline -o and merge -o killed (SIGKILL) at random moments leave cut temporary files; the
    next run of the same output removes those of dead writers once they are 60 s old (the
    library's rule; aged here with os.utime), and keeps the ones in doubt: too recent, another
    host's, locked by a live writer."""
    rng = random.Random(20261206)
    big = os.path.join(tmp, "big.json")
    write_json(big, big_report(os.path.join(opts.data, "oom-pytorch.json"), 3000, 32, 1000))
    kills = int(os.environ.get("VW_KILLS", "20"))
    host = "".join(c if c.isalnum() or c in ".-_" else "_" for c in socket.gethostname())
    for what, args, out in (("merge -o", ["merge", "big.json", "-o", "killed.json"], "killed.json"),
                            ("timeline -o", ["timeline", "-o", "killed.svg", "oom-b64.json"], "killed.svg")):
        mine = lambda: sorted(f for f in os.listdir(tmp) if f.startswith(out + ".tmp-"))
        start = time.monotonic()
        r = run(opts, args, cwd=tmp)
        took = time.monotonic() - start
        check(r.returncode == 0, "%s: exit %d %r" % (what, r.returncode, r.stderr))
        os.unlink(os.path.join(tmp, out))
        for _ in range(kills):
            p = subprocess.Popen([opts.vramwatch] + args, cwd=tmp, env=base_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, took * 1.2))
            p.send_signal(signal.SIGKILL)
            p.wait()
        left = mine()
        # Ones that must stay: a dead writer's written just now, another host's, a live writer's
        # (locked, by this test's own pid).
        dead = subprocess.Popen(["true"])
        dead.wait()
        keep = ["%s.tmp-%s-%d-0" % (out, host, dead.pid), "%s.tmp-other-host-%d-0" % (out, dead.pid),
                "%s.tmp-%s-%d-7" % (out, host, os.getpid())]
        for name in keep:
            with open(os.path.join(tmp, name), "w") as f:
                f.write("cut")
        locked = open(os.path.join(tmp, keep[2]), "rb")
        fcntl.flock(locked.fileno(), fcntl.LOCK_EX)
        old = time.time() - 120
        for name in left + keep[1:]:
            os.utime(os.path.join(tmp, name), (old, old))
        r = run(opts, args, cwd=tmp)
        locked.close()
        check(r.returncode == 0, "%s after %d kills: exit %d %r" % (what, kills, r.returncode, r.stderr))
        after = mine()
        check(after == sorted(keep), "%s: %d cut temporaries of killed writers, after one more run %r left, "
              "expected only %r" % (what, len(left), after, sorted(keep)))
        with open(os.path.join(tmp, out), "rb") as f:
            data = f.read()
        whole = json.loads(data) is not None if out.endswith(".json") else data.rstrip().endswith(b"</svg>")
        check(whole, "%s: the output is whole" % what)
        for name in keep:
            os.unlink(os.path.join(tmp, name))
        print("%s: %d SIGKILLs left %d cut temporaries; the next run removed them (aged 120 s), kept "
              "a recent one, another host's and a locked one" % (what, kills, len(left)))


def group_inputs(opts):
    """An input that is not a regular file is refused at once with one line naming it: a FIFO
    nobody writes to (which would wait for a writer for ever), a device that never ends."""
    tmp = tempfile.mkdtemp(prefix="vw-inputs-")
    try:
        os.mkfifo(os.path.join(tmp, "fifo.json"))
        for name, kind in (("fifo.json", "a FIFO"), ("/dev/zero", "a device")):
            for args in (["report", name], ["report", "--json", name], ["advise", name], ["timeline", name],
                         ["merge", name, "-o", "out.json"]):
                what = " ".join(args)
                if kind == "a FIFO":
                    r, took, rss = run_bounded(opts, args, what, cwd=tmp), 0, 0
                else:
                    r, took, rss = measured(opts, args, cwd=tmp)
                line = one_line_error(r, what)
                check(line.endswith(name + ": is %s, not a report file" % kind), "%s: %s" % (what, line))
                check(rss < 256 * 1024, "%s: %d KiB" % (what, rss))
                timed_check(opts, took, what)
                check(not os.path.exists(os.path.join(tmp, "out.json")), "%s: merge wrote its output" % what)
        print("inputs: a FIFO and /dev/zero refused at once by report, report --json, advise, timeline, merge")

        # A file the command did not create is looked at before it is opened: advise reads the
        # script a report names (for its options), and a report may name /dev/ptmx (opening it
        # makes a terminal) or a FIFO. Each is skipped as a missing script is, never opened;
        # and a report that is itself a device is never opened either.
        fifo_script = os.path.join(tmp, "train.py")
        os.mkfifo(fifo_script)
        with open(os.path.join(opts.data, "oom-mixed.json")) as f:
            doc = json.load(f)
        doc["process"]["cwd"] = tmp
        strace = shutil.which("strace")
        probe = subprocess.run([strace, "-f", "-qq", "-e", "trace=none", "true"], capture_output=True) if strace else None
        if not strace or probe.returncode != 0:
            not_checked(opts, "that advise never opens a device or FIFO a report names (no working strace)")
        else:
            for script in ("/dev/ptmx", "train.py", "/dev/zero"):
                doc["process"]["argv"] = ["python3", script, "--batch", "24"]
                rep = os.path.join(tmp, "named.json")
                write_json(rep, doc)
                log = os.path.join(tmp, "strace.log")
                for args in (["advise", rep], ["advise", "--json", rep], ["report", "/dev/ptmx"]):
                    r = subprocess.run([strace, "-f", "-qq", "-o", log, "-e", "trace=open,openat,openat2",
                                        opts.vramwatch] + args, capture_output=True, cwd=tmp, env=base_env(),
                                       timeout=60)
                    check(r.returncode in (0, 1, 2), "%s (script %s): exit %d" % (" ".join(args), script, r.returncode))
                    with open(log) as f:
                        opened = [l.strip() for l in f if ("/dev/ptmx" in l or "train.py" in l or "/dev/zero" in l)
                                  and "ENOENT" not in l]
                    check(opened == [], "%s (script %s) opened: %r" % (" ".join(args), script, opened))
            print("inputs: a script named /dev/ptmx, /dev/zero or a FIFO in a report is never opened by advise")
    finally:
        shutil.rmtree(tmp)


def group_values(opts):
    """More JSON values than the loader takes (a 16 MB file of 8 000 001 zeros, which cJSON would
    build in about 1 GB) are refused by its pre-scan, before anything is built, in little memory;
    a report as large as the library writes (10 000 call sites of 32 frames) still loads."""
    tmp = tempfile.mkdtemp(prefix="vw-values-")
    try:
        many = os.path.join(tmp, "many.json")
        with open(many, "w") as f:
            f.write("[" + "0," * 8000000 + "0]")
        for args in (["report", many], ["advise", many], ["timeline", many], ["merge", many, "-o", "out.json"]):
            r, took, rss = measured(opts, args, cwd=tmp)
            line = one_line_error(r, "8 000 001 values: " + args[0])
            check("more than 8 million JSON values: not a vramwatch report" in line, "8 000 001 values: %s" % line)
            check(rss < 256 * 1024, "8 000 001 values: %s took %d KiB" % (args[0], rss))
            timed_check(opts, took, "8 000 001 values: " + args[0])
            print("8 000 001 JSON values, %s: refused in %.2f s, max RSS %d KiB" % (args[0], took, rss))
        check(not os.path.exists(os.path.join(tmp, "out.json")), "8 000 001 values: merge wrote its output")
        os.unlink(many)
        big = os.path.join(tmp, "big.json")
        with open(big, "w") as f:
            json.dump(big_report(os.path.join(opts.data, "oom-pytorch.json"), 10000, 32, 1000), f,
                      separators=(",", ":"))
        for args in (["report", big], ["advise", big], ["merge", big, "-o", "out.json"]):
            r, took, rss = measured(opts, args, cwd=tmp)
            check(r.returncode in (0, 1) and r.stderr == b"", "10 000 call sites: %s: exit %d: %s" %
                  (args[0], r.returncode, r.stderr[:300].decode("utf-8", "replace")))
            print("10 000 call sites of 32 frames, 1000 live (%d bytes), %s: %.2f s, max RSS %d KiB" %
                  (os.path.getsize(big), args[0], took, rss))
        # A command line far longer than the library writes (64 KiB): advice copies it into
        # every command it proposes, so it is refused, not multiplied.
        with open(os.path.join(opts.data, "exit-clean.json")) as f:
            doc = json.load(f)
        doc["process"]["argv"] = ["python3", "train.py", "--batch", "16", "x" * (8 << 20)]
        long_argv = os.path.join(tmp, "argv.json")
        with open(long_argv, "w") as f:
            json.dump(doc, f)
        for args in (["report", long_argv], ["advise", long_argv]):
            r, took, rss = measured(opts, args, cwd=tmp)
            line = one_line_error(r, "8 MiB argv: " + args[0])
            check("process.argv:" in line and "more than the 1048576" in line, "8 MiB argv: %s" % line)
    finally:
        shutil.rmtree(tmp)

# The forms issue 24 found in reports (S01..S32) and others of their kind, as an older library
# wrote them: unredacted.
SECRET_ARGV = ["python3", "train.py", "--pass", "S01x", "DB_PASS=S02x", "MYSQL_PWD=S03x", "--db-pass", "S04x",
               "--db-pwd=S05x",
               "https://b.s3.amazonaws.com/k?X-Amz-Credential=S09x&X-Amz-Date=1&X-Amz-Signature=S06x",
               "https://a.blob.core.windows.net/c?sv=2022&sig=S07x",
               "https://storage.googleapis.com/b/o?X-Goog-Signature=S08x",
               "--jwt", "S28x", "JWT=S29x", "--session", "S30x", "--bearer", "S32x", "--token", "S33x",
               "--batch", "24"]
SECRETS = ["S%02dx" % i for i in range(1, 40) if any("S%02dx" % i in a for a in SECRET_ARGV)]


def live_file(path, pid, host, argv_line):
    """A live-state file as lib/base/livefile.h lays it out (x86-64 / aarch64): one device, no call site."""
    size = 24 + 40 + 16 + 16 + 64 + 256 + 512 + 8 * 72 + 5 * (40 + 16 * 256)
    data = bytearray(size)
    struct.pack_into("<8sIIQ", data, 0, b"vwlive1\n", 1, size, 2)
    now = time.time_ns()
    struct.pack_into("<qqqqqQQIIII", data, 24, pid, os.getppid(), 0, 0, 1, now, now, 1000, 1, 0, 0)
    struct.pack_into("64s256s512s", data, 96, host.encode(), b"/tmp", argv_line.encode()[:511])
    struct.pack_into("<iIqqqqqQQQ", data, 928, 0, 0, 1 << 30, 1 << 30, 1 << 30, -1, 16 << 30, 1, 0, 0)
    with open(path, "wb") as f:
        f.write(data)


def group_secrets(opts):
    """One rule for secrets wherever the command line is written: a report of an older library
    holding them unredacted, through report, report --json, advise, advise --json, timeline (the
    terminal and -o .svg/.html/.trace.json) and merge -o, and a live-state file through top; no
    secret anywhere, every ordinary argument kept, and each -o file mode 0600 under umask 022."""
    old_umask = os.umask(0o022)
    tmp = tempfile.mkdtemp(prefix="vw-secrets-")
    try:
        with open(os.path.join(os.path.dirname(opts.data), "..", "timeline", "data", "oom-b64.json")) as f:
            doc = json.load(f)  # a report with a timeline
        doc["process"]["argv"] = SECRET_ARGV
        rep = os.path.join(tmp, "old.json")
        write_json(rep, doc)
        outs = {"t.svg": ["timeline", "-o", "t.svg", rep], "t.html": ["timeline", "-o", "t.html", rep],
                "t.trace.json": ["timeline", "-o", "t.trace.json", rep], "m.json": ["merge", rep, "-o", "m.json"]}
        runs = [["report", rep], ["report", "--full", rep], ["report", "--json", rep], ["advise", rep],
                ["advise", "--json", rep], ["timeline", rep]] + list(outs.values())
        for args in runs:
            r = run(opts, args, cwd=tmp)
            check(r.returncode in (0, 1), "%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[:300]))
            for text in (r.stdout, r.stderr):
                leaked = [x for x in SECRETS if x.encode() in text]
                check(not leaked, "%s shows %r" % (" ".join(args[:2]), leaked))
        for name in outs:
            path = os.path.join(tmp, name)
            with open(path, "rb") as f:
                text = f.read()
            leaked = [x for x in SECRETS if x.encode() in text]
            check(not leaked, "%s holds %r" % (name, leaked))
            check(b"train.py" in text and b"--batch" in text, "%s: the command line is there" % name)
            mode = os.stat(path).st_mode & 0o777
            check(mode == 0o600, "%s: mode %o under umask 022, expected 600" % (name, mode))
        r = run(opts, ["advise", "--json", rep], cwd=tmp)
        argv = json.loads(r.stdout)["observed"]["argv"]
        check(argv[:4] == ["python3", "train.py", "--pass", "***"] and "DB_PASS=***" in argv and
              "--batch" in argv and "24" in argv, "advise --json: the report's argv redacted: %r" % argv)
        print("an old report's %d secrets: in none of %d outputs; -o files 0600" % (len(SECRETS), len(runs)))

        # top: the live-state file's command line, arguments joined by spaces
        live = os.path.join(tmp, "live")
        os.mkdir(live)
        host = "".join(c if c.isalnum() or c in ".-_" else "_" for c in socket.gethostname())[:63]
        line = " ".join(SECRET_ARGV[:12] + ["--api-key", "-S34x", "--batch", "24"])
        live_file(os.path.join(live, "vramwatch-live.%s.%d" % (host, os.getpid())), os.getpid(), host, line)
        r = run(opts, ["top", "--once", live], cwd=tmp)
        shown = [l for l in r.stdout.decode().splitlines() if "train.py" in l]
        check(r.returncode == 0 and len(shown) == 1, "top --once: the process listed: %r %r" % (r.stdout, r.stderr))
        leaked = [x for x in SECRETS + ["S34x"] if x in r.stdout.decode()]
        check(not leaked, "top shows %r: %r" % (leaked, shown))
        check(shown and "--pass *** DB_PASS=*** MYSQL_PWD=***" in shown[0] and "--api-key *** --batch 24" in shown[0],
              "top: the line redacted word by word: %r" % shown)
        print("top: a live file's joined command line redacted")
    finally:
        os.umask(old_umask)
        shutil.rmtree(tmp)


GROUPS = {"golden": group_golden, "malformed": group_malformed, "json": group_json, "usage": group_usage,
          "run": group_run, "schema": group_schema, "merge": group_merge,
          "outputs": group_outputs, "inputs": group_inputs, "values": group_values, "sim": group_sim,
          "secrets": group_secrets}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--child")
    ap.add_argument("--stub")
    ap.add_argument("--validator")
    ap.add_argument("--libvramwatch")
    ap.add_argument("--docs")
    ap.add_argument("--sim", help="the simulated GPU's build folder (BUILD/tools/simgpu), for the sim group")
    ap.add_argument("--sim-job", help="sim_job.c built against the decoy runtime, for the sim group")
    ap.add_argument("--timed", action="store_true",
                    help="also the time bounds of refusals (malformed, inputs, values): a benchmark, not a test")
    ap.add_argument("group", choices=sorted(GROUPS))
    opts = ap.parse_args()
    opts.not_checked = []
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    if opts.child:
        opts.child = os.path.abspath(opts.child)
    if opts.sim_job:
        opts.sim_job = os.path.abspath(opts.sim_job)
    return run_group(GROUPS, opts)


if __name__ == "__main__":
    sys.exit(main())
