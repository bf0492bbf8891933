#!/usr/bin/env python3
"""vramwatch top on a real terminal (a tmux pane, 100 columns): two ranks of a copy of
examples/train_sim.py named train_dual.py, under the preload, on physical GPUs 0 and 1 of a
simulated machine with two cards (CUDA_VISIBLE_DEVICES=0 and =1, so each is its own process's
device 0). The screen shows the two nvidia-smi indices and bus ids, the script's name, the
capacity bar with the limit's mark, and a footer saying how to quit; the arrow keys move the
selection and the selected process shows its full command; `s` changes the sort and the rows
follow; a smaller pane (60 x 12) cuts the lines and scrolls the selection into view; `q` and
Ctrl-C end it with exit 0, SIGTERM by the signal, the folder removed under it with exit 2 and
one line, each with the terminal as it was (`stty -a` before and after, less the size); into a
pipe it prints the plain view and leaves the terminal alone."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Tally, clean_env, skip  # noqa: E402

tally = Tally()
check = tally.check
GIB = 1 << 30


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--train-sim", required=True)
    ap.add_argument("--python", default=sys.executable)
    o = ap.parse_args()
    # meson gives paths relative to the build folder; the ranks run in a folder of their own.
    o.vramwatch, o.lib, o.sim = (os.path.abspath(x) for x in (o.vramwatch, o.lib, o.sim))
    if not shutil.which("tmux"):
        skip("tmux is not installed (tools/install-deps.sh --tests installs it)")
    # meson ends a test that runs too long with SIGTERM: the tmux server and the ranks still go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tmp = tempfile.mkdtemp(prefix="vw-toptty-")
    procs = []
    try:
        run(o, tmp, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["tmux", "-S", os.path.join(tmp, "tmux.sock"), "kill-server"],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if tally.failures:
        print("%d failed" % len(tally.failures))
        return 1
    return 0


class Pane:
    """One tmux server of our own (its socket in the test's folder), one window of 100 x 30."""

    def __init__(self, tmp, name, command):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.name = name
        env = clean_env(keep_preload=False)
        env["LANG"] = env["LC_ALL"] = "C.UTF-8"  # the bar's blocks are UTF-8
        subprocess.run(self.tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command),
                       env=env, check=True)

    def tmux(self, *args):
        return ["tmux", "-S", self.sock, "-f", "/dev/null"] + list(args)

    def screen(self):
        return subprocess.run(self.tmux("capture-pane", "-p", "-t", self.name), capture_output=True,
                              text=True).stdout

    def keys(self, *keys):
        subprocess.run(self.tmux("send-keys", "-t", self.name) + list(keys), check=True)

    def wait_for(self, cond, what, seconds=20):
        deadline = time.time() + seconds
        s = ""
        while time.time() < deadline:
            s = self.screen()
            if cond(s):
                return s
            time.sleep(0.2)
        print("--- screen waiting for %s:\n%s---" % (what, s))
        return s


def wait_file(path, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path):
            time.sleep(0.1)
            with open(path) as f:
                return f.read()
        time.sleep(0.1)
    return None


def settings(tmp, tag, when):
    """`stty -a` as the pane's shell wrote it, less the size (the test resizes the pane)."""
    text = wait_file(os.path.join(tmp, "%s.%s" % (tag, when)))
    return re.sub(r"rows \d+; columns \d+;", "", text) if text is not None else None


def restored(tmp, tag):
    after = settings(tmp, tag, "after")
    return after is not None and after == settings(tmp, tag, "before")


def shell_line(o, d, tmp, tag, tail=""):
    """stty before, top (its pid in TAG.pid), its exit status, stty after; the shell stays so the
    pane does too. `tail` follows top's command (a pipe)."""
    t = os.path.join(tmp, tag)
    return ("stty -a > %s.before; sh -c 'echo $$ > %s.pid; exec %s top --interval 0.3 %s'%s; "
            "echo $? > %s.rc; stty -a > %s.after; exec sleep 120") % (t, t, o.vramwatch, d, tail, t, t)


