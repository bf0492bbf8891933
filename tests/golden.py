"""Golden files of the test runners: a test's output compared with its recorded file, or rewritten.

Every runner with golden files (tests/cli, tests/timeline, tests/advise) calls
compare_or_update(path, actual):

  - normally it compares `actual` (str or bytes) with the file at `path`, byte for byte, and
    returns None when they are equal, or a message (the file is missing, or a unified diff of
    its first lines) for the runner to report as a failure;
  - with VRAMWATCH_UPDATE_GOLDEN=1 in the environment it writes `actual` to `path` instead,
    prints "updated PATH" and returns None. This one variable is the switch for every runner
    (`VRAMWATCH_UPDATE_GOLDEN=1 meson test -C BUILD --suite cli`); a runner's own --update flag,
    where it has one, is an alias that sets it. Read the diff before committing what it rewrote.

A runner imports it with the tests folder first on sys.path (its own folder may hold a golden/
folder of the same name):

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from golden import compare_or_update
"""
import difflib
import os

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
