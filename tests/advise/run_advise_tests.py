#!/usr/bin/env python3
"""Tests of `vramwatch advise` on recorded reports: exact expected output (golden), and bad
usage or input (exit 2 with one line on stderr, nothing on stdout).

    run_advise_tests.py --vramwatch BUILD/tools/vramwatch/vramwatch --data DIR --golden DIR
                        --cli-data DIR {golden,usage,schema} [--update]

The schema group validates every golden case's --json output against docs/advice.schema.json
with the jsonschema module (exit 77, skipped, saying why on stderr, when it is not installed).

Golden files are compared by tests/lib/vwtest.py; VRAMWATCH_UPDATE_GOLDEN=1 rewrites them instead,
as in every runner, and --update is the same switch.
"""
import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import vwtest  # noqa: E402
from vwtest import SKIP, compare_or_update, request_update  # noqa: E402

# name: (arguments after "advise"; data files are relative to --data)
GOLDEN = {
    "yolov9-oom-b64": ["yolov9-oom-b64.json"],
    "yolov9-bound": ["yolov9-oom-b64-nomarkers.json"],
    "observe-b64": ["observe-b64.json"],
    "runs-16-32": ["run-b16.json", "run-b32.json"],
    "hf-fragmented": ["hf-fragmented.json"],
    "observe-target": ["--target", "24GiB", "--headroom", "20", "observe-b64.json"],
    "validation-oom": ["val-oom-b44.json"],
    "fragmented": ["--target", "16GiB", "fragmented-b16.json"],
    "hf-fp32-oom": ["hf-fp32-oom.json"],
    "runs-16-oom-64": ["run-b16.json", "oom-b64.json"],
    "other-process": ["other-process-oom.json"],
    "leak": ["leak-oom.json"],
    # the four ranks of one job: the model is the rank that ran out of memory first
    "job4": ["../../cli/data/job4-rank%d.json" % i for i in range(4)],
    "job-zero": ["zero-rank0.json", "zero-rank1.json"],
    # the same four ranks running YOLOv9 with --batch 44 (the job's total): the next batch is a
    # multiple of the 4 ranks, as its DDP assertion requires (job4's argv rewritten)
    "yolo-job4": ["yolo-job4-rank%d.json" % i for i in range(4)],
    # weights and optimizer state alone are more than the usable card: no batch, offload/sharding
    "static-large-oom": ["static-large-oom.json"],
    "static-large-observe": ["static-large-observe.json"],
    # the static part fits but not one sample: smaller model, amp=True, checkpointing
    "batch1-observe": ["batch1-observe.json"],
    # a failure in the first step of a job whose static part is most of the card
    "static-heavy-oom": ["static-heavy-oom.json"],
    # YOLOv9 started with an interpreter option (python3 -u): the multi-GPU command keeps -u before
    # -m torch.distributed.run, where torchrun does not see it (observe-b64's run, argv rewritten)
    "yolov9-interpreter-option": ["yolov9-u-observe.json"],
    # AutoBatch chose the batch (YOLOv9's --batch -1, Ultralytics' batch=0.7): nothing is scaled
    # from a batch the report cannot tell; a fixed batch and fit instead (argv of yolov9-oom-b64
    # and batch1-observe rewritten)
    "yolov9-autobatch": ["yolov9-autobatch-oom.json"],
    # a generic script whose source defines --accumulate, --checkpoint and --amp, none given on its
    # command line: the advice names them (observe-b64's run, argv rewritten; the script is read
    # from the folder advise runs in, as the report's own folder does not exist here)
    "generic-script-options": ["generic-script-observe.json"],
    "ultralytics-autobatch": ["ultralytics-autobatch-observe.json"],
    # the YOLOv9 job at batch 44 on 6 GiB cards: DDP on 8 GPUs with --batch 40, a multiple of 8
    "yolov9-ddp-round": ["--target", "6GiB", "val-oom-b44.json"],
    # failures after completed steps: a --multi-scale step at 1.5 x --img ran out after two steps
    # at smaller sides; validation met training's cache in an allocator that does not retry
    "multiscale-oom": ["multiscale-oom-b32.json"],
    "multiscale-steps-oom": ["multiscale-steps-oom-b32.json"],
    "noretry-val-oom": ["noretry-val-oom-b32.json"],
    # a run that fitted because validation made the allocator flush training's cache
    "flush-val-fitted": ["flush-val-b44.json"],
    # two ranks of one job, rank 0 on a 16 GiB card, rank 1 on a 12 GiB one: rank 1 decides
    "cards-ranks": ["cards-rank0.json", "cards-rank1.json"],
    # a failure in the first step advised for a larger card, and for a smaller one with less
    # headroom (a prediction above the usable memory never "may fit")
    "target-larger": ["--target", "24GiB", "yolov9-oom-b64-nomarkers.json"],
    "target-smaller": ["--target", "8GiB", "--headroom", "5", "yolov9-oom-b64.json"],
    # the README's quick start: a generic script, its own name in the snippets' notes
    "quickstart": ["quickstart-oom-b64.json"],
    # val-oom-b44 without markers: validation found from the call sites
    "validation-oom-nomarkers": ["val-oom-b44-nomarkers.json"],
    # unchanged PyTorch whose first step ran out of memory after a pause within itself; the
    # companion had promised a vramwatch_step after every step, and none came
    "torch-first-step": ["torch-first-step-oom.json"],
    # the same report as a program that promised nothing would leave: the climb after the pause
    # runs through call chains not seen before it, so the first step was still under way
    "torch-first-step-unpromised": ["derived:torch-first-step-unpromised.json"],
}