def start_ranks(o, tmp, d, procs):
    script = os.path.join(tmp, "train_dual.py")
    shutil.copy(o.train_sim, script)
    for rank, batch, limit in ((0, 2, "12GiB"), (1, 4, None)):
        env = clean_env(keep_preload=True)
        env.update(VRAMWATCH_DIR=d, RANK=str(rank), WORLD_SIZE="2", SIMGPU_DEVICES="2",
                   SIMGPU_MEMORY="16GiB", CUDA_VISIBLE_DEVICES=str(rank))
        if limit:
            env["VRAMWATCH_LIMIT"] = limit
        env["LD_LIBRARY_PATH"] = o.sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["LD_PRELOAD"] = (env["LD_PRELOAD"] + " " if env.get("LD_PRELOAD") else "") + o.lib
        cmd = [o.python, script, "--img", "64", "--epochs", "1", "--steps", "600", "--step-ms", "100",
               "--no-markers", "--static-gib", str(2 + 2 * rank)]
        with open(os.path.join(tmp, "rank%d.err" % rank), "w") as err:
            procs.append(subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err))
    return [p.pid for p in procs]


def row_order(screen, pids):
    """The pids in the order their rows stand on the screen."""
    at = {}
    for i, line in enumerate(screen.splitlines()):
        m = re.match(r"^[ >]\s*(\d+)\s", line)
        if m and int(m.group(1)) in pids and int(m.group(1)) not in at:
            at[int(m.group(1))] = i
    return sorted(at, key=at.get)


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def growths(screen, pids):
    """pid -> the GROWTH column of its row (bytes; None for "-"), in the rows' order. The row is
    "%c%7d %5s %4s %10s %10s %10s": GROWTH is columns 42 to 52."""
    out = []
    for line in screen.splitlines():
        m = re.match(r"^[ >]\s*(\d+)\s", line)
        if not m or int(m.group(1)) not in pids:
            continue
        g = line[42:52].strip()
        v = re.match(r"([+-]?)(\d+(?:\.\d+)?) (\w+)$", g)
        out.append((int(m.group(1)), None if not v else
                    (-1 if v.group(1) == "-" else 1) * float(v.group(2)) * UNITS[v.group(3)]))
    return out


def check_screen(s, pids):
    lines = s.splitlines()
    check(all(len(l) <= 100 for l in lines), "no line is wider than the pane")
    gpus = re.findall(r"^\s+(\d)\s+(0000000[0-9A-F]:[0-9A-F]{2}:00\.0)\s+\[", s, re.M)
    check(sorted(gpus) == [("0", "00000000:01:00.0"), ("1", "00000000:02:00.0")],
          "the two physical GPUs with nvidia-smi's index and bus id (%r)" % gpus)
    check(s.count("train_dual.py") >= 2, "both processes named by their script")
    check(not re.search(r"\[\S*\s*\|", s) is None, "a bar with the limit's mark")
    check("16.00 GiB" in s and "12.00 GiB" in s, "the capacity and the limit shown")
    check(re.search(r"\[[█▉▊▋▌▍▎▏]+ *\|? *\]", s) is not None, "a filled bar")
    check(re.search(r"q quit\s+↑↓ select\s+s sort: memory", lines[-1] if lines else "") is not None,
          "the footer on the last line (%r)" % (lines[-1] if lines else ""))
    check(len(set(row_order(s, pids))) == 2, "a row per process")


