#!/usr/bin/env python3
"""The Python companion (docs/companion.md), one case per run: real Python processes started by
`vramwatch run` (or by hand with LD_PRELOAD and PYTHONPATH) on the simulated GPU, each in a fresh
folder, checked through the report's markers and the facts the scripts write at exit
(facts.py). Cases that need PyTorch exit 77 (skipped) when the interpreter cannot import it."""
import argparse
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vwtest import SKIP, Failed, check, clean_env, eq  # noqa: E402
PHASES = ["epoch 0 train", "epoch 0 val", "epoch 1 train", "epoch 1 val", "epoch 2 train",
          "epoch 2 val", "epoch 3 train"]
JOB_MARKS = ["setup"] + PHASES


class Case:
    def __init__(self, args, folder):
        self.args = args
        self.dir = folder
        self.n = 0

    def env(self, extra=None):
        # The job's environment is the test's: no preload or Python path of the caller's leaks in,
        # except a sanitizer runtime, which must stay first.
        pre = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if "san" in os.path.basename(p)]
        env = clean_env()
        if pre:
            # AddressSanitizer looks up the real __cxa_throw when it starts, and Python does not
            # link libstdc++: without it loaded that early, PyTorch's first C++ exception stops
            # the process in the sanitizer's own check (libvramwatch, when preloaded, throws
            # through its own __cxa_throw and hides this; the not_preloaded case has no library).
            pre.append("libstdc++.so.6")
            env["LD_PRELOAD"] = ":".join(pre)
        for k in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONNOUSERSITE"):
            env.pop(k, None)
        env.update({"LD_LIBRARY_PATH": self.args.sim, "SIMGPU_MEMORY": "1GiB", "LC_ALL": "C",
                    "VW_TEST_CUDART": os.path.join(self.args.sim, "libcudart.so.13")})
        env.update(extra or {})
        return env

    def start(self, cmd, extra=None, via_cli=True, cli_opts=(), expect_rc=0):
        """Runs cmd (under `vramwatch run` unless via_cli is False); returns (report or None,
        facts, process)."""
        self.n += 1
        reports = os.path.join(self.dir, "reports%d" % self.n)
        facts = os.path.join(self.dir, "facts%d.json" % self.n)
        env = self.env(extra)
        env["VW_TEST_FACTS"] = facts
        if via_cli:
            cmd = [self.args.vramwatch, "run", "--dir", reports] + list(cli_opts) + ["--"] + cmd
        else:
            os.mkdir(reports)
            env["VRAMWATCH_DIR"] = reports
        p = subprocess.run(cmd, env=env, cwd=self.dir, capture_output=True, text=True, timeout=240)
        log = "$ %s\nexit %d\n--- stdout\n%s--- stderr\n%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr)
        print(log, file=sys.stderr)
        eq(p.returncode, expect_rc, "exit status")
        found = glob.glob(os.path.join(reports, "vramwatch-*.json"))
        report = None
        if found:
            eq(len(found), 1, "reports")
            with open(found[0], encoding="utf-8") as f:
                report = json.load(f)
        got = None
        if os.path.exists(facts):
            with open(facts, encoding="utf-8") as f:
                got = json.load(f)
        return report, got, p


def labels(report):
    check(report is not None, "a report was written")
    return [m["label"] for m in report["markers"]]


def script(name):
    return os.path.join(HERE, name)


def python_bin(case):
    """A folder whose python3 is the interpreter under test, for commands found on PATH."""
    d = os.path.join(case.dir, "bin")
    if not os.path.isdir(d):
        os.mkdir(d)
        # A script, not a link: a virtual environment's interpreter finds its pyvenv.cfg beside
        # the path it was started by, so a link elsewhere would start it without its packages.
        exe = os.path.join(d, "python3")
        with open(exe, "w") as f:
            f.write('#!/bin/sh\nexec "%s" "$@"\n' % case.args.python)
        os.chmod(exe, stat.S_IRWXU)
    return d


def case_markers(case):
    """`vramwatch run -- python3 script.py`: exactly one marker per switch, in order, and the
    job's own checks (modes, return values, exceptions, inspection, TorchScript, FX) pass."""
    bindir = python_bin(case)
    report, facts, _ = case.start(["python3", script("torch_phases.py")],
                                  {"PATH": bindir + ":" + os.environ.get("PATH", "")})
    eq(labels(report), PHASES, "markers")
    check(facts["companion_loaded"] and facts["train_wrapped"], "the companion patched torch")
    check(not facts["finder_waiting"], "the import hook left sys.meta_path once torch was imported")
    # one vramwatch_step per optimizer step, where torch has the global hook (2.0 on), and the
    # promise of one after every step (a report without steps: none ended)
    eq(steps_of(report), 9 if facts["step_hook"] else 0, "steps")
    eq(report["process"].get("steps_reported"), facts["step_hook"], "process.steps_reported")


