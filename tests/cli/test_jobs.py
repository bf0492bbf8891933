#!/usr/bin/python3
"""The job view at scale and separate runs told apart, on reports made here from a recorded one.

Usage: test_jobs.py --vramwatch EXE --data DIR GROUP [--ranks N] [--budget S]

GROUP:
  runs      six runs of one command, one after the other from one shell, in one folder: report
            shows six runs, merge refuses them
  launchers two torchrun jobs with the same command line and different run ids: two jobs (and
            Slurm steps, MPI jobs the same way); one job's ranks on two hosts stay one job
  scale     a 1,024-rank job: the grouped view is under 60 lines and names the first failure and
            the outliers; --full shows every post-mortem
  bench     4,096 ranks (--ranks): merge then report, timed; the view under 60 lines. Prints the
            wall and CPU times; fails past --budget seconds of CPU (default 2), as a benchmark: the
            wall time on a loaded machine says more about the machine

Commands run with LC_ALL=C TERM=dumb NO_COLOR=1, as the other CLI tests do.
"""
import argparse
import copy
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Tally, clean_env  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
T0 = 1796000000000000000  # a fixed start, so that outputs are the same every run
SEC = 1000000000

# Every check runs; each failure is listed on stderr, and the group fails at the end.
tally = Tally(verbose=False, stream=sys.stderr)
check = tally.check


def env():
    e = clean_env(keep_preload=True)
    e.update(LC_ALL="C", TERM="dumb", NO_COLOR="1")
    return e


def vw(opts, args, cwd):
    return subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=cwd, env=env(), timeout=300)