# Reports made from recorded ones when the tests run (name: (recorded file, change)), named in
# GOLDEN as derived:NAME: a variant that differs in one field needs no second recording.
DERIVED = {
    "torch-first-step-unpromised.json": ("torch-first-step-oom.json",
                                         lambda r: r["process"].pop("steps_reported")),
}

# What a case's advice must say, beyond its golden text: the figures the issue that added it
# measured (the truth of the simulated job by bisection, tests/advise/accuracy.py), so that a
# golden rewritten with a wrong answer still fails. name: [(description, check(doc))]


def first_batch(doc):
    return next((r["value"] for r in doc["recommendations"] if r["kind"] == "batch"), None)


EXPECT = {
    # the largest batch within 10% headroom is 22, on the card 25
    "multiscale-oom": [("the batch is planned for the 960 side: 19..25", lambda d: 19 <= (first_batch(d) or 0) <= 25)],
    "multiscale-steps-oom": [("the batch is planned for the 960 side: 19..25",
                              lambda d: 19 <= (first_batch(d) or 0) <= 25)],
    # 17 and 20; before, the first request of validation was counted once: 26
    "noretry-val-oom": [("validation's request counted twice: 15..20", lambda d: 15 <= (first_batch(d) or 0) <= 20)],
    # 41 and 47; before, validation's rise was measured from training's flushed cache: 51
    "flush-val-fitted": [("validation measured after the flush: 35..47", lambda d: 35 <= (first_batch(d) or 0) <= 47)],
    # rank 0's 16 GiB card would allow 51, rank 1's 12 GiB card 35
    "cards-ranks": [("rank 1, the smaller card, decides", lambda d: d.get("job", {}).get("rank") == 1),
                    ("the batch fits rank 1's card: at most 36", lambda d: 1 <= (first_batch(d) or 0) <= 36)],
    # the need's lower bound at 64 (16.4 GiB) is within 21.6 GiB usable: 64 again, not 32
    "target-larger": [("the failed batch again on the larger card", lambda d: first_batch(d) == 64)],
    # the largest batch that runs on the 16 GiB card is 119, 107 within 10% headroom; read as
    # completed steps, the pause made it 114 (tests/advise/accuracy.py, torch first-oom)
    "torch-first-step-unpromised": [("a failure in the first step stays a bound",
                                     lambda d: d["model"]["basis"] == "bound")],
    "torch-first-step": [("a failure in the first step stays a bound", lambda d: d["model"]["basis"] == "bound"),
                         ("the first recommendation's note proposes vramwatch fit",
                          lambda d: "vramwatch fit" in (d["recommendations"][0].get("note") or ""))],
}


