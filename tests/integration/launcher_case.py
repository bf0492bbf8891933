#!/usr/bin/python3
"""Which job a process was part of, in real reports: process.launcher (torchrun's run id, Slurm's
job and step, the MPI job id, the parent process and its start) and process.loaded_unix_ns, as
the library reads them when it is loaded; and report and merge telling runs apart by them.

Run like run_case.py (the same arguments), with the case `launcher`: the cases are run_case's,
this file adds its own to them.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_case  # noqa: E402
from vwtest import check, eq  # noqa: E402 (run_case put the harness on sys.path)


def start_ns(pid):
    """A process's start as the library computes it: /proc/PID/stat field 22 and the boot time."""
    with open("/proc/%d/stat" % pid) as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return btime * 1000000000 + ticks * (1000000000 // os.sysconf("SC_CLK_TCK"))


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


BASE = {"SIMGPU_MEMORY": "2GiB", "PATHS_MIB": "64"}
# Launcher variables from outside must not leak into the cases that expect none.
LAUNCHER_VARS = ["TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID",
                 "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"]


def clean(run, extra):
    env = run.env(extra)
    for k in LAUNCHER_VARS:
        if k not in extra:
            env.pop(k, None)
    return env


def launch(run, folder, extra):
    """paths in `folder`, started by this script (its parent), at once."""
    env = clean(run, dict(BASE, VRAMWATCH_DIR=folder, **extra))
    return subprocess.Popen([run.args.paths, "rank"], env=env, cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs):
    for p in procs:
        out, err = p.communicate(timeout=60)
        eq(p.returncode, 0, "paths rank's exit status (stderr: %s)" % err)


def reports_in(run, folder):
    saved, run.dir = run.dir, folder
    try:
        return run.reports()
    finally:
        run.dir = saved


def vw(run, args, folder, rc):
    p = subprocess.run([run.args.vramwatch] + args, cwd=folder, capture_output=True, text=True,
                       env=dict(os.environ, LC_ALL="C", TERM="dumb", NO_COLOR="1"), timeout=60)
    # report: 0, or 1 where it found a problem (an out-of-memory); merge: 0 or 2.
    check(p.returncode in rc, "vramwatch %s: exit status %d (stderr: %s)" % (args[0], p.returncode, p.stderr))
    return p


def case_launcher(run):
    # Every id a launcher sets, recorded as it was at load; the parent is this script.
    one = os.path.join(run.dir, "one")
    os.mkdir(one)
    before = time.time_ns()
    finish([launch(run, one, {"TORCHELASTIC_RUN_ID": "run-7", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3",
                              "PMIX_NAMESPACE": "prte-host-1234@1"})])
    after = time.time_ns()
    (r,) = reports_in(run, one)
    p = r["process"]
    eq(p["launcher"], {"torchrun_run_id": "run-7", "slurm_job_id": "77", "slurm_step_id": "3",
                       "mpi_job_id": "prte-host-1234@1", "parent_pid": os.getpid(),
                       "parent_start_unix_ns": start_ns(os.getpid()), "parent_name": comm(os.getpid())},
       "process.launcher")
    check(before <= p["loaded_unix_ns"] <= after, "loaded_unix_ns %d outside the run [%d, %d]"
           % (p["loaded_unix_ns"], before, after))
    check(p["start_unix_ns"] <= p["loaded_unix_ns"], "loaded before the process started")

    # Nothing set: the ids are null, the parent still known; Open MPI's own job id is taken first.
    two = os.path.join(run.dir, "two")
    os.mkdir(two)
    finish([launch(run, two, {}), launch(run, two, {"OMPI_MCA_ess_base_jobid": "4242",
                                                     "PMIX_NAMESPACE": "other"})])
    plain, mpi = sorted(reports_in(run, two), key=lambda x: x["process"]["launcher"]["mpi_job_id"] or "")
    eq([plain["process"]["launcher"][k] for k in ("torchrun_run_id", "slurm_job_id", "slurm_step_id",
                                                   "mpi_job_id")], [None] * 4, "no launcher: null ids")
    eq(plain["process"]["launcher"]["parent_pid"], os.getpid(), "no launcher: the parent")
    eq(mpi["process"]["launcher"]["mpi_job_id"], "4242", "Open MPI's job id before PMIx's namespace")

    # Three runs of one command, one after the other from one parent: three runs, not one job.
    seq = os.path.join(run.dir, "seq")
    os.mkdir(seq)
    for _ in range(3):
        finish([launch(run, seq, {})])
    names = sorted(f for f in os.listdir(seq) if f.startswith("vramwatch-"))
    eq(len(names), 3, "three reports")
    out = vw(run, ["report"] + names, seq, (0, 1)).stdout
    check(out.startswith("vramwatch: 3 separate runs in 3 reports"), "three runs: %r" % out[:300])
    err = vw(run, ["merge"] + names + ["-o", "job.json"], seq, (2,)).stderr
    check("one ended before the other began: separate runs" in err, "merge of three runs: %r" % err)

    # Two torchrun jobs at once, the same command, ranks 0 and 1 each: two jobs; each merges.
    jobs = os.path.join(run.dir, "jobs")
    os.mkdir(jobs)
    slow = {"PATHS_DELAY_MS": "400", "PATHS_FAIL_MIB": "100000", "WORLD_SIZE": "2"}
    procs = [launch(run, jobs, dict(slow, RANK=str(rank), TORCHELASTIC_RUN_ID=rid))
             for rid in ("job-a", "job-b") for rank in (0, 1)]
    finish(procs)
    names = sorted(f for f in os.listdir(jobs) if f.startswith("vramwatch-"))
    eq(len(names), 4, "four reports")
    out = vw(run, ["report"] + names, jobs, (0, 1)).stdout
    check(out.startswith("vramwatch: 2 separate runs in 4 reports"), "two torchrun jobs: %r" % out[:300])
    eq(out.count("vramwatch job: 2 processes on 1 host, world size 2"), 2, "each job's own view")
    err = vw(run, ["merge"] + names + ["-o", "job.json"], jobs, (2,)).stderr
    check("different torchrun run ids (job-a and job-b): not one job" in err, "merge of two jobs: %r" % err)
    by_id = {}
    for n in names:
        with open(os.path.join(jobs, n)) as f:
            by_id.setdefault(json.load(f)["process"]["launcher"]["torchrun_run_id"], []).append(n)
    vw(run, ["merge"] + by_id["job-a"] + ["-o", "a.json"], jobs, (0,))


run_case.CASES["launcher"] = case_launcher

if __name__ == "__main__":
    sys.exit(run_case.main())