def run(o, tmp, procs):
    d = os.path.join(tmp, "shared")
    os.mkdir(d)
    pids = start_ranks(o, tmp, d, procs)
    pane = Pane(tmp, "a", shell_line(o, d, tmp, "a"))
    s = pane.wait_for(lambda s: all(str(p) in s for p in pids) and s.count("train_dual.py") >= 2 and
                      len(re.findall(r"0000000\d:0\d:00\.0", s)) >= 2, "both ranks")
    print(s)
    for p in procs:
        if p.poll() is not None:
            with open(os.path.join(tmp, "rank%d.err" % procs.index(p))) as f:
                print("rank %d ended (%s): %s" % (procs.index(p), p.returncode, f.read()[-600:]))
    check_screen(s, pids)
    # By memory: rank 1 (more static memory) first; by pid: ascending.
    check(row_order(s, pids) == [pids[1], pids[0]], "sorted by memory: rank 1 first (%r)" % row_order(s, pids))
    # Growth: known once each file has been seen updated twice (a second apart), then the order.
    pane.keys("g")
    s = pane.wait_for(lambda s: "sort: growth" in s and all(v is not None for _, v in growths(s, pids)) and
                      len(growths(s, pids)) == 2, "growth of both")
    g = growths(s, pids)
    check(len(g) == 2 and all(v is not None for _, v in g), "the growth of each process is known (%r)" % g)
    check([v for _, v in g] == sorted((v for _, v in g), reverse=True), "g: sorted by growth (%r)" % g)
    pane.keys("m")
    pane.wait_for(lambda s: "sort: memory" in s, "sort by memory again")
    pane.keys("s")
    pane.keys("s")
    s = pane.wait_for(lambda s: "sort: pid" in s, "sort by pid")
    check(row_order(s, pids) == sorted(pids), "s s: sorted by pid (%r)" % row_order(s, pids))
    # The selection starts on the first row; Down moves it to the second, whose command shows.
    pane.keys("Down")
    s = pane.wait_for(lambda s: re.search(r"^>\s*%d\s" % max(pids), s, re.M), "selection on the second row")
    check(re.search(r"^>\s*%d\s" % max(pids), s, re.M) is not None, "Down selects the second row")
    check("--static-gib 4" in s if max(pids) == pids[1] else "--static-gib 2" in s,
          "the selected process's full command is shown")
    pane.keys("k")
    s = pane.wait_for(lambda s: re.search(r"^>\s*%d\s" % min(pids), s, re.M), "selection back up")
    check(re.search(r"^>\s*%d\s" % min(pids), s, re.M) is not None, "k selects the first row again")
    # A small terminal: lines cut to its width, the footer on its last line, and the selected
    # process scrolled into view below the cards.
    subprocess.run(pane.tmux("resize-window", "-t", "a", "-x", "60", "-y", "12"), check=True)
    pane.keys("j")
    s = pane.wait_for(lambda s: len(s.splitlines()) <= 12 and "q quit" in s.splitlines()[-1] and
                      re.search(r"^>", s, re.M), "the view in 60 x 12")
    lines = s.splitlines()
    check(all(len(l) <= 60 for l in lines) and lines and "q quit" in lines[-1],
          "resized to 60 x 12: lines cut, the footer last (%r)" % lines[-1:])
    check(re.search(r"^>\s*%d\s" % max(pids), s, re.M) is not None and "00000000:01:00.0" in s,
          "resized: the selected row in view, the cards kept")
    pane.keys("q")
    rc = wait_file(os.path.join(tmp, "a.rc"))
    check(rc is not None and rc.strip() == "0", "q: exit 0 (%r)" % rc)
    check(restored(tmp, "a"),
          "q: the terminal's settings restored")

    pane = Pane(tmp, "b", shell_line(o, d, tmp, "b"))
    pane.wait_for(lambda s: "q quit" in s, "the second view")
    pane.keys("C-c")
    rc = wait_file(os.path.join(tmp, "b.rc"))
    check(rc is not None and rc.strip() == "0", "Ctrl-C: exit 0 (%r)" % rc)
    check(restored(tmp, "b"),
          "Ctrl-C: the terminal's settings restored")

    pane = Pane(tmp, "c", shell_line(o, d, tmp, "c"))
    pane.wait_for(lambda s: "q quit" in s, "the third view")
    pid = wait_file(os.path.join(tmp, "c.pid"))
    if pid:
        os.kill(int(pid), 15)
    rc = wait_file(os.path.join(tmp, "c.rc"))
    check(rc is not None and rc.strip() == "143", "SIGTERM: ended by the signal (%r)" % rc)
    check(restored(tmp, "c"),
          "SIGTERM: the terminal's settings restored")
    s = pane.screen()
    check("q quit" not in s, "SIGTERM: the view is gone from the screen (alternate screen left)")

    # An error while it runs (the folder removed): one line, exit 2, the terminal restored.
    gone = os.path.join(tmp, "gone")
    os.mkdir(gone)
    pane = Pane(tmp, "d", shell_line(o, gone, tmp, "d"))
    pane.wait_for(lambda s: "q quit" in s, "the view of a folder to remove")
    os.rmdir(gone)
    rc = wait_file(os.path.join(tmp, "d.rc"))
    check(rc is not None and rc.strip() == "2", "a folder removed: exit 2 (%r)" % rc)
    check(restored(tmp, "d"),
          "a folder removed: the terminal's settings restored")
    s = pane.wait_for(lambda s: "vramwatch: top: " in s, "the error on the normal screen")
    check(re.search(r"vramwatch: top: .*gone", s) is not None, "the error stays on the screen")

    # Into a pipe: the plain view, the terminal never touched.
    pane = Pane(tmp, "e", shell_line(o, d, tmp, "e", " | head -n 1 > %s" % os.path.join(tmp, "e.out")))
    rc = wait_file(os.path.join(tmp, "e.rc"))
    out = wait_file(os.path.join(tmp, "e.out")) or ""
    check(out.startswith("vramwatch top: 2 processes"), "into a pipe: the plain view (%r)" % out)
    check(restored(tmp, "e"),
          "into a pipe: the terminal's settings as they were")


if __name__ == "__main__":
    sys.exit(main())
