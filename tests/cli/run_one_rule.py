#!/usr/bin/python3
"""One report, every view: report, timeline, the Leak: line and advise name the same call site
and speak of the same device (the model's one rule for each, tools/vramwatch/model/model.h).

Usage: run_one_rule.py --vramwatch EXE --data DIR

The fixtures are recorded reports made to tell the rules apart:
  one-rule-oom.json   the failing call site passes through PyTorch's own Python code
                      (torch/nn/modules/conv.py) before the user's line, train_sim.py:68
  one-rule-leak.json  the leaking call site likewise (train_sim.py:189 under conv.py), and two
                      devices: device 0 peaks highest in live memory (16 GiB card), device 1 in
                      reserved memory (24 GiB card, its pool holding cache)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed, check, clean_env  # noqa: E402


def run(opts, args):
    env = clean_env(dict(LC_ALL="C", TERM="dumb", NO_COLOR="1"), keep_preload=True)
    r = subprocess.run([opts.vramwatch] + args, capture_output=True, cwd=opts.data, env=env,
                       timeout=60)
    # report and advise exit 1 on a report of a problem (an out-of-memory): still a view
    check(r.returncode in (0, 1) and r.stderr == b"",
          "%s: exit %d, stderr %s" % (" ".join(args), r.returncode, r.stderr.decode()))
    return r.stdout.decode()


def site_key(text):
    """A call site's name as the frame it names: a Python frame's file by its base name (the
    report gives the path from the working folder, annotations the file's name), else as is."""
    m = re.match(r"^(.*):(\d+) in (.*)$", text.strip())
    if m:
        return "%s:%s in %s" % (os.path.basename(m.group(1)), m.group(2), m.group(3))
    return text.strip()


def one_line(out, pattern, what):
    found = [m for m in (re.search(pattern, l) for l in out.splitlines()) if m]
    check(len(found) == 1, "%s: expected one line matching %r, found %d in:\n%s"
          % (what, pattern, len(found), out))
    return found[0]


def names_of_oom(opts, name):
    """What report (its lead line and the first frame it lists under "called from") and the
    terminal timeline (its out-of-memory line) call the failing site."""
    rep = run(opts, ["report", name])
    lead = one_line(rep, r"^Out of memory at (.*)$", "report " + name).group(1)
    lines = rep.splitlines()
    first = lines[lines.index("  called from") + 1].strip()
    tl = run(opts, ["timeline", name])
    label = one_line(tl, r"^Out of memory .* from (.*)$", "timeline " + name).group(1)
    return {"report lead": lead, "report called from": first, "timeline": label}


def leak_of(out, what):
    m = one_line(out, r"^Leak: .* from (.*?); (at this rate the (\S+ \S+) card|the card)", what)
    return m.group(1), m.group(3)


def check_same(names, expected):
    keys = {view: site_key(text) for view, text in names.items()}
    check(set(keys.values()) == {expected},
          "the views name different call sites (expected %r everywhere): %r" % (expected, names))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    try:
        # An out-of-memory reached through PyTorch's Python code: the user's line, everywhere.
        check_same(names_of_oom(opts, "one-rule-oom.json"),
                   "train_sim.py:68 in CachingAllocator._cuda_malloc")

        # The same report with Python frames off: the native frames alone name one frame too.
        with open(os.path.join(opts.data, "one-rule-oom.json")) as f:
            doc = json.load(f)
        for cs in doc["callsites"]:
            cs["frames"] = [fr for fr in cs["frames"] if fr["kind"] == "native"]
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, dir=None)
        try:
            json.dump(doc, tmp)
            tmp.close()
            names = names_of_oom(opts, tmp.name)
            check(len(set(names.values())) == 1,
                  "native frames only: the views name different frames: %r" % names)
        finally:
            os.unlink(tmp.name)

        # A leak: the Leak: line of report and of timeline, and the report's table row.
        rep = run(opts, ["report", "one-rule-leak.json"])
        tl = run(opts, ["timeline", "one-rule-leak.json"])
        site, card = leak_of(rep, "report's Leak line")
        tl_site, tl_card = leak_of(tl, "timeline's Leak line")
        row = one_line(rep, r"^\s+\S+ \S+\s+\S+%\s+\d+\s+(\S*train_sim\.py:189 in .*)$",
                       "report's table row of the leaking site").group(1)
        check_same({"report Leak": site, "timeline Leak": tl_site, "report table": row},
                   "train_sim.py:189 in main")

        # The leak's projection and the advice speak of one device: advise's card is the one
        # the Leak line projects onto, in its text and in its JSON.
        adv = json.loads(run(opts, ["advise", "--json", "one-rule-leak.json"]))
        capacity = adv["device"]["capacity_bytes"]
        gib = "%.2f GiB" % (capacity / (1 << 30))
        check(card == gib and tl_card == gib,
              "the Leak line projects onto a %s card (timeline: %s), advise speaks of device %s "
              "with %s" % (card, tl_card, adv["device"]["ordinal"], gib))
        notes = [x["note"] for x in adv["recommendations"] if x["kind"] == "leak"]
        check(len(notes) == 1 and ("the %s card" % gib) in notes[0],
              "advise's leak recommendation is about another card than its device: %r" % notes)
        text = run(opts, ["advise", "one-rule-leak.json"])
        check(("Device %d: capacity %s" % (adv["device"]["ordinal"], gib)) in text,
              "advise's text names another device than its JSON:\n" + text)
    except Failed as e:
        print("FAIL: %s" % e, file=sys.stderr)
        return 1
    print("report, timeline, the Leak line and advise agree on the call site and the device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
