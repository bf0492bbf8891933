#!/usr/bin/env python3
"""The gauntlet: attacks on the preload library (load, processes, faults) and its cost, each
run against the simulated GPU in a fresh folder, each failing when the property it guards does
not hold. Prints the figures docs/reliability.md and docs/performance.md record.

usage: gauntlet.py --build BUILD [--preload-first RT] [--long] [--sanitized] [--timed] load|procs|faults|cost

--timed: the cost attack also measures and checks its time targets (report writing, the CLI on a
three-day run, /bin/true with the preload against without). Durations say as much about the
machine and its load as about the library, so the tests leave them out; the benchmark
gauntlet-cost-timed (`meson test --benchmark`) runs them.

Sizes: the reduced ones by default (what CI runs), the full ones with --long or GAUNTLET_LONG=1.
A check that cannot run here (a full disk needs root and unshare for a private tmpfs; the schema
needs the python3 jsonschema module) is named on stderr, everything else still runs, and the
attack then exits 77, skipped, not 0.
"""
import argparse
import glob
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import run_case  # noqa: E402  (the report schema validation)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from vwtest import SKIP, Failed, check, clean_env, eq  # noqa: E402

MiB = 1 << 20


class Case:
    """One attack's folder and environment: the preload, the simulated GPU, nothing inherited
    from the caller's VRAMWATCH_* or SIMGPU_* settings."""

    def __init__(self, opts, name):
        self.opts = opts
        self.dir = tempfile.mkdtemp(prefix=f"vramwatch-gauntlet-{name}-")
        self.sim = os.path.join(opts.build, "tools", "simgpu")
        self.lib = os.path.join(opts.build, "lib", "libvramwatch.so")
        self.exe = lambda n: os.path.join(opts.build, "tests", "gauntlet", n)

    def env(self, extra=None, preload=True):
        env = clean_env(drop_prefixes=("SIMGPU_", "LD_PRELOAD"))
        env["LD_LIBRARY_PATH"] = self.sim
        if preload:
            env["LD_PRELOAD"] = ":".join(filter(None, [self.opts.preload_first, self.lib]))
        elif self.opts.preload_first:
            # a sanitizer build's programs and simulated card need its runtime first, with the
            # library or without
            env["LD_PRELOAD"] = self.opts.preload_first
        if self.opts.preload_first:
            env["ASAN_OPTIONS"] = "detect_leaks=0"
            env["TSAN_OPTIONS"] = ("halt_on_error=1 suppressions=" +
                                   os.path.join(os.path.dirname(HERE), "tsan.supp"))
        env["VRAMWATCH_DIR"] = self.dir
        env.update(extra or {})
        return env

    def run(self, cmd, extra=None, preload=True, timeout=120, expect_rc=0, **kw):
        try:
            p = subprocess.run(cmd, env=self.env(extra, preload), cwd=self.dir,
                               capture_output=True, text=True, timeout=timeout, **kw)
        except subprocess.TimeoutExpired:
            raise Failed(f"{cmd} did not finish in {timeout} s: a hang")
        if expect_rc is not None and p.returncode != expect_rc:
            raise Failed(f"{cmd} exited {p.returncode}, expected {expect_rc}\n"
                         f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-4000:]}")
        return p

    def reports(self, folder=None):
        out = {}
        for f in sorted(glob.glob(os.path.join(folder or self.dir, "vramwatch-*.json"))):
            if "-request-" in os.path.basename(f):
                continue  # a dump on request, a file of its own beside the process's report
            with open(f, encoding="utf-8") as fh:
                doc = json.load(fh)
            run_case.validate(self.opts.schema, f, doc)
            out[doc["process"]["pid"]] = doc
        return out

    def clean(self):
        for f in os.listdir(self.dir):
            p = os.path.join(self.dir, f)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def dev0(r):
    return [d for d in r["devices"] if d["ordinal"] == 0][0]


def warnings(stderr):
    return [line for line in stderr.splitlines() if line.startswith("vramwatch: ")]


def tmp_files(folder):
    return [f for f in os.listdir(folder) if ".tmp-" in f]


# ---------------------------------------------------------------------------------------------
# Load: threads x pairs on every path at once; exact totals, no hang, memory within the bound.

# The tables this workload may use: live allocations stay far below the first doubling (each
# thread holds at most 5), so both allocation tables keep their first 4096 slots of 40 bytes;
# the call-site index is 512 KiB; and at most 64 distinct stacks of up to 32 frames
# (48 + 8 x 32 bytes each). Anything beyond means the library's memory grew with the run.
LOAD_TABLE_BOUND = 2 * 4096 * 40 + 512 * 1024 + 64 * (48 + 8 * 32)
# The process's resident memory may move a little after the warm-up (the simulator's and
# libc's arenas, page cache of the report); a per-pair leak of even one byte would show here
# at the full size (32 million pairs).
LOAD_RSS_GROWTH_KIB = 8 * 1024


