#!/usr/bin/python3
"""Tests of `vramwatch timeline` and of the report's sparkline and leak lines; one group per meson test.

Usage: run_timeline_tests.py --vramwatch EXE --data DIR --golden DIR --long-run EXE --validator PY GROUP

GROUP:
  golden  recorded reports (data/*.json) drawn as SVG, HTML and in the terminal, and their
          `vramwatch report`: the SVG's structure (elements, classes and texts, without
          coordinates), the terminal view and the report are compared with golden/ exactly; every
          marker listed under its panel with its whole label at its time since the process start,
          and no marker label cut with "…" where the panel has room;
          VRAMWATCH_UPDATE_GOLDEN=1 rewrites them instead (tests/lib/vwtest.py; read the diff before
          committing).
  usage   bad usage and bad input: exit 2, one line on stderr; old reports without a timeline.
  long    a three-day run written by the library's own core (long_run): within the timeline's
          bounds, the peak at its time, the leak found, and every view drawn in under a second.
  terminal the terminal view as wide as the terminal (a pty's own size, $COLUMNS, else 80), the
          list of markers and the key wrapped at that width, untracked memory, cache flushes and
          failures a retry overcame drawn and named, PyTorch's reserved-but-unallocated figure;
          the out-of-memory at the time `vramwatch report` gives it, one X for a failure and its
          failed retry, and the axis saying what its times count from.
  trace   `-o X.trace.json` (and --format=trace): a Chrome trace event file for every recorded
          report and the job, checked against the format's fields and the report
          (check_trace.py), ts 0 at the process start (the job's first) as otherData.time_origin
          says, compared with golden/*.trace.json exactly; the checker itself is
          shown to refuse broken traces.
  runs    runs of one script at other settings (runs/: --batch 32 and --batch 64): each drawn on
          its own time axis and named by what differs, in the terminal, SVG, HTML and trace,
          compared with golden/runs.*; reports of different scripts refused in one line.
  stacks  collapsed stacks and speedscope's JSON (--format=collapsed|speedscope) of what was live at
          the peak and at the failure: the lines add up to the report's figures, frames above the
          application's first hidden unless --full (the HTML's flame graphs too), a job's processes
          named in the root frame, names escaped, speedscope valid by speedscope.schema.json.
  flamegraph  flamegraph.pl draws the collapsed stacks as an SVG; skipped where it is missing.
  render  the HTML and the SVG opened in headless Chromium (/usr/bin/chromium) at two window
          sizes: each screenshot is a real plot (not blank; axis, live line and capacity colours
          present), kept under --shots; for every recorded report, the job and the runs at other
          settings, the browser's own text boxes (read back from the DOM) show no label over
          another, over the capacity line, over a marker line (where the markers leave room) or
          off the picture, the out-of-memory label within OOM_NEAR px of its cross and meeting no
          segment of the live, reserved, capacity or marker lines, and hovering anywhere on a plot
          shows time, live,
          reserved, untracked and the nearest event with its call chain. Without Chromium this
          FAILS, as it must in CI (.ci/run and tools/install-deps.sh --tests install it); set
          VRAMWATCH_ALLOW_SKIP=1 to let it skip on a machine without Chromium.

Every command runs with LC_ALL=C.UTF-8 TERM=dumb NO_COLOR=1 COLUMNS=100. A check that cannot run
here (the schema without the python3 jsonschema module) is named on stderr and its group exits
77, skipped, after everything else in it has run: never a pass for a check that did not run.
"""
import argparse
import fcntl
import html as html_lib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import check_trace  # noqa: E402
from vwtest import SKIP, Failed, check, clean_env, golden  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"


def env():
    e = clean_env()
    e.update(LC_ALL="C.UTF-8", TERM="dumb", NO_COLOR="1", COLUMNS="100")
    return e


def run(opts, args, timeout=60):
    return subprocess.run([opts.vramwatch] + args, capture_output=True, env=env(), timeout=timeout)


def one_line_error(r, what):
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == 2, "%s: exit %d, expected 2; stderr: %s" % (what, r.returncode, err))
    check(r.stdout == b"", "%s: printed on stdout: %r" % (what, r.stdout[:200]))
    lines = err.splitlines()
    check(len(lines) == 1 and lines[0].startswith("vramwatch: "), "%s: expected one line, got %r" % (what, err))
    return lines[0]


def compare_golden(opts, name, actual):
    golden(os.path.join(opts.golden, name), actual, "golden/" + name)


def not_checked(opts, why):
    """A check that cannot run here: said on stderr now; the group then ends with exit 77
    (skipped), not a pass, once everything else in it has passed."""
    if why not in opts.not_checked:
        opts.not_checked.append(why)
        print("not checked: " + why, file=sys.stderr)


def self_contained(text, what):
    """Nothing fetched from anywhere: no links, no external scripts, styles or fonts."""
    low = text.lower()
    for bad in ("href", "src=", "@import", "url(", "<link", "<iframe", "<object", "<img"):
        check(bad not in low, "%s refers outside itself (%s)" % (what, bad))
    rest = low.replace("http://www.w3.org/2000/svg", "")
    check("http:" not in rest and "https:" not in rest, "%s names a network address" % what)


def svg_structure(svg_text):
    """The SVG as lines of element, class and text, without coordinates: what a person sees,
    not where exactly it is drawn."""
    root = ET.fromstring(svg_text)
    check(root.tag == SVG_NS + "svg", "the root element is %s, not svg" % root.tag)
    out = []

    def walk(e, depth):
        tag = e.tag.replace(SVG_NS, "")
        line = "  " * depth + tag
        if e.get("class"):
            line += "." + e.get("class").replace(" ", ".")
        text = "".join(e.itertext()).strip() if tag in ("text", "title") else ""
        if text:
            line += " " + " ".join(text.split())
        out.append(line)
        if tag not in ("text", "title", "style"):
            for c in e:
                walk(c, depth + 1)

    walk(root, 0)
    return "\n".join(out) + "\n"