def case_torch_first(case):
    """A job whose first import is torch: the companion still patches it (in an interpreter
    without a sitecustomize of its own, such as a virtual environment's, the finder that cleans
    up after the missing one used to make that import skip the companion's)."""
    report, facts, _ = case.start([case.args.python, script("torch_first.py")])
    check(facts["companion_loaded"] and facts["train_wrapped"], "the companion patched torch")


def steps_of(report):
    """The steps the report's devices say ended (vramwatch_step), summed."""
    return sum((d.get("steps") or {}).get("count", 0) for d in report["devices"])


def case_no_torch(case):
    """A job that never imports torch: the companion waits for it (so it was started), imports
    nothing, not even itself, and marks nothing."""
    report, facts, _ = case.start([case.args.python, script("no_torch.py")])
    check(facts["finder_waiting"], "the companion waits for torch (else this case proves nothing)")
    eq(facts["companion_loaded"], False, "vramwatch_companion imported")
    eq(facts["torch_imported"], False, "torch in sys.modules at exit")
    eq(labels(report), [], "markers")


def plain_sitecustomize(case):
    """The sitecustomize the interpreter imports on its own (Debian's, for its python3)."""
    p = subprocess.run([case.args.python, "-c",
                        "import sys; m = sys.modules.get('sitecustomize'); print(getattr(m, '__file__', None))"],
                       env=case.env(), capture_output=True, text=True, check=True)
    out = p.stdout.strip()
    return None if out == "None" else out