class Maker:
    """Reports of made-up processes, from the recorded rank 1 of tests/cli/data (which ran out of
    memory) and rank 2 (which did not)."""

    def __init__(self, data):
        with open(os.path.join(data, "job4-rank1.json")) as f:
            self.oom = json.load(f)
        with open(os.path.join(data, "job4-rank2.json")) as f:
            self.fit = json.load(f)

    def report(self, pid, host="node-a", rank=None, world=None, argv=None, begin=T0, end=T0 + 60 * SEC,
               peak=10 * GiB, live=9 * GiB, oom_at=None, launcher=None, parent=4000, gpu=None):
        r = copy.deepcopy(self.oom if oom_at is not None else self.fit)
        p = r["process"]
        p.update(pid=pid, ppid=parent, host=host, rank=rank, local_rank=None if rank is None else rank % 8,
                 world_size=world, start_unix_ns=begin - begin % SEC, loaded_unix_ns=begin)
        if argv is not None:
            p["argv"] = argv
        p.pop("env", None)
        p["env"] = {}
        lau = {"torchrun_run_id": None, "slurm_job_id": None, "slurm_step_id": None, "mpi_job_id": None,
               "parent_pid": parent, "parent_start_unix_ns": T0 - 3600 * SEC, "parent_name": "bash"}
        lau.update(launcher or {})
        p["launcher"] = lau
        r["time_unix_ns"] = end
        d = r["devices"][0]
        d.update(peak_live_bytes=peak, peak_reserved_bytes=peak, live_bytes=live, reserved_bytes=live,
                 peak_time_unix_ns=begin + (end - begin) // 2)
        d["uuid"] = "GPU-00000000-0000-4000-8000-%012x" % (pid if gpu is None else gpu)
        d["pci_bus_id"] = None
        for f in r["failures"]:
            f["time_unix_ns"] = oom_at
            f["live_bytes_at_failure"] = live
        return r


def write(folder, reports):
    names = []
    for r in reports:
        name = "vramwatch-%s-%d.json" % (r["process"]["host"], r["process"]["pid"])
        with open(os.path.join(folder, name), "w") as f:
            json.dump(r, f)
        names.append(name)
    return sorted(names)


def job(m, n, first_fail=None, launcher=None, hosts=8, argv=None, pid0=10000, extra_fail=(), high=()):
    """n ranks of one job over `hosts` hosts (n / hosts a host): all alike, but `high` ranks
    peak 30% higher, and `first_fail` (then `extra_fail`) run out of memory."""
    out = []
    per_host = max(1, n // hosts)
    for rank in range(n):
        oom = None
        if rank == first_fail:
            oom = T0 + 61 * SEC
        elif rank in extra_fail:
            oom = T0 + 62 * SEC + rank * 1000
        peak = 13 * GiB if rank in high else 10 * GiB + (rank % 7) * 16 * MiB
        out.append(m.report(pid0 + rank, host="node-%03d" % (rank // per_host), rank=rank, world=n,
                            argv=argv, begin=T0 + (rank % 5) * SEC // 100, end=T0 + 65 * SEC, peak=peak,
                            live=peak - GiB, oom_at=oom, launcher=launcher,
                            parent=3000 + rank // per_host))
    return out


def group_runs(opts, m, tmp):
    """Six runs of one command from one shell, one after the other: six runs, not one job."""
    reps = []
    for k in range(6):
        begin = T0 + k * 100 * SEC
        reps.append(m.report(5000 + k, begin=begin, end=begin + 90 * SEC,
                             peak=(9 + k) * GiB, live=8 * GiB, oom_at=begin + 80 * SEC if k == 5 else None,
                             argv=["python3", "train.py", "--batch", "16"]))
    names = write(tmp, reps)
    r = vw(opts, ["report"] + names, tmp)
    out = r.stdout.decode()
    check(r.returncode in (0, 1), "runs: report exit %d: %s" % (r.returncode, r.stderr.decode()))
    check(out.startswith("vramwatch: 6 separate runs in 6 reports"), "runs: header: %r" % out[:200])
    for k in range(6):
        check("=== run %d of 6 ===" % (k + 1) in out, "runs: run %d shown apart" % (k + 1))
    check("vramwatch job:" not in out, "runs: six runs read as one job")
    check("peaks add up" not in out, "runs: their peaks added as if one job")
    # --json: one document, whose runs say which processes go together.
    r = vw(opts, ["report", "--json"] + names, tmp)
    doc = json.loads(r.stdout)
    check([x["processes"] for x in doc.get("runs", [])] == [[k] for k in range(6)],
          "runs: --json runs: %r" % doc.get("runs"))
    # merge keeps one job only: it refuses them, naming why.
    r = vw(opts, ["merge"] + names + ["-o", "job.json"], tmp)
    err = r.stderr.decode()
    check(r.returncode == 2 and "one ended before the other began: separate runs" in err,
          "runs: merge: exit %d: %s" % (r.returncode, err))
    check(not os.path.exists(os.path.join(tmp, "job.json")), "runs: merge wrote a file")
    # Reports without the launcher (earlier versions) and with overlapping lives stay one job.
    old = []
    for k in range(2):
        x = m.report(6000 + k, rank=k, world=2, end=T0 + 60 * SEC)
        del x["process"]["launcher"], x["process"]["loaded_unix_ns"]
        old.append(x)
    sub = tempfile.mkdtemp(dir=tmp)
    names = write(sub, old)
    r = vw(opts, ["report"] + names, sub)
    check(r.stdout.decode().startswith("vramwatch job: 2 processes"), "runs: earlier reports of one job: %r"
          % r.stdout[:200])
    # Two runs of the same command started from two shells at the same time: apart.
    sub = tempfile.mkdtemp(dir=tmp)
    names = write(sub, [m.report(7000, parent=100), m.report(7001, parent=200)])
    r = vw(opts, ["report"] + names, sub)
    check(r.stdout.decode().startswith("vramwatch: 2 separate runs"), "runs: two shells: %r" % r.stdout[:200])


def group_launchers(opts, m, tmp):
    argv = ["/opt/venv/bin/python", "-u", "train.py", "--batch-size", "32"]
    # The same command, both at the same time, two torchrun run ids.
    a = job(m, 2, launcher={"torchrun_run_id": "run-a"}, hosts=1, argv=argv, pid0=100)
    b = job(m, 2, launcher={"torchrun_run_id": "run-b"}, hosts=1, argv=argv, pid0=200)
    for x in b:  # another agent on the same host
        x["process"]["launcher"]["parent_pid"] = 3999
    names = write(tmp, a + b)
    r = vw(opts, ["report"] + names, tmp)
    out = r.stdout.decode()
    check(r.returncode in (0, 1), "torchrun: report exit %d" % r.returncode)
    check(out.startswith("vramwatch: 2 separate runs in 4 reports"), "torchrun: two jobs: %r" % out[:300])
    check(out.count("vramwatch job: 2 processes") == 2, "torchrun: each job its own view")
    check("torchrun run run-a" in out and "torchrun run run-b" in out, "torchrun: the run ids named")
    r = vw(opts, ["merge"] + names + ["-o", "j.json"], tmp)
    check(r.returncode == 2 and "different torchrun run ids (run-a and run-b): not one job" in r.stderr.decode(),
          "torchrun: merge refuses: %s" % r.stderr.decode())
    r = vw(opts, ["merge"] + names[:2] + ["-o", "j.json"], tmp)
    check(r.returncode == 0, "torchrun: one job merges: %s" % r.stderr.decode())
    # One job on two hosts: two agents (parents), one run id: one job.
    sub = tempfile.mkdtemp(dir=tmp)
    c = job(m, 4, launcher={"torchrun_run_id": "run-c"}, hosts=2, argv=argv, pid0=300)
    names = write(sub, c)
    r = vw(opts, ["merge"] + names + ["-o", "j.json"], sub)
    check(r.returncode == 0, "torchrun: one job on two hosts: %s" % r.stderr.decode())
    # Slurm steps, MPI jobs.
    for key, ids, words in ((("slurm_job_id", "slurm_step_id"), (("77", "0"), ("77", "1")), "Slurm steps (0 and 1)"),
                            (("slurm_job_id", "slurm_step_id"), (("77", "0"), ("78", "0")), "Slurm jobs (77 and 78)"),
                            (("mpi_job_id",), (("ns-1",), ("ns-2",)), "MPI jobs (ns-1 and ns-2)")):
        sub = tempfile.mkdtemp(dir=tmp)
        x = job(m, 2, launcher=dict(zip(key, ids[0])), hosts=1, argv=argv, pid0=400)
        y = job(m, 2, launcher=dict(zip(key, ids[1])), hosts=1, argv=argv, pid0=500)
        names = write(sub, x + y)
        r = vw(opts, ["report"] + names, sub)
        check(r.stdout.decode().startswith("vramwatch: 2 separate runs"), "%s: two jobs: %r" % (words, r.stdout[:200]))
        r = vw(opts, ["merge"] + names + ["-o", "j.json"], sub)
        check(r.returncode == 2 and ("different %s: not one job" % words) in r.stderr.decode(),
              "%s: merge: %s" % (words, r.stderr.decode()))


def view_lines(opts, names, tmp, what, extra=()):
    r = vw(opts, ["report"] + list(extra) + names, tmp)
    # 0, or 1: a process did not fit (the problem a report reports)
    check(r.returncode in (0, 1), "%s: report exit %d: %s" % (what, r.returncode, r.stderr.decode()[:300]))
    return r.stdout.decode()


def group_scale(opts, m, tmp):
    n = 1024
    reps = job(m, n, first_fail=517, extra_fail=(512, 513, 514), high=(0, 700), hosts=128)
    names = write(tmp, reps)
    out = view_lines(opts, names, tmp, "1,024 ranks")
    lines = out.splitlines()
    check(len(lines) < 60, "1,024 ranks: %d lines, expected under 60:\n%s" % (len(lines), out))
    check(out.startswith("vramwatch job: 1024 processes on 128 hosts, world size 1024"), "1,024: header %r" % lines[:1])
    check("first out of memory: rank 517, pid 10517 on node-064" in out, "1,024: the first failure named")
    check("=== the first to run out of memory: rank 517, pid 10517 on node-064 ===" in out,
          "1,024: its post-mortem shown")
    check(out.count("vramwatch report: ") == 1, "1,024: one post-mortem by default")
    check("rank 0, pid 10000 on node-000: live" in out and "rank 700, pid 10700" in out, "1,024: outliers named")
    check(any(l.startswith("  ranks 1-511,515-516,518-699,701-1023: 1018 processes on 128 hosts") for l in lines),
          "1,024: the alike ranks on one line:\n" + out)
    check(any(l.startswith("  ranks 512-514: 3 processes on node-064, out of memory after the first") for l in lines),
          "1,024: the other failures on one line")
    check(max(len(l) for l in lines) <= 240, "1,024: a line of %d characters" % max(len(l) for l in lines))
    full = view_lines(opts, names, tmp, "1,024 --full", ["--full"])
    check(full.count("vramwatch report: ") == n, "--full: every post-mortem (%d)" % full.count("vramwatch report: "))


def timed(opts, args, cwd):
    """vw(), with its wall time and its CPU time (user + system: what the machine's other load
    changes least)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    r = vw(opts, args, cwd)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def group_bench(opts, m, tmp):
    n = opts.ranks
    t = time.monotonic()
    names = write(tmp, job(m, n, first_fail=n // 3, high=(0,), hosts=n // 8))
    made = time.monotonic() - t
    r, merge_s, merge_cpu = timed(opts, ["merge"] + names + ["-o", "job.json"], tmp)
    check(r.returncode == 0, "bench: merge: %s" % r.stderr.decode()[:300])
    r, report_s, report_cpu = timed(opts, ["report", "job.json"], tmp)
    out = r.stdout.decode()
    check(r.returncode in (0, 1), "bench: report: %s" % r.stderr.decode()[:300])
    lines = len(out.splitlines())
    check(lines < 60, "bench: %d lines, expected under 60" % lines)
    size = os.path.getsize(os.path.join(tmp, "job.json"))
    print("%d ranks (%.1f MB of reports, made in %.1f s): merge %.2f s (CPU %.2f s), report of the merged "
          "file %.2f s (CPU %.2f s); together %.2f s, CPU %.2f s (budget %.1f s of CPU); the view %d lines" %
          (n, size / 1e6, made, merge_s, merge_cpu, report_s, report_cpu, merge_s + report_s,
           merge_cpu + report_cpu, opts.budget, lines))
    check(merge_cpu + report_cpu < opts.budget,
          "bench: merge + report took %.2f s of CPU, over %.1f s" % (merge_cpu + report_cpu, opts.budget))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("group", choices=["runs", "launchers", "scale", "bench"])
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    m = Maker(opts.data)
    tmp = tempfile.mkdtemp(prefix="vw-jobs-")
    try:
        globals()["group_" + opts.group](opts, m, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tally.failures:
        print("%d check(s) failed" % len(tally.failures), file=sys.stderr)
        return 1
    print("PASS " + opts.group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