def reltime(ns):
    """A time since the origin as `vramwatch report` writes it (util_fmt_reltime): "+0.83s"."""
    sign, a = ("-", -ns) if ns < 0 else ("+", ns)
    c = (a + 5000000) // 10000000
    if c < 6000:
        return "%s%d.%02ds" % (sign, c // 100, c % 100)
    d = (a + 50000000) // 100000000
    if d < 36000:
        return "%s%dm%02d.%ds" % (sign, d // 600, d % 600 // 10, d % 10)
    s = (a + 500000000) // 1000000000
    return "%s%dh%02dm%02ds" % (sign, s // 3600, s % 3600 // 60, s % 60)


def check_markers(what, svg_text, reports, crowded=False):
    """Every marker listed under its panel with its whole label and its time since the process
    start (the job's first), and no label above the plot cut with "…" where the panel has room."""
    root = ET.fromstring(svg_text)
    origin = min(r["process"]["start_unix_ns"] for r in reports)
    panels = root.findall(SVG_NS + "g[@class='panel']")
    for pg in panels:
        title = "".join(pg.find(SVG_NS + "text").itertext())
        r = reports[0] if len(reports) == 1 else next(
            r for r in reports if "pid %d)" % r["process"]["pid"] in title)
        key = pg.find(SVG_NS + "g[@class='marker-key']")
        listed = [] if key is None else ["".join(t.itertext()) for t in key.iter(SVG_NS + "text")][1:]
        want = ["%s %s" % (reltime(m["time_unix_ns"] - origin), m["label"]) for m in r.get("markers", [])]
        check(listed == want, "%s: the markers' list under %r is %r, not %r" % (what, title, listed[:6], want[:6]))
        if crowded:
            continue
        for g in pg.iter(SVG_NS + "g"):
            if g.get("class") == "marker":
                for t in g.findall(SVG_NS + "text"):
                    text = "".join(t.itertext())
                    check(not text.endswith("\u2026"), "%s: a marker's label is cut where the panel has room: %r"
                          % (what, text))


def fixtures(opts):
    return sorted(f for f in os.listdir(opts.data) if f.endswith(".json"))


def check_flames(name, html_text):
    """The HTML's flame graphs: one per moment the report keeps (at the peak, at the failure, when
    it was written; moments with the same figures share one), each frame within its parent, the
    outermost frames filling the graph, the call chains' Python and native frames named."""
    sections = re.findall(r'<section class="flame" data-moment="([a-z ]+)">\n<h2>(.*?)</h2>\n'
                          r'<div class="graph"[^>]*>\n(.*?)</div>\n</section>', html_text, re.S)
    check(sections, "%s: no flame graph in the HTML" % name)
    moments = [m for m, _, _ in sections]
    for m, h2, body in sections:
        frames = re.findall(r'<div class="frame (py|native)" style="left:([0-9.]+)%;width:([0-9.]+)%;'
                            r'top:([0-9]+)px;[^"]*" data-tip="([^"]*)">', body)
        check(frames, "%s: flame graph %s without frames" % (name, m))
        top = [f for f in frames if f[3] == "0"]
        check(abs(sum(float(f[2]) for f in top) - 100) < 0.5,
              "%s: the outermost frames of %s fill %.1f%%" % (name, m, sum(float(f[2]) for f in top)))
        rows = {}
        for f in frames:
            rows.setdefault(int(f[3]), []).append((float(f[1]), float(f[1]) + float(f[2])))
        for y, spans in rows.items():
            spans.sort()
            check(all(a[1] <= b[0] + 0.01 for a, b in zip(spans, spans[1:])), "%s: frames overlap in %s" % (name, m))
            if y > 0:
                above = rows.get(y - 18, [])
                check(all(any(p0 - 0.01 <= x0 and x1 <= p1 + 0.01 for p0, p1 in above) for x0, x1 in spans),
                      "%s: a frame of %s is not under its caller" % (name, m))
        check(any(f[0] == "py" for f in frames) and any(f[0] == "native" for f in frames),
              "%s: %s lacks Python or native frames" % (name, m))
        check(all("% of the graph" in f[4] for f in frames), "%s: a frame without its share on hover" % name)
    if name == "peak-sites.json":
        check(moments == ["peak", "report"] and sections[0][1].endswith("at the peak: 3.00 GiB") and
              sections[1][1].endswith("at exit: 1.00 GiB"), "peak-sites: graphs %r" % [h for _, h, _ in sections])
        check("pool_workload.py:31 in &lt;module&gt;" in sections[0][2] and
              "pool_workload.py:31 in" not in sections[1][2], "peak-sites: the peak's call site is not the peak's graph")
    if name == "oom-fragmented.json":
        check(moments == ["peak failure report"] and "at the peak, at the out-of-memory failure and at exit" in
              sections[0][1], "oom-fragmented: graphs %r" % [h for _, h, _ in sections])


def group_golden(opts):
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-")
    try:
        for name in fixtures(opts):
            base = name[:-5]
            src = os.path.join(opts.data, name)
            svg = os.path.join(tmp, base + ".svg")
            r = run(opts, ["timeline", "-o", svg, src])
            check(r.returncode == 0 and r.stdout == b"" and r.stderr == b"",
                  "%s: svg: exit %d %s" % (name, r.returncode, r.stderr))
            with open(svg, encoding="utf-8") as f:
                svg_text = f.read()
            self_contained(svg_text, base + ".svg")
            with open(src, encoding="utf-8") as f:
                check_markers(name, svg_text, [json.load(f)], crowded=base == "crowded-markers")
            structure = svg_structure(svg_text)
            check(".live-line" in structure and ".reserved" in structure and "axis" in structure,
                  "%s: the SVG lacks the live line, reserved area or axes" % name)
            compare_golden(opts, base + ".svg.txt", structure)
            html = os.path.join(tmp, base + ".html")
            r = run(opts, ["timeline", "-o", html, src])
            check(r.returncode == 0, "%s: html: exit %d %s" % (name, r.returncode, r.stderr))
            with open(html, encoding="utf-8") as f:
                html_text = f.read()
            self_contained(html_text, base + ".html")
            check(html_text.startswith("<!DOCTYPE html>") and html_text.count("<svg") == 1 and
                  html_text.count("<script>") == 1, "%s: the HTML is not one page with one SVG and one inline script" % name)
            check_flames(name, html_text)
            inner = html_text[html_text.index("<svg"):html_text.index("</svg>") + 6]
            check(svg_structure(inner) == structure, "%s: the HTML's picture differs from the SVG" % name)
            r = run(opts, ["timeline", src])
            check(r.returncode == 0 and r.stderr == b"", "%s: terminal: exit %d %s" % (name, r.returncode, r.stderr))
            term = r.stdout.decode("utf-8")
            check("\033[" not in term, "%s: colour with NO_COLOR set" % name)
            compare_golden(opts, base + ".term.txt", term)
            r = run(opts, ["report", src])
            # 1: printed, for a run that did not fit (README; exact codes: tests/cli/run_conventions.py)
            check(r.returncode in (0, 1) and r.stdout, "%s: report: exit %d" % (name, r.returncode))
            compare_golden(opts, base + ".report.txt", r.stdout.decode("utf-8"))
        # eight markers close together: more than the rows above the plot hold, each label still
        # whole, beside its line at the top of the plot where nothing is drawn there
        with open(os.path.join(opts.data, "leak-markers.json"), encoding="utf-8") as f:
            doc = json.load(f)
        mid = (doc["timeline"]["devices"][0]["start_unix_ns"] + doc["time_unix_ns"]) // 2
        doc["markers"] = [dict(doc["markers"][0], time_unix_ns=mid + i * 100000, label="epoch %d train" % i)
                          for i in range(8)]
        cluster = os.path.join(tmp, "cluster.json")
        with open(cluster, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        svg = os.path.join(tmp, "cluster.svg")
        r = run(opts, ["timeline", "-o", svg, cluster])
        check(r.returncode == 0, "cluster: svg: exit %d %s" % (r.returncode, r.stderr))
        with open(svg, encoding="utf-8") as f:
            svg_text = f.read()
        check_markers("eight markers together", svg_text, [doc])
        check(svg_text.count(">epoch ") == 8, "eight markers together: a label left out where the plot has room")
        # a job: its ranks' reports, or the file merge writes of them, on one time axis
        ranks = [os.path.join(opts.data, "..", "job", "rank%d.json" % i) for i in (1, 0)]
        svg = os.path.join(tmp, "job.svg")
        r = run(opts, ["timeline", "-o", svg] + ranks)
        check(r.returncode == 0 and r.stderr == b"", "job: svg: exit %d %s" % (r.returncode, r.stderr))
        with open(svg, encoding="utf-8") as f:
            svg_text = f.read()
        structure = svg_structure(svg_text)
        job_reports = []
        for p in ranks:
            with open(p, encoding="utf-8") as f:
                job_reports.append(json.load(f))
        check_markers("job", svg_text, job_reports)
        check("time since the job's first process started" in structure, "job: the shared axis does not say what it is")
        check(structure.index("rank 0 (") < structure.index("rank 1 ("), "job: panels in rank order")
        check(structure.count("\n  g.panel") == 2, "job: one panel per rank and device")
        compare_golden(opts, "job.svg.txt", structure)
        merged = os.path.join(tmp, "job.json")
        r = run(opts, ["merge", "-o", merged] + ranks)
        check(r.returncode == 0, "job: merge: exit %d %s" % (r.returncode, r.stderr))
        svg2 = os.path.join(tmp, "job2.svg")
        r = run(opts, ["timeline", "-o", svg2, merged])
        check(r.returncode == 0, "job: svg of the merged file: exit %d %s" % (r.returncode, r.stderr))
        with open(svg2, encoding="utf-8") as f:
            check(svg_structure(f.read()) == structure, "job: the merged file draws the same picture as its reports")
        r = run(opts, ["timeline"] + ranks)
        check(r.returncode == 0, "job: terminal: exit %d" % r.returncode)
        compare_golden(opts, "job.term.txt", r.stdout.decode("utf-8"))
    finally:
        shutil.rmtree(tmp)


def group_usage(opts):
    src = os.path.join(opts.data, "leak-markers.json")
    old = os.path.join(opts.data, "..", "..", "cli", "data", "oom-pytorch.json")
    r = run(opts, ["timeline", "--help"])
    check(r.returncode == 0 and r.stdout.startswith(b"usage: vramwatch timeline"), "--help: %r" % r.stdout[:80])
    one_line_error(run(opts, ["timeline"]), "no report")
    # One process's reports twice (its dump on request beside its report): drawn once, the
    # other left out in one line.
    r = run(opts, ["timeline", "--format=svg", src, src])
    check(r.returncode == 0 and r.stdout.count(b"<svg") == 1 and
          r.stderr.count(b"earlier reports of the same process") == 1,
          "the same report twice: one process: %d %r" % (r.returncode, r.stderr))
    one_line_error(run(opts, ["timeline", "--frobnicate", src]), "unknown option")
    one_line_error(run(opts, ["timeline", "-o"]), "-o without a value")
    line = one_line_error(run(opts, ["timeline", "-o", "/tmp/x.png", src]), "-o .png")
    check(".svg, .html, .trace.json, .collapsed, .folded, .speedscope.json or .pickle" in line, "-o .png: %s" % line)
    line = one_line_error(run(opts, ["timeline", "--format=png", src]), "--format=png")
    check("svg, html, trace, collapsed, speedscope or torch-snapshot" in line, "--format=png: %s" % line)
    one_line_error(run(opts, ["timeline", "--format=trace", "-o", "/tmp/x.svg", src]), "--format=trace -o X.svg")
    one_line_error(run(opts, ["timeline", "--format=", src]), "--format= without a value")
    r = run(opts, ["timeline", "--color=always", src])
    check(r.returncode == 0 and b"\033[" in r.stdout, "--color=always: no colour into a pipe")
    r = run(opts, ["timeline", "--color=never", src])
    check(r.returncode == 0 and b"\033[" not in r.stdout, "--color=never: colour")
    one_line_error(run(opts, ["timeline", "--color=sometimes", src]), "--color=sometimes")
    one_line_error(run(opts, ["timeline", "/nonexistent/report.json"]), "missing file")
    one_line_error(run(opts, ["timeline", "-o", "/nonexistent/dir/x.svg", src]), "unwritable output")
    line = one_line_error(run(opts, ["timeline", old]), "report without a timeline")
    check("has no timeline" in line, "old report: %s" % line)
    # Old reports still load everywhere else.
    r = run(opts, ["report", old])
    check(r.returncode in (0, 1) and r.stdout and b"Live memory over the run" not in r.stdout,
          "old report: report exit %d" % r.returncode)
    # Damaged timelines: one line naming the place.
    with open(src, encoding="utf-8") as f:
        doc = json.load(f)
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-bad-")
    try:
        def bad(mutate, expect):
            d = json.loads(json.dumps(doc))
            mutate(d)
            p = os.path.join(tmp, "bad.json")
            with open(p, "w") as f:
                json.dump(d, f)
            line = one_line_error(run(opts, ["timeline", p]), expect)
            check(expect in line, "expected %r in %r" % (expect, line))
            one_line_error(run(opts, ["report", p]), expect + " (report)")

        def swap(d):
            b = d["timeline"]["devices"][0]["buckets"]
            b[0], b[1] = b[1], b[0]

        bad(swap, "timeline.devices[0].buckets[1].t")
        bad(lambda d: d["timeline"]["devices"][0]["buckets"][0].update(live="x"), "timeline.devices[0].buckets[0].live")
        bad(lambda d: d["timeline"].update(devices=7), "timeline.devices")
        bad(lambda d: d["timeline"]["devices"][0].update(bucket_ns=0), "timeline.devices[0].bucket_ns")
        bad(lambda d: d["markers"][0].pop("label"), "markers[0]")
        # No devices at all: nothing to draw, said in one line.
        d = json.loads(json.dumps(doc))
        d["timeline"]["devices"] = []
        p = os.path.join(tmp, "empty.json")
        with open(p, "w") as f:
            json.dump(d, f)
        one_line_error(run(opts, ["timeline", p]), "no devices")
    finally:
        shutil.rmtree(tmp)


def term_lines(out):
    return out.decode("utf-8").splitlines()


def group_terminal(opts):
    """The terminal view: as wide as the terminal (its TIOCGWINSZ size, else $COLUMNS, else 80),
    markers wrapped at that width, untracked memory, failures a retry overcame and cache flushes
    drawn and named."""
    def plot_rows(lines):
        return [l for l in lines if l[12:13] in ("\u2524", "\u2502", "\u2514")]

    for name in fixtures(opts) + ["../job/rank0.json"]:
        src = os.path.join(opts.data, name)
        srcs = [src] if not name.startswith("../job") else [src, src.replace("rank0", "rank1")]
        for width in (60, 100, 157):
            e = dict(env(), COLUMNS=str(width))
            r = subprocess.run([opts.vramwatch, "timeline"] + srcs, capture_output=True, env=e, timeout=60)
            check(r.returncode == 0, "%s: exit %d %s" % (name, r.returncode, r.stderr))
            lines = term_lines(r.stdout)
            rows = plot_rows(lines)
            check(rows and all(len(l) == width - 1 for l in rows),
                  "%s at %d columns: plot rows of %s columns" % (name, width, sorted({len(l) for l in rows})))
            # the list of markers and the key wrap at the width (an item longer than the width alone
            # on its line)
            for l in lines:
                listing = "arkers (|):" in l or l.startswith("   +") or l.startswith(" " * 13 + "\u2588") or \
                    (l.startswith(" " * 13) and l[13:14] in "\u2500\u2592\u2591|fxX" and l[14:15] == " ")
                if listing and len(l) > width:
                    check(not re.search(r", \+\d", l) and "  " not in l.strip(),
                          "%s at %d columns: a line of %d: %r" % (name, width, len(l), l))
    # The terminal's own width wins over $COLUMNS; without either, 80.
    src = os.path.join(opts.data, "leak-markers.json")
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 133, 0, 0))
        p = subprocess.Popen([opts.vramwatch, "timeline", src], stdout=slave, stderr=subprocess.PIPE,
                             env=dict(env(), COLUMNS="100"))
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                c = os.read(master, 65536)
            except OSError:
                break
            if not c:
                break
            chunks.append(c)
        p.wait(timeout=60)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    rows = plot_rows(term_lines(b"".join(chunks).replace(b"\r\n", b"\n")))
    check(rows and all(len(l) == 132 for l in rows),
          "on a terminal of 133 columns (COLUMNS=100): plot rows of %s" % sorted({len(l) for l in rows}))
    e = env()
    e.pop("COLUMNS")
    r = subprocess.run([opts.vramwatch, "timeline", src], capture_output=True, env=e, timeout=60)
    rows = plot_rows(term_lines(r.stdout))
    check(rows and all(len(l) == 79 for l in rows), "without a terminal or COLUMNS: %s" % sorted({len(l) for l in rows}))
    # What the help promises: untracked memory, cache flushes, failures a retry overcame.
    r = run(opts, ["timeline", os.path.join(opts.data, "limit-observe.json")])
    out = r.stdout.decode("utf-8")
    check("\u2591" in out and "\u2591 untracked" in out, "limit-observe: no untracked memory drawn")
    r = run(opts, ["timeline", os.path.join(opts.data, "flushes.json")])
    out = r.stdout.decode("utf-8")
    marks = [l for l in out.splitlines() if l.startswith(" " * 13) and ("f" in l or "x" in l) and set(l.strip()) <= set("|fxX ")]
    # a flush falls in the column of the failure it rescued: the x shows both
    check(marks and marks[0].count("x") == 2, "flushes: no x marks under the axis: %r" % marks)
    check("x failure a retry overcame" in out and "f cache flush" not in out,
          "flushes: the key names what is not drawn, or lacks the x")
    check("2 cache flushes (f, or the x of the failure it rescued):" in out and "freed in 5 frees to fit 2.00 GiB, from train_sim.py:178 in main" in out,
          "flushes: the cache flushes are not named with their call sites")
    check("2 failures a retry overcame (x):" in out, "flushes: the retried failures are not named")
    r = run(opts, ["timeline", os.path.join(opts.data, "oom-fragmented.json")])
    check(b"3.64 GiB reserved but unallocated" in r.stdout, "oom-fragmented: PyTorch's figure not shown")
    same_times_as_report(opts)


def same_times_as_report(opts):
    """One time origin for every view: the terminal names the out-of-memory at the time `vramwatch
    report` gives it (since the process start, "+0.83s"), the axis says what its times count from,
    and the failure and its retry that failed again (one failure, as the application saw it) are
    one X mark."""
    for name in ("oom-b64.json", "oom-fragmented.json"):
        src = os.path.join(opts.data, name)
        rep = run(opts, ["report", src]).stdout.decode("utf-8")
        m = re.search(r"^What failed: .* at (\+[0-9.ms]+)$", rep, re.M)
        check(m, "%s: the report names no failure time" % name)
        term = run(opts, ["timeline", src]).stdout.decode("utf-8")
        t = re.search(r"^Out of memory \(X\) at ([^:]+):", term, re.M)
        check(t and t.group(1) == m.group(1), "%s: the terminal says the out-of-memory was at %r, the report %r"
              % (name, t and t.group(1), m.group(1)))
        check("time since the process started" in term, "%s: the terminal's axis does not say what its times count from" % name)
        marks = [l for l in term.splitlines() if l.startswith(" " * 13) and "X" in l and set(l.strip()) <= set("|fxX ")]
        check(len(marks) == 1 and marks[0].count("X") == 1, "%s: the out-of-memory is not one X: %r" % (name, marks))
    job = [os.path.join(opts.data, "..", "job", "rank%d.json" % i) for i in (0, 1)]
    term = run(opts, ["timeline"] + job).stdout.decode("utf-8")
    check("time since the job's first process started" in term, "job: the shared axis does not say what it counts from")


def group_long(opts):
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-long-")
    try:
        p = subprocess.run([opts.long_run, tmp], capture_output=True, timeout=120)
        check(p.returncode == 0, "long_run exited %d: %s" % (p.returncode, p.stderr))
        path = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".json")][0]
        v = subprocess.run([sys.executable, opts.validator, path], capture_output=True, text=True)
        if v.returncode == SKIP:
            not_checked(opts, "the long run's report against the schema: " + v.stderr.strip())
        else:
            check(v.returncode == 0, "schema: " + v.stdout + v.stderr)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        tl = doc["timeline"]["devices"][0]
        span_h = (doc["time_unix_ns"] - tl["start_unix_ns"]) / 3.6e12
        check(span_h > 72, "the run spans %.1f h, expected three days" % span_h)
        check(len(tl["buckets"]) <= doc["timeline"]["buckets_max"] and tl["merges"] > 10,
              "%d buckets, %d merges" % (len(tl["buckets"]), tl["merges"]))
        dev = doc["devices"][0]
        peak = [b for b in tl["buckets"] if b["live_max"] == dev["peak_live_bytes"]]
        check(peak and peak[0]["peak_t"] == dev["peak_time_unix_ns"],
              "the peak's bucket does not hold the peak at its time")
        figures = []
        for what, args in (("svg", ["-o", os.path.join(tmp, "x.svg")]), ("html", ["-o", os.path.join(tmp, "x.html")]),
                           ("terminal", [])):
            best = None
            for _ in range(3):
                t = time.perf_counter()
                r = run(opts, ["timeline"] + args + [path])
                dt = time.perf_counter() - t
                check(r.returncode == 0, "%s: exit %d %s" % (what, r.returncode, r.stderr))
                best = dt if best is None else min(best, dt)
            if opts.timed:  # the benchmark timeline-long-timed; a duration is no test
                check(best < 1.0, "drawing a three-day timeline as %s took %.3f s" % (what, best))
            figures.append("%s %.1f ms" % (what, best * 1000))
        print("three-day timeline (%d buckets, %d events) drawn in: %s" % (len(tl["buckets"]), tl["events"], ", ".join(figures)))
        r = run(opts, ["report", path])
        out = r.stdout.decode("utf-8")
        leaks = [l for l in out.splitlines() if l.startswith("Leak: ")]
        check(len(leaks) == 1 and 'grows 16.00 MiB per "epoch #" (72 phases, 1h00m apart)' in leaks[0],
              "the three-day leak: %s" % leaks)
    finally:
        shutil.rmtree(tmp)