def attack_load(opts):
    if opts.sanitized:
        threads, pairs, timeout = 32, 4000, 300
    elif opts.long:
        threads, pairs, timeout = 32, 1_000_000, 3600
    else:
        threads, pairs, timeout = 32, 100_000, 300
    c = Case(opts, "load")
    try:
        t0 = time.monotonic()
        p = c.run([c.exe("load"), str(threads), str(pairs), str(opts.seed)], timeout=timeout)
        wall = time.monotonic() - t0
        want = json.loads(p.stdout)
        eq(warnings(p.stderr), [], "warnings")
        check("Sanitizer" not in p.stderr and "runtime error:" not in p.stderr,
               f"a sanitizer finding: {p.stderr[-4000:]}")
        reps = c.reports()
        eq(len(reps), 1, "one report")
        r = list(reps.values())[0]
        eq(r["reason"], "exit", "the last report is the one at exit")
        d = dev0(r)
        eq(d["live_bytes"], want["live_bytes"], "live bytes at exit")
        eq(d["alloc_calls"], want["alloc_calls"], "allocation calls")
        eq(d["free_calls"], want["free_calls"], "free calls")
        eq(d["failed_calls"], 0, "failed calls")
        eq(r["allocations_untracked"], 0, "untracked allocations")
        eq(sum(1 for a in r["live"]), threads, "live allocations listed")
        apis = sorted({a["api"] for a in r["live"]})
        eq(apis, ["cuMemAlloc_v2", "cuMemCreate", "cudaMalloc", "cudaMallocAsync"],
           "every path in the live list")
        tb = r["vramwatch"]["table_bytes"]
        check(tb <= LOAD_TABLE_BOUND, f"library tables {tb} bytes, bound {LOAD_TABLE_BOUND}")
        growth = want["rss_end_kib"] - want["rss_warm_kib"]
        mgrowth = want["maps_end"] - want["maps_warm"]
        if not opts.sanitized:  # a sanitizer's own shadow memory grows as it sees more
            check(growth <= LOAD_RSS_GROWTH_KIB, f"resident memory grew {growth} KiB after "
                   f"the warm-up (bound {LOAD_RSS_GROWTH_KIB})")
            check(mgrowth <= 8, f"{mgrowth} new mappings after the warm-up")
        npairs = threads * pairs
        print(f"load: {threads} threads x {pairs} pairs = {npairs} pairs in {wall:.1f} s "
              f"({wall / npairs * 1e9:.0f} ns per pair, all threads), {want['dumps']} reports "
              f"written under load; exact totals (live {d['live_bytes']}, alloc "
              f"{d['alloc_calls']}, free {d['free_calls']}); tables {tb} bytes "
              f"(bound {LOAD_TABLE_BOUND}), {len(r['callsites'])} call sites; RSS "
              f"{want['rss_warm_kib']} KiB warm, {want['rss_end_kib']} KiB at end "
              f"({growth:+d}), mappings {want['maps_warm']} -> {want['maps_end']}")
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# Processes: forks under load, vfork, posix_spawn, system(); reports for exactly those that
# allocated.

def attack_procs(opts):
    # a sanitizer's runtime makes each fork of a process with its shadow memory slow: fewer
    forks = 20 if opts.sanitized else 100
    c = Case(opts, "procs")
    try:
        t0 = time.monotonic()
        p = c.run([c.exe("procs"), "run", str(forks)], timeout=180)
        wall = time.monotonic() - t0
        got = json.loads(p.stdout)
        eq(warnings(p.stderr), [], "warnings")
        eq(tmp_files(c.dir), [], "temporary files")
        reps = c.reports()
        want = {int(k): v for k, v in got["allocated"].items()}
        want[got["parent"]] = got["parent_live"]
        eq(sorted(reps), sorted(want), "the processes that reported")
        for pid, live in want.items():
            d = dev0(reps[pid])
            eq(d["live_bytes"], live, f"live bytes of {pid}")
            if pid != got["parent"]:
                eq(reps[pid]["process"]["ppid"], got["parent"], f"parent of {pid}")
                check(d["alloc_calls"] == 1, f"{pid} reports only its own allocation")
        print(f"procs: {forks} forks under 4 allocating threads, vfork+exec x2, posix_spawn x2, "
              f"system() x2 in {wall:.2f} s; {len(reps)} reports = the parent and the "
              f"{len(want) - 1} children that allocated, none from the {forks // 2} that exited "
              f"or exec'ed without allocating")
    finally:
        c.close()


def bin_true_cost(opts, c, n, rounds):
    """ns per /bin/true started with posix_spawn, without and with the preload, interleaved."""
    without, with_ = [], []
    for _ in range(rounds):
        for pre, acc in ((False, without), (True, with_)):
            p = c.run([c.exe("procs"), "spawn_bench", str(n)], preload=pre)
            acc.append(float(p.stdout))
    return statistics.median(without), statistics.median(with_)


# ---------------------------------------------------------------------------------------------
# Faults.

def can_mount():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c",
                           "d=$(mktemp -d) && mount -t tmpfs -o size=4k tmpfs $d && umount $d; "
                           "rc=$?; rmdir $d; exit $rc"],
                          capture_output=True).returncode == 0