def invariants(name, doc):
    """Rules every case obeys; a list of what broke."""
    bad = []
    usable = doc["device"].get("usable_bytes")
    recs = doc["recommendations"]
    for r in recs:
        p = r["predicted_peak_bytes"]
        if r["fits"] is not False and p is not None and usable and p > usable and r["kind"] != "other_processes":
            bad.append(f"{r['kind']}: predicted {p} above the {usable} usable, fits {r['fits']}")
    if recs and recs[0]["kind"] == "leak":
        postpones = [r["kind"] for r in recs if r["kind"] not in ("leak", "validation", "other_processes")]
        if postpones:
            bad.append(f"a leak ran the card out, yet {postpones} are proposed")
    for what, check in EXPECT.get(name, []):
        if not check(doc):
            bad.append(what)
    return bad

# (arguments, what stderr must contain)
USAGE = [
    ([], "no report file given"),
    (["--frobnicate", "run-b16.json"], "unknown option --frobnicate"),
    (["--headroom", "100", "run-b16.json"], "--headroom 100"),
    (["--headroom", "ten", "run-b16.json"], "--headroom ten"),
    (["--headroom"], "--headroom needs a value"),
    (["--target", "0", "run-b16.json"], "--target 0"),
    (["--target", "lots", "run-b16.json"], "--target lots"),
    (["--target"], "--target needs a value"),
    (["run-b16.json", "other-job-b32.json"], "not the same job"),
    (["run-b16.json", "yolov9-oom-b64.json"], "not the same job"),
    (["no-such-report.json"], "no-such-report.json"),
]


# Exit statuses of advice printed: 1 when a report shows a run that did not fit (README; which
# report gives which: tests/cli/run_conventions.py exit).
PRINTED = (0, 1)


_derived_dir = None


def derived(arg, data):
    """The path of a derived:NAME report, made once per run in a folder of its own."""
    global _derived_dir
    name = arg[len("derived:"):]
    if _derived_dir is None:
        _derived_dir = tempfile.mkdtemp(prefix="vw-advise-derived-")
        atexit.register(shutil.rmtree, _derived_dir, True)
    path = os.path.join(_derived_dir, name)
    if not os.path.exists(path):
        source, change = DERIVED[name]
        with open(os.path.join(data, source)) as f:
            r = json.load(f)
        change(r)
        with open(path, "w") as f:
            json.dump(r, f)
    return path


def run(exe, args, cwd):
    args = [derived(a, cwd) if a.startswith("derived:") else a for a in args]
    # the width the text is wrapped to, pinned (docs/advice.md: $COLUMNS, else 80)
    p = vwtest.run([exe, "advise"] + args, env=vwtest.clean_env({"COLUMNS": "80"}, keep_preload=True),
                   cwd=cwd, text=True)
    return p.returncode, p.stdout, p.stderr


def golden(o):
    failed = 0
    for name, args in GOLDEN.items():
        for fmt in ("txt", "json"):
            a = (["--json"] if fmt == "json" else []) + args
            rc, out, err = run(o.vramwatch, a, o.data)
            path = os.path.join(o.golden, f"{name}.{fmt}")
            if rc not in PRINTED or err:
                print(f"FAIL {name}.{fmt}: exit {rc}, stderr {err!r}")
                failed += 1
                continue
            if fmt == "json":
                doc = json.loads(out)
                keys = ["schema", "device", "observed", "model", "recommendations"]
                # the contract's keys in order, then only the documented extra "job" (ranks)
                extra = list(doc)[len(keys):]
                if list(doc)[:len(keys)] != keys or extra not in ([], ["job"]) or doc["schema"] != "vramwatch.advice/1":
                    print(f"FAIL {name}.json: top-level keys {list(doc)}")
                    failed += 1
                for r in doc["recommendations"]:
                    if list(r) != ["kind", "flag", "value", "command", "predicted_peak_bytes", "fits", "note"]:
                        print(f"FAIL {name}.json: recommendation keys {list(r)}")
                        failed += 1
                    if doc["model"]["basis"] == "bound" and r["fits"] is True:
                        print(f"FAIL {name}.json: fits true on a bound")
                        failed += 1
                for what in invariants(name, doc):
                    print(f"FAIL {name}.json: {what}")
                    failed += 1
            msg = compare_or_update(path, out, f"golden/{name}.{fmt}")
            if msg:
                print(f"FAIL {name}.{fmt}: {msg}")
                failed += 1
            else:
                print(f"ok   {name}.{fmt}")
    return failed