def trace_ok(path, report_paths, what):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text, parse_constant=check_trace.reject_constant)
        reports = []
        for p in report_paths:
            with open(p, encoding="utf-8") as f:
                d = json.load(f)
            reports += [x["report"] for x in d["processes"]] if d.get("schema") == "vramwatch.job/1" else [d]
        check_trace.check_format(doc)
        check_trace.check_content(doc, reports)
    except (Failed, ValueError, KeyError, TypeError) as e:
        raise Failed("%s: %s" % (what, e))
    return text, doc


def group_trace(opts):
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-trace-")
    try:
        for name in fixtures(opts):
            base = name[:-5]
            src = os.path.join(opts.data, name)
            out = os.path.join(tmp, base + ".trace.json")
            r = run(opts, ["timeline", "-o", out, src])
            check(r.returncode == 0 and r.stdout == b"" and r.stderr == b"",
                  "%s: trace: exit %d %s" % (name, r.returncode, r.stderr))
            text, doc = trace_ok(out, [src], name)
            check(doc.get("displayTimeUnit") == "ms", "%s: displayTimeUnit" % name)
            # ts 0 is the process start, as the report's own times, and the file says so
            with open(src, encoding="utf-8") as f:
                start = json.load(f)["process"]["start_unix_ns"]
            check(doc["baseTimeNanoseconds"] == start and
                  doc["otherData"].get("time_origin") == "time since the process started",
                  "%s: the trace counts from %r (%r), not the process start %r" %
                  (name, doc["baseTimeNanoseconds"], doc["otherData"].get("time_origin"), start))
            compare_golden(opts, base + ".trace.json", text)
            # --format=trace: the same file, under any name or on standard output
            r = run(opts, ["timeline", "--format=trace", src])
            check(r.returncode == 0 and r.stdout.decode("utf-8") == text,
                  "%s: --format=trace on stdout differs from -o X.trace.json" % name)
            other = os.path.join(tmp, base + ".json")
            r = run(opts, ["timeline", "--format", "trace", "-o", other, src])
            check(r.returncode == 0, "%s: --format trace -o X.json: exit %d" % (name, r.returncode))
            with open(other, encoding="utf-8") as f:
                check(f.read() == text, "%s: --format=trace -o X.json differs" % name)
        ranks = [os.path.join(opts.data, "..", "job", "rank%d.json" % i) for i in (1, 0)]
        out = os.path.join(tmp, "job.trace.json")
        r = run(opts, ["timeline", "-o", out] + ranks)
        check(r.returncode == 0 and r.stderr == b"", "job: trace: exit %d %s" % (r.returncode, r.stderr))
        text, doc = trace_ok(out, ranks, "job")
        starts = [json.load(open(p, encoding="utf-8"))["process"]["start_unix_ns"] for p in ranks]
        check(doc["baseTimeNanoseconds"] == min(starts) and
              doc["otherData"].get("time_origin") == "time since the job's first process started",
              "job: the trace does not count from the job's first process start")
        order = [e["args"]["sort_index"] for e in doc["traceEvents"] if e["name"] == "process_sort_index"]
        check(order == [0, 1], "job: processes in rank order: %s" % order)
        compare_golden(opts, "job.trace.json", text)
        # The checker refuses what the format does not allow.
        good = json.loads(text)

        def refused(mutate, what):
            d = json.loads(json.dumps(good))
            mutate(d)
            try:
                check_trace.check_format(d)
                check_trace.check_content(d, [json.load(open(p, encoding="utf-8")) for p in ranks])
            except (Failed, KeyError, TypeError, ValueError):
                return
            raise Failed("the trace checker accepted a trace with " + what)

        refused(lambda d: d.pop("traceEvents"), "no traceEvents")
        refused(lambda d: d["traceEvents"][-1].update(ts="12"), "a string ts")
        refused(lambda d: d["traceEvents"][-1].update(ph="Q"), "an unknown phase")
        refused(lambda d: d["traceEvents"][-1].pop("pid"), "no pid")
        refused(lambda d: d.update(displayTimeUnit="s"), "displayTimeUnit s")
        refused(lambda d: [e["args"].update(bytes="1") for e in d["traceEvents"] if e["ph"] == "C"][:1],
                "a counter value that is a string")
        refused(lambda d: d["traceEvents"].__setitem__(
            slice(None), [e for e in d["traceEvents"] if e.get("cat") != "vramwatch.marker"]), "no markers")
    finally:
        shutil.rmtree(tmp)


