#!/usr/bin/env python3
"""Runs cxx_oom (a C++ program throwing PyTorch's out-of-memory exceptions) under
LD_PRELOAD=libvramwatch.so in a fresh folder, and checks that the throws arrived unchanged and
that the reports left at the throws (the program's, and its forked child's, which counts only
its own) hold PyTorch's verdict, figure by figure, and match docs/report.schema.json.

Then, for each release's message in data/pytorch/ (one file per release and case, citing the
source it was built from), one process throws it as the type that release threw
(c10::OutOfMemoryError, c10::CUDAOutOfMemoryError or a plain c10::Error), with a library named
libc10_cuda.so loaded as in a PyTorch process unless the file says otherwise, and the report's
`framework` must be exactly the one the file expects (null where the throw is no verdict).

usage: cxx_oom_check.py --lib LIB --prog CXX_OOM --sim SIMGPU_DIR --schema SCHEMA
                        [--c10-stub LIBC10_CUDA] [--preload-first SANITIZER_RT]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vwtest import Failed, clean_env, eq  # noqa: E402 (its own check() is the case)
RELEASES = os.path.join(HERE, "data", "pytorch")
# The report's figures, besides those every verdict has (name, message, time, thread, count).
FIGURES = ("exception", "format", "device", "requested_bytes", "capacity_bytes", "free_bytes",
           "process_in_use_bytes", "allowed_bytes", "allocated_bytes", "reserved_unallocated_bytes",
           "private_pools_bytes")

# The figures of cxx_oom.cpp's message, each round(figure x unit) in bytes.
MESSAGE_START = "CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity"
EXPECTED = {
    "name": "pytorch",
    "exception": "c10::OutOfMemoryError",
    "format": "current",
    "count": 2,  # thrown twice (the forked child's own: once)
    "device": 0,
    "requested_bytes": 268435456,          # 256.00 MiB
    "capacity_bytes": 16943645983,         # 15.78 GiB
    "free_bytes": 195160965,               # 186.12 MiB
    "process_in_use_bytes": 15365245501,   # 14.31 GiB (not the other process's 1.25 GiB)
    "allowed_bytes": 16106127360,          # 15.00 GiB
    "allocated_bytes": 13110387671,        # 12.21 GiB
    "reserved_unallocated_bytes": 1095216660,  # 1.02 GiB
    "private_pools_bytes": 1610612736,     # 1.50 GiB
}


def validate(schema_path, path, doc):
    try:
        import jsonschema
    except ImportError:
        raise Failed("python3-jsonschema is required to validate reports")
    with open(schema_path, encoding="utf-8") as fh:
        schema = json.load(fh)
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        raise Failed(f"{path} does not match the schema at {list(errors[0].path)}: {errors[0].message}")


def run(args, folder, extra, argv=(), also_preload=None):
    env = clean_env()
    env["LD_PRELOAD"] = ":".join(filter(None, [args.preload_first, args.lib, also_preload]))
    if args.preload_first:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env["VRAMWATCH_DIR"] = folder
    env["LD_LIBRARY_PATH"] = args.sim
    env.update(extra)
    p = subprocess.run([args.prog, *argv], env=env, cwd=folder, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise Failed(f"cxx_oom exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def reports(folder):
    return sorted(glob.glob(os.path.join(folder, "vramwatch-*.json")))


def check(args):
    folder = tempfile.mkdtemp(prefix="vramwatch-cxx-oom-")
    try:
        # Under the preload: the throws are passed on unchanged, and the report holds the verdict.
        p = run(args, folder, {})
        files = reports(folder)
        eq(len(files), 2, "number of reports (the program's and its forked child's)")
        docs = []
        for f in files:
            with open(f, encoding="utf-8") as fh:
                docs.append(json.load(fh))
            validate(args.schema, f, docs[-1])
        parent = [r for r in docs if any(c["process"]["ppid"] == r["process"]["pid"] for c in docs)]
        eq(len(parent), 1, "one report is the parent's")
        child = [r for r in docs if r is not parent[0]][0]
        # The parent threw twice; the child once, and its count must not include the parent's.
        for r, count in ((parent[0], 2), (child, 1)):
            who = "child" if r is child else "parent"
            # The parent's report written at the throw (checked by the program itself, right
            # after its catch) is replaced at exit by the exit report, which still holds the
            # verdict; so is the child's, which ends with _exit (the library writes the report of
            # a process that ends with _exit too).
            eq(r["reason"], "exit", f"{who}: reason")
            fw = r.get("framework")
            if not isinstance(fw, dict):
                raise Failed(f"{who}: framework: expected an object, got {fw!r}")
            for key, value in dict(EXPECTED, count=count).items():
                eq(fw[key], value, f"{who}: framework.{key}")
            if not fw["message"].startswith(MESSAGE_START) or "expandable_segments:True" not in fw["message"]:
                raise Failed(f"{who}: framework.message: {fw['message']!r}")
            eq(fw["thread"], r["process"]["pid"], f"{who}: framework.thread (the main thread threw)")
            if not r["process"]["start_unix_ns"] - 10**9 <= fw["time_unix_ns"] <= r["time_unix_ns"]:
                raise Failed(f"{who}: framework.time_unix_ns is outside the process's life")
            eq(r["failures"], [], f"{who}: failures (no CUDA call failed)")
        eq([l for l in os.listdir(folder) if ".tmp-" in l], [], "temporary files left behind")
        if p.stderr.strip():
            raise Failed(f"something was said on stderr: {p.stderr}")

        # Disabled: still passed through, nothing written.
        shutil.rmtree(folder)
        os.mkdir(folder)
        run(args, folder, {"VRAMWATCH_DISABLE": "1"})
        eq(reports(folder), [], "reports with VRAMWATCH_DISABLE=1")
        shutil.rmtree(folder)
    except Failed:
        print("files kept in", folder)
        raise


def expected_message(message):
    """What a reader of what() gets: the text before the first NUL (PyTorch 2.3's device byte
    for GPU 0), as the report keeps it."""
    text = message.split("\0", 1)[0]
    if len(text.encode("utf-8")) >= 4095:
        raise Failed("a release message longer than the report keeps: shorten the data file")
    return text


def check_release(args, path, folder):
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as fh:
        case = json.load(fh)
    for key in ("release", "source", "exception", "message", "framework"):
        if key not in case:
            raise Failed(f"{name}: no {key!r}")
    if not name.startswith(case["release"] + "-"):
        raise Failed(f"{name}: not named after its release {case['release']!r}")
    msg_file = os.path.join(folder, "message")
    with open(msg_file, "wb") as fh:
        fh.write(case["message"].encode("utf-8"))
    stub = args.c10_stub if case.get("libc10_cuda_loaded", True) else None
    p = run(args, folder, {}, ["throw", case["exception"], msg_file], also_preload=stub)
    if "arrived unchanged" not in p.stdout:
        raise Failed(f"{name}: {p.stdout} {p.stderr}")
    if p.stderr.strip():
        raise Failed(f"{name}: something was said on stderr: {p.stderr}")
    files = reports(folder)
    eq(len(files), 1, f"{name}: number of reports")
    with open(files[0], encoding="utf-8") as fh:
        r = json.load(fh)
    fmt = (r.get("framework") or {}).get("format")
    with open(args.schema, encoding="utf-8") as fh:
        listed = json.load(fh)["properties"]["framework"]["properties"]["format"].get("enum")
    if listed is not None and fmt not in listed:
        raise Failed(f"{name}: the report's framework.format {fmt!r} (docs/report-format.md) is not in the "
                     f"enum of {args.schema}: {listed}")
    validate(args.schema, files[0], r)
    eq(r["reason"], "exit", f"{name}: reason")
    eq(r["failures"], [], f"{name}: failures (no CUDA call failed)")
    fw, want = r.get("framework"), case["framework"]
    if want is None:
        eq(fw, None, f"{name}: framework (the throw is no verdict)")
    else:
        if not isinstance(fw, dict):
            raise Failed(f"{name}: framework: expected an object, got {fw!r}")
        eq(sorted(want), sorted(FIGURES), f"{name}: the data file's figures")
        for key in FIGURES:
            eq(fw[key], want[key], f"{name}: framework.{key}")
        eq(fw["name"], "pytorch", f"{name}: framework.name")
        eq(fw["message"], expected_message(case["message"]), f"{name}: framework.message")
        eq(fw["count"], 1, f"{name}: framework.count")
        eq(fw["thread"], r["process"]["pid"], f"{name}: framework.thread")
    for f in os.listdir(folder):
        os.unlink(os.path.join(folder, f))


def check_releases(args):
    if not args.c10_stub:
        args.c10_stub = os.path.join(os.path.dirname(os.path.abspath(args.prog)), "libc10_cuda.so")
    if not os.path.exists(args.c10_stub):
        raise Failed(f"no library named libc10_cuda.so at {args.c10_stub} (the integration tests' c10 stub)")
    paths = sorted(glob.glob(os.path.join(RELEASES, "*.json")))
    if len(paths) < 20:
        raise Failed(f"only {len(paths)} release messages in {RELEASES}")
    folder = tempfile.mkdtemp(prefix="vramwatch-cxx-releases-")
    try:
        for path in paths:
            check_release(args, path, folder)
        shutil.rmtree(folder)
    except Failed:
        print("files kept in", folder)
        raise
    return len(paths)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim", required=True, help="the simulated GPU's folder (LD_LIBRARY_PATH)")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--c10-stub", help="a library named libc10_cuda.so (default: beside --prog)")
    ap.add_argument("--preload-first")
    args = ap.parse_args()
    try:
        check(args)
        n = check_releases(args)
    except Failed as e:
        print("FAIL:", e)
        return 1
    print(f"ok: cxx_oom, and {n} release messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