def case_chain(case):
    """A sitecustomize already on PYTHONPATH still runs, after the companion's folder and before
    the rest of the user's path; without one, the distribution's runs as it does without us."""
    user = os.path.join(case.dir, "user")
    other = os.path.join(case.dir, "other")
    for d in (user, other):
        os.mkdir(d)
    with open(os.path.join(user, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['VW_TEST_CHAINED'] = __file__\n")
    report, facts, _ = case.start([case.args.python, script("torch_phases.py")],
                                  {"PYTHONPATH": user + os.pathsep + other})
    eq(facts["chained"], os.path.join(user, "sitecustomize.py"), "the user's sitecustomize ran")
    eq(facts["sitecustomize_file"], os.path.join(user, "sitecustomize.py"),
       "sys.modules['sitecustomize'] is the user's")
    eq(labels(report), PHASES, "markers with the user's sitecustomize")
    path = facts["sys_path"]
    ours = [i for i, p in enumerate(path) if os.path.isfile(os.path.join(p, "vramwatch_companion.py"))]
    check(ours, "the companion's folder is on sys.path")
    check(ours[0] < path.index(user) < path.index(other), "companion, then the user's PYTHONPATH in order: %r" % path)

    want = plain_sitecustomize(case)
    _, facts, _ = case.start([case.args.python, script("no_torch.py")])
    check(facts["finder_waiting"], "the companion was started")
    eq(facts["sitecustomize_file"], want, "the interpreter's own sitecustomize")


def case_no_companion(case):
    """--no-companion: no PYTHONPATH of ours, nothing patched, no marker, where the same run
    without it has them all."""
    report, _, _ = case.start([case.args.python, script("torch_phases.py")])
    eq(labels(report), PHASES, "markers without --no-companion")
    report, facts, _ = case.start([case.args.python, script("torch_phases.py")], cli_opts=["--no-companion"])
    eq(facts["companion_loaded"], False, "companion loaded")
    eq(facts["train_wrapped"], False, "Module.train patched")
    eq(labels(report), [], "markers")


def case_plain_preload(case):
    """Without the command line: PYTHONPATH=<folder> LD_PRELOAD=libvramwatch.so python3 ...,
    as docs/companion.md tells plain LD_PRELOAD users."""
    pre = case.env().get("LD_PRELOAD")
    report, facts, _ = case.start([case.args.python, script("torch_phases.py")],
                                  {"PYTHONPATH": case.args.companion,
                                   "LD_PRELOAD": ":".join(filter(None, [pre, case.args.lib]))},
                                  via_cli=False)
    eq(labels(report), PHASES, "markers")


def case_shebang(case):
    """A script run by name is a Python command when its #! line names python, directly or
    through env; a shell script is not."""
    bindir = python_bin(case)
    path = {"PATH": bindir + ":" + os.environ.get("PATH", "")}
    with open(script("torch_phases.py")) as f:
        body = f.read().replace("os.path.dirname(os.path.abspath(__file__))", repr(HERE))
    for n, line in enumerate(["#!%s" % case.args.python, "#!/usr/bin/env python3",
                              "#!/usr/bin/env -S python3 -u"]):
        name = os.path.join(case.dir, "job%d" % n)
        with open(name, "w") as f:
            f.write(line + "\n" + body)
        os.chmod(name, stat.S_IRWXU)
        report, _, _ = case.start([name], path)
        eq(labels(report), PHASES, "markers for " + line)
    sh = os.path.join(case.dir, "job.sh")
    with open(sh, "w") as f:
        f.write("#!/bin/sh\nexec python3 %s\n" % script("no_torch.py"))
    os.chmod(sh, stat.S_IRWXU)
    _, facts, _ = case.start([sh], path)
    eq(facts["finder_waiting"], False, "companion started for a shell script")


def case_not_preloaded(case):
    """On PYTHONPATH without the library: with no LD_PRELOAD the companion does nothing at all;
    with another library preloaded it waits for torch, finds no vramwatch_mark and patches
    nothing. The job runs as usual both times."""
    for pre in (None, "libm.so.6"):
        extra = {"PYTHONPATH": case.args.companion}
        if pre:
            extra["LD_PRELOAD"] = ":".join(filter(None, [case.env().get("LD_PRELOAD"), pre]))
        _, facts, _ = case.start([case.args.python, script("torch_phases.py")], extra, via_cli=False)
        check(facts["torch_imported"], "the job ran")
        if pre:
            check(facts["companion_loaded"], "the companion was imported with torch (else this case proves nothing)")
        elif not case.env().get("LD_PRELOAD"):  # a sanitizer build always preloads its runtime
            eq(facts["companion_loaded"], False, "companion imported without LD_PRELOAD")
        eq(facts["train_wrapped"], False, "Module.train patched with LD_PRELOAD=%s" % pre)
        eq(facts["finder_waiting"], False, "import hook left with LD_PRELOAD=%s" % pre)


def case_job_marks(case):
    """A job that looks vramwatch_mark up and marks its own phases keeps exactly its markers."""
    report, facts, _ = case.start([case.args.python, script("torch_phases.py"), "--job-marks"])
    check(facts["companion_loaded"] and facts["train_wrapped"], "the companion patched torch")
    eq(labels(report), JOB_MARKS, "markers")
    # a job that marks its phases still gets its steps (it does not call vramwatch_step itself)
    eq(steps_of(report), 9 if facts["step_hook"] else 0, "steps")


def case_job_steps(case):
    """A job that looks vramwatch_step up and says where its steps end itself keeps exactly its
    steps (one per epoch), and the companion's promise of a call after every step is taken back."""
    report, facts, _ = case.start([case.args.python, script("torch_phases.py"), "--job-steps"])
    check(facts["companion_loaded"] and facts["train_wrapped"], "the companion patched torch")
    eq(labels(report), PHASES, "markers")
    eq(steps_of(report), 3, "steps")
    eq(report["process"].get("steps_reported"), False, "process.steps_reported")


def case_installed(case):
    """meson install puts the companion under the datadir, and the installed vramwatch finds it
    there (through bin/../share, as in a DESTDIR staging)."""
    dest = os.path.join(case.dir, "dest")
    p = subprocess.run(["meson", "install", "-C", case.args.build, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True)
    eq(p.returncode, 0, "meson install: " + p.stderr)
    # The program is bin/vramwatch; the bash completion is also a file named vramwatch.
    clis = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs
            if f == "vramwatch" and os.path.basename(d) == "bin"]
    mods = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "vramwatch_companion.py"]
    eq(len(clis), 1, "installed vramwatch")
    eq(len(mods), 1, "installed companion")
    check(mods[0].endswith("/share/vramwatch/python/vramwatch_companion.py"), mods[0])
    case.args.vramwatch = clis[0]
    report, facts, _ = case.start([case.args.python, script("torch_phases.py")], {"VRAMWATCH_LIB": case.args.lib})
    ours = [p for p in facts["sys_path"] if os.path.isfile(os.path.join(p, "vramwatch_companion.py"))]
    eq([os.path.realpath(p) for p in ours], [os.path.dirname(os.path.realpath(mods[0]))],
       "the installed companion on sys.path")
    eq(labels(report), PHASES, "markers")


NEEDS_TORCH = {"markers", "torch_first", "chain", "no_companion", "plain_preload", "shebang", "not_preloaded", "job_marks", "job_steps",
               "installed"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--companion", required=True, help="the companion's folder in the build tree")
    ap.add_argument("--python", required=True)
    ap.add_argument("--build", help="the build folder (for the installed case)")
    ap.add_argument("case")
    args = ap.parse_args()
    fn = globals().get("case_" + args.case)
    if fn is None:
        print("unknown case %s" % args.case, file=sys.stderr)
        return 2
    if args.case in NEEDS_TORCH:
        p = subprocess.run([args.python, "-c", "import torch"], capture_output=True, text=True)
        if p.returncode != 0:
            print("cannot run %s (skipped, exit 77): %s cannot import torch: %s"
                  % (args.case, args.python, p.stderr.strip().splitlines()[-1:]), file=sys.stderr)
            return SKIP
    folder = tempfile.mkdtemp(prefix="vw-companion-")
    try:
        fn(Case(args, folder))
    except Failed as e:
        print("FAIL %s: %s" % (args.case, e), file=sys.stderr)
        return 1
    shutil.rmtree(folder, ignore_errors=True)
    print("ok %s" % args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
