#!/usr/bin/python3
"""Checks a file that `vramwatch timeline -o X.trace.json` wrote against the Trace Event Format
(the JSON object form read by chrome://tracing, Perfetto and PyTorch's profiler), and against the
report it was drawn from.

Usage: check_trace.py TRACE.json REPORT.json [REPORT.json...]   (exit 0: good, 1: what is wrong)

The format's rules checked (as its specification states them):
- the file is strict JSON (no NaN, no trailing commas): one object with a "traceEvents" array;
  "displayTimeUnit", when present, is "ms" or "ns"; any other top-level key is allowed;
- every event is an object with "ph" (one character, a phase the format defines), "name"
  (string), "pid" and "tid" (integers); "args", when present, is an object; "cat", when present,
  a string;
- every event but metadata ("M") has "ts", a number in microseconds;
- counters ("C"): every value in "args" is a number (each key is one series);
- instants ("i"/"I"): "s", when present, is "g", "p" or "t";
- metadata ("M"): "process_name"/"thread_name" carry args.name (string), "process_sort_index"/
  "thread_sort_index" carry args.sort_index (integer), "process_labels" args.labels (string).
And what vramwatch promises beside (docs/timeline.md): per device a "GPU d live" / "reserved"
counter in time order whose largest value is the report's peak, each marker once at its exact
time, each failure on its thread with its size and its whole call chain, a process_name for every
report's process, baseTimeNanoseconds a Unix time in ns with ts relative to it (or, for runs of one
script at other settings, to the run's own base_time_ns in otherData.runs).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import Failed  # noqa: E402

PHASES = set("BEXiICbnestfPNODM()RcSTpF")  # the phases the format defines (S, T, p, F, I: deprecated)
META = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}


def need(cond, what):
    if not cond:
        raise Failed(what)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


def reject_constant(name):
    raise Failed("not strict JSON: %s" % name)


def check_format(doc):
    need(isinstance(doc, dict), "the top level is not an object (the JSON object form)")
    need(isinstance(doc.get("traceEvents"), list), "no traceEvents array")
    if "displayTimeUnit" in doc:
        need(doc["displayTimeUnit"] in ("ms", "ns"), "displayTimeUnit %r" % doc["displayTimeUnit"])
    for n, e in enumerate(doc["traceEvents"]):
        where = "traceEvents[%d]" % n
        need(isinstance(e, dict), where + " is not an object")
        ph = e.get("ph")
        need(isinstance(ph, str) and len(ph) == 1 and ph in PHASES, "%s: ph %r" % (where, ph))
        need(isinstance(e.get("name"), str), where + ": name is not a string")
        need(is_int(e.get("pid")), where + ": pid is not an integer")
        need(is_int(e.get("tid")), where + ": tid is not an integer")
        if "cat" in e:
            need(isinstance(e["cat"], str), where + ": cat is not a string")
        if "args" in e:
            need(isinstance(e["args"], dict), where + ": args is not an object")
        if ph != "M":
            need(is_num(e.get("ts")), where + ": ts is not a number")
        if ph == "C":
            need(e.get("args"), where + ": a counter without values")
            for k, v in e["args"].items():
                need(is_num(v), "%s: counter value %s is not a number" % (where, k))
        if ph in ("i", "I") and "s" in e:
            need(e["s"] in ("g", "p", "t"), "%s: instant scope %r" % (where, e["s"]))
        if ph == "M":
            need(e["name"] in META, "%s: unknown metadata %r" % (where, e["name"]))
            a = e.get("args", {})
            if e["name"].endswith("_name"):
                need(isinstance(a.get("name"), str), where + ": metadata without args.name")
            elif e["name"].endswith("_sort_index"):
                need(is_int(a.get("sort_index")), where + ": metadata without args.sort_index")
            else:
                need(isinstance(a.get("labels"), str), where + ": metadata without args.labels")


def check_content(doc, reports):
    base = doc.get("baseTimeNanoseconds")
    need(is_int(base) and base > 10 ** 18, "baseTimeNanoseconds %r is not a Unix time in ns" % base)
    events = doc["traceEvents"]
    names = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    pids = {e["pid"] for e in names}
    need(len(names) == len(reports) and len(pids) == len(reports),
         "%d process_name events for %d reports" % (len(names), len(reports)))

    # Runs of one script at other settings are each on their own time axis: their events are
    # relative to their own start, named per process in otherData.runs.
    run_base = {x["pid"]: x["base_time_ns"] for x in doc.get("otherData", {}).get("runs", [])}
    for b in run_base.values():
        need(is_int(b) and b > 10 ** 18, "otherData.runs: base_time_ns %r is not a Unix time in ns" % b)
    pid_now = [None]

    def us(t_ns):
        return (t_ns - run_base.get(pid_now[0], base)) / 1000.0

    counters = {}
    for e in events:
        if e["ph"] == "C":
            counters.setdefault((e["pid"], e["name"]), []).append(e)
    for (pid, name), evs in counters.items():
        ts = [e["ts"] for e in evs]
        need(ts == sorted(ts), "counter %s of pid %d is not in time order" % (name, pid))
    for r in reports:
        pid = r["process"]["pid"]
        pid_now[0] = pid
        need(pid in pids, "no process_name for pid %d" % pid)
        for d in r["timeline"]["devices"]:
            dev = "?" if d["ordinal"] is None else str(d["ordinal"])
            live = [k for k in counters if k[1] == "GPU %s live" % dev and k[0] == pid]
            need(live, "no live counter for device %s" % dev)
            res = [k for k in counters if k[1] == "GPU %s reserved" % dev and k[0] == pid]
            need(res, "no reserved counter for device %s" % dev)
            top = max(b["live_max"] for b in d["buckets"]) if d["buckets"] else 0
            most = max(max(e["args"]["bytes"] for e in counters[k]) for k in live)
            need(most == top, "device %s: the live counter's most is %d, the timeline's %d" % (dev, most, top))
            first = min(min(e["ts"] for e in counters[k]) for k in live)
            need(abs(first - us(d["start_unix_ns"])) < 0.0015 or first >= us(d["start_unix_ns"]),
                 "device %s: the live counter starts before the device's first allocation" % dev)
        markers = [e for e in events if e["ph"] == "i" and e.get("cat") == "vramwatch.marker" and
                   e["pid"] == pid]
        need(len(markers) == len(r["markers"]), "%d marker events for %d markers" % (len(markers), len(r["markers"])))
        for m, e in zip(r["markers"], markers):
            need(e["name"] == m["label"], "marker %r named %r" % (m["label"], e["name"]))
            need(abs(e["ts"] - us(m["time_unix_ns"])) < 0.0015, "marker %r at %r, expected %r" %
                 (m["label"], e["ts"], us(m["time_unix_ns"])))
            need(e.get("s") in ("p", "g"), "marker %r is not process-wide" % m["label"])
        fails = [e for e in events if e["ph"] == "i" and e.get("cat") == "vramwatch.failure" and
                 e["pid"] == pid]
        need(len(fails) == len(r["failures"]), "%d failure events for %d failures" % (len(fails), len(r["failures"])))
        sites = {c["id"]: c for c in r["callsites"]}
        for f, e in zip(sorted(r["failures"], key=lambda f: f["time_unix_ns"]),
                        sorted(fails, key=lambda e: e["ts"])):
            a = e["args"]
            need(a["size_bytes"] == f["size"] and a["api"] == f["api"], "failure args %r" % a)
            need(e["tid"] == f["thread"] and e.get("s") == "t", "failure not on its thread %d" % f["thread"])
            chain = a.get("call_chain")
            need(isinstance(chain, list) and all(isinstance(x, str) for x in chain), "failure without a call chain")
            want = len(sites[f["callsite"]]["frames"]) if f["callsite"] in sites else 0
            need(len(chain) == want, "call chain of %d frames, the call site has %d" % (len(chain), want))
            need(isinstance(a.get("call_site"), str) and a["call_site"], "failure without its call site")


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            doc = json.load(f, parse_constant=reject_constant)
        reports = []
        for p in argv[2:]:
            with open(p, encoding="utf-8") as f:
                d = json.load(f)
            if d.get("schema") == "vramwatch.job/1":
                reports += [p["report"] for p in d["processes"]]
            else:
                reports.append(d)
        check_format(doc)
        check_content(doc, reports)
    except (Failed, ValueError, KeyError, TypeError) as e:
        print("FAIL: %s: %s" % (argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