def schema(o):
    """Every golden case's --json output against docs/advice.schema.json."""
    try:
        import jsonschema
    except ImportError:
        print("cannot run: the Python module jsonschema is not installed (Debian: python3-jsonschema)",
              file=sys.stderr)
        return SKIP
    with open(o.schema) as f:
        sch = json.load(f)
    jsonschema.Draft202012Validator.check_schema(sch)
    validator = jsonschema.Draft202012Validator(sch)
    failed = 0
    kinds = set()
    for name, args in GOLDEN.items():
        rc, out, err = run(o.vramwatch, ["--json"] + args, o.data)
        if rc not in PRINTED:
            print(f"FAIL {name}: exit {rc}, {err!r}")
            failed += 1
            continue
        doc = json.loads(out)
        kinds.update(r["kind"] for r in doc["recommendations"])
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            print(f"FAIL {name}: {'/'.join(map(str, e.path))}: {e.message}")
        failed += bool(errors)
        if not errors:
            print(f"ok   {name} validates")
    # every kind the schema names is shown by at least one golden case
    missing = set(sch["$defs"]["recommendation"]["properties"]["kind"]["enum"]) - kinds
    if missing:
        print(f"FAIL kinds no golden case shows: {sorted(missing)}")
        failed += 1
    return failed


def one_line_error(label, rc, out, err, must):
    if rc != 2 or out or err.count("\n") != 1 or must not in err or not err.startswith("vramwatch: "):
        print(f"FAIL {label}: exit {rc}, stdout {out[:200]!r}, stderr {err!r} (want exit 2, one line with {must!r})")
        return 1
    print(f"ok   {label}")
    return 0


def usage(o):
    failed = 0
    for args, must in USAGE:
        rc, out, err = run(o.vramwatch, args, o.data)
        failed += one_line_error("advise " + " ".join(args), rc, out, err, must)
    rc, out, err = run(o.vramwatch, ["--help"], o.data)
    rc2, out2, err2 = run(o.vramwatch, ["run-b16.json", "--help"], o.data)
    if rc != 0 or "usage: vramwatch advise" not in out or rc2 != 0:
        print("FAIL advise --help")
        failed += 1
    # every malformed report of the cli tests: exit 2 with one line, never a crash
    for name in sorted(os.listdir(o.cli_data)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(o.cli_data, name)
        rc, out, err = run(o.vramwatch, [path], o.data)
        if name.startswith("bad-"):
            failed += one_line_error(f"advise {name}", rc, out, err, name)
        elif name == "unknowns.json" and rc == 2:
            failed += one_line_error(f"advise {name}", rc, out, err, "capacity is not known")
            rc, out, err = run(o.vramwatch, ["--target", "16GiB", path], o.data)
            if rc not in PRINTED or err:
                print(f"FAIL advise --target 16GiB {name}: exit {rc}, {err!r}")
                failed += 1
        else:
            for a in ([path], ["--json", path]):
                rc, out, err = run(o.vramwatch, a, o.data)
                if rc not in PRINTED or err or not out:
                    print(f"FAIL advise {' '.join(a)}: exit {rc}, {err!r}")
                    failed += 1
                else:
                    print(f"ok   advise {' '.join(a)}")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vramwatch", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--cli-data", required=True)
    ap.add_argument("--update", action="store_true",
                    help="rewrite the golden files (the same as VRAMWATCH_UPDATE_GOLDEN=1)")
    ap.add_argument("--schema", help="docs/advice.schema.json (default: beside this checkout's tests)")
    ap.add_argument("group", choices=["golden", "usage", "schema"])
    o = ap.parse_args()
    if o.update:
        request_update()
    o.vramwatch = os.path.abspath(o.vramwatch)
    o.cli_data = os.path.abspath(o.cli_data)
    o.golden = os.path.abspath(o.golden)
    if not o.schema:
        o.schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "advice.schema.json")
    if o.group == "schema":
        failed = schema(o)
        if failed == SKIP:
            return SKIP
    else:
        failed = golden(o) if o.group == "golden" else usage(o)
    print(f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
