#!/usr/bin/env python3
"""Runs one integration case: a real program under LD_PRELOAD=libvramwatch.so against the
simulated GPU, in a fresh folder, then checks the exact figures of the report(s) it left and
validates each against docs/report.schema.json.

A case that cannot run here (it needs root for chown or mknod) exits 77, skipped, and says why on
stderr. A check inside a case that cannot run (another user's file as non-root, the schema without
the python3 jsonschema module) is named on stderr as it is met, every other check still runs, and
the case then exits 77, not 0: a failure still fails, but a pass means every check ran.

usage: run_case.py --lib LIB --sim SIMDIR --paths PATHS_EXE --schema SCHEMA [--realrc EXE] CASE
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

MiB = 1 << 20
GiB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vwtest import SKIP, Failed, check, clean_env, eq  # noqa: E402


# Checks that could not run here, in the order met (gauntlet.py shares this through validate).
NOT_CHECKED = []


def not_checked(why):
    """Names on stderr a check that cannot run here; the case then ends with exit 77."""
    if why not in NOT_CHECKED:
        NOT_CHECKED.append(why)
        print(f"not checked: {why}", file=sys.stderr)


class Run:
    def __init__(self, args, case_dir):
        self.args = args
        self.dir = case_dir
        self.rc = None
        self.stdout = ""
        self.stderr = ""

    def env(self, extra=None, preload=True, sim=True):
        env = clean_env(drop_prefixes=("SIMGPU_",))
        if sim:
            env["LD_LIBRARY_PATH"] = self.args.sim
        if preload:
            env["LD_PRELOAD"] = ":".join(filter(None, [self.args.preload_first, self.args.lib]))
        if self.args.preload_first:
            # The interpreter and /bin/true are not ours to leak-check.
            env["ASAN_OPTIONS"] = "detect_leaks=0"
            env["TSAN_OPTIONS"] = "suppressions=" + os.path.join(os.path.dirname(HERE), "tsan.supp")
        env["VRAMWATCH_DIR"] = self.dir
        env.update(extra or {})
        return env

    def run(self, cmd, extra=None, preload=True, sim=True, expect_rc=0):
        p = subprocess.run(cmd, env=self.env(extra, preload, sim), cwd=self.dir,
                           capture_output=True, text=True, timeout=120)
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
        if expect_rc is not None and p.returncode != expect_rc:
            raise Failed(f"{cmd} exited {p.returncode}, expected {expect_rc}\n"
                             f"stdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def paths(self, mode, extra=None, **kw):
        return self.run([self.args.paths, mode], extra, **kw)

    def reports(self, requests=False):
        """The processes' reports (requests=False) or the dumps on request, each in a file of
        its own (vramwatch-HOST-PID-request-N.json), validated and of mode 0600."""
        files = sorted(f for f in glob.glob(os.path.join(self.dir, "vramwatch-*.json"))
                       if ("-request-" in os.path.basename(f)) == requests)
        out = []
        for f in files:
            with open(f, encoding="utf-8") as fh:
                out.append(json.load(fh))
            validate(self.args.schema, f, out[-1])
            mode = os.stat(f).st_mode & 0o777
            eq(mode, 0o600, f"mode of {f}")
        leftovers = [f for f in os.listdir(self.dir) if ".tmp-" in f]
        eq(leftovers, [], "temporary files left behind")
        return out

    def report(self):
        r = self.reports()
        eq(len(r), 1, "number of reports")
        return r[0]


_validator = None


def validate(schema_path, path, doc):
    global _validator
    try:
        import jsonschema
    except ImportError:
        not_checked("reports against the schema: the python3 jsonschema module is missing "
                    "(Debian: python3-jsonschema)")
        return
    if _validator is None:
        with open(schema_path, encoding="utf-8") as fh:
            schema = json.load(fh)
        cls = jsonschema.validators.validator_for(schema)
        _validator = cls(schema)
    errors = sorted(_validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise Failed(f"{path} does not match the schema at {list(e.path)}: {e.message}")


def dev0(r):
    devs = [d for d in r["devices"] if d["ordinal"] == 0]
    eq(len(devs), 1, "device 0 listed once")
    return devs[0]


def site(r, cid):
    for c in r["callsites"]:
        if c["id"] == cid:
            return c
    raise Failed(f"call site {cid} not listed")


def counts(d, alloc, free, failed=0):
    eq(d["alloc_calls"], alloc, "alloc_calls")
    eq(d["free_calls"], free, "free_calls")
    eq(d["failed_calls"], failed, "failed_calls")


def app_frame_first(r, cid):
    """The call site's innermost frame is the application's own code, not ours."""
    frames = site(r, cid)["frames"]
    check(frames, f"call site {cid} has frames")
    check(all(f["kind"] == "native" for f in frames), "native frames")
    check(not any("libvramwatch" in (f["module"] or "") for f in frames),
           "frames inside libvramwatch are left out")
    eq(os.path.basename(frames[0]["module"]), "paths", "innermost module")


# ---------------------------------------------------------------- cases

def case_rt_malloc(run):
    run.paths("rt_malloc")
    r = run.report()
    eq(r["reason"], "exit", "reason")
    d = dev0(r)
    eq(d["live_bytes"], 6 * MiB, "live")
    eq(d["peak_live_bytes"], 7 * MiB, "peak")
    eq(d["reserved_bytes"], 6 * MiB, "reserved equals live without pools")
    eq(d["live_count"], 2, "live_count")
    counts(d, 3, 1)
    eq(d["total_bytes"], 16 * GiB, "total (simulated default)")
    # Untracked: the simulated context's 300 MiB, exactly (sizes are multiples of 512).
    eq(d["untracked_bytes"], 300 * MiB, "untracked")
    eq(d["used_bytes"], 306 * MiB, "used")
    eq(r["failures"], [], "failures")
    eq([(l["size"], l["api"]) for l in r["live"]], [(4 * MiB, "cudaMalloc"), (2 * MiB, "cudaMalloc")],
       "live list")
    top = r["callsites"][0]
    eq(top["live_bytes"], 4 * MiB, "top call site")
    app_frame_first(r, top["id"])
    eq(r["process"]["argv"][1], "rt_malloc", "argv")


def case_rt_pitch(run):
    run.paths("rt_pitch")
    d = dev0(run.report())
    eq(d["live_bytes"], 1024 * 100 + 1024 * 10 * 5, "pitch x height (+ x depth)")
    counts(d, 2, 0)


def case_rt_managed_host(run):
    run.paths("rt_managed_host")
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 1 * MiB, "managed memory is device memory")
    counts(d, 1, 0)
    eq([l["kind"] for l in r["live"]], ["managed"], "kinds")
    h = r["host_pinned"]
    eq((h["live_bytes"], h["peak_live_bytes"], h["alloc_calls"], h["free_calls"]),
       (2 * MiB, 3 * MiB, 2, 1), "pinned host memory, tracked apart")


def case_rt_async(run):
    run.paths("rt_async")
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 4 * MiB, "live")
    eq(d["pool_cached_bytes"], 12 * MiB, "pools hold the freed 4 MiB and 8 MiB")
    eq(d["reserved_bytes"], 16 * MiB, "reserved = live + pool cache")
    check(d["peak_reserved_bytes"] >= 16 * MiB, "peak reserved >= reserved")
    counts(d, 4, 2)
    eq(sorted({l["api"] for l in r["live"]}), ["cudaMallocAsync_ptsz", "cudaMallocFromPoolAsync_ptsz"],
       "apis of live allocations")
    eq(d["untracked_bytes"], 300 * MiB, "untracked stays the context")


def case_drv_direct(run):
    p = run.paths("drv_direct")
    vals = dict(kv.split("=") for kv in p.stdout.split())
    pitch, gran = int(vals["pitch"]), int(vals["gran"])
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], pitch * 10 + 1 * MiB + 2 * MiB + 2 * MiB + 4 * gran, "live")
    counts(d, 9, 4)
    eq(d["va_reserved_bytes"], 64 * gran, "address space is reported apart")
    check(d["reserved_bytes"] >= d["live_bytes"], "reserved >= live")
    h = r["host_pinned"]
    eq((h["live_bytes"], h["peak_live_bytes"], h["alloc_calls"], h["free_calls"]),
       (1 * MiB, 4 * MiB, 2, 1), "cuMemHostAlloc and cuMemAllocHost are host memory")
    apis = {l["api"] for l in r["live"]}
    eq(apis, {"cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemAllocAsync", "cuMemCreate",
              "cuMemAllocFromPoolAsync"}, "apis")


def case_drv_dlsym(run):
    run.paths("drv_dlsym")
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 5 * MiB, "live")
    counts(d, 2, 1)
    eq(r["live"][0]["api"], "cuMemAlloc_v2", "api")


def case_drv_procaddr(run):
    run.paths("drv_procaddr")
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 3 * MiB, "live")
    eq(d["peak_live_bytes"], 10 * MiB, "peak")
    counts(d, 3, 1)
    eq(sorted(l["api"] for l in r["live"]), ["cuMemAllocAsync", "cuMemAllocAsync_ptsz"],
       "per-thread-stream flag picks the _ptsz shim")


def case_rt_entrypoint(run):
    run.paths("rt_entrypoint")
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 7 * MiB, "live")
    counts(d, 3, 0)
    eq(d["va_reserved_bytes"], 0, "no address space")
    eq(sorted(l["api"] for l in r["live"]), ["cuMemAlloc_v2", "cuMemAlloc_v2", "cudaMalloc"],
       "a runtime call counts once, as itself")


def case_oom(run):
    run.paths("oom", {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0"})
    r = run.report()
    eq(r["reason"], "exit", "final report at exit")
    d = dev0(r)
    counts(d, 5, 3, failed=3)
    eq(d["live_bytes"], 900 * MiB, "live")
    eq(d["cache_flushes"], 1, "cache flushes")
    f = r["failures"]
    eq(len(f), 3, "failures")
    eq([(x["size"], x["retried"], x["oom"]) for x in f],
       [(500 * MiB, "succeeded", True), (300 * MiB, "failed", True), (300 * MiB, None, True)],
       "failure outcomes")
    eq([x["freed_before_retry_bytes"] for x in f], [200 * MiB, 10 * MiB, None],
       "what each retry had flushed before it")
    eq(f[0]["api"], "cudaMalloc", "api")
    eq(f[0]["error_name"], "cudaErrorMemoryAllocation", "error name")
    eq(f[0]["error_code"], 2, "error code")
    eq(f[0]["live_bytes_at_failure"], 600 * MiB, "live at failure")
    eq(f[0]["free_bytes_at_failure"], 424 * MiB, "free at failure")
    eq(r["failures_total"], 3, "failures_total")
    ev = r["pressure_events"]
    eq(len(ev), 1, "pressure events")
    eq((ev[0]["kind"], ev[0]["size"], ev[0]["freed_bytes"], ev[0]["freed_count"]),
       ("cache_flush", 500 * MiB, 200 * MiB, 2), "cache flush")
    app_frame_first(r, f[1]["callsite"])


def case_other_processes(run):
    """At an out-of-memory failure the report lists the other processes on the card (NVML), with
    their names, and not this process; the exit report keeps the list."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        run.paths("oom", {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0", "SIMGPU_OTHER_BYTES": "100MiB",
                          "SIMGPU_OTHER_PID": str(other.pid)})
    finally:
        other.kill()
        other.wait()
    d = dev0(run.report())
    eq(d["other_processes"], [{"pid": other.pid, "name": "sleep", "used_bytes": 100 * MiB}], "the other process")
    check(d["untracked_bytes"] >= 100 * MiB, "its memory is part of the untracked memory")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    run.paths("oom", {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0"})
    eq(dev0(run.report())["other_processes"], [], "nobody else on the card")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    run.paths("rt_malloc")
    eq(dev0(run.report())["other_processes"], None, "not asked without an out-of-memory failure")


def case_fragmentation(run):
    run.paths("fragmentation", {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0"})
    r = run.report()
    f = r["failures"][0]
    eq(f["size"], 200 * MiB, "size")
    eq(f["free_bytes_at_failure"], 524 * MiB, "free bytes exceed the request: fragmentation")
    eq(dev0(r)["live_bytes"], 500 * MiB, "live")


def case_threads(run):
    run.paths("threads")
    d = dev0(run.report())
    eq(d["live_bytes"], 8 * 8192, "live")
    counts(d, 8 * 20001, 8 * 20000)


def case_first_threads(run):
    """Threads whose first CUDA calls are simultaneous allocations, while the library's lookup of
    the driver is slowed to 100 ms: every allocation is still on its device, none on a device
    without an ordinal (five runs: a race that is lost now and then must lose here)."""
    for attempt in range(5):
        extra = {"LD_PRELOAD": ":".join(filter(None, [run.args.preload_first, run.args.slowdl, run.args.lib]))}
        run.paths("first_threads", extra)
        r = run.report()
        eq([d["ordinal"] for d in r["devices"]], [0], f"run {attempt}: every allocation on device 0")
        eq(dev0(r)["alloc_calls"], 16, f"run {attempt}: allocations")
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call


def case_fork(run):
    p = run.paths("fork")
    busy = int(p.stdout.split("=")[1])
    reps = run.reports()
    eq(len(reps), 2, "reports: the parent and the child that allocated, no other")
    by_pid = {x["process"]["pid"]: x for x in reps}
    check(busy in by_pid, "the allocating child reported")
    child = by_pid[busy]
    parent = [x for x in reps if x is not child][0]
    eq(dev0(parent)["live_bytes"], 10 * MiB, "parent live")
    eq(dev0(child)["live_bytes"], 3 * MiB, "child reports only its own allocations")
    eq(child["process"]["ppid"], parent["process"]["pid"], "child's parent")
    # A parent thread may have been inside libunwind at the fork, holding its lock: the child
    # walks no native stack (Python frames stay).
    eq([f for cs in child["callsites"] for f in cs["frames"] if f["kind"] == "native"], [],
       "no native frames in the child")
    check(any(f["kind"] == "native" for cs in parent["callsites"] for f in cs["frames"]),
           "the parent keeps its native frames")


def case_two_devices(run):
    run.paths("two_devices", {"SIMGPU_MEMORY": "0:4GiB,1:2GiB", "SIMGPU_CONTEXT_BYTES": "100MiB"})
    r = run.report()
    devs = {d["ordinal"]: d for d in r["devices"]}
    eq(sorted(devs), [0, 1], "devices listed")
    eq((devs[0]["live_bytes"], devs[0]["alloc_calls"], devs[0]["free_calls"]), (1 * MiB, 1, 0), "device 0")
    eq((devs[1]["live_bytes"], devs[1]["peak_live_bytes"], devs[1]["alloc_calls"], devs[1]["free_calls"]),
       (2 * MiB, 6 * MiB, 2, 1), "device 1")
    eq((devs[0]["total_bytes"], devs[1]["total_bytes"]), (4 * GiB, 2 * GiB), "capacities")
    eq(devs[0]["untracked_bytes"], 100 * MiB, "device 0 asked through its own context")
    eq(devs[1]["untracked_bytes"], 100 * MiB, "device 1 untracked")
    check(devs[0]["pci_bus_id"] and devs[0]["pci_bus_id"] != devs[1]["pci_bus_id"], "bus ids")


LIMITED = {"SIMGPU_MEMORY": "4GiB", "SIMGPU_CONTEXT_BYTES": "100MiB", "VRAMWATCH_LIMIT": "1GiB"}


def case_limit_enforce(run):
    """An emulated 1 GiB card on a 4 GiB one: queries agree, every path fails beyond it."""
    run.paths("limit_enforce", LIMITED)
    r = run.report()
    d = dev0(r)
    eq((d["total_bytes"], d["limit_bytes"]), (1 * GiB, 1 * GiB), "emulated capacity in the report")
    eq(d["free_bytes"], 4 * MiB, "emulated free: 1024 - 100 context - 920 live")
    eq(d["live_bytes"], 920 * MiB, "live")
    f = r["failures"]
    eq([(x["api"], x["size"], x["error_name"]) for x in f],
       [("cudaMalloc", 100 * MiB, "cudaErrorMemoryAllocation"),
        ("cuMemAlloc_v2", 100 * MiB, "CUDA_ERROR_OUT_OF_MEMORY"),
        ("cudaMallocAsync", 100 * MiB, "cudaErrorMemoryAllocation"),
        ("cuMemCreate", 64 * MiB, "CUDA_ERROR_OUT_OF_MEMORY"),
        ("cudaMallocManaged", 100 * MiB, "cudaErrorMemoryAllocation")], "refused allocations")
    eq(f[0]["free_bytes_at_failure"], 24 * MiB, "free at failure, on the emulated card")
    eq(r["limit_crossings"], [], "no crossings in enforce mode")
    eq(r["host_pinned"]["live_bytes"], 512 * MiB, "pinned host memory is not limited")


def case_limit_observe(run):
    """Observe mode: queries still describe the 1 GiB card, allocations beyond it succeed, and
    the first crossing is recorded."""
    run.paths("limit_observe", dict(LIMITED, VRAMWATCH_LIMIT_MODE="observe"))
    r = run.report()
    d = dev0(r)
    eq(r["failures"], [], "nothing refused")
    eq(d["live_bytes"], 1400 * MiB, "live")
    eq((d["total_bytes"], d["free_bytes"]), (1 * GiB, 0), "emulated card, over its capacity")
    x = r["limit_crossings"]
    eq(len(x), 1, "one crossing per device")
    eq((x[0]["api"], x[0]["size"], x[0]["device"], x[0]["live_bytes_at_crossing"]),
       ("cudaMalloc", 200 * MiB, 0, 1100 * MiB), "the first allocation over the limit")
    app_frame_first(r, x[0]["callsite"])


def case_nvml(run):
    """NVML's memory figures agree with cudaMemGetInfo, without and with a limit."""
    p = run.paths("nvml", {"SIMGPU_MEMORY": "4GiB", "SIMGPU_CONTEXT_BYTES": "100MiB"})
    eq(p.stdout.strip(), f"nvml total={4 * GiB} free={4 * GiB - 400 * MiB}", "no limit: the real card")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    p = run.paths("nvml", LIMITED)
    eq(p.stdout.strip(), f"nvml total={1 * GiB} free={1 * GiB - 400 * MiB}", "the emulated card")
    # With CUDA_VISIBLE_DEVICES, NVML's device is matched to CUDA's by its PCI bus id.
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    p = run.paths("nvml", dict(LIMITED, CUDA_VISIBLE_DEVICES="0"))
    eq(p.stdout.strip(), f"nvml total={1 * GiB} free={1 * GiB - 400 * MiB}", "the emulated card, by PCI id")


def case_limit_per_device(run):
    run.paths("two_devices", {"SIMGPU_MEMORY": "0:4GiB,1:2GiB", "SIMGPU_CONTEXT_BYTES": "100MiB",
                              "VRAMWATCH_LIMIT": "1:1GiB"})
    devs = {d["ordinal"]: d for d in run.report()["devices"]}
    eq((devs[0]["total_bytes"], devs[0]["limit_bytes"]), (4 * GiB, None), "device 0 unlimited")
    eq((devs[1]["total_bytes"], devs[1]["limit_bytes"]), (1 * GiB, 1 * GiB), "device 1 limited")


def read_status(path):
    with open(path, encoding="ascii") as fh:
        line = fh.read()
    words = line.split()
    eq(words[0], "vramwatch-status", "status line")
    return {k: int(v) for k, v in (w.split("=") for w in words[1:])}


def case_status(run):
    """VRAMWATCH_STATUS: a one-line file kept up to date with the peak, for vramwatch fit."""
    path = os.path.join(run.dir, "status.txt")
    run.paths("rt_malloc", {"VRAMWATCH_STATUS": path})
    st = read_status(path)
    eq((st["peak_live_bytes"], st["oom"]), (7 * MiB, 0), "peak, no out-of-memory")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    run.paths("oom", {"VRAMWATCH_STATUS": path, "SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0"})
    st = read_status(path)
    eq(st["oom"], 1, "an out-of-memory failure is flagged")
    check(st["peak_live_bytes"] >= 600 * MiB, "peak written")


def pressure(run, args, extra, expect_rc=0):
    py = shutil.which("python3") or sys.executable
    p = run.run([py, os.path.join(HERE, "pressure.py")] + args, extra, expect_rc=expect_rc)
    words = p.stdout.split()
    check(len(words) >= 2 and words[0] == "refused", f"pressure.py printed {p.stdout!r}")
    return int(words[1])


def status_text(path):
    with open(path, encoding="ascii") as fh:
        return fh.read()


def case_pressure_rescue(run):
    """A failure that the retry rescued is pressure, not an out-of-memory: the status says so
    (in plain decimal), and a process stopped by SIGTERM right after leaves a report that says so
    too, not the one written at the failure."""
    path = os.path.join(run.dir, "status.txt")
    card = {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0", "VRAMWATCH_STATUS": path}
    eq(pressure(run, ["rescue", "--kill"], card, expect_rc=-signal.SIGTERM), 1, "the card refused once")
    r = run.report()
    # the failure's report was rewritten at the rescue ("pressure"), then at the SIGTERM ("signal")
    eq(r["reason"], "signal", "the report written at the failure was rewritten, at the rescue and at the stop")
    eq([(f["size"], f["retried"]) for f in r["failures"]], [(256 * MiB, "succeeded")], "the failure, rescued")
    eq(dev0(r)["cache_flushes"], 1, "one cache flush")
    st = read_status(path)
    eq((st["oom"], st["pressure"]), (0, 1), "status: no out-of-memory, one flush")
    check(st["sites"] >= 2, f"status: the call chains seen ({st['sites']})")
    for word in status_text(path).split()[1:]:
        value = word.split("=")[1]
        check(value == "0" or not value.startswith("0"), f"plain decimal, not zero-padded: {word}")


def case_stop_signal(run):
    """A job stopped by SIGTERM (a time limit, torchrun stopping its ranks) leaves a report with
    reason "signal" and still ends by the signal, as without the library; for SIGINT, Python's own
    handler runs after the report (KeyboardInterrupt), and Python ends by the signal itself."""
    py = shutil.which("python3") or sys.executable
    for sig, want_rc in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)):
        p = subprocess.Popen([py, os.path.join(HERE, "pressure.py"), "sleep"], env=run.env(), cwd=run.dir,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline().strip()
        eq(line, "ready", f"{sig.name}: the job allocated")
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Failed(f"{sig.name}: the job did not end")
        err = p.stderr.read()
        # Python ends an uncaught KeyboardInterrupt by the signal too (3.8 and later)
        eq(rc, want_rc, f"{sig.name}: the job ends by the signal, as without the library ({err[-300:]})")
        if sig == signal.SIGINT:
            check("KeyboardInterrupt" in err, f"SIGINT: Python's own handler ran ({err[-300:]})")
        r = run.report()
        eq(r["reason"], "signal", f"{sig.name}: the report's reason")
        eq(dev0(r)["live_bytes"], 100 * MiB, f"{sig.name}: live")
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call
    # A forked worker has no thread of ours to write a report: its stop signals act as they
    # would without the library from the start (Python leaves SIGTERM at its default and catches
    # SIGINT itself), not through our handler, which a sanitizer's runtime may defer past a
    # restarted wait (pool workers left blocked, their SIGTERM lost).
    p = run.run([py, os.path.join(HERE, "pressure.py"), "forked"])
    eq(p.stdout.strip(), "child catches SIGINT", "a forked child's stop signals")


def case_pressure_final(run):
    """A failure that is never retried is final: oom=1 in the status."""
    path = os.path.join(run.dir, "status.txt")
    card = {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0", "VRAMWATCH_STATUS": path}
    eq(pressure(run, ["final"], card), 1, "the card refused once")
    st = read_status(path)
    eq((st["oom"], st["pressure"]), (1, 0), "status: a final out-of-memory, no flush")
    eq(run.report()["failures"][0]["retried"], None, "no retry seen")


def case_observe_retry(run):
    """Observe mode and an allocator that says it flushes and retries: the request over the
    emulated card is refused once, as the small card would refuse it; no failure is recorded and
    no out-of-memory report written; a retry still over the limit goes through."""
    observe = dict(LIMITED, VRAMWATCH_LIMIT_MODE="observe")
    eq(pressure(run, ["observe", "--retries"], observe), 2, "refused once at each crossing")
    r = run.report()
    d = dev0(r)
    eq(r["reason"], "exit", "no out-of-memory report")
    eq(r["failures"], [], "a refusal for the flush is not a failure")
    eq(d["cache_flushes"], 2, "each refusal made the allocator flush")
    eq(r["limit_crossings"], [], "the flushes were enough: the job fits the emulated card")
    eq(d["peak_live_bytes"], 900 * MiB, "the peak the small card allows")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    # nothing to give back: each retry goes past the limit, where the small card would fail
    eq(pressure(run, ["observe", "--retries", "--keep"], observe), 3, "each request over the card refused once")
    r = run.report()
    eq(r["failures"], [], "no failure recorded")
    eq(len(r["limit_crossings"]), 1, "the first retry that went past is the crossing")
    eq(r["limit_crossings"][0]["live_bytes_at_crossing"], 1200 * MiB, "live at the crossing")
    eq(dev0(r)["peak_live_bytes"], 1800 * MiB, "the run went on")


def case_observe_torch(run):
    """A PyTorch process (libc10_cuda.so loaded) is known to flush and retry: refused once at each
    crossing without saying so; with PYTORCH_CUDA_ALLOC_CONF's cudaMallocAsync backend, which
    raises at the first failure, never."""
    observe = dict(LIMITED, VRAMWATCH_LIMIT_MODE="observe")
    eq(pressure(run, ["observe", "--torch", run.args.c10_stub], observe), 2, "the native allocator is refused once")
    eq(run.report()["failures"], [], "no failure recorded")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = dict(observe, **{var: "expandable_segments:False,backend:cudaMallocAsync"})
        eq(pressure(run, ["observe", "--torch", run.args.c10_stub], conf), 0, f"the async backend ({var}) is not")
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call


def case_observe_plain(run):
    """Observe mode and a program that does not retry: it never sees a failure."""
    eq(pressure(run, ["observe"], dict(LIMITED, VRAMWATCH_LIMIT_MODE="observe")), 0, "nothing refused")
    r = run.report()
    eq((r["failures"], dev0(r)["peak_live_bytes"]), ([], 1800 * MiB), "no failure, the uncapped peak")
    eq(len(r["limit_crossings"]), 1, "one crossing")


def case_limit_first(run):
    """The limit holds from the very first allocation of the process, and every allocation is on
    its device (the runtime loads the driver inside the first call)."""
    for args in (["first"], ["first", "--dump"]):
        eq(pressure(run, args, LIMITED), 31, f"{args}: 9 x 100 MiB fit 1 GiB beside the 100 MiB context")
        r = run.report()
        eq([d["ordinal"] for d in r["devices"]], [0], f"{args}: every allocation on device 0")
        eq(dev0(r)["live_bytes"], 900 * MiB, f"{args}: live")
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call


def case_limit_share(run):
    """VRAMWATCH_LIMIT=25%: a quarter of the real card."""
    eq(pressure(run, ["first"], {"SIMGPU_MEMORY": "4GiB", "SIMGPU_CONTEXT_BYTES": "100MiB",
                                 "VRAMWATCH_LIMIT": "25%"}), 31, "a 1 GiB card")
    d = dev0(run.report())
    eq((d["total_bytes"], d["limit_bytes"]), (1 * GiB, 1 * GiB), "the emulated card in the report")


def case_status_burst(run):
    """A caching allocator asks for its segments in one burst and then never again: the status
    file still ends up with the whole peak, not the one before the rate limit."""
    path = os.path.join(run.dir, "status.txt")
    py = shutil.which("python3") or sys.executable
    burst = "import ctypes\nrt = ctypes.CDLL('libcudart.so.13')\nps = [ctypes.c_void_p() for _ in range(20)]\n" \
            "[rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(100 << 20)) for p in ps]\n" \
            "open(__import__('sys').argv[1], 'w').write(open(__import__('sys').argv[2]).read())\n"
    copy = os.path.join(run.dir, "status-before-exit.txt")
    run.run([py, "-c", burst, copy, path], {"VRAMWATCH_STATUS": path})
    eq(read_status(copy)["peak_live_bytes"], 2000 * MiB, "the burst's peak, before the exit's update")


def case_dump(run):
    """Each dump on request is a file of its own, kept whatever the process writes after it:
    the first number was taken (planted by the program), so the dumps are 2 and 3, each with
    the memory of its moment, and the exit report is the process's own file."""
    run.paths("dump")
    dumps = sorted(glob.glob(os.path.join(run.dir, "vramwatch-*-request-*.json")))
    eq([re.sub(r".*-(request-\d+)\.json$", r"\1", f) for f in dumps], ["request-2", "request-3"],
       "one file per dump, the planted first number skipped")
    got = run.reports(requests=True)
    eq([(r["reason"], dev0(r)["live_bytes"]) for r in got], [("request", 1 * MiB), ("request", 2 * MiB)],
       "each dump as it was when asked, not overwritten by the next or by the exit report")
    r = run.report()
    eq(r["reason"], "exit", "the process's own report")
    eq([(m["label"], m["live_bytes"], m["phase_peak_bytes"]) for m in r["markers"]],
       [("epoch 1", 1 * MiB, 1 * MiB)], "markers, with the memory of the phase they close")


def case_queries_only(run):
    run.paths("queries_only")
    eq(run.reports(), [], "no allocation call: no report")


def case_no_cuda(run):
    py = shutil.which("python3") or sys.executable
    for cmd in (["/bin/true"], [py, "-c", "import ctypes, json; print(json.dumps([1]))"]):
        plain = run.run(cmd, preload=False)
        out_plain = (plain.stdout, plain.returncode)
        pre = run.run(cmd)
        eq((pre.stdout, pre.returncode), out_plain, f"{cmd[0]} output and status unchanged")
        eq(pre.stderr, plain.stderr, "nothing on stderr")
    eq(run.reports(), [], "processes that never touch CUDA write nothing")


def case_disabled(run):
    run.paths("rt_malloc", {"VRAMWATCH_DISABLE": "1"})
    eq(run.reports(), [], "disabled: nothing written")


def case_bad_env(run):
    run.paths("rt_malloc", {"VRAMWATCH_STACK_DEPTH": "lots", "VRAMWATCH_LOG": "warn"})
    lines = [l for l in run.stderr.splitlines() if l.startswith("vramwatch: ")]
    eq(len(lines), 1, f"one warning line, got {run.stderr!r}")
    check("VRAMWATCH_STACK_DEPTH" in lines[0], "the warning names the variable")
    eq(run.report()["vramwatch"]["stack_depth"], 32, "default kept")


def case_no_stacks(run):
    run.paths("rt_malloc", {"VRAMWATCH_STACK_DEPTH": "0"})
    r = run.report()
    eq(dev0(r)["live_bytes"], 6 * MiB, "live")
    check(all(c["frames"] == [] for c in r["callsites"]), "no frames")


def case_unwritable(run):
    bad = os.path.join(run.dir, "file-not-folder")
    open(bad, "w").close()
    run.paths("oom", {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0",
                      "VRAMWATCH_DIR": os.path.join(bad, "sub")}, expect_rc=134)
    # The workload itself checks that its report exists, which cannot be here; what matters is
    # that the job ran on to that check (134) with one warning and no crash.
    lines = [l for l in run.stderr.splitlines() if l.startswith("vramwatch: ")]
    eq(len(lines), 1, f"one warning line, got {run.stderr!r}")


def case_exit_status(run):
    run.run(["/bin/sh", "-c", f"{run.args.paths} rt_malloc && exit 7"], expect_rc=7)
    eq(len(run.reports()), 1, "report of the child written")


def case_ctypes(run):
    py = shutil.which("python3") or sys.executable
    script = os.path.join(HERE, "ctypes_alloc.py")
    run.run([py, script])
    r = run.report()
    d = dev0(r)
    eq(d["live_bytes"], 3 * MiB, "live: 1 MiB through CDLL (GIL released) + 2 MiB through PyDLL")
    counts(d, 3, 1)


def case_workers(run):
    """DataLoader-like: forked workers and exec'd tools that never allocate stay silent; a
    spawned worker that allocates reports as its own process."""
    py = shutil.which("python3") or sys.executable
    p = run.run([py, os.path.join(HERE, "workers.py")])
    spawned = int(p.stdout.strip().split("=")[1])
    reps = run.reports()
    eq(len(reps), 2, "reports: the parent and the spawned worker that allocated, no other")
    by_pid = {x["process"]["pid"]: x for x in reps}
    check(spawned in by_pid, "the spawned worker reported")
    child = by_pid[spawned]
    parent = [x for x in reps if x is not child][0]
    eq(dev0(parent)["live_bytes"], 8 * MiB, "parent live")
    eq(dev0(child)["live_bytes"], 3 * MiB, "the spawned worker reports only its own allocations")
    eq(child["process"]["ppid"], parent["process"]["pid"], "spawned worker's parent")
    check("workers.py" in " ".join(parent["process"]["argv"]), "parent argv")


# Four ranks on two simulated GPUs, two ranks per GPU through CUDA_VISIBLE_DEVICES: rank 0
# keeps 300 MiB of extra buffers (30% above the median), rank 3 runs out of memory first,
# rank 1 later; rank 3 is started first and rank 1 last, so neither start order nor rank
# order gives the right answer by chance.
RANKS = [  # rank, CUDA_VISIBLE_DEVICES, MiB allocated, delay before the failing request (ms), MiB asked
    (3, "1", "500,500", 0, 1500),
    (0, "0", "500,300,500", None, None),
    (2, "0", "500,500", None, None),
    (1, "1", "500,500", 800, 1500),
]


def case_ranks(run):
    procs = []
    for rank, cvd, mib, delay, fail in RANKS:
        extra = {"SIMGPU_DEVICES": "2", "SIMGPU_MEMORY": "2GiB", "SIMGPU_CONTEXT_BYTES": "100MiB",
                 "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "4",
                 "CUDA_VISIBLE_DEVICES": cvd, "PATHS_MIB": mib}
        if fail:
            extra.update(PATHS_FAIL_MIB=str(fail), PATHS_DELAY_MS=str(delay))
        procs.append(subprocess.Popen([run.args.paths, "rank"], env=run.env(extra), cwd=run.dir,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for pr in procs:
        out, err = pr.communicate(timeout=60)
        eq(pr.returncode, 0, "a rank's exit status (stderr: %s)" % err)
    reps = run.reports()
    eq(len(reps), 4, "one report per rank, none overwritten in the shared folder")
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")))
    eq(len(set(files)), 4, "distinct file names")
    by_rank = {r["process"]["rank"]: r for r in reps}
    eq(sorted(by_rank), [0, 1, 2, 3], "ranks")
    for rank, cvd, mib, delay, fail in RANKS:
        r = by_rank[rank]
        eq((r["process"]["local_rank"], r["process"]["world_size"]), (rank, 4), "rank %d: local rank, world" % rank)
        eq(r["process"]["env"].get("CUDA_VISIBLE_DEVICES"), cvd, "rank %d: CUDA_VISIBLE_DEVICES" % rank)
        d = dev0(r)
        phys = int(cvd)
        # The process's device 0 is physical device `cvd`: its bus id and UUID say so.
        eq(d["pci_bus_id"], "0000:%02X:00.0" % (phys + 1), "rank %d: PCI bus id" % rank)
        eq(d["uuid"], "GPU-7672616d-7761-7463-682d-4750552d30%02x" % phys, "rank %d: UUID" % rank)
        eq(d["peak_live_bytes"], sum(int(x) for x in mib.split(",")) * MiB, "rank %d: peak" % rank)
        eq(len([f for f in r["failures"] if f["oom"]]), 1 if fail else 0, "rank %d: failures" % rank)

    out = os.path.join(run.dir, "job.json")
    names = [os.path.join(run.dir, f) for f in files]
    run.run([run.args.vramwatch, "merge"] + names + ["-o", out], preload=False, sim=False)
    with open(out, encoding="utf-8") as fh:
        job = json.load(fh)
    eq([p["rank"] for p in job["processes"]], [0, 1, 2, 3], "job: rank order")
    eq(job["first_failure"]["rank"], 3, "job: the first out-of-memory is rank 3's")
    eq(job["first_failure"]["pid"], by_rank[3]["process"]["pid"], "job: first failure pid")
    eq(job["first_failure"]["size"], 1500 * MiB, "job: first failure size")
    eq(job["processes_out_of_memory"], 2, "job: two ranks ran out of memory")
    eq([p["device_ids"] for p in job["processes"]],
       [["GPU-7672616d-7761-7463-682d-4750552d30%02x" % g] for g in (0, 1, 0, 1)], "job: physical GPUs")
    eq([g["processes"] for g in job["gpus"]], [[0, 2], [1, 3]], "job: ranks per GPU")
    eq(job["median_peak_bytes"], 1000 * MiB, "job: median peak")
    eq([(f["kind"], f["rank"], f.get("excess_pct")) for f in job["findings"]],
       [("rank0_extra", 0, 30), ("shared_gpu", 0, None), ("shared_gpu", 1, None)], "job: findings")
    # exit 1: the job's reports show runs that did not fit (README, exit status)
    p = run.run([run.args.vramwatch, "report", out], preload=False, sim=False, expect_rc=1)
    check("first out of memory: rank 3, pid %d" % by_rank[3]["process"]["pid"] in p.stdout,
           "report names rank 3 first:\n" + p.stdout[:600])
    check("rank 0 peaked at 1.27 GiB, 30% more than the median process (1000.00 MiB" in p.stdout,
           "report names rank 0's extra memory:\n" + p.stdout[:1500])
    check("ranks 0 and 2 share GPU 0" in p.stdout and "ranks 1 and 3 share GPU 1" in p.stdout,
           "report names the shared GPUs")


def case_cli_run(run):
    """vramwatch run finds the library next to itself, preloads it, passes the status through
    and prints the post-mortem of the report the program left."""
    sim = {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0"}
    if run.args.preload_first:
        # A sanitizer runtime already in LD_PRELOAD must stay first: run keeps it in front.
        sim["LD_PRELOAD"] = run.args.preload_first
    p = run.run([run.args.vramwatch, "run", "--dir", run.dir, "--", run.args.paths, "oom"], sim,
                preload=False)
    check("What failed: cudaMalloc of 300.00 MiB" in p.stdout, f"post-mortem printed:\n{p.stdout}")
    # the advice's answer before the post-mortem, its reasons after
    check(p.stdout.startswith("Answer: ") and "Recommendations" in p.stdout
          and p.stdout.index("What failed:") < p.stdout.index("Recommendations"),
          f"advice printed after the out-of-memory, its answer first:\n{p.stdout}")
    eq(dev0(run.report())["failed_calls"], 3, "the report is the library's")
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    run.run([run.args.vramwatch, "run", "--dir", run.dir, "--", "/bin/sh", "-c",
             f"{run.args.paths} rt_malloc; exit 5"], sim, preload=False, expect_rc=5)
    check("Answer:" not in run.stdout and "Recommendations" not in run.stdout,
          "no advice for a run that did not run out of memory")
    eq(dev0(run.report())["live_bytes"], 6 * MiB, "report of the shell's child")


def case_install(run):
    """meson install puts the library, the CLI, the header and vramwatch.pc in place, and the
    installed CLI finds the installed library."""
    dest = os.path.join(run.dir, "dest")
    p = subprocess.run(["meson", "install", "-C", run.args.build, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True)
    eq(p.returncode, 0, f"meson install: {p.stderr}")
    files = [os.path.relpath(os.path.join(d, f), dest) for d, _, fs in os.walk(dest) for f in fs]
    for want in ("libvramwatch.so", "bin/vramwatch", "include/vramwatch/vramwatch.h", "vramwatch.pc"):
        check(any(f.endswith(want) for f in files), f"{want} installed (got {files})")
    pc = [f for f in files if f.endswith("vramwatch.pc")][0]
    text = open(os.path.join(dest, pc)).read()
    check("-lvramwatch" in text, "pkg-config names the library")


def python_frames(frames):
    return [f for f in frames if f["kind"] == "python"]


def same_function(ours, theirs, minor):
    """From 3.11 the report has qualified names (Trainer.step), traceback the bare name."""
    return ours == theirs or (minor >= 11 and ours.endswith("." + theirs))


def case_python(run):
    """Python call sites, checked against CPython's own traceback.extract_stack() for every
    allocation of pyframes_workload.py; on versions we do not know, frames are off with one
    info line and nothing breaks."""
    py = run.args.python
    ver = subprocess.run([py, "-c", "import sys; print(sys.version_info[1])"], capture_output=True,
                         text=True).stdout.strip()
    minor = int(ver)
    env = {"SIMGPU_MEMORY": "1GiB", "SIMGPU_CONTEXT_BYTES": "0", "VRAMWATCH_LOG": "info",
           "NATIVE_THREAD_LIB": run.args.native_thread_lib, "PYTHONIOENCODING": "utf-8"}
    run.run([py, os.path.join(HERE, "pyframes_workload.py")], env)
    r = run.report()
    info = [l for l in run.stderr.splitlines() if l.startswith("vramwatch: Python")]
    if minor < 8:
        eq(r["vramwatch"]["python"], False, "Python frames off on an unknown version")
        eq(len(info), 1, f"one info line, got {info}")
        check("unknown version" in info[0], info[0])
        check(all(not python_frames(c["frames"]) for c in r["callsites"]), "no Python frames")
        check(all(c["frames"] for c in r["callsites"] if c["live_bytes"]), "native frames kept")
        return
    eq(r["vramwatch"]["python"], True, "Python frames on")
    with open(os.path.join(run.dir, "expected.json"), encoding="utf-8") as fh:
        expected = json.load(fh)
    sites = {c["id"]: c for c in r["callsites"]}
    by_size = {l["size"]: sites[l["callsite"]] for l in r["live"]}
    for f in r["failures"]:
        by_size.setdefault(f["size"], sites[f["callsite"]])
    for mib, want in sorted(expected.items(), key=lambda kv: int(kv[0])):
        size = int(mib) * MiB
        check(size in by_size, f"allocation of {mib} MiB not in the report")
        ours = python_frames(by_size[size]["frames"])
        theirs = want["frames"]
        eq(len(ours), len(theirs), f"{mib} MiB: Python frames {ours} vs traceback {theirs}")
        for o, (file, name, line) in zip(ours, theirs):
            eq(os.path.abspath(o["file"]), file, f"{mib} MiB: file")
            check(same_function(o["function"], name, minor), f"{mib} MiB: function {o['function']} vs {name}")
            eq(o["line"], line, f"{mib} MiB: line of {name}")
        if not theirs:
            check(by_size[size]["frames"], f"{mib} MiB: native frames of a thread Python never saw")
    eq(r["failures"][0]["size"], 2000 * MiB, "the out-of-memory failure")
    check_python_tail(run, py, env)


def check_python_tail(run, py, env):
    """The native frames below Python, from a thread's first walk and from a thread that
    walks only down to its outermost run of the evaluation loop and keeps the rest: the same,
    frame by frame, on every path of pytail_workload.py."""
    for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
        os.remove(f)
    run.run([py, os.path.join(HERE, "pytail_workload.py")], env)
    r = run.report()
    with open(os.path.join(run.dir, "expected_tail.json"), encoding="utf-8") as fh:
        expected = json.load(fh)
    sites = {c["id"]: c for c in r["callsites"]}
    by_size = {l["size"]: sites[l["callsite"]] for l in r["live"]}
    native = {}
    for size, (path, kind) in expected.items():
        check(int(size) in by_size, f"tail: allocation of {size} bytes ({path}, {kind}) in the report")
        frames = [(f["module"], f["offset"]) for f in by_size[int(size)]["frames"]
                  if f["kind"] == "native"]
        check(frames, f"tail: {path}, {kind}: native frames")
        native.setdefault(path, {}).setdefault(kind, []).append(frames)
    eq(len(native), 6, "tail: six paths")
    for path, kinds in sorted(native.items()):
        eq(len(kinds.get("cold", [])), 1, f"tail: {path}: one cold allocation")
        eq(len(kinds.get("warm", [])), 4, f"tail: {path}: four warm allocations")
        for i, frames in enumerate(kinds["warm"]):
            eq(frames, kinds["cold"][0], f"tail: {path}: warm allocation {i}'s native frames")


def case_local_scope(run):
    """The runtime loaded only in a local scope: the shims still find it."""
    run.run([run.args.local_scope, run.args.native_thread_lib])
    d = dev0(run.report())
    eq((d["live_bytes"], d["alloc_calls"]), (8 * MiB, 2), "both allocations, tracked")


def case_cxx_local_names(run):
    """A C++ library loaded in a local scope (as Python loads PyTorch): its frames are named
    demangled, although its libstdc++ is not in the global scope."""
    run.run([run.args.local_scope, run.args.cxx_site_lib, "alloc_from_cxx"])
    r = run.report()
    names = [f.get("symbol") for c in r["callsites"] for f in c["frames"] if f["kind"] == "native"]
    check("vwtest::Grabber<int>::grab(unsigned long)" in names,
          f"the C++ frame demangled: {[n for n in names if n and 'rab' in n]}")


def case_torch_exceptions(run):
    run.run([run.args.python, os.path.join(HERE, "torch_exceptions.py")], sim=False)
    check("arrived unchanged" in run.stdout, run.stdout + run.stderr)


def case_real_cudart(run):
    """The real toolkit libcudart, no driver and the toolkit's stub driver: same return codes."""
    exe = run.args.realrc
    check(exe and os.path.exists(exe), "realrc program built")
    stub_src = run.args.stub
    libpaths = [""]
    if stub_src and os.path.exists(stub_src):
        stubdir = os.path.join(run.dir, "stub")
        os.mkdir(stubdir)
        os.symlink(stub_src, os.path.join(stubdir, "libcuda.so.1"))
        libpaths.append(stubdir)
    else:
        # Toolkits installed from pip or the runfile's runtime-only parts have no stubs folder.
        print(f"real_cudart: no stub driver at {stub_src}: the half with the toolkit's stub is not run")
    for libpath in libpaths:
        extra = {"LD_LIBRARY_PATH": libpath}
        plain = run.run([exe], extra, preload=False, sim=False)
        pre = run.run([exe], extra, sim=False)
        eq(pre.stdout, plain.stdout, f"return codes with LD_LIBRARY_PATH={libpath!r}")
        check(plain.stdout.strip(), "the program printed its return codes")
        # No driver that works: no device to put the failed calls on, and no device without an
        # ordinal in the report; they are counted as unattributed.
        r = run.report()
        eq(r["devices"], [], f"no device (LD_LIBRARY_PATH={libpath!r})")
        check(r["unattributed"] and r["unattributed"]["failed_calls"] >= 3,
               f"the failed calls counted, on no device: {r['unattributed']}")
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call




# ---------- security (docs/design.md, "Security") ----------

def nobody_ids():
    import pwd
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


def probe(run, folder, *args, expect_rc=0, extra=None):
    """The library dlopened by secure_probe, asked for a report in folder."""
    env = {"VRAMWATCH_DIR": folder}
    env.update(extra or {})
    return run.run([run.args.probe, run.args.lib] + list(args), env, preload=False, expect_rc=expect_rc)


def vw_lines(run):
    return [l for l in run.stderr.splitlines() if l.startswith("vramwatch: ")]


def case_file_modes(run):
    """Folders 0700, reports and the status file 0600 whatever the umask."""
    for umask in ("000", "077", "777"):
        folder = os.path.join(run.dir, "u" + umask, "a", "b")
        status = os.path.join(run.dir, "status-" + umask)
        run.run(["/bin/sh", "-c", f'umask {umask} && exec "$0" rt_malloc', run.args.paths],
                {"VRAMWATCH_DIR": folder, "VRAMWATCH_STATUS": status})
        eq(os.stat(status).st_mode & 0o777, 0o600, f"umask {umask}: status file mode")
        files = glob.glob(os.path.join(folder, "vramwatch-*.json"))
        eq(len(files), 1, f"umask {umask}: one report")
        eq(os.stat(files[0]).st_mode & 0o777, 0o600, f"umask {umask}: report mode")
        for d in (folder, os.path.dirname(folder), os.path.dirname(os.path.dirname(folder))):
            eq(os.stat(d).st_mode & 0o777, 0o700, f"umask {umask}: mode of {d}")
        eq([f for f in os.listdir(folder) if ".tmp-" in f], [], f"umask {umask}: no temporary file left")
        eq(vw_lines(run), [], f"umask {umask}: no warning")


def case_previous_report(run):
    """A report at our name from before this process started (an earlier process with the same
    pid on a host of the same name: a restarted container) is kept under a name with its time,
    not overwritten; one written after this process started (its image before an exec) is."""
    host = "".join(c if c.isalnum() or c in ".-_" else "_" for c in socket.gethostname())
    for age, kept in (("@1000000000", True), ("now", False)):
        folder = os.path.join(run.dir, "prev-" + str(kept))
        os.mkdir(folder, 0o700)
        script = (f'echo \'{{"earlier": true}}\' > "{folder}/vramwatch-{host}-$$.json" && '
                  f'touch -d {age} "{folder}/vramwatch-{host}-$$.json" && exec "$0" "$@"')
        run.run(["/bin/sh", "-c", script, run.args.probe, run.args.lib], {"VRAMWATCH_DIR": folder}, preload=False)
        files = sorted(glob.glob(os.path.join(folder, "vramwatch-*.json")))
        if kept:
            eq(len(files), 2, f"the earlier report kept beside ours: {files}")
            aside = [f for f in files if f.endswith("-1000000000.json")]
            eq(len(aside), 1, "kept under its time")
            with open(aside[0]) as f:
                eq(json.load(f), {"earlier": True}, "the earlier report untouched")
        else:
            eq(len(files), 1, f"a file written after the start is replaced: {files}")
        with open([f for f in files if not f.endswith("-1000000000.json")][0]) as f:
            eq(json.load(f)["schema"], "vramwatch.report/1", "our report at our name")


def case_symlinks(run):
    """A link planted at the report's name is replaced, never written through; a report folder
    that is a link is followed only when this user (or root) owns the link."""
    victim = os.path.join(run.dir, "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me\n")
    folder = os.path.join(run.dir, "reports")
    os.mkdir(folder, 0o700)
    # The report's name is vramwatch-HOST-PID.json: plant a link at every pid the next few
    # processes could get is not practical, so the probe's pid is planted by running it in a
    # shell that links its own name first and then execs the probe (same pid).
    host = "".join(c if c.isalnum() or c in ".-_" else "_" for c in socket.gethostname())
    script = f'ln -s "{victim}" "{folder}/vramwatch-{host}-$$.json" && exec "$0" "$@"'
    run.run(["/bin/sh", "-c", script, run.args.probe, run.args.lib], {"VRAMWATCH_DIR": folder}, preload=False)
    with open(victim) as f:
        eq(f.read(), "keep me\n", "the link's target is untouched")
    files = glob.glob(os.path.join(folder, "vramwatch-*.json"))
    eq(len(files), 1, "one report")
    check(not os.path.islink(files[0]), "the planted link was replaced by the report")
    eq(os.stat(files[0]).st_mode & 0o777, 0o600, "report mode")
    # A folder that is a link of ours: followed.
    mine = os.path.join(run.dir, "mine-link")
    os.symlink(folder, mine)
    probe(run, mine)
    eq(vw_lines(run), [], "a link of our own: no warning")
    eq(len(glob.glob(os.path.join(folder, "vramwatch-*.json"))), 2, "a link of our own is followed")
    if os.geteuid() != 0:
        not_checked("a folder link owned by another user is refused (needs root for chown)")
        return
    uid, gid = nobody_ids()
    theirs = os.path.join(run.dir, "their-link")
    os.symlink(folder, theirs)
    os.lchown(theirs, uid, gid)
    probe(run, theirs, expect_rc=3)
    lines = vw_lines(run)
    eq(len(lines), 1, f"a link owned by nobody: one warning, got {run.stderr!r}")
    check("symbolic link owned by another user" in lines[0], lines[0])
    eq(len(glob.glob(os.path.join(folder, "vramwatch-*.json"))), 2, "nothing written through it")


def case_unsafe_dirs(run):
    """A folder anyone may write to without the sticky bit, or one owned by another user, is
    refused with one warning; the job runs on and nothing is written."""
    open_dir = os.path.join(run.dir, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    run.paths("rt_malloc", {"VRAMWATCH_DIR": open_dir})
    lines = vw_lines(run)
    eq(len(lines), 1, f"world-writable: one warning, got {run.stderr!r}")
    check("no sticky bit" in lines[0], lines[0])
    eq(os.listdir(open_dir), [], "world-writable: nothing written")
    sticky = os.path.join(run.dir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    run.paths("rt_malloc", {"VRAMWATCH_DIR": sticky})
    eq(vw_lines(run), [], "world-writable with the sticky bit (like /tmp): no warning")
    eq(len(glob.glob(os.path.join(sticky, "vramwatch-*.json"))), 1, "sticky: report written")
    if os.geteuid() != 0:
        not_checked("a folder owned by another user is refused (needs root for chown)")
        return
    uid, gid = nobody_ids()
    theirs = os.path.join(run.dir, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, uid, gid)
    run.paths("rt_malloc", {"VRAMWATCH_DIR": theirs})
    lines = vw_lines(run)
    eq(len(lines), 1, f"owned by nobody: one warning, got {run.stderr!r}")
    check("owned by another user" in lines[0], lines[0])
    eq(os.listdir(theirs), [], "owned by nobody: nothing written")


def case_redaction(run):
    args = ["--token", "tok1", "--api-key=key2", "--password", "pw3", "--batch", "64", "HF_TOKEN=tok4",
            "MY_API_KEY=key5", "--data", "https://alice:pw6@example.com/x", "https://tok7@github.com/o/r",
            "--tokenizer", "gpt2"]
    probe(run, run.dir, *args)
    argv = run.report()["process"]["argv"]
    eq(argv[2:], ["--token", "***", "--api-key=***", "--password", "***", "--batch", "64", "HF_TOKEN=***",
                  "MY_API_KEY=***", "--data", "https://alice:***@example.com/x", "https://***@github.com/o/r",
                  "--tokenizer", "gpt2"], "argv redacted")
    with open(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0]) as f:
        text = f.read()
    for secret in ("tok1", "key2", "pw3", "tok4", "key5", "pw6", "tok7"):
        check(secret not in text, f"{secret} is nowhere in the report")
    # The forms issue 24 found left in reports, end to end (/proc/self/cmdline to the report).
    os.remove(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0])
    args = ["--pass", "S01x", "DB_PASS=S02x", "MYSQL_PWD=S03x", "--db-pwd=S05x",
            "https://b/k?X-Amz-Credential=S09x&X-Amz-Signature=S06x", "https://a/c?sv=1&sig=S07x",
            "https://g/o?X-Goog-Signature=S08x", "--jwt", "S28x", "JWT=S29x", "--session", "S30x",
            "--bearer", "S32x", "--passes", "3", "--session-name", "n"]
    probe(run, run.dir, *args)
    argv = run.report()["process"]["argv"]
    eq(argv[2:], ["--pass", "***", "DB_PASS=***", "MYSQL_PWD=***", "--db-pwd=***",
                  "https://b/k?X-Amz-Credential=***&X-Amz-Signature=***", "https://a/c?sv=1&sig=***",
                  "https://g/o?X-Goog-Signature=***", "--jwt", "***", "JWT=***", "--session", "***",
                  "--bearer", "***", "--passes", "3", "--session-name", "n"], "issue 24's forms redacted")
    # The command line is cut at 64 KiB: a cut inside a URL's password, before its "@", must show
    # none of it (the URL is redacted before the cut).
    url = "https://user:hunter2hunter2@example.com/x"
    prefix = len(os.fsencode(run.args.probe)) + 1 + len(os.fsencode(run.args.lib)) + 1
    for inside in (13, 15, 20, 27):  # bytes of the URL before the cut: in "user:", in the password
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.remove(f)  # the report, and the dump asked for before any CUDA call
        pad = 65536 - prefix - 1 - inside
        probe(run, run.dir, "x" * pad, url)
        with open(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))[0]) as f:
            text = f.read()
        check("hunt" not in text and "user:h" not in text, f"a cut {inside} bytes into the URL shows its password")


def case_setuid(run):
    """In a setuid program the library is pure pass-through: it reads nothing and writes nothing."""
    folder = os.path.join(run.dir, "out")
    os.mkdir(folder)
    os.chmod(folder, 0o1777)  # so that the program could write here as nobody: the library must not
    probe(run, folder)
    eq(len(glob.glob(os.path.join(folder, "vramwatch-*.json"))), 1, "control: the probe writes a report")
    for f in glob.glob(os.path.join(folder, "*")):
        os.unlink(f)
    if os.geteuid() != 0:
        not_checked("a setuid copy owned by nobody: pure pass-through (needs root for chown)")
        return
    uid, gid = nobody_ids()
    os.chmod(run.dir, 0o755)
    copy = os.path.join(run.dir, "secure_probe_setuid")
    shutil.copy(run.args.probe, copy)
    os.chown(copy, uid, gid)
    os.chmod(copy, 0o4755)
    lib_copy = os.path.join(run.dir, "libvramwatch.so")
    shutil.copy(run.args.lib, lib_copy)
    os.chmod(lib_copy, 0o755)
    p = run.run([copy, lib_copy], {"VRAMWATCH_DIR": folder, "VRAMWATCH_LOG": "debug"}, preload=False,
                expect_rc=None)
    if p.returncode == 2:
        raise Failed(f"the setuid probe could not load the library: {p.stderr}")
    eq(p.returncode, 3, f"setuid: the library refused the dump (stderr {p.stderr!r})")
    eq(vw_lines(run), [], "setuid: not a word, even at VRAMWATCH_LOG=debug")
    eq(os.listdir(folder), [], "setuid: nothing written")



# ---------- every component of a path, the status file, leftovers of killed writers ----------

def skip_unless_root(run, why):
    """Exit 77 (a skipped test for meson) with the reason on stderr, when this case needs root."""
    if os.geteuid() != 0:
        print(f"cannot run {run.args.case} (skipped, exit 77): not root: {why}", file=sys.stderr)
        shutil.rmtree(run.dir, ignore_errors=True)
        sys.exit(SKIP)


def refused(run, what, words):
    lines = vw_lines(run)
    eq(len(lines), 1, f"{what}: one warning, got {run.stderr!r}")
    check(words in lines[0], f"{what}: {words!r} in {lines[0]!r}")
    return lines[0]


def case_dir_components(run):
    """Every component of VRAMWATCH_DIR is checked on the way down, not only the last: a link
    of another user's or a folder of another user's in the middle, or a folder anyone may write
    to without the sticky bit, is refused with one warning and nothing is created or written
    below it; /tmp itself, links of our own (chains, relative targets), '.', '..' and a
    relative VRAMWATCH_DIR keep working."""
    def ok(folder, where=None, extra=None):
        probe(run, folder, extra=extra)
        eq(vw_lines(run), [], f"{folder}: no warning")
        where = where or folder
        eq(len(glob.glob(os.path.join(where, "vramwatch-*.json"))), 1, f"{folder}: report in {where}")
        eq(os.stat(where).st_mode & 0o777, 0o700, f"{where}: created 0700")

    # /tmp itself (root's, world-writable, sticky) on the way, two missing levels below it.
    tmp = tempfile.mkdtemp(prefix="vw-components-", dir="/tmp")
    try:
        eq(os.stat("/tmp").st_mode & 0o1002, 0o1002, "/tmp is world-writable and sticky here")
        ok(os.path.join(tmp, "a", "b"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # A sticky world-writable folder of our own in the middle.
    sticky = os.path.join(run.dir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    ok(os.path.join(sticky, "mine", "deeper"))
    # Our own links in the middle: a chain of two, the second with a relative target.
    base = os.path.join(run.dir, "base")
    target = os.path.join(run.dir, "target")
    os.mkdir(base, 0o755)
    os.mkdir(target, 0o755)
    os.symlink(os.path.join(base, "l2"), os.path.join(base, "l1"))
    os.symlink("../target", os.path.join(base, "l2"))
    ok(os.path.join(base, "l1", "sub"), os.path.join(target, "sub"))
    # '.', '..' and doubled slashes; a relative VRAMWATCH_DIR (from the working directory).
    os.mkdir(os.path.join(base, "x"), 0o755)
    ok(base + "/./x/..//dots", os.path.join(base, "dots"))
    ok(base + "/l1/../dots", os.path.join(run.dir, "dots"))  # '..' of the link's target, as the kernel has it
    ok("rel/sub", os.path.join(run.dir, "rel", "sub"))

    # Anyone may write to a folder in the middle (no sticky bit): refused, whether the folder
    # below exists (theirs to swap) or not.
    open_dir = os.path.join(run.dir, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    os.mkdir(os.path.join(open_dir, "reports"), 0o700)
    for below in ("reports", "missing"):
        probe(run, os.path.join(open_dir, below), expect_rc=3)
        line = refused(run, f"world-writable middle, {below}", "no sticky bit")
        check(open_dir in line, f"the warning names the folder in the middle: {line!r}")
    eq(sorted(os.listdir(open_dir)), ["reports"], "nothing created below the open folder")
    eq(os.listdir(os.path.join(open_dir, "reports")), [], "nothing written below the open folder")

    if os.geteuid() != 0:
        not_checked("links and folders of another user in the middle are refused (need root for chown)")
        return
    uid, gid = nobody_ids()
    victim = os.path.join(run.dir, "victim")
    os.mkdir(victim, 0o755)
    theirs = os.path.join(base, "their-link")
    os.symlink(victim, theirs)
    os.lchown(theirs, uid, gid)
    probe(run, os.path.join(theirs, "reports"), expect_rc=3)
    refused(run, "a link of nobody's in the middle", "symbolic link owned by another user")
    eq(os.listdir(victim), [], "nothing created through nobody's link")
    # Our own link whose target goes through nobody's link: refused just the same.
    os.symlink(os.path.join(theirs, "x"), os.path.join(base, "mine-to-theirs"))
    probe(run, os.path.join(base, "mine-to-theirs", "reports"), expect_rc=3)
    refused(run, "our link into nobody's link", "symbolic link owned by another user")
    eq(os.listdir(victim), [], "nothing created through a chain with nobody's link")
    # A folder of nobody's in the middle (mode 0755: only nobody can write to it), a folder of
    # ours below it: nobody could swap ours for a link at any time.
    their_dir = os.path.join(run.dir, "their-dir")
    os.mkdir(their_dir, 0o755)
    os.mkdir(os.path.join(their_dir, "reports"), 0o700)
    os.chown(their_dir, uid, gid)
    probe(run, os.path.join(their_dir, "reports"), expect_rc=3)
    refused(run, "a folder of nobody's in the middle", "owned by another user")
    eq(os.listdir(os.path.join(their_dir, "reports")), [], "nothing written below nobody's folder")


def paths_quick(run, extra, timeout=20):
    """paths rt_malloc under a timeout: a hang is a failure, not a stuck suite."""
    try:
        p = subprocess.run([run.args.paths, "rt_malloc"], env=run.env(extra), cwd=run.dir,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"the job hung (killed after {timeout} s) with {extra}")
    run.rc, run.stdout, run.stderr = p.returncode, p.stdout, p.stderr
    return p


def status_refused(run, path, words, extra=None):
    """The job runs on, exit 0, its report written, one warning about the status file."""
    for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
        os.unlink(f)
    env = {"VRAMWATCH_STATUS": path}
    env.update(extra or {})
    paths_quick(run, env)
    eq(run.rc, 0, f"status {path}: the job's own status (stderr {run.stderr!r})")
    eq(len(glob.glob(os.path.join(run.dir, "vramwatch-*.json"))), 1, f"status {path}: report written")
    line = refused(run, f"status {path}", words)
    check("status file" in line, line)


def case_status_fifo(run):
    """VRAMWATCH_STATUS naming a FIFO: the job neither hangs (no reader) nor writes into it (a
    reader waiting); one warning, the job runs on without a status file."""
    fifo = os.path.join(run.dir, "status.fifo")
    os.mkfifo(fifo, 0o600)
    status_refused(run, fifo, "not a regular file")
    # With a reader, opening it for writing would not block: it must still not be written.
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        status_refused(run, fifo, "not a regular file")
        try:
            got = os.read(rd, 4096)
        except BlockingIOError:
            got = b""
        eq(got, b"", "nothing written into the FIFO")
    finally:
        os.close(rd)


def case_status_device(run):
    """VRAMWATCH_STATUS naming a character device: never opened for writing, never chmod'ed
    (as root, the old behaviour made /dev/null 0600 for everyone). A private copy of /dev/null
    (mknod, root) is tried first, so that a regression shows there before /dev/null is touched;
    /dev/null's mode is put back whatever happens."""
    import stat
    if os.geteuid() == 0:
        copy = os.path.join(run.dir, "null-copy")
        os.mknod(copy, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(copy, 0o666)
        status_refused(run, copy, "not a regular file")
        eq(os.stat(copy).st_mode & 0o7777, 0o666, "the device copy's mode unchanged")
    else:
        not_checked("a private device node as the status file (needs root for mknod)")
    before = os.stat("/dev/null").st_mode & 0o7777
    try:
        status_refused(run, "/dev/null", "not a regular file")
    finally:
        after = os.stat("/dev/null").st_mode & 0o7777
        if after != before:
            os.chmod("/dev/null", before)
            raise Failed(f"/dev/null's mode changed to {after:o} (put back to {before:o})")


def case_status_foreign(run):
    """VRAMWATCH_STATUS naming another user's file (planted in a sticky folder before a root job
    starts, or anywhere): never opened, overwritten or chmod'ed."""
    skip_unless_root(run, "a status file owned by nobody needs chown")
    uid, gid = nobody_ids()
    sticky = os.path.join(run.dir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    for folder in (run.dir, sticky):
        theirs = os.path.join(folder, "status.txt")
        with open(theirs, "w") as f:
            f.write("theirs\n")
        os.chown(theirs, uid, gid)
        os.chmod(theirs, 0o644)
        status_refused(run, theirs, "owned by another user")
        st = os.stat(theirs)
        eq((st.st_uid, st.st_mode & 0o7777), (uid, 0o644), f"{theirs}: owner and mode unchanged")
        with open(theirs) as f:
            eq(f.read(), "theirs\n", f"{theirs}: content unchanged")


def case_status_links(run):
    """VRAMWATCH_STATUS: a symbolic link at its name is never followed, a second name (hard
    link) of a file of ours is not written through, its folder is walked like the report
    folder (a folder anyone may write to, a link of nobody's in the middle: refused); a new
    file is created 0600, an existing one of ours is kept up to date and made 0600."""
    victim = os.path.join(run.dir, "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me\n")
    os.chmod(victim, 0o644)
    link = os.path.join(run.dir, "status-symlink")
    os.symlink(victim, link)
    status_refused(run, link, "symbolic link")
    hard = os.path.join(run.dir, "status-hardlink")
    os.link(victim, hard)
    status_refused(run, hard, "hard link")
    os.unlink(hard)
    with open(victim) as f:
        eq(f.read(), "keep me\n", "the victim untouched")
    eq(os.stat(victim).st_mode & 0o777, 0o644, "the victim's mode unchanged")
    open_dir = os.path.join(run.dir, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    status_refused(run, os.path.join(open_dir, "status.txt"), "no sticky bit")
    eq(os.listdir(open_dir), [], "nothing created in the open folder")
    # Normal use: a new file in a sticky folder, then the same file again (ours, reused).
    sticky = os.path.join(run.dir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    good = os.path.join(sticky, "status.txt")
    for rnd in ("new", "again"):
        for f in glob.glob(os.path.join(run.dir, "vramwatch-*.json")):
            os.unlink(f)
        paths_quick(run, {"VRAMWATCH_STATUS": good})
        eq((run.rc, vw_lines(run)), (0, []), f"{rnd}: exit 0, no warning ({run.stderr!r})")
        eq(read_status(good)["peak_live_bytes"], 7 * MiB, f"{rnd}: status written")
        eq(os.stat(good).st_mode & 0o777, 0o600, f"{rnd}: mode 0600")
        os.chmod(good, 0o644)
    if os.geteuid() != 0:
        not_checked("a link of nobody's in the status file's folder is refused (needs root for chown)")
        return
    uid, gid = nobody_ids()
    target = os.path.join(run.dir, "target")
    os.mkdir(target, 0o755)
    theirs = os.path.join(run.dir, "their-link")
    os.symlink(target, theirs)
    os.lchown(theirs, uid, gid)
    status_refused(run, os.path.join(theirs, "status.txt"), "symbolic link owned by another user")
    eq(os.listdir(target), [], "nothing created through nobody's link")


def case_stale_tmp(run):
    """Temporary report files left by killed processes are removed by the next process that
    writes a report in the folder, and only those: our name pattern with our host name, a
    regular file of ours with one name, a pid that is not alive, no lock held on it (a writer in
    another PID namespace holds one), not written to for a minute. Everything else stays."""
    import fcntl
    import time
    host = "".join(c if c.isalnum() or c in ".-_" else "_" for c in socket.gethostname())
    folder = os.path.join(run.dir, "reports")
    os.mkdir(folder, 0o700)
    dead = []
    for _ in range(4):
        p = subprocess.Popen(["/bin/true"])
        p.wait()
        dead.append(p.pid)
    old = 3600

    def tmp(pid, tid, seq, age=old, h=host, kind="file"):
        name = f"vramwatch-{h}-{pid}.json.tmp-{tid}-{seq}"
        path = os.path.join(folder, name)
        if kind == "file":
            with open(path, "w") as f:
                f.write('{"schema": "vramw')  # half a report
        elif kind == "fifo":
            os.mkfifo(path, 0o600)
        elif kind == "dir":
            os.mkdir(path, 0o700)
        elif kind == "symlink":
            os.symlink(victim, path)
        t = time.time() - age
        os.utime(path, (t, t), follow_symlinks=False)
        return name

    victim = os.path.join(run.dir, "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me\n")
    stale = [tmp(dead[0], dead[0], 0), tmp(dead[0], dead[0] + 1, 3), tmp(dead[1], dead[1], 17)]
    kept = [tmp(os.getpid(), os.getpid(), 0),                 # a live pid
            tmp(dead[2], dead[2], 0, age=0),                   # written to just now
            tmp(dead[2], dead[2], 1, h=host + "x"),            # another host's
            tmp(dead[2], dead[2], 2, kind="fifo"),
            tmp(dead[2], dead[2], 3, kind="dir"),
            tmp(dead[2], dead[2], 4, kind="symlink"),
            tmp(dead[2], dead[2], 5) + ".bak",                 # not our pattern
            tmp(dead[3], dead[3], 6)]                          # locked: a writer elsewhere
    os.rename(os.path.join(folder, kept[6][:-4]), os.path.join(folder, kept[6]))
    hard = tmp(dead[2], dead[2], 7)                            # a second name of a file
    os.link(os.path.join(folder, hard), os.path.join(run.dir, "other-name"))
    kept.append(hard)
    if os.geteuid() == 0:
        uid, gid = nobody_ids()
        theirs = tmp(dead[2], dead[2], 8)
        os.chown(os.path.join(folder, theirs), uid, gid)
        t = time.time() - old
        os.utime(os.path.join(folder, theirs), (t, t))
        kept.append(theirs)
    else:
        not_checked("a stale temporary of nobody's is kept (needs root for chown)")
    for pid in dead:
        try:
            os.kill(pid, 0)
            raise Failed(f"pid {pid} came back to life before the run")
        except ProcessLookupError:
            pass
    lk = os.open(os.path.join(folder, kept[7]), os.O_RDONLY)
    fcntl.flock(lk, fcntl.LOCK_EX)
    try:
        probe(run, folder)
    finally:
        os.close(lk)
    eq(vw_lines(run), [], "no warning")
    left = sorted(f for f in os.listdir(folder) if ".tmp-" in f)
    eq(left, sorted(kept), "the stale temporaries removed, every other one kept")
    with open(victim) as f:
        eq(f.read(), "keep me\n", "a link's target untouched")
    eq(len([f for f in glob.glob(os.path.join(folder, "vramwatch-*.json")) if "-request-" not in f]), 1,
       "our report written")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--paths", required=True)
    ap.add_argument("--probe", help="secure_probe, for the security cases")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--realrc")
    ap.add_argument("--stub")
    ap.add_argument("--vramwatch", help="the vramwatch CLI")
    ap.add_argument("--build", help="the build folder (for the install case)")
    ap.add_argument("--c10-stub", help="a library named libc10_cuda.so (the observe_torch case)")
    ap.add_argument("--slowdl", help="a preload that slows the driver lookup (the first_threads case)")
    ap.add_argument("--python", help="the interpreter for the python case")
    ap.add_argument("--native-thread-lib", help="libnativethread.so for the python case")
    ap.add_argument("--local-scope", help="the local_scope program")
    ap.add_argument("--cxx-site-lib", help="libcxxsite.so for the cxx_local_names case")
    ap.add_argument("--preload-first", help="a sanitizer runtime to load before the library")
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    case_dir = tempfile.mkdtemp(prefix=f"vw-{args.case}-")
    try:
        CASES[args.case](Run(args, case_dir))
    except Failed as e:
        print(f"FAIL {args.case}: {e}\n(folder kept: {case_dir})", file=sys.stderr)
        return 1
    shutil.rmtree(case_dir, ignore_errors=True)
    if NOT_CHECKED:
        print(f"{args.case}: skipped (exit 77), not a pass: {len(NOT_CHECKED)} check(s) could not run "
              "here; every other one passed", file=sys.stderr)
        return SKIP
    print(f"PASS {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