def in_mount(c, opts_mount, fill, cmd, env_extra=None):
    """Runs cmd with the report folder a fresh tmpfs (in a private mount namespace, so nothing
    outside sees it), optionally filled to the last byte; lists the folder afterwards."""
    listing = c.dir + ".list"
    script = ('mount -t tmpfs -o "$1" tmpfs "$VRAMWATCH_DIR" || exit 90; '
              + ('cat /dev/zero > "$VRAMWATCH_DIR/fill" 2>/dev/null; ' if fill else '')
              + ('mount -o remount,ro "$VRAMWATCH_DIR" || exit 91; ' if 'ro' in opts_mount.split(',') else '')
              + 'shift; "$@"; rc=$?; ls -A "$VRAMWATCH_DIR" > "$LISTING"; exit $rc')
    mount_opts = ",".join(o for o in opts_mount.split(",") if o != "ro")
    p = c.run(["unshare", "-m", "sh", "-c", script, "sh", mount_opts] + cmd,
              dict(env_extra or {}, LISTING=listing), expect_rc=None)
    with open(listing, encoding="utf-8") as fh:
        files = fh.read().split()
    os.unlink(listing)
    return p, files


def set_fsize_limit():
    # A full disk, as the process sees it: writes past 1 KiB fail (EFBIG) and the signal the
    # kernel would send instead is ignored, as a job that handles disk errors itself would.
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def check_runs_on(p, what):
    eq(p.returncode, 3, f"{what}: the job's own exit status")
    eq(p.stdout.strip(), "ran on", f"{what}: the job ran on")
    w = warnings(p.stderr)
    eq(len(w), 1, f"{what}: exactly one warning, got {p.stderr!r}")
    return w[0]