def group_runs(opts):
    """Runs of one script at other settings (runs/: examples/train_sim.py at --batch 32, which
    fits, and --batch 64, which runs out of memory): the set advise reads as one job. Each run is
    drawn on its own time axis, from its own start, and named by what differs, in the terminal,
    the SVG and HTML and the trace. Reports of different scripts are refused in one line."""
    runs = [os.path.join(opts.data, "..", "runs", n) for n in ("b64.json", "b32.json")]
    labels = ["--batch 32", "--batch 64 (out of memory)"]  # in the order the runs began
    other = os.path.join(opts.data, "pool-async.json")
    r = run(opts, ["advise"] + runs)
    check(r.returncode in (0, 1) and r.stderr == b"", "runs: advise reads them as one job: exit %d %s"
          % (r.returncode, r.stderr))
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-runs-")
    try:
        r = run(opts, ["timeline"] + runs)
        check(r.returncode == 0 and r.stderr == b"", "runs: terminal: exit %d %s" % (r.returncode, r.stderr))
        term = r.stdout.decode("utf-8")
        titles = [l for l in term.splitlines() if ", Device 0" in l]
        check(len(titles) == 2 and all(t.startswith(w + ", Device 0") for t, w in zip(titles, labels)),
              "runs: one panel per run, named by what differs, in the order they began: %r" % titles)
        # each axis counts from its own run's process start, and ends at its own length
        ends = [l.split() for l in term.splitlines() if "time since each run's process started" in l]
        check(len(ends) == 2 and ends[0][-1] != ends[1][-1], "runs: two time axes of their own: %r" % ends)
        check(term.lower().count("out of memory (x) at +") == 1 and
              "\n--batch 64 (out of memory): out of memory (X) at +" in term,
              "runs: the failure named under its own run, at its time from that run's start")
        compare_golden(opts, "runs.term.txt", term)

        svg = os.path.join(tmp, "runs.svg")
        r = run(opts, ["timeline", "-o", svg] + runs)
        check(r.returncode == 0 and r.stderr == b"", "runs: svg: exit %d %s" % (r.returncode, r.stderr))
        with open(svg, encoding="utf-8") as f:
            structure = svg_structure(f.read())
        check(structure.count("\n  g.panel") == 2, "runs: svg: one panel per run")
        check(structure.index(labels[0] + ", Device 0") < structure.index(labels[1] + ", Device 0"),
              "runs: svg: panels named by what differs, in the order the runs began")
        compare_golden(opts, "runs.svg.txt", structure)
        html = os.path.join(tmp, "runs.html")
        r = run(opts, ["timeline", "-o", html] + runs)
        check(r.returncode == 0 and r.stderr == b"", "runs: html: exit %d %s" % (r.returncode, r.stderr))
        with open(html, encoding="utf-8") as f:
            html_text = f.read()
        inner = html_text[html_text.index("<svg"):html_text.index("</svg>") + 6]
        check(svg_structure(inner) == structure, "runs: the HTML's picture differs from the SVG")
        check(all(w + ": " in html_text for w in labels), "runs: html: the flame graphs named by run")

        out = os.path.join(tmp, "runs.trace.json")
        r = run(opts, ["timeline", "-o", out] + runs)
        check(r.returncode == 0 and r.stderr == b"", "runs: trace: exit %d %s" % (r.returncode, r.stderr))
        text, doc = trace_ok(out, runs, "runs")
        names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
        check(len(names) == 2 and all(n.startswith(w + ": ") for n, w in zip(names, labels)),
              "runs: trace: one process track per run, named by what differs: %r" % names)
        meta = doc["otherData"].get("runs")
        check(isinstance(meta, list) and [m.get("label") for m in meta] == labels,
              "runs: trace: otherData.runs names the runs: %r" % meta)
        starts = {os.path.basename(p): json.load(open(p))["process"]["start_unix_ns"] for p in runs}
        check(doc["otherData"].get("time_origin") == "time since each run's process started",
              "runs: trace: otherData.time_origin is %r" % doc["otherData"].get("time_origin"))
        for m in meta:
            # ts 0 is the run's own process start, the report's own origin
            check(m["base_time_ns"] in starts.values(), "runs: trace: %s counts from %r, no run's process start"
                  % (m["label"], m["base_time_ns"]))
            first = min(e["ts"] for e in doc["traceEvents"] if e["ph"] == "C" and e["pid"] == m["pid"])
            check(0 <= first < 60e6, "runs: trace: %s starts at %r us, not after its process start"
                  % (m["label"], first))
        compare_golden(opts, "runs.trace.json", text)

        # Different scripts are not runs of one job: refused in one line, as advise refuses them.
        for args in (["timeline", runs[1], other], ["timeline", "-o", svg, runs[1], other],
                     ["timeline", "--format=trace", runs[1], other]):
            line = one_line_error(run(opts, args), "runs: different scripts")
            check("not the same job" in line, "runs: different scripts: %s" % line)
        one_line_error(run(opts, ["advise", runs[1], other]), "runs: advise refuses different scripts too")
    finally:
        shutil.rmtree(tmp)


