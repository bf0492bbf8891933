#!/usr/bin/python3
"""`vramwatch timeline --format=torch-snapshot`, end to end: real runs under the preload on the
simulated GPU, each report converted and the pickle loaded by the installed PyTorch's own
torch.cuda._memory_viz (snapshot_load.py, run by the PyTorch interpreter), its views checked
against the report. One group per meson test:

  sim      examples/train_sim.py: a run that fits (every event kept) and one that runs out of
           memory with VRAMWATCH_TRACE=16 (the ring wrapped): segments are the report's live
           allocations, one active block each; the device trace is the report's trace, an
           allocation as segment_alloc + alloc, a free as free_requested + free_completed +
           segment_free, with sizes, times and the Python frames of the report's call sites, and
           an oom entry per out-of-memory failure; every text view and both pages build
  old      the same report without its trace (as an earlier version wrote it): still converts,
           segments only, and one line on stderr says so; damaged input gives a one-line error
  torch    unchanged PyTorch (examples/train_torch.py) on the simulated card under vramwatch run,
           converted and loaded the same way
  render   the pages trace_plot and segment_plot return, opened in headless Chromium

usage: torch_snapshot.py --vramwatch EXE --lib LIB --sim DIR --repo DIR --torch-python PY
                         --validator PY [--chromium EXE] [--preload-first RT] GROUP
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed, Skipped, check, clean_env, eq, run_group  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def plain_env():
    """PyTorch's interpreter reading a pickle needs no GPU: run plainly, without a sanitizer
    build's runtime preloaded and without its instrumented libraries (the simulated card's
    libcudart, which PyTorch would load) on the library path."""
    return clean_env(drop=("LD_LIBRARY_PATH",))


def torch_usable(py):
    if not py:
        raise Skipped("no interpreter with PyTorch (configure with -Dtorch_python=PY)")
    p = subprocess.run([py, "-c", "import torch.cuda._memory_viz"], capture_output=True, text=True,
                       env=plain_env())
    if p.returncode != 0:
        raise Skipped("%s cannot import torch.cuda._memory_viz" % py)


def record(a, folder, argv, extra):
    env = clean_env()
    env["LD_PRELOAD"] = ":".join(filter(None, [a.preload_first, a.lib]))
    if a.preload_first:
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    env.update(VRAMWATCH_DIR=folder, LD_LIBRARY_PATH=a.sim, SIMGPU_MEMORY="16GiB")
    env.update(extra)
    p = subprocess.run(argv, env=env, cwd=folder, capture_output=True, text=True, timeout=120)
    found = glob.glob(os.path.join(folder, "vramwatch-*.json"))
    check(len(found) == 1, "%s (exit %d): expected one report, found %s: %s"
          % (argv, p.returncode, found, p.stderr[-600:]))
    v = subprocess.run(["/usr/bin/python3", a.validator, found[0]], capture_output=True, text=True)
    check(v.returncode in (0, 77), "schema: " + v.stdout + v.stderr)
    return p, found[0]


def convert(a, report, out, want_note=False):
    p = subprocess.run([a.vramwatch, "timeline", "-o", out, report], capture_output=True, text=True)
    check(p.returncode == 0, "timeline -o %s exited %d: %s" % (out, p.returncode, p.stderr))
    notes = p.stderr.strip().splitlines()
    if want_note:
        check(len(notes) == 1 and "has no trace" in notes[0], "expected one line about the missing trace: %r" % notes)
    else:
        eq(notes, [], "stderr of a conversion")


def load(a, pickle_path, html_dir):
    p = subprocess.run([a.torch_python, os.path.join(HERE, "snapshot_load.py"), pickle_path, html_dir],
                       capture_output=True, text=True, timeout=300, env=plain_env())
    if p.returncode == 77:
        raise Skipped(p.stderr.strip())
    check(p.returncode == 0, "PyTorch's _memory_viz on the snapshot: %s" % p.stderr[-1500:])
    return json.loads(p.stdout)


def python_frames(doc, site):
    for cs in doc["callsites"]:
        if cs["id"] == site:
            return [(f["file"], f["line"], f["function"]) for f in cs["frames"] if f["kind"] == "python"]
    raise Failed("call site %d is not listed" % site)


def check_segments(doc, got):
    live = {int(l["address"], 16): l for l in doc["live"]}
    segs = {s["address"]: s for s in got["segments"]}
    for addr, l in live.items():
        check(addr in segs, "live allocation %#x is not a segment" % addr)
        s = segs[addr]
        eq((s["total_size"], s["device"]), (l["size"], l["device"]), "segment %#x size, device" % addr)
        eq(s["blocks"], [[l["size"], "active_allocated"]], "segment %#x blocks" % addr)
        py = [tuple(f) for f in s["frames"] if f[1] > 0]
        eq(py, [tuple(f) for f in python_frames(doc, l["callsite"])], "segment %#x Python frames" % addr)
    if not doc.get("live_truncated"):
        eq(len(segs), len(live), "segments (the report's live allocations)")
    seg_lines = [l for l in got["segments_lines"] if ";active_allocated;" in l]
    check(len(seg_lines) >= len(live), "segments(): %d active lines for %d segments" % (len(seg_lines), len(live)))
    check(any(l.startswith("segments: %d" % len(segs)) for l in got["segsum"]), "segsum: %s" % got["segsum"][-3:])
    check(sum(int(l.rsplit(" ", 1)[1]) for l in got["memory_lines"]) == sum(s["total_size"] for s in segs.values()),
          "memory(): its sizes do not add up to the segments'")


def expected_entries(doc):
    """The device-0 trace the report's events and out-of-memory failures should give."""
    want = []
    fails = [f for f in doc["failures"] if f["oom"]]
    fi = 0
    for e in doc["trace"]["events"]:
        while fi < len(fails) and fails[fi]["time_unix_ns"] <= e["time_unix_ns"]:
            want.append(("oom", fails[fi]["size"], fails[fi]["time_unix_ns"] // 1000, None, fails[fi]["callsite"]))
            fi += 1
        actions = ["free_requested", "free_completed", "segment_free"] if e["action"] == "free" else ["segment_alloc", "alloc"]
        for act in actions:
            want.append((act, e["size"], e["time_unix_ns"] // 1000, int(e["address"], 16), e["callsite"]))
    for f in fails[fi:]:
        want.append(("oom", f["size"], f["time_unix_ns"] // 1000, None, f["callsite"]))
    return want


def check_trace(doc, got):
    traces = got["device_traces"]
    check(len(traces) >= 1, "no device trace")
    want = expected_entries(doc)
    have = traces[0]
    eq(len(have), len(want), "device 0 trace entries")
    for i, (w, h) in enumerate(zip(want, have)):
        eq((h["action"], h["size"], h["time_us"], h["addr"]), w[:4], "trace entry %d" % i)
        py = [tuple(f) for f in h["frames"] if f[1] > 0]
        eq(py, [tuple(f) for f in python_frames(doc, w[4])], "trace entry %d Python frames" % i)
        if w[0] == "oom":
            check(isinstance(h["device_free"], int), "oom entry %d without device_free" % i)
    allocs = sum(1 for e in doc["trace"]["events"] if e["action"] == "alloc")
    mallocs = [l for l in got["trace_text"] if "= cudaMalloc(" in l]
    eq(len(mallocs), allocs, "trace(): cudaMalloc lines")
    ooms = [l for l in got["trace_text"] if l.startswith("raise OutOfMemoryError")]
    eq(len(ooms), sum(1 for f in doc["failures"] if f["oom"]), "trace(): OutOfMemoryError lines")
    for k, n in got["html_bytes"].items():
        check(n > 1000, "%s: a page of %d bytes" % (k, n))


def one_run(a, tmp, name, argv, extra, wrapped):
    folder = os.path.join(tmp, name)
    os.mkdir(folder)
    _, report = record(a, folder, argv, extra)
    with open(report, encoding="utf-8") as f:
        doc = json.load(f)
    t = doc["trace"]
    check(t["kept"] == len(t["events"]) and t["lost"] == 0, "%s: trace %r" % (name, {k: t[k] for k in t if k != "events"}))
    check((t["total"] > t["kept"]) == wrapped, "%s: wrapped %s expected, trace total %d kept %d" % (name, wrapped, t["total"], t["kept"]))
    listed = {c["id"] for c in doc["callsites"]}
    check(all(e["callsite"] in listed for e in t["events"]), "%s: a trace event names an unlisted call site" % name)
    out = os.path.join(folder, "snap.pickle")
    convert(a, report, out)
    got = load(a, out, folder)
    eq(got["keys"], ["device_traces", "segments"], "snapshot keys")
    check_segments(doc, got)
    check_trace(doc, got)
    print("ok: %s: %d segments, %d trace entries (%d events of %d in the report's ring), %d oom"
          % (name, len(got["segments"]), len(got["device_traces"][0]), t["kept"], t["total"],
             sum(1 for e in got["device_traces"][0] if e["action"] == "oom")))
    return report, doc


def g_sim(a, tmp):
    torch_usable(a.torch_python)
    ex = os.path.join(a.repo, "examples", "train_sim.py")
    one_run(a, tmp, "fits", ["/usr/bin/python3", ex, "--batch", "16", "--epochs", "2", "--step-ms", "5"], {}, False)
    _, doc = one_run(a, tmp, "oom", ["/usr/bin/python3", ex, "--batch", "64", "--epochs", "1", "--step-ms", "1"],
                     {"VRAMWATCH_TRACE": "16"}, True)
    check(any(f["oom"] for f in doc["failures"]), "the oom run had no out-of-memory failure")


def g_old(a, tmp):
    torch_usable(a.torch_python)
    ex = os.path.join(a.repo, "examples", "train_sim.py")
    folder = os.path.join(tmp, "old")
    os.mkdir(folder)
    _, report = record(a, folder, ["/usr/bin/python3", ex, "--batch", "16", "--epochs", "1", "--step-ms", "1"], {})
    with open(report, encoding="utf-8") as f:
        doc = json.load(f)
    del doc["trace"]
    old = os.path.join(folder, "old.json")
    with open(old, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    out = os.path.join(folder, "old.pickle")
    convert(a, old, out, want_note=True)
    got = load(a, out, folder)
    check_segments(doc, got)
    check(all(e["action"] == "oom" for d in got["device_traces"] for e in d), "an old report gave trace events")
    # Damaged input: one line, exit 2, never a crash, nothing written.
    doc["trace"] = {"capacity": 4, "total": 1, "kept": 1, "lost": 0,
                    "events": [{"time_unix_ns": 1, "action": "grow", "address": "0x10", "size": 1,
                                "device": 0, "api": "cudaMalloc", "callsite": 0}]}
    bad = os.path.join(folder, "bad.json")
    with open(bad, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    # a second process of the job (one process's reports given twice are read as one)
    other = json.loads(json.dumps(doc))
    del other["trace"]
    other["process"]["pid"] += 1
    second = os.path.join(folder, "second.json")
    with open(second, "w", encoding="utf-8") as f:
        json.dump(other, f)
    for args in (["-o", os.path.join(folder, "bad.pickle"), bad],
                 ["--format=torch-snapshot", "-o", os.path.join(folder, "x.svg"), report],
                 ["-o", os.path.join(folder, "two.pickle"), report, second]):
        p = subprocess.run([a.vramwatch, "timeline"] + args, capture_output=True, text=True)
        eq(p.returncode, 2, "timeline %s: exit" % args)
        eq(len(p.stderr.strip().splitlines()), 1, "timeline %s: one line on stderr: %r" % (args, p.stderr))
    check(not os.path.exists(os.path.join(folder, "bad.pickle")), "a damaged report left a pickle")
    print("ok: a report without a trace converts (%d segments, one line on stderr); damaged input refused"
          % len(got["segments"]))


def g_torch(a, tmp):
    torch_usable(a.torch_python)
    folder = os.path.join(tmp, "torch")
    os.mkdir(folder)
    train = os.path.join(a.repo, "examples", "train_torch.py")
    env = clean_env(drop=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTHONPATH"), drop_prefixes=("SIMGPU_",))
    env.update(LC_ALL="C", TERM="dumb", NO_COLOR="1")
    argv = [a.vramwatch, "run", "--sim", "16GiB", "--dir", folder, "--", a.torch_python, train,
            "--batch", "8", "--img", "320", "--cfg", "s", "--steps", "2", "--val-steps", "1", "--workers", "0"]
    p = subprocess.run(argv, env=env, cwd=folder, capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, "PyTorch on the simulated card: exit %d: %s" % (p.returncode, p.stderr[-800:]))
    found = glob.glob(os.path.join(folder, "vramwatch-*.json"))
    check(len(found) == 1, "expected one report, found %s" % found)
    with open(found[0], encoding="utf-8") as f:
        doc = json.load(f)
    t = doc["trace"]
    check(t["kept"] > 0, "PyTorch's run left an empty trace")
    out = os.path.join(folder, "snap.pickle")
    convert(a, found[0], out)
    got = load(a, out, folder)
    check_segments(doc, got)
    check_trace(doc, got)
    check(any(f[0].endswith("train_torch.py") for s in got["segments"] for f in s["frames"]),
          "no segment names a line of train_torch.py")
    print("ok: PyTorch: %d segments (its cudaMalloc'd segments), %d trace entries from %d events"
          % (len(got["segments"]), len(got["device_traces"][0]), t["kept"]))


CDN = ("cdn.jsdelivr.net", 443)


def g_render(a, tmp):
    chromium = a.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise Skipped("no Chromium to open the pages in")
    # The pages PyTorch's trace_plot and segment_plot return hold the snapshot, but their viewer
    # is MemoryViz.js imported from cdn.jsdelivr.net (the wheel does not ship it): offline they
    # cannot draw anything, and there is nothing of ours to check in an empty page.
    try:
        socket.create_connection(CDN, timeout=5).close()
    except OSError as e:
        raise Skipped("the pages trace_plot and segment_plot return load PyTorch's MemoryViz.js from "
                      "%s, which cannot be reached from here (%s)" % (CDN[0], e))
    torch_usable(a.torch_python)
    g_sim_pages = os.path.join(tmp, "pages")
    os.mkdir(g_sim_pages)
    ex = os.path.join(a.repo, "examples", "train_sim.py")
    _, report = record(a, g_sim_pages, ["/usr/bin/python3", ex, "--batch", "16", "--epochs", "1", "--step-ms", "1"], {})
    out = os.path.join(g_sim_pages, "snap.pickle")
    convert(a, report, out)
    load(a, out, g_sim_pages)
    for page in ("trace_plot", "segment_plot"):
        html = os.path.join(g_sim_pages, page + ".html")
        p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                            "--v=0", "--virtual-time-budget=10000", "--dump-dom", "file://" + html],
                           capture_output=True, text=True, timeout=120)
        errors = [l for l in p.stderr.splitlines() if "Uncaught" in l or "CONSOLE" in l and "rror" in l]
        eq(errors, [], "%s: JavaScript errors" % page)
        check("<svg" in p.stdout or "<canvas" in p.stdout, "%s: the viewer drew nothing" % page)
    print("ok: both pages render in headless Chromium without JavaScript errors")


GROUPS = {"sim": g_sim, "old": g_old, "torch": g_torch, "render": g_render}


def main():
    ap = argparse.ArgumentParser()
    for k in ("--vramwatch", "--lib", "--sim", "--repo", "--validator"):
        ap.add_argument(k, required=True)
    ap.add_argument("--torch-python", default="")
    ap.add_argument("--chromium", default="")
    ap.add_argument("--preload-first", default="")
    ap.add_argument("group", choices=sorted(GROUPS))
    a = ap.parse_args()
    for k in ("vramwatch", "lib", "sim", "repo", "validator"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    a.tmp = tempfile.mkdtemp(prefix="vramwatch-snapshot-")
    try:
        return run_group({k: (lambda o, f=f: f(o, o.tmp)) for k, f in GROUPS.items()}, a)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