def attack_faults(opts):
    c = Case(opts, "faults")
    lines = []
    try:
        # 1. SIGKILL while a report is being written: the previous report stays whole.
        trials = 200 if opts.long else 25
        rng = random.Random(opts.seed)
        hits = 0
        for _ in range(trials):
            c.clean()
            proc = subprocess.Popen([c.exe("faults"), "dump_loop", "2000"], env=c.env(),
                                    cwd=c.dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while not glob.glob(os.path.join(c.dir, "vramwatch-*.json")):
                if proc.poll() is not None:
                    raise Failed(f"dump_loop ended early: {proc.stderr.read()!r}")
                check(time.monotonic() < deadline, "no first report within 60 s")
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            proc.kill()
            proc.wait()
            proc.stderr.close()
            finals = glob.glob(os.path.join(c.dir, "vramwatch-*.json"))
            eq(len(finals), 1, "one report")
            with open(finals[0], encoding="utf-8") as fh:
                doc = json.load(fh)  # raises on half a report
            eq(len(doc["callsites"]) > 1000, True, "every call site in the report")
            hits += len(tmp_files(c.dir)) > 0
        run_case.validate(opts.schema, finals[0], doc)
        check(hits > 0, "no kill landed inside a write: the attack did not hit its window")
        lines.append(f"SIGKILL during report writing: {trials} kills at random times, {hits} "
                     f"inside a write (temporary file left); the report parsed whole every time")

        # 2. Temporary names left by a killed process whose pid comes back.
        c.clean()
        p = c.run([c.exe("faults"), "stale_tmp"])
        reps = c.reports()
        eq(len(reps), 1, "report written despite stale temporary files")
        eq(dev0(list(reps.values())[0])["live_bytes"], 6 * MiB, "live")
        eq(warnings(p.stderr), [], "warnings")
        lines.append("stale temporary names of a killed process with the same pid: report "
                     "written")

        # 3. A full disk and an unwritable folder: one warning, the job runs on, its own status.
        if can_mount():
            c.clean()
            p, files = in_mount(c, "size=4k", True, [c.exe("faults"), "full_disk"])
            w = check_runs_on(p, "full tmpfs")
            eq([f for f in files if f != "fill"], [], "nothing left on the full disk")
            lines.append(f"full disk (4 KiB tmpfs, filled): exit 3, one warning ({w})")
            c.clean()
            p, files = in_mount(c, "size=1m,ro", False, [c.exe("faults"), "full_disk"])
            w = check_runs_on(p, "read-only folder")
            lines.append(f"unwritable folder (read-only tmpfs): exit 3, one warning ({w})")
        else:
            run_case.not_checked("a full disk and a read-only folder (a private tmpfs needs root and unshare); "
                                 "an unwritable folder of mode 0500 instead")
            c.clean()
            os.chmod(c.dir, 0o500)
            p = c.run([c.exe("faults"), "full_disk"], expect_rc=None)
            os.chmod(c.dir, 0o700)
            w = check_runs_on(p, "unwritable folder")
            lines.append(f"unwritable folder (mode 0500): exit 3, one warning ({w})")
        c.clean()
        p = c.run([c.exe("faults"), "full_disk"], expect_rc=None, preexec_fn=set_fsize_limit)
        w = check_runs_on(p, "RLIMIT_FSIZE")
        eq(tmp_files(c.dir), [], "temporary file removed")
        lines.append(f"file size limit 1 KiB, SIGXFSZ ignored: exit 3, one warning ({w})")

        # 4. The application's fatal signals: same status, same core bit, its handlers called.
        soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
        core_limit = 256 * MiB if hard == resource.RLIM_INFINITY else min(hard, 256 * MiB)
        sig_results = []
        for how, sig in (("segv", signal.SIGSEGV), ("abort", signal.SIGABRT)):
            for handler in ("handler", "nohandler"):
                st = {}
                for pre in (False, True):
                    c.clean()
                    err = os.path.join(c.dir, "stderr")
                    with open(err, "w") as fh:
                        proc = subprocess.Popen(
                            [c.exe("faults"), "signal", how, handler], cwd=c.dir, stderr=fh,
                            env=c.env({"SIMGPU_MEMORY": "1GiB"}, preload=pre),
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE,
                                                                  (core_limit, hard)))
                        _, status = os.waitpid(proc.pid, 0)
                        proc.returncode = 0
                    with open(err) as fh:
                        text = fh.read()
                    check(os.WIFSIGNALED(status), f"{how}/{handler}: ended by a signal")
                    st[pre] = (os.WTERMSIG(status), os.WCOREDUMP(status),
                               text.count("handler called"))
                    eq(warnings(text), [], "warnings")
                eq(st[True], st[False], f"{how}/{handler}: signal, core bit, handler calls "
                   "with the preload as without")
                eq(st[True][0], sig, f"{how}/{handler}: the signal")
                eq(st[True][2], 1 if handler == "handler" else 0, f"{how}/{handler}: handler")
                sig_results.append(f"{how}/{handler}: signal {st[True][0]}, core "
                                   f"{'yes' if st[True][1] else 'no'}")
        lines.append("fatal signals, same as without the preload: " + "; ".join(sig_results))

        # 5. dlclose of the runtime and the driver, three times over; what the program can see
        # (lookups by name, libraries going away, a pointer used after dlclose) must be the
        # same as without the preload.
        c.clean()
        p = c.run([c.exe("faults"), "dlclose", c.sim])
        eq(warnings(p.stderr), [], "warnings")
        seen = p.stdout
        r = list(c.reports().values())
        c.clean()
        q = c.run([c.exe("faults"), "dlclose", c.sim], preload=False)
        eq(seen, q.stdout, "what the program sees, with the preload and without")
        eq(len(r), 1, "one report")
        d = dev0(r[0])
        eq(d["live_bytes"], (1 + 2 + 3 + 1) * MiB + 3 * 4 * MiB,
           "live after three dlopen/dlclose rounds")
        eq((d["alloc_calls"], d["free_calls"]), (10, 3), "calls")
        apis = sorted((a["api"], a["size"] // MiB) for a in r[0]["live"])
        eq(apis, [("cuMemAlloc_v2", 4)] * 3 + [("cudaMalloc", 1), ("cudaMalloc", 1),
                                                ("cudaMalloc", 2), ("cudaMalloc", 3)],
           "every round recorded at the call the application made")
        lines.append("dlclose of libcudart and libcuda, reopened 3 times at new addresses: no "
                     "crash, every allocation recorded as the call made, lookups by name and "
                     "unloading as without the preload (" + "; ".join(seen.splitlines()) + ")")

        # 6. Two copies of the runtime in one process.
        c.clean()
        copies = []
        for name in ("libcudart-a.so.13", "libcudart-b.so.13"):
            copies.append(os.path.join(c.dir, name))
            shutil.copy(os.path.join(c.sim, "libcudart.so.13"), copies[-1])
        p = c.run([c.exe("faults"), "two_copies"] + copies)
        w = warnings(p.stderr)
        eq(len(w), 1, f"one warning about the second copy, got {w}")
        r = list(c.reports().values())
        eq(len(r), 1, "one report")
        d = dev0(r[0])
        eq(d["live_bytes"], 9 * MiB, "live with two runtimes")
        eq((d["alloc_calls"], d["free_calls"]), (204, 201), "calls through both copies")
        # The first copy is followed at the runtime, the second (whose functions our shims
        # cannot forward to) at the driver underneath: each allocation still counted once.
        apis = sorted((a["api"], a["size"] // MiB) for a in r[0]["live"])
        eq(apis, [("cuMemAlloc_v2", 3), ("cudaMalloc", 2), ("cudaMalloc", 4)], "live list")
        lines.append("two copies of libcudart (RTLD_LOCAL, libcudart-a.so.13 and "
                     "libcudart-b.so.13): no crash, every allocation counted once (the second "
                     "copy's at the driver), one warning")
        for line in lines:
            print("faults: " + line)
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# Cost: report writing with many live allocations and call sites, memory per allocation and per
# stack, the CLI on a three-day run, and a process that never touches CUDA. The memory bounds and
# what each program does are checked always; the time targets only with --timed (a benchmark).

def attack_cost(opts):
    c = Case(opts, "cost")
    try:
        sites, live, rounds = 10_000, 100_000, 5
        p = c.run([c.exe("cost"), str(sites), str(live), str(rounds)], timeout=300)
        got = json.loads(p.stdout)
        tb = got["table_bytes"]
        per_stack = (tb[1] - tb[0]) / (sites - 1)
        per_live = (tb[2] - tb[1]) / live
        best = min(got["write_ms"])
        r = list(c.reports().values())[0]
        nframes = max(len(s["frames"]) for s in r["callsites"])
        print(f"cost: report with {live} live allocations and {sites} call sites "
              f"({got['report_bytes']} bytes): written in {best:.1f} ms best of {rounds} "
              f"({', '.join('%.1f' % x for x in got['write_ms'])}); tables {tb[0]} -> {tb[1]} "
              f"bytes for {sites} stacks of up to {nframes} frames ({per_stack:.0f} bytes each), "
              f"-> {tb[2]} for {live} live ({per_live:.0f} bytes each)")
        if opts.timed:
            check(best <= 100, f"report writing took {best:.1f} ms (target 100)")
        # the record (72 bytes: counts, and where its first allocation stood, for phases without
        # markers), its frames, and slack
        check(per_stack <= 72 + 8 * nframes + 8, f"{per_stack:.0f} bytes per stack")
        check(per_live <= 114, f"{per_live:.0f} bytes per live allocation (bound 114)")

        # The CLI on a three-day run's report.
        c.clean()
        rr = subprocess.run([opts.long_run, c.dir], capture_output=True, timeout=120)
        eq(rr.returncode, 0, "long_run")
        rep = glob.glob(os.path.join(c.dir, "vramwatch-*.json"))[0]
        vw = opts.vramwatch
        times = {}
        for name, cmd in (("report", [vw, "report", rep]), ("advise", [vw, "advise", rep]),
                          ("timeline", [vw, "timeline", "-o", os.path.join(c.dir, "t.svg"), rep])):
            ts = []
            for _ in range(3 if opts.timed else 1):
                t0 = time.monotonic()
                q = subprocess.run(cmd, capture_output=True, timeout=60,
                                   env=dict(os.environ, LC_ALL="C", NO_COLOR="1"))
                ts.append(time.monotonic() - t0)
                check(q.returncode in (0, 1), f"{name} exited {q.returncode}: {q.stderr!r}")
            times[name] = min(ts)
            if opts.timed:
                check(times[name] < 1.0, f"vramwatch {name} took {times[name]:.2f} s (target 1 s)")
        print(f"cost: CLI on a three-day run ({os.path.getsize(rep)} bytes), best of "
              f"{len(ts)}, process start included: "
              + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in times.items()))

        # A process that never touches CUDA.
        c.clean()
        p = c.run(["/bin/true"])
        eq((p.stdout, p.stderr, os.listdir(c.dir)), ("", "", []), "/bin/true: no output, no file")
        if opts.timed:  # the start of a process with the preload against without
            n, rounds = (2000, 7) if opts.long else (300, 5)
            base, pre = bin_true_cost(opts, c, n, rounds)
            ratio = pre / base
            print(f"cost: /bin/true started with posix_spawn, median of {rounds} rounds of {n}: "
                  f"{base / 1000:.0f} us without the preload, {pre / 1000:.0f} us with "
                  f"(ratio {ratio:.2f}, {(pre - base) / 1000:+.0f} us)")
            # Linking libunwind again (mapped into every process) measured 1.40 here.
            check(ratio <= 1.3, f"/bin/true ratio {ratio:.2f} (at most 1.3)")
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# The host: a preload must change nothing the process can see. Each case runs the same program
# with and without the library, in folders of their own, and compares what the program sees
# (its output, its exit status, the files it made); then what the library left is checked on
# its own: a whole report from every process that allocated, no live-state file after it.

def live_files(folder):
    return sorted(f for f in os.listdir(folder) if f.startswith("vramwatch-live."))


def app_files(folder):
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.startswith("vramwatch-"):
            continue
        with open(os.path.join(folder, f), "rb") as fh:
            out[f] = fh.read()
    return out


class Twin:
    """One program run twice: `bare` without the library, `pre` with it."""

    def __init__(self, opts, name):
        self.bare = Case(opts, name + "-bare")
        self.pre = Case(opts, name + "-pre")

    def close(self):
        self.bare.close()
        self.pre.close()

    def run(self, cmd, extra=None, timeout=60, signal_after=None, preexec=None):
        """Both runs; returns (bare, pre) as (returncode, stdout, stderr, seconds). With
        signal_after=(sig, delay), the signal goes to the process `delay` seconds after its
        first line of output."""
        out = []
        for case, preload in ((self.bare, False), (self.pre, True)):
            case.clean()
            t0 = time.monotonic()
            p = subprocess.Popen(cmd, env=case.env(extra, preload), cwd=case.dir, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=preexec and (lambda c=case: preexec(c)))
            first = ""
            if signal_after:
                first = p.stdout.readline()
                time.sleep(signal_after[1])
                p.send_signal(signal_after[0])
            try:
                so, se = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                so, se = p.communicate()
                so += f"\n[still running {timeout} s later: killed]"
            out.append((p.returncode, first + so, se, time.monotonic() - t0))
        return out

    def same(self, got, what):
        (brc, bout, berr, bt), (prc, pout, perr, pt) = got
        eq((prc, pout), (brc, bout), f"{what}: (status, output) with the library")
        eq(app_files(self.pre.dir), app_files(self.bare.dir), f"{what}: the program's files")
        eq(warnings(perr), [], f"{what}: warnings")
        return got


def check_left(c, want, what):
    """The library's leftovers in c.dir: reports of exactly the pids in want (pid -> live bytes
    on device 0), no live-state file, no temporary."""
    reps = c.reports()
    eq({pid: dev0(r)["live_bytes"] for pid, r in reps.items()}, want, f"{what}: reports")
    eq(live_files(c.dir), [], f"{what}: live-state files left")
    eq(tmp_files(c.dir), [], f"{what}: temporary files left")
    return reps


def host_case(fails, name, fn):
    try:
        fn()
        print(f"host: {name}: ok")
    except Failed as e:
        fails.append(f"{name}: {e}")
        print(f"host: {name}: FAILED: {e}")


def attack_host(opts):
    fails = []
    exe = os.path.join(opts.build, "tests", "gauntlet", "host")
    longsym = os.path.join(opts.build, "tests", "gauntlet", "longsym")
    py = sys.executable

    def signals_c():
        t = Twin(opts, "eintr")
        try:
            got = t.same(t.run([exe, "eintr"], signal_after=(signal.SIGTERM, 0.3), timeout=10),
                         "a blocking read and a handler without SA_RESTART")
            check("EINTR" in got[1][1], f"the read ended with EINTR: {got[1][1]!r}")
        finally:
            t.close()
        t = Twin(opts, "resethand")
        try:
            got = t.same(t.run([exe, "resethand"]), "SA_RESETHAND")
            eq(got[1][0], -signal.SIGINT, "the second SIGINT ends the process")
        finally:
            t.close()
        t = Twin(opts, "query")
        try:
            t.same(t.run([exe, "query"]), "what sigaction() and signal() say")
        finally:
            t.close()

    def signals_py():
        # Python's SIGINT handler has no SA_RESTART: a blocked wait ends at once and raises
        # KeyboardInterrupt
        for what, block in (("Event().wait()", "threading.Event().wait()"),
                            ("subprocess.run(sleep 8)", "subprocess.run(['sleep', '8'])"),
                            ("os.read(empty pipe)", "os.read(os.pipe()[0], 1)")):
            src = PY_ALLOC + ("import threading, subprocess, os, sys\n"
                              "print('ready', flush=True)\n"
                              "try:\n    " + block + "\n"
                              "except KeyboardInterrupt:\n    print('KeyboardInterrupt')\n")
            t = Twin(opts, "pysig")
            try:
                got = t.same(t.run([py, "-c", src], signal_after=(signal.SIGINT, 0.5), timeout=12),
                             f"Ctrl-C in {what}")
                check("KeyboardInterrupt" in got[1][1], f"{what}: KeyboardInterrupt raised")
                check(got[1][3] < got[0][3] + 4, f"{what}: the job stopped in "
                       f"{got[1][3]:.1f} s with the library, {got[0][3]:.1f} s without")
                check_left(t.pre, {pid: MiB for pid in t.pre.reports()}, what)
            finally:
                t.close()

    def demangle():
        t = Twin(opts, "longsym")
        try:
            got = t.same(t.run([longsym, "2"]), "a call site with a long C++ symbol")
            reps = check_left(t.pre, {pid: MiB for pid in t.pre.reports()}, "long symbol")
            eq(len(reps), 1, "one report")
            got = t.same(t.run([longsym, "5"], signal_after=(signal.SIGTERM, 1.5)),
                         "SIGTERM at a call site with a long C++ symbol")
            eq(got[1][0], -signal.SIGTERM, "ended by SIGTERM")
            reps = check_left(t.pre, {pid: MiB for pid in t.pre.reports()}, "long symbol, SIGTERM")
            eq([r["reason"] for r in reps.values()], ["signal"], "the report's reason")
        finally:
            t.close()

    def descriptors():
        t = Twin(opts, "fds")
        try:
            status = os.path.join(t.pre.dir, "vramwatch-status")
            t.same(t.run([exe, "fds"], extra={"VRAMWATCH_STATUS": status}),
                   "descriptors the program closed and reused")
            check_left(t.pre, {pid: 98 * MiB for pid in t.pre.reports()}, "fds")
            t.same(t.run([exe, "closeexit"]), "descriptors 3-15 closed before exit")
            check_left(t.pre, {pid: MiB for pid in t.pre.reports()}, "closeexit")
        finally:
            t.close()

    def children():
        # ThreadSanitizer does not follow a raw clone: the child runs on the parent thread's
        # state, and the child forgetting the parent's tables reads to it as a race
        modes = ["fork", "forkfirst"] + ([] if "tsan" in opts.preload_first else ["clone"])
        for mode, child_live in ((m, MiB) for m in modes):
            t = Twin(opts, mode)
            try:
                t.same(t.run([exe, mode]), mode)
                reps = t.pre.reports()
                parent = [p for p, r in reps.items() if r["process"]["ppid"] not in reps]
                kids = {p: r for p, r in reps.items() if r["process"]["ppid"] in reps}
                want_parent = 0 if mode == "forkfirst" else 64 * MiB
                eq(len(kids) if mode != "forkfirst" else len(reps), 1, f"{mode}: the child's report")
                child = list(kids.values() or reps.values())[-1]
                eq(dev0(child)["live_bytes"], child_live, f"{mode}: the child's live bytes")
                eq(dev0(child)["alloc_calls"], 1, f"{mode}: the child's allocation calls")
                if want_parent:
                    eq([dev0(reps[p])["live_bytes"] for p in parent], [want_parent],
                       f"{mode}: the parent's report")
                eq(live_files(t.pre.dir), [], f"{mode}: live-state files left")
            finally:
                t.close()
        t = Twin(opts, "exec")
        try:
            t.same(t.run([exe, "exec"]), "exec")
            reps = check_left(t.pre, {pid: 64 * MiB for pid in t.pre.reports()}, "exec")
            eq(len(reps), 1, "exec: the report of the image that allocated")
            t.same(t.run([exe, "vfork"]), "vfork")
            reps = check_left(t.pre, {pid: 65 * MiB for pid in t.pre.reports()}, "vfork")
            eq(len(reps), 1, "vfork: only the parent's report")
        finally:
            t.close()
        # multiprocessing's fork context, its child ended with os._exit
        src = PY_ALLOC + ("import multiprocessing as mp, os\n"
                          "def child():\n    alloc(1 << 20)\n    os._exit(0)\n"
                          "p = mp.get_context('fork').Process(target=child)\n"
                          "p.start(); p.join(); print('child', p.exitcode)\n")
        t = Twin(opts, "mpfork")
        try:
            t.same(t.run([py, "-c", src]), "a multiprocessing fork child")
            reps = check_left(t.pre, {pid: MiB for pid in t.pre.reports()}, "mpfork")
            eq(len(reps), 2, "mpfork: the parent's and the child's reports")
        finally:
            t.close()

    def names():
        import pwd
        import socket
        host = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in socket.gethostname())
        if os.geteuid() != 0:
            run_case.NOT_CHECKED.append("names another user holds: needs root to make them")
        else:
            nobody = pwd.getpwnam("nobody")
            c = Case(opts, "names")
            try:
                os.chmod(c.dir, 0o1777)
                planted = {}

                def plant(case):
                    pid = os.getpid()
                    for n in (f"vramwatch-{host}-{pid}.json", f"vramwatch-live.{host}.{pid}"):
                        path = os.path.join(case.dir, n)
                        with open(path, "w") as fh:
                            fh.write("nobody's\n")
                        os.chown(path, nobody.pw_uid, nobody.pw_gid)
                        planted[n] = True

                p = subprocess.run([exe, "alloc"], env=c.env(), cwd=c.dir, capture_output=True,
                                   text=True, timeout=60, preexec_fn=lambda: plant(c))
                eq(p.returncode, 0, "names: exit status")
                w = warnings(p.stderr)
                eq(len(w), 1, f"names: one warning ({w})")
                check("another user's" in w[0], f"names: the warning says why: {w[0]}")
                ours = os.path.join(c.dir, "ours")
                os.mkdir(ours)
                for f in os.listdir(c.dir):
                    if f.endswith(".json") and os.lstat(os.path.join(c.dir, f)).st_uid == 0:
                        shutil.copy(os.path.join(c.dir, f), ours)
                reps = c.reports(ours)
                eq(len(reps), 1, "names: the report, under another name")
                eq([dev0(r)["live_bytes"] for r in reps.values()], [MiB], "names: its live bytes")
                pid = list(reps)[0]
                for n in (f"vramwatch-{host}-{pid}.json", f"vramwatch-live.{host}.{pid}"):
                    path = os.path.join(c.dir, n)
                    st = os.lstat(path)
                    eq((st.st_uid, open(path).read()), (nobody.pw_uid, "nobody's\n"),
                       f"names: {n} left as it was")
                eq([f for f in live_files(c.dir) if f != f"vramwatch-live.{host}.{pid}"], [],
                   "names: our live-state file gone at exit")
            finally:
                c.close()
        # killed writers' live-state files: removed by the next process that writes here
        c = Case(opts, "killed")
        try:
            procs = [subprocess.Popen([exe, "hold"], env=c.env(), cwd=c.dir, stdout=subprocess.PIPE,
                                      text=True) for _ in range(20)]
            for p in procs:
                p.stdout.readline()
            deadline = time.monotonic() + 10
            while len(live_files(c.dir)) < 20 and time.monotonic() < deadline:
                time.sleep(0.1)
            eq(len(live_files(c.dir)), 20, "killed: the writers' live-state files")
            for p in procs:
                p.kill()
                p.wait()
                p.stdout.close()
            old = time.time() - 60  # writers tick every second: a minute untouched is dead
            for f in live_files(c.dir):
                os.utime(os.path.join(c.dir, f), (old, old))
            c.run([exe, "alloc"])
            eq(live_files(c.dir), [], "killed: live-state files of the 20 killed writers")
        finally:
            c.close()

    def status_reused():
        t = Twin(opts, "status")
        try:
            path = os.path.join(t.pre.dir, "status")
            with open(path, "w") as fh:
                fh.write("x" * 400 + "\n")
            t.pre.run([exe, "alloc"], extra={"VRAMWATCH_STATUS": path})
            with open(path) as fh:
                lines = fh.read().splitlines()
            eq(len(lines), 1, f"status: one line in a reused status file: {lines!r}")
            check(lines[0].startswith("vramwatch-status ") and "xxx" not in lines[0],
                   f"status: nothing of the old line left: {lines[0]!r}")
        finally:
            t.close()

    def fd_exhaustion():
        # out of descriptors at the first call: the program fails as it would without us, and
        # the warning says why libunwind could not be loaded (it said "not found"); the report
        # cannot be written either, which its own warning says
        t = Twin(opts, "nofile")
        try:
            got = t.run([exe, "nofile"])
            eq(got[1][:2], got[0][:2], "out of descriptors: (status, output) with the library")
            w = [x for x in warnings(got[1][2]) if "libunwind" in x]
            check(len(w) == 1 and "Too many open files" in w[0],
                   f"out of descriptors: the warning about libunwind says why: {w}")
        finally:
            t.close()

    def address_space():
        # a job under a tight RLIMIT_AS: what runs without the library runs with it. The bare
        # program's peak address space (the simulated card reserves its memory's worth), plus
        # 32 MiB: before, the library took 137 MiB more (its call-site tables' 64 MiB reserve and
        # glibc's 64 MiB arena for the library's thread) and CUDA's set-up failed
        c = Case(opts, "rlimit-as")
        try:
            p = subprocess.Popen([exe, "hold"], env=c.env(preload=False), cwd=c.dir,
                                 stdout=subprocess.PIPE, text=True)
            p.stdout.readline()
            with open(f"/proc/{p.pid}/status") as fh:
                peak = [int(x.split()[1]) for x in fh if x.startswith("VmPeak:")][0] * 1024
            p.kill()
            p.wait()
            p.stdout.close()
            limit = peak + 32 * MiB
            for prog in ([exe, "alloc"], [longsym, "1.5"]):
                got = c.run(prog, preexec_fn=lambda: resource.setrlimit(
                    resource.RLIMIT_AS, (limit, limit)), expect_rc=None)
                eq((got.returncode, warnings(got.stderr)), (0, []),
                   f"{os.path.basename(prog[0])} with RLIMIT_AS at the bare program's peak + 32 MiB")
            eq(len(c.reports()), 2, "rlimit-as: both reports")
        finally:
            c.close()

    def broken_stderr():
        # a warning of ours onto a stderr whose reader has gone: without us nothing is written
        # there; with us the line must not cost the program a SIGPIPE (which ended it before)
        c = Case(opts, "epipe")
        try:
            bad = os.path.join(c.dir, "not-a-folder")
            with open(bad, "w"):
                pass
            statuses = []
            for preload in (False, True):
                r, w = os.pipe()
                os.close(r)
                p = subprocess.run([exe, "alloc"], env=c.env({"VRAMWATCH_DIR": bad}, preload),
                                   cwd=c.dir, stdout=subprocess.PIPE, stderr=w, timeout=60)
                os.close(w)
                statuses.append(p.returncode)
            eq(statuses[1], statuses[0], "a warning onto a broken stderr: exit status")
        finally:
            c.close()

    def file_size_limit():
        # RLIMIT_FSIZE below a report's size, SIGXFSZ at its default (which ends a process with
        # a core): the program writes nothing itself, so without us nothing happens; with us
        # the report's write fails, one warning, and the program runs to its end
        t = Twin(opts, "fsize")
        try:
            got = t.run([exe, "alloc"], preexec=lambda c: resource.setrlimit(
                resource.RLIMIT_FSIZE, (1024, 1024)))
            eq(got[1][:2], got[0][:2], "RLIMIT_FSIZE 1 KiB: (status, output) with the library")
            w = warnings(got[1][2])
            check(len(w) == 1 and "File too large" in w[0], f"RLIMIT_FSIZE: one warning: {w}")
        finally:
            t.close()

    # Under a sanitizer: its runtime's own address space is what a limit would take (the
    # case is for the plain build), and ThreadSanitizer's build walks no native stacks, so
    # libunwind is never loaded.
    skip = ["address space"] if opts.sanitized else []
    if "tsan" in opts.preload_first:
        skip.append("out of descriptors")
    for name, fn in (("broken stderr", broken_stderr), ("file size limit", file_size_limit), ("address space", address_space), ("out of descriptors", fd_exhaustion), ("names", names), ("status file reused", status_reused),
                     ("signals (C)", signals_c), ("signals (Python)", signals_py),
                     ("long symbols", demangle), ("descriptors", descriptors),
                     ("children", children)):
        if os.environ.get("GAUNTLET_HOST_ONLY", name) in name and name not in skip:
            host_case(fails, name, fn)  # GAUNTLET_HOST_ONLY: by hand, one case at a time
    if fails:
        raise Failed(f"{len(fails)} of the host cases failed:\n  " + "\n  ".join(fails))


# A Python job's allocation through the simulated runtime, as ctypes sees it.
PY_ALLOC = ("import ctypes\n"
            "_rt = ctypes.CDLL('libcudart.so.13')\n"
            "def alloc(n):\n"
            "    p = ctypes.c_void_p()\n"
            "    assert _rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0\n"
            "alloc(1 << 20)\n")


ATTACKS = {"host": attack_host, "load": attack_load, "procs": attack_procs, "faults": attack_faults, "cost": attack_cost}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--preload-first", default="")
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--sanitized", action="store_true",
                    help="a sanitizer build: smaller sizes, the process's memory not checked")
    ap.add_argument("--timed", action="store_true",
                    help="also the time targets (the cost attack; a benchmark, not a test)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("GAUNTLET_SEED", "1")))
    ap.add_argument("attack", choices=sorted(ATTACKS))
    opts = ap.parse_args()
    opts.build = os.path.abspath(opts.build)
    opts.long = opts.long or os.environ.get("GAUNTLET_LONG") == "1"
    root = os.path.dirname(os.path.dirname(HERE))
    opts.schema = os.path.join(root, "docs", "report.schema.json")
    opts.vramwatch = os.path.join(opts.build, "tools", "vramwatch", "vramwatch")
    opts.long_run = os.path.join(opts.build, "tests", "timeline", "long_run")
    try:
        ATTACKS[opts.attack](opts)
    except Failed as e:
        print(f"FAILED: {opts.attack}: {e}", file=sys.stderr)
        return 1
    if run_case.NOT_CHECKED:
        print(f"{opts.attack}: skipped (exit 77), not a pass: {len(run_case.NOT_CHECKED)} check(s) could not "
              "run here; every other one passed", file=sys.stderr)
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