# ---- PNG, without PIL ----

def png_pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            check(depth == 8 and ctype in (2, 6) and body[12] == 0, "unexpected PNG format %d/%d" % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def colour_counts(path):
    w, h, bpp, rows = png_pixels(path)
    counts = {"nonwhite": 0, "dark": 0, "live": 0, "red": 0}
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if r < 245 or g < 245 or b < 245:
                counts["nonwhite"] += 1
            if r < 80 and g < 80 and b < 80:
                counts["dark"] += 1       # axes, ticks, labels
            if r < 70 and 50 < g < 110 and b > 130:
                counts["live"] += 1       # the live line, #1f4fa0
            if r > 180 and g < 60 and b < 60:
                counts["red"] += 1        # the capacity line, #d01010
    return w * h, counts


CHECK_JS = r"""<script>
window.addEventListener('load', function () {
  var out = {overlaps: [], outside: [], capacity: [], marker_lines: [], hover: [], texts: 0};
  var svg = document.querySelector('svg.vramwatch-timeline'), sr = svg.getBoundingClientRect();
  function R(e) { var r = e.getBoundingClientRect(); return {x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; }
  function meet(a, b) { return Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > 0.5 &&
                               Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > 0.5; }
  var boxes = [].slice.call(svg.querySelectorAll('text')).map(function (t) {
    return {t: t.textContent, r: R(t), inplot: !!t.closest('g.failure,g.peak,g.capacity,g.fragmentation-pytorch')};
  }).filter(function (b) { return b.r.x1 > b.r.x0; });
  out.texts = boxes.length;
  for (var i = 0; i < boxes.length; i++) {
    var a = boxes[i];
    if (a.r.x0 < sr.left - 0.5 || a.r.x1 > sr.right + 0.5 || a.r.y0 < sr.top - 0.5 || a.r.y1 > sr.bottom + 0.5)
      out.outside.push(a.t);
    for (var j = i + 1; j < boxes.length; j++)
      if (meet(a.r, boxes[j].r)) out.overlaps.push([a.t, boxes[j].t]);
  }
  function lines(sel, pad) { return [].slice.call(svg.querySelectorAll(sel)).map(function (l) {
    var r = R(l); return {x0: r.x0 - pad, y0: r.y0 - pad, x1: r.x1 + pad, y1: r.y1 + pad}; }); }
  var caps = lines('g.panel g.capacity line', 1), marks = lines('g.panel g.marker line', 0.5);
  boxes.forEach(function (b) {
    if (!b.inplot) return;
    caps.forEach(function (c) { if (meet(b.r, c)) out.capacity.push(b.t); });
    marks.forEach(function (m) { if (meet(b.r, m)) out.marker_lines.push(b.t); });
  });
  // the out-of-memory label: how far from its cross (in the picture's px), and which drawn line
  // (a segment of the live or reserved line, the capacity line, a marker line) its box meets
  function hits(p, q, b) {  // whether segment pq meets box b (Liang-Barsky)
    var t0 = 0, t1 = 1, d = [-(q.x - p.x), q.x - p.x, -(q.y - p.y), q.y - p.y],
        e = [p.x - b.x0, b.x1 - p.x, p.y - b.y0, b.y1 - p.y];
    for (var i = 0; i < 4; i++) {
      if (d[i] === 0) { if (e[i] < 0) return false; continue; }
      var r = e[i] / d[i];
      if (d[i] < 0) { if (r > t1) return false; t0 = Math.max(t0, r); }
      else { if (r < t0) return false; t1 = Math.min(t1, r); }
    }
    return true;
  }
  out.oom = [];
  var scale = sr.width / svg.viewBox.baseVal.width;
  [].slice.call(svg.querySelectorAll('g.panel g.failure')).forEach(function (g) {
    var t = g.querySelector('text'); if (!t) return;
    var b = R(t), x = R(g.querySelector('path')), cx = (x.x0 + x.x1) / 2, cy = (x.y0 + x.y1) / 2;
    var dx = Math.max(b.x0 - cx, 0, cx - b.x1), dy = Math.max(b.y0 - cy, 0, cy - b.y1);
    var res = {t: t.textContent, dist: Math.sqrt(dx * dx + dy * dy) / scale, crosses: []};
    var pg = g.closest('g.panel');
    [].slice.call(pg.querySelectorAll('path.live-line, path.reserved-line, g.capacity line, g.marker line')).forEach(function (l) {
      var m = l.getScreenCTM(), pts = [];
      var n = l.tagName === 'line' ? [l.x1.baseVal.value, l.y1.baseVal.value, l.x2.baseVal.value, l.y2.baseVal.value]
                                   : l.getAttribute('d').match(/-?[0-9.]+/g).map(Number);
      for (var i = 0; i + 1 < n.length; i += 2) {
        var pt = svg.createSVGPoint(); pt.x = n[i]; pt.y = n[i + 1]; pts.push(pt.matrixTransform(m));
      }
      for (var k = 0; k + 1 < pts.length; k++)
        if (hits(pts[k], pts[k + 1], b)) { res.crosses.push(l.getAttribute('class') || l.parentNode.getAttribute('class')); break; }
    });
    out.oom.push(res);
  });
  var dn = document.getElementById('vw-data'), data = dn ? JSON.parse(dn.textContent).panels : [];
  [].slice.call(svg.querySelectorAll('g.panel')).forEach(function (pg) {
    if (!data.length) return;
    var P = data[+pg.getAttribute('data-panel')];
    pg.scrollIntoView({block: 'center'});  // the browser finds what is under a point on screen only
    [0.37, 0.5, 0.91].forEach(function (f) {
      var pt = svg.createSVGPoint(); pt.x = P.x0 + f * (P.x1 - P.x0); pt.y = P.y0 + 0.5 * (P.y1 - P.y0);
      var q = pt.matrixTransform(pg.getScreenCTM());
      out.hover.push(window.vramwatchHover(q.x, q.y));
    });
  });
  var fr = document.querySelector('.flame .frame');
  if (fr) { fr.scrollIntoView({block: 'center'}); var b = fr.getBoundingClientRect();
            out.flame = window.vramwatchHover(b.left + 2, b.top + b.height / 2); }
  var pre = document.createElement('pre'); pre.id = 'vw-check'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""

SIZES = ((1400, 1000), (820, 620))
OOM_NEAR = 40  # px of the picture from the out-of-memory cross's middle to its label's box


def chromium_path(opts):
    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if chromium:
        return chromium
    if os.environ.get("VRAMWATCH_ALLOW_SKIP") == "1":
        return None
    raise Failed("chromium is not installed (Debian: apt-get install chromium; tools/install-deps.sh --tests "
                 "installs it). Set VRAMWATCH_ALLOW_SKIP=1 to skip this test on a machine without it.")


def chromium_cmd(chromium, tmp, size):
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--user-data-dir=" + os.path.join(tmp, "profile"), "--window-size=%d,%d" % size]


def dom_check(opts, chromium, tmp, page, size, what):
    """The page with CHECK_JS added, loaded in Chromium: the browser's own text boxes, and what
    hovering shows, read back from the DOM it dumps."""
    with open(page, encoding="utf-8") as f:
        html = f.read()
    checked = page[:-5] + ".check.html"
    with open(checked, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", CHECK_JS + "</body>"))
    p = subprocess.run(chromium_cmd(chromium, tmp, size) + ["--virtual-time-budget=3000", "--dump-dom",
                                                            "file://" + checked],
                       capture_output=True, timeout=120, env=dict(env(), HOME=tmp))
    dom = p.stdout.decode("utf-8", "replace")
    m = re.search(r'<pre id="vw-check">(.*?)</pre>', dom, re.S)
    check(p.returncode == 0 and m, "%s: chromium gave no result (exit %d): %s" %
          (what, p.returncode, p.stderr.decode("utf-8", "replace")[-1500:]))
    return json.loads(html_lib.unescape(m.group(1)))


def group_render(opts):
    chromium = chromium_path(opts)
    if not chromium:
        print("cannot run: no chromium (skipped, VRAMWATCH_ALLOW_SKIP=1)", file=sys.stderr)
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vramwatch-timeline-render-")
    shots = opts.shots or tmp
    os.makedirs(shots, exist_ok=True)
    try:
        # Screenshots at two sizes: a real plot each time (not blank; axis, live line, capacity).
        src = os.path.join(opts.data, "leak-markers.json")
        for ext in ("svg", "html"):
            pic = os.path.join(tmp, "t." + ext)
            r = run(opts, ["timeline", "-o", pic, src])
            check(r.returncode == 0, "%s: exit %d" % (ext, r.returncode))
            for size in SIZES:
                png = os.path.join(shots, "leak-markers-%s-%dx%d.png" % (ext, size[0], size[1]))
                p = subprocess.run(chromium_cmd(chromium, tmp, size) + ["--screenshot=" + png, "file://" + pic],
                                   capture_output=True, timeout=120, env=dict(env(), HOME=tmp))
                check(p.returncode == 0 and os.path.exists(png),
                      "chromium failed on the %s (exit %d): %s" % (ext, p.returncode, p.stderr.decode("utf-8", "replace")[-2000:]))
                total, c = colour_counts(png)
                print("%s %dx%d: %d pixels, %s" % (ext, size[0], size[1], total, c))
                check(c["nonwhite"] > total * 0.10, "%s: the screenshot is nearly blank: %s" % (ext, c))
                check(c["dark"] > 2000, "%s: no axes or labels drawn: %s" % (ext, c))
                check(c["live"] > 300, "%s: no live-memory line drawn: %s" % (ext, c))
                check(c["red"] > 300, "%s: no capacity line drawn: %s" % (ext, c))
        # Every recorded report, the job and the runs at other settings, as HTML, at both sizes: no
        # text over another, over the capacity line (or, where the plot leaves room, a marker line)
        # or off the picture; hover anywhere on a plot shows the figures and the nearest event.
        cases = [(name[:-5], [os.path.join(opts.data, name)]) for name in fixtures(opts)]
        cases.append(("job", [os.path.join(opts.data, "..", "job", "rank%d.json" % i) for i in (0, 1)]))
        cases.append(("runs", [os.path.join(opts.data, "..", "runs", "b%d.json" % b) for b in (32, 64)]))
        for base, srcs in cases:
            page = os.path.join(tmp, base + ".html")
            r = run(opts, ["timeline", "-o", page] + srcs)
            check(r.returncode == 0, "%s: exit %d %s" % (base, r.returncode, r.stderr))
            for size in SIZES:
                what = "%s at %dx%d" % (base, size[0], size[1])
                png = os.path.join(shots, "%s-%dx%d.png" % (base, size[0], size[1]))
                subprocess.run(chromium_cmd(chromium, tmp, size) + ["--screenshot=" + png, "file://" + page],
                               capture_output=True, timeout=120, env=dict(env(), HOME=tmp))
                out = dom_check(opts, chromium, tmp, page, size, what)
                check(out["texts"] > 10, "%s: only %d texts drawn" % (what, out["texts"]))
                check(not out["overlaps"], "%s: labels overlap: %s" % (what, out["overlaps"][:5]))
                check(not out["outside"], "%s: labels off the picture: %s" % (what, out["outside"][:5]))
                check(not out["capacity"], "%s: labels over the capacity line: %s" % (what, out["capacity"]))
                # 37 markers leave no gap wide enough for every label; the recorded runs are a few
                # milliseconds long, their peaks a pixel or two from a marker (each alone, too)
                if base not in ("crowded-markers", "runs"):
                    check(not out["marker_lines"], "%s: labels over a marker line: %s" % (what, out["marker_lines"]))
                # the out-of-memory label beside its cross, clear of every drawn line
                for lab in out["oom"]:
                    check(not lab["crosses"], "%s: the label %r crosses %s" % (what, lab["t"], lab["crosses"]))
                    check(lab["dist"] <= OOM_NEAR, "%s: the label %r is %.0f px from its cross" % (what, lab["t"], lab["dist"]))
                if base.startswith("oom-"):
                    check(out["oom"], "%s: no out-of-memory label" % what)
                check(out["hover"], "%s: no plot to hover" % what)
                for tip in out["hover"]:
                    check(tip and all(k in tip for k in ("live ", "reserved ", "untracked ")),
                          "%s: hovering the plot shows %r" % (what, tip))
                    check("nearest event, at " in tip, "%s: hover without the nearest event: %r" % (what, tip))
                check(out.get("flame") and "% of the graph" in out["flame"],
                      "%s: hovering a flame graph's frame shows %r" % (what, out.get("flame")))
                if base.startswith("oom-"):
                    check(any("\n    " in tip and "train_sim.py:" in tip for tip in out["hover"]),
                          "%s: hover without the event's call chain: %r" % (what, out["hover"]))
            print("%s: labels clear at %s, hover: %r" % (base, " and ".join("%dx%d" % s for s in SIZES),
                                                          out["hover"][0].split("\n")[:5]))
        print("screenshots in %s" % shots)
    finally:
        shutil.rmtree(tmp)


# ---- flame graphs in standard formats: collapsed stacks and speedscope ----

# Frames above the application's first (the process's entry, the interpreter's) that the
# recorded reports hold and the default output leaves out.
HIDDEN = ("_start (", "__libc_start_main (", "Py_RunMain (", "Py_BytesMain (", "PyEval_EvalCode (")


def collapsed_lines(text, what):
    """Collapsed stacks as (frames, count): one line per call chain, the count the last field."""
    out = []
    check(text.endswith("\n") or text == "", "%s: the last line is not ended" % what)
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        check(stack and count.isdigit() and int(count) > 0, "%s: not 'frames count': %r" % (what, line))
        frames = stack.split(";")
        check(all(frames), "%s: an empty frame in %r" % (what, line))
        out.append((frames, int(count)))
    stacks = [";".join(f) for f, _ in out]
    check(len(set(stacks)) == len(stacks), "%s: a call chain on two lines" % what)
    return out


def collapsed(opts, args, what):
    r = run(opts, ["timeline", "--format=collapsed"] + args)
    check(r.returncode == 0 and r.stderr == b"", "%s: exit %d %s" % (what, r.returncode, r.stderr))
    return collapsed_lines(r.stdout.decode("utf-8"), what)


def report_figures(path):
    """The report's own totals: the devices' peaks added up, and the live memory at the latest
    out-of-memory failure (None without one)."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    oom = [f for f in d["failures"] if f["oom"]]
    return sum(x["peak_live_bytes"] for x in d["devices"]), oom[-1]["live_bytes_at_failure"] if oom else None


def check_speedscope(opts, path, what):
    """A speedscope file: valid by our schema of the format (tests/timeline/speedscope.schema.json,
    through the report validator's --schema), and what a schema cannot say. Its profiles."""
    schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speedscope.schema.json")
    r = subprocess.run([sys.executable, opts.validator, "--schema", schema, path], capture_output=True)
    if r.returncode == SKIP:
        not_checked(opts, "speedscope files against the schema (no python3 jsonschema module)")
    else:
        check(r.returncode == 0, "%s: %s%s" % (what, r.stdout.decode(), r.stderr.decode()))
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    frames = doc["shared"]["frames"]
    for p in doc["profiles"]:
        check(len(p["samples"]) == len(p["weights"]), "%s: %s: a weight per sample" % (what, p["name"]))
        check(all(0 <= i < len(frames) for s in p["samples"] for i in s), "%s: a frame index out of range" % what)
        check(p["endValue"] == sum(p["weights"]), "%s: %s: endValue is not the weights' sum" % (what, p["name"]))
    check(doc.get("activeProfileIndex", 0) < len(doc["profiles"]), "%s: activeProfileIndex out of range" % what)
    return doc


def group_stacks(opts):
    """Collapsed stacks and speedscope's JSON of what was live at the peak and at the failure: the
    lines add up to the report's own figures, frames above the application's first hidden unless
    --full, a job's processes named in the root frame, names escaped, errors in one line."""
    tmp = tempfile.mkdtemp(prefix="vramwatch-stacks-")
    try:
        for name in ("oom-fragmented.json", "peak-sites.json", "../runs/b32.json", "../runs/b64.json"):
            src = os.path.join(opts.data, name)
            peak, failure = report_figures(src)
            lines = collapsed(opts, ["--at=peak", src], name)
            check(sum(c for _, c in lines) == peak, "%s: the peak's lines add up to %d, the devices' peaks to %d"
                  % (name, sum(c for _, c in lines), peak))
            check(not any(h in fr for f, _ in lines for fr in f for h in HIDDEN),
                  "%s: frames above the application's first by default: %r" % (name, lines[0][0][:3]))
            check(all("(" in f[0] and ".py:" in f[0] for f, _ in lines), "%s: a chain not from a Python line: %r"
                  % (name, [f[0] for f, _ in lines]))
            full = collapsed(opts, ["--at=peak", "--full", src], name + " --full")
            check(sum(c for _, c in full) == peak, "%s --full: the lines do not add up" % name)
            check(all(f[0] == "_start (python3)" and any(fr.startswith("Py_RunMain (") for fr in f) for f, _ in full),
                  "%s --full: the process's entry is not the root: %r" % (name, full[0][0][:3]))
            # By default a chain is the full one from the application's first frame, less the
            # interpreter's own frames between the Python lines (and never fewer than its leaf).
            def shown(chain):
                return [fr for k, fr in enumerate(chain)
                        if k == len(chain) - 1 or not re.search(r"\((python[0-9.]*|libpython[^)]*)\)$|^(python[0-9.]*|libpython[^+]*)\+0x", fr)]
            check(all(shown(f)[-len(g):] == g for (f, _), (g, _) in zip(sorted(full, key=lambda x: x[0][-1]),
                                                                         sorted(lines, key=lambda x: x[0][-1]))),
                  "%s: --full is not the same chains with their outer and the interpreter's frames" % name)
            check(not any(re.search(r"\((libpython[^)]*|python3)\)$|^libpython", fr) for f, _ in lines for fr in f[:-1]),
                  "%s: an interpreter frame between the Python lines by default: %r" % (name, lines[0][0]))
            if failure is not None:
                at_failure = collapsed(opts, ["--at=failure", src], name + " --at=failure")
                check(sum(c for _, c in at_failure) == failure, "%s: the failure's lines add up to %d, not %d"
                      % (name, sum(c for _, c in at_failure), failure))
                check(collapsed(opts, [src], name) == at_failure, "%s: the default is not the failure" % name)
            else:
                check(collapsed(opts, [src], name) == lines, "%s: without a failure the default is not the peak" % name)
                line = one_line_error(run(opts, ["timeline", "--format=collapsed", "--at=failure", src]),
                                      name + " --at=failure")
                check("no out-of-memory failure" in line, "%s --at=failure: %s" % (name, line))
        src = os.path.join(opts.data, "oom-fragmented.json")
        want = run(opts, ["timeline", "--format=collapsed", src]).stdout
        for out in ("x.collapsed", "x.folded"):
            r = run(opts, ["timeline", "-o", os.path.join(tmp, out), src])
            check(r.returncode == 0 and r.stdout == b"" and r.stderr == b"", "-o %s: exit %d %s" % (out, r.returncode, r.stderr))
            with open(os.path.join(tmp, out), "rb") as f:
                check(f.read() == want, "-o %s differs from --format=collapsed" % out)
        # speedscope: a profile at the peak and one at the failure, the failure's opened first
        ss = os.path.join(tmp, "x.speedscope.json")
        r = run(opts, ["timeline", "-o", ss, src])
        check(r.returncode == 0 and r.stderr == b"", "-o x.speedscope.json: exit %d %s" % (r.returncode, r.stderr))
        doc = check_speedscope(opts, ss, "oom-fragmented speedscope")
        names = [p["name"] for p in doc["profiles"]]
        check(names == ["live at the peak", "live at the out-of-memory failure (GPU 0)"], "speedscope profiles %r" % names)
        check(doc["activeProfileIndex"] == 1, "speedscope opens on %r" % doc.get("activeProfileIndex"))
        peak, failure = report_figures(src)
        check([p["endValue"] for p in doc["profiles"]] == [peak, failure], "speedscope totals %r"
              % [p["endValue"] for p in doc["profiles"]])
        fnames = [f["name"] for f in doc["shared"]["frames"]]
        check(not any(h in n for n in fnames for h in HIDDEN), "speedscope: hidden frames by default")
        check(any(n.startswith("CachingAllocator.malloc (examples/train_sim.py:") for n in fnames) and
              "ffi_call (libffi.so.8)" in fnames, "speedscope: Python and native frames named %r" % fnames[:6])
        r = run(opts, ["timeline", "--format=speedscope", "--full", "--at=peak", src])
        check(r.returncode == 0, "speedscope --full --at=peak: exit %d %s" % (r.returncode, r.stderr))
        with open(ss, "wb") as f:
            f.write(r.stdout)
        doc = check_speedscope(opts, ss, "speedscope --full --at=peak")
        check(len(doc["profiles"]) == 1 and "_start (python3)" in [f["name"] for f in doc["shared"]["frames"]],
              "speedscope --full --at=peak: %r" % [p["name"] for p in doc["profiles"]])
        stacks_job(opts, tmp)
        stacks_names(opts, tmp)
        stacks_html(opts, tmp)
        stacks_usage(opts)
    finally:
        shutil.rmtree(tmp)


def stacks_job(opts, tmp):
    """A job's reports: each process named in the root frame, its lines adding up to its own."""
    paths, totals = [], {}
    for i in (0, 1):
        with open(os.path.join(opts.data, "..", "job", "rank%d.json" % i), encoding="utf-8") as f:
            d = json.load(f)
        # recorded before the figures at the peak were kept: give each site its live bytes
        for cs in d["callsites"]:
            cs["live_bytes_at_peak"] = cs["live_bytes"]
        totals["rank %d" % i] = sum(cs["live_bytes"] for cs in d["callsites"])
        paths.append(os.path.join(tmp, "rank%d.json" % i))
        with open(paths[-1], "w", encoding="utf-8") as f:
            json.dump(d, f)
    lines = collapsed(opts, paths[::-1], "job")
    got = {}
    for frames, count in lines:
        m = re.match(r"(rank \d) \(", frames[0])
        check(m and len(frames) > 1, "job: the root frame does not name the rank: %r" % frames[0])
        got[m.group(1)] = got.get(m.group(1), 0) + count
    check(got == totals, "job: per rank %r, expected %r" % (got, totals))
    check([f[0] for f, _ in lines] == sorted(f[0] for f, _ in lines), "job: lines not in order")
    ss = os.path.join(tmp, "job.speedscope.json")
    r = run(opts, ["timeline", "-o", ss] + paths)
    check(r.returncode == 0, "job speedscope: exit %d %s" % (r.returncode, r.stderr))
    doc = check_speedscope(opts, ss, "job speedscope")
    names = [p["name"] for p in doc["profiles"]]
    check(len(names) == 2 and names[0].startswith("rank 0 (") and names[1].startswith("rank 1 (") and
          all(n.endswith(": live at the peak") for n in names), "job speedscope profiles %r" % names)
    line = one_line_error(run(opts, ["timeline", "--format=collapsed", "--at=failure"] + paths), "job --at=failure")
    check("none of these reports" in line, "job --at=failure: %s" % line)


def stacks_names(opts, tmp):
    """Names the collapsed format cannot hold as they are (';' separates frames, a newline ends the
    line), and a C program's chain from its main, without the C runtime and _start above it."""
    with open(os.path.join(opts.data, "peak-sites.json"), encoding="utf-8") as f:
        d = json.load(f)
    cs = d["callsites"][0]
    py = [fr for fr in cs["frames"] if fr["kind"] == "python"]
    py[0]["function"] = "odd;name\nnext line"
    app = "/opt/app/bin/trainer"
    native = [{"kind": "native", "module": "/usr/lib/libcudart.so.12", "symbol": "cudaMalloc", "offset": 64, "symbol_offset": 4},
              {"kind": "native", "module": app, "symbol": "grow_pool(unsigned long)", "offset": 4096, "symbol_offset": 16},
              {"kind": "native", "module": app, "symbol": "main", "offset": 5000, "symbol_offset": 40},
              {"kind": "native", "module": "/usr/lib/x86_64-linux-gnu/libc.so.6", "symbol": "__libc_start_main", "offset": 9, "symbol_offset": 1},
              {"kind": "native", "module": app, "symbol": "_start", "offset": 100, "symbol_offset": 32}]
    d["callsites"][1]["frames"] = native
    p = os.path.join(tmp, "names.json")
    with open(p, "w", encoding="utf-8") as f:
        json.dump(d, f)
    r = run(opts, ["timeline", "--format=collapsed", "--at=peak", p])
    check(r.returncode == 0, "names: exit %d %s" % (r.returncode, r.stderr))
    text = r.stdout.decode("utf-8")
    lines = collapsed_lines(text, "names")
    want = sum(c.get("live_bytes_at_peak", 0) for c in d["callsites"])
    check(sum(c for _, c in lines) == want, "names: the lines add up to %d, not %d" % (sum(c for _, c in lines), want))
    check(any(fr.startswith("odd:name\\x0anext line (") for f, _ in lines for fr in f),
          "names: ';' and the newline not escaped: %r" % text[:300])
    if d["callsites"][1].get("live_bytes_at_peak"):
        check(["main (trainer)", "grow_pool (trainer)", "cudaMalloc (libcudart.so.12)"] in [f for f, _ in lines],
              "names: the C program's chain is not from its main: %r" % [f for f, _ in lines])


def stacks_html(opts, tmp):
    """The HTML's flame graphs take the same default: hidden frames said in the page, --full shows them."""
    src = os.path.join(opts.data, "oom-fragmented.json")
    for args, hidden in (([], False), (["--full"], True)):
        out = os.path.join(tmp, "x.html")
        r = run(opts, ["timeline", "-o", out] + args + [src])
        check(r.returncode == 0, "html %r: exit %d %s" % (args, r.returncode, r.stderr))
        with open(out, encoding="utf-8") as f:
            page = f.read()
        flames = page[page.index('<div class="flames">'):]
        check(("&gt;_start (" in flames or ">_start (" in flames) == hidden, "html %r: _start in the flame graphs: %s"
              % (args, not hidden))
        check(("--full" in flames and "hidden" in flames) != hidden, "html %r: the note on hidden frames" % args)
        check_flames("oom-fragmented.json", page)


def stacks_usage(opts):
    src = os.path.join(opts.data, "oom-fragmented.json")
    for args, want in ((["--format=collapsed", "--at=sometime"], "peak or failure"),
                       (["--at=peak"], "--at is for"), (["--format=svg", "--at=peak"], "--at is for"),
                       (["--format=trace", "--full"], "--full is for"), (["--full"], "--full is for"),
                       (["-o", "/tmp/x.speedscope"], ".speedscope.json"),
                       (["--format=collapsed", "-o", "/tmp/x.speedscope.json"], "the name says")):
        line = one_line_error(run(opts, ["timeline"] + args + [src]), " ".join(args))
        check(want in line, "%s: %s" % (" ".join(args), line))
    line = one_line_error(run(opts, ["timeline", "--format=collapsed", os.path.join(opts.data, "oom-b64.json")]),
                          "a report without the figures")
    check("earlier version" in line, "oom-b64: %s" % line)


def group_flamegraph(opts):
    """flamegraph.pl (Brendan Gregg's FlameGraph) draws our collapsed stacks as an SVG. Not in
    Debian bookworm: skipped where it is not on the PATH."""
    tool = shutil.which("flamegraph.pl")
    if not tool:
        return skip_group("flamegraph.pl is not installed (no Debian bookworm package has it)")
    src = os.path.join(opts.data, "oom-fragmented.json")
    r = run(opts, ["timeline", "--format=collapsed", src])
    check(r.returncode == 0, "collapsed: exit %d" % r.returncode)
    svg = subprocess.run([tool, "--countname=bytes"], input=r.stdout, capture_output=True, timeout=60)
    check(svg.returncode == 0 and b"<svg" in svg.stdout, "flamegraph.pl: exit %d %s" % (svg.returncode, svg.stderr[:300]))
    check(b"CachingAllocator.malloc" in svg.stdout, "flamegraph.pl's SVG lacks our frames")


def skip_group(reason):
    print("skipped: " + reason, file=sys.stderr)
    return SKIP


GROUPS = {"golden": group_golden, "usage": group_usage, "long": group_long, "trace": group_trace,
          "terminal": group_terminal, "runs": group_runs,
          "render": group_render, "stacks": group_stacks, "flamegraph": group_flamegraph}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--long-run", required=True)
    ap.add_argument("--validator", required=True)
    ap.add_argument("--shots", help="where the render group leaves its screenshots (default: nowhere kept)")
    ap.add_argument("--timed", action="store_true",
                    help="the long group also checks that each view is drawn in under a second: a benchmark, not a test")
    ap.add_argument("group", choices=sorted(GROUPS))
    opts = ap.parse_args()
    opts.not_checked = []
    try:
        rc = GROUPS[opts.group](opts)
    except Failed as e:
        print("FAIL:", e)
        return 1
    if not rc and opts.not_checked:
        print("%s: skipped (exit 77), not a pass: %d check(s) could not run here; every other one passed"
              % (opts.group, len(opts.not_checked)), file=sys.stderr)
        return SKIP
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
