#!/usr/bin/env python3
"""vramwatch top: two simulated training processes under the preload sharing one folder are both
listed by `vramwatch top --once DIR`, each with its live bytes and its top call site; their live
files go when they exit; a file left by a process that is gone is counted, not shown; a process
that never touched CUDA leaves no file; bad usage is one line and exit 2."""
import argparse
import glob
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Tally, clean_env  # noqa: E402

# Every check runs and says "ok" or "FAIL"; the test fails at the end if one did.
tally = Tally()
check = tally.check


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--paths", required=True, help="tests/integration/paths, a C program of calls")
    o = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="vw-top-")
    try:
        run(o, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tally.failures:
        print("%d failed" % len(tally.failures))
        return 1
    return 0


def preload_env(o, d, **extra):
    env = clean_env(keep_preload=True)
    env["VRAMWATCH_DIR"] = d
    env["LD_LIBRARY_PATH"] = o.sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    # A sanitizer runtime the test environment preloads stays first.
    env["LD_PRELOAD"] = (env["LD_PRELOAD"] + " " if env.get("LD_PRELOAD") else "") + o.lib
    env.update(extra)
    return env


def top(o, d, *args):
    env = clean_env(keep_preload=True)
    return subprocess.run([o.vramwatch, "top"] + list(args) + ([d] if d else []), env=env,
                          capture_output=True, text=True, timeout=60)


def rows_of(out):
    """pid -> (the process's first row, the call-site lines under it)."""
    rows, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(.*)$", line)
        if m and not line.startswith(" " * 14):
            cur = int(m.group(1))
            rows[cur] = (line, [])
        elif cur is not None and line.startswith(" " * 14) and " in " in line:
            rows[cur][1].append(line.strip())
    return rows


def run(o, tmp):
    d = os.path.join(tmp, "shared")
    os.mkdir(d)
    cmd = [o.python, o.train_sim, "--img", "64", "--epochs", "1", "--steps", "40", "--step-ms", "150",
           "--no-markers", "--static-gib", "1"]
    procs = [subprocess.Popen(cmd + ["--batch", str(b)], env=preload_env(o, d, RANK=str(r), WORLD_SIZE="2"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r, b in ((0, 2), (1, 4))]
    pids = [p.pid for p in procs]
    out, rows = "", {}
    deadline = time.time() + 30
    while time.time() < deadline:
        p = top(o, d, "--once")
        out = p.stdout
        rows = rows_of(out)
        if all(pid in rows and rows[pid][1] for pid in pids):
            break
        time.sleep(0.3)
    print(out)
    check(p.returncode == 0, "top --once exits 0 (%d: %s)" % (p.returncode, p.stderr.strip()))
    check("2 processes in" in out, "the header counts both processes")
    for r, pid in enumerate(pids):
        check(pid in rows, "pid %d is listed" % pid)
        if pid not in rows:
            continue
        line, sites = rows[pid]
        m = re.match(r"\s*\d+\s+(\S+)\s+\S+\s+(\S+)\s+(\d+\.\d+ [KMGT]iB|\d+ B)", line)
        check(m is not None and m.group(1) == str(r), "pid %d: rank %d (%r)" % (pid, r, line))
        check(m is not None and m.group(2) == "0" and not m.group(3).startswith("0 "),
              "pid %d: device 0 with live bytes (%r)" % (pid, line))
        check("train_sim.py" in line, "pid %d: its command (%r)" % (pid, line))
        # One simulated card: nvidia-smi's index 0, its bus id as nvidia-smi prints it, 16 GiB.
        check(re.search(r" 16\.00 GiB\s+0 00000000:01:00\.0  ", line) is not None,
              "pid %d: capacity, GPU index and bus id (%r)" % (pid, line))
        check(bool(sites) and re.search(r"train_sim\.py:\d+ in ", sites[0]) is not None,
              "pid %d: top call site is a line of train_sim.py (%r)" % (pid, sites[:1]))
    live_files = glob.glob(os.path.join(d, "vramwatch-live.*"))
    check(len(live_files) == 2, "one live file per process (%s)" % [os.path.basename(f) for f in live_files])
    for f in live_files:
        check(oct(os.stat(f).st_mode & 0o777) == "0o600", "%s is mode 0600" % os.path.basename(f))

    # A file left behind by a process that is gone (killed before its exit): counted, not shown.
    gone = subprocess.Popen(["true"])
    gone.wait()
    if live_files:
        with open(live_files[0], "rb") as f:
            data = bytearray(f.read())
        struct.pack_into("<q", data, 24, gone.pid)  # pid (lib/base/livefile.h)
        stale = os.path.join(d, "vramwatch-live.%s.%d" % (socket.gethostname(), gone.pid))
        with open(stale, "wb") as f:
            f.write(data)
        p = top(o, d, "--once")
        check("1 more left a file and exited" in p.stdout and gone.pid not in rows_of(p.stdout),
              "an exited process's file is counted, not listed (%r)" % p.stdout.splitlines()[:2])
        os.unlink(stale)

    for pr in procs:
        try:
            pr.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.wait()
        check(pr.returncode == 0, "training process %d ends well (%s)" % (pr.pid, pr.stderr.read()[-300:]))
    check(glob.glob(os.path.join(d, "vramwatch-live.*")) == [], "live files removed at exit")
    check(len(glob.glob(os.path.join(d, "vramwatch-*.json"))) == 2, "each process still leaves its report")
    p = top(o, d, "--once")
    check(p.returncode == 0 and "0 processes" in p.stdout, "after they end: no process (%r)" % p.stdout)

    # A process that never made an allocation call has no live file.
    quiet = os.path.join(tmp, "quiet")
    os.mkdir(quiet)
    probe = ("import ctypes; rt = ctypes.CDLL('libcudart.so'); f, t = ctypes.c_size_t(), ctypes.c_size_t(); "
             "rt.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))")
    subprocess.run([o.python, "-c", probe],
                   env=preload_env(o, quiet), capture_output=True, timeout=60)
    check(os.listdir(quiet) == [], "CUDA queried but nothing allocated: no file (%s)" % os.listdir(quiet))

    # Processes that allocate once and exit at once: the thread that makes the file may come
    # after the exit handler; no file may be left behind.
    brief = os.path.join(tmp, "brief")
    os.mkdir(brief)
    quick = [subprocess.Popen([o.paths, "rt_malloc"], env=preload_env(o, brief),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(12)]
    for q in quick:
        q.wait(timeout=60)
    left = sorted(f for f in os.listdir(brief) if f.startswith("vramwatch-live."))
    check(left == [] and len(glob.glob(os.path.join(brief, "vramwatch-*.json"))) == 12,
          "12 processes that allocate and exit at once: 12 reports, no live file left (%s)" % left)

    # Bad usage: one line, exit 2.
    for args, what in ((["--interval", "0"], "an interval of 0"), (["--bogus"], "an unknown option")):
        p = top(o, d, *args)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and p.stdout == "",
              "%s: exit 2 with one line (%d, %r)" % (what, p.returncode, p.stderr))
    p = top(o, os.path.join(tmp, "missing"), "--once")
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1,
          "a missing folder: exit 2 with one line (%d, %r)" % (p.returncode, p.stderr))
    p = top(o, None, "--once", d, d)
    check(p.returncode == 2, "two folders: exit 2 (%r)" % p.stderr)


if __name__ == "__main__":
    sys.exit(main())
