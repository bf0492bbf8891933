"""The test runners' harness: one failure type, the checks, a command run in a clean
environment, golden files, skipping, and the group protocol every runner's main() follows.

A runner finds it from its own folder (tests/SUITE/x.py; tests/advise/parsers adds one "..")::

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import vwtest  # noqa: E402

Standard library only: the runners run under /usr/bin/python3 and under the PyTorch venv's
interpreter alike.

Exit statuses, meson's: 0 passed, 1 failed, 77 skipped (SKIP). A skip is never a pass: whatever
could not run here says why on stderr and the runner exits 77.
"""
import difflib
import os
import subprocess
import sys

SKIP = 77


class Failed(Exception):
    """A check that did not hold; its message says what, and what was seen instead."""


class Skipped(Exception):
    """The group cannot run here; the message says why (run_group prints it and exits 77)."""


def check(cond, what):
    """Raises Failed(what) unless cond holds."""
    if not cond:
        raise Failed(what)


def eq(got, want, what):
    """Raises Failed unless got == want, with both values in the message."""
    if got != want:
        raise Failed(f"{what}: expected {want!r}, got {got!r}")


class Tally:
    """Checks that go on after a failure, for runners that list every case that is wrong in one
    run: each failure is kept (in order) and printed as "FAIL  what"; with verbose, each pass as
    "ok    what" too. check() returns cond, so a dependent check can be skipped."""

    def __init__(self, verbose=True, stream=None):
        self.failures = []
        self.verbose = verbose
        self.stream = stream

    def check(self, cond, what):
        if not cond:
            self.failures.append(what)
        if self.verbose or not cond:
            print(("ok    " if cond else "FAIL  ") + what, file=self.stream or sys.stdout)
        return cond

    def __bool__(self):
        """True when a check failed."""
        return bool(self.failures)


def skip(reason):
    """Ends the runner as skipped (exit 77), saying why on stderr."""
    print(f"skipped (exit 77), not a pass: {reason}", file=sys.stderr)
    sys.exit(SKIP)


# ---- commands ----

# What a caller's environment must not hand to the programs a test starts: our own settings and
# a preload (the test says which it wants).
INHERITED_NEVER = ("VRAMWATCH_",)


def clean_env(extra=None, drop=(), drop_prefixes=(), keep_preload=False):
    """The caller's environment less every VRAMWATCH_* variable, LD_PRELOAD (unless keep_preload:
    a sanitizer build preloads its runtime in front of python3, and some programs need it too),
    the names in `drop` and those starting with one of `drop_prefixes`; then `extra` on top."""
    prefixes = INHERITED_NEVER + tuple(drop_prefixes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k not in drop}
    if not keep_preload:
        env.pop("LD_PRELOAD", None)
    if extra:
        env.update(extra)
    return env


def run(argv, env=None, extra=None, timeout=60, text=False, **kw):
    """Runs argv with its output captured; env is the whole environment (default clean_env(extra)).
    Returns the CompletedProcess; subprocess.TimeoutExpired is a failure of the caller's test."""
    if env is None:
        env = clean_env(extra)
    elif extra:
        env = dict(env, **extra)
    return subprocess.run(argv, capture_output=True, env=env, timeout=timeout, text=text, **kw)


# ---- golden files ----
#
# A runner with golden files compares its output with compare_or_update(path, actual):
#   - normally it compares `actual` (str or bytes) with the file at `path`, byte for byte, and
#     returns None when they are equal, or a message (the file is missing, or a unified diff of
#     its first lines) for the runner to report as a failure;
#   - with VRAMWATCH_UPDATE_GOLDEN=1 in the environment it writes `actual` to `path` instead,
#     prints "updated PATH" and returns None. This one variable is the switch for every runner
#     (`VRAMWATCH_UPDATE_GOLDEN=1 meson test -C BUILD --suite cli`); a runner's own --update flag,
#     where it has one, is an alias that sets it. Read the diff before committing what it rewrote.

UPDATE_VARIABLE = "VRAMWATCH_UPDATE_GOLDEN"
DIFF_LINES = 80  # of a difference, shown in the failure: enough to see it, not a whole file


def updating():
    """True when the golden files are to be rewritten, not compared."""
    return os.environ.get(UPDATE_VARIABLE) == "1"


def request_update():
    """What a runner's --update flag does: the same as VRAMWATCH_UPDATE_GOLDEN=1."""
    os.environ[UPDATE_VARIABLE] = "1"


def compare_or_update(path, actual, label=None):
    """None when `actual` equals the golden file at `path` (or has just been written to it with
    VRAMWATCH_UPDATE_GOLDEN=1); otherwise what differs, as a message. `label` names the golden
    file in the message (default: its last two path components)."""
    data = actual.encode("utf-8") if isinstance(actual, str) else actual
    label = label or os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    if updating():
        with open(path, "wb") as f:
            f.write(data)
        print("updated", path)
        return None
    try:
        with open(path, "rb") as f:
            expected = f.read()
    except FileNotFoundError:
        return "no golden file %s (%s=1 writes it)" % (path, UPDATE_VARIABLE)
    if data == expected:
        return None
    diff = list(difflib.unified_diff(expected.decode("utf-8", "replace").splitlines(),
                                     data.decode("utf-8", "replace").splitlines(),
                                     label, "actual", lineterm=""))
    more = len(diff) - DIFF_LINES
    shown = "\n".join(diff[:DIFF_LINES]) + ("\n... %d more line(s) of difference" % more if more > 0 else "")
    return "%s differs (%s=1 rewrites it):\n%s" % (label, UPDATE_VARIABLE, shown)


def golden(path, actual, label=None):
    """compare_or_update as a check: raises Failed with the difference."""
    msg = compare_or_update(path, actual, label)
    if msg:
        raise Failed(msg)


# ---- the group protocol ----

def run_group(groups, opts, name=None):
    """Runs the group opts.group of `groups` (name -> function(opts)) and returns the runner's exit
    status: 1 on Failed ("FAIL: why" first), 77 when the group returned SKIP, raised Skipped, or
    left checks in opts.not_checked that could not run here (said on stderr), else 0 with
    "ok: GROUP". `name` labels the group in those lines (default opts.group)."""
    label = name or opts.group
    not_checked = getattr(opts, "not_checked", [])
    try:
        status = groups[opts.group](opts)
    except Failed as e:
        print("FAIL:", e)
        return 1
    except Skipped as e:
        print(f"{label}: skipped (exit 77), not a pass: {e}", file=sys.stderr)
        return SKIP
    if status == SKIP:
        return SKIP
    if not_checked:
        print("%s: skipped (exit 77), not a pass: %d check(s) could not run here; every other one passed"
              % (label, len(not_checked)), file=sys.stderr)
        return SKIP
    print("ok:", label)
    return 0


def main(body, *args):
    """Runs body(*args) as a whole runner: its return value is the exit status (None: 0); Failed
    is exit 1 with "FAIL: why", Skipped exit 77 with its reason on stderr."""
    try:
        status = body(*args)
    except Failed as e:
        print("FAIL:", e)
        return 1
    except Skipped as e:
        print(f"skipped (exit 77), not a pass: {e}", file=sys.stderr)
        return SKIP
    return 0 if status is None else status
