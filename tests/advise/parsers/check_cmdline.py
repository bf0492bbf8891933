#!/usr/bin/env python3
"""check_cmdline.py: reads command lines with each family's real parser where its package is
installed in the interpreter that runs this (real_parsers.py: Ultralytics, Hugging Face, torchrun,
accelerate, the script's own argparse), else with the option lists in this folder (written from
the public sources each names), and checks that the command lines vramwatch's advice writes are
accepted and mean what was intended.

  check_cmdline.py --driver EXE            run EXE, read one JSON case a line, check each
  check_cmdline.py --driver EXE --real PY  the same under the interpreter PY, where every parser
                                           that can be installed must be the real one (exit 77,
                                           and why, when PY is empty or lacks a package); each
                                           case is also read by the option lists, which must
                                           agree, and misspelt flags must be refused by the real
                                           parsers
  check_cmdline.py FAMILY ARG...           print what one command line means (for looking)

A case is {"name", "family", "argv", "want": {key: value}}; keys are batch, imgsz, accumulate,
eval_batch, nbs, amp, fp16, bf16, gradient_checkpointing, checkpoint, autobatch, launcher,
world_size. The option lists stay the only parser for deepspeed (not installed with the test
interpreter) and yolov9 (train_dual.py is not on PyPI), and stand in for the others under a
python3 without their packages."""

import argparse
import json
import os
import re
import subprocess
import sys

import real_parsers  # noqa: E402 (this folder is on sys.path: the script's own)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from vwtest import SKIP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher


Refused = real_parsers.Refused
REAL = ("ultralytics", "hf", "torchrun", "accelerate", "generic")  # families with a real parser


def load(family):
    with open(os.path.join(HERE, family + ".json"), encoding="utf-8") as f:
        return json.load(f)


def hf_bool(v):
    # hf_argparser.string_to_bool
    if v.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if v.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise Refused(f"truthy value expected: got {v}")


def convert(opt, v, spec):
    if "choices" in opt and v not in opt["choices"]:
        raise Refused(f"{opt['names'][0]}: invalid choice {v!r}")
    t = opt.get("type", "str")
    try:
        if t == "int":
            return int(v)
        if t == "float":
            return float(v)
    except ValueError:
        raise Refused(f"{opt['names'][0]}: invalid {t} value {v!r}") from None
    if t == "bool":
        return hf_bool(v)
    return v


def option_table(spec):
    """Every accepted spelling -> option, with the aliases each parser adds by itself."""
    table = {}
    for opt in spec["options"]:
        names = list(opt["names"])
        if spec.get("dashed_aliases"):
            names += [n[:2] + n[2:].replace("_", "-") for n in opt["names"] if n.startswith("--") and "_" in n[2:]]
            if spec["family"] == "hf" and opt.get("type") == "bool" and opt.get("default") is True:
                for n in opt["names"]:
                    table["--no_" + n[2:]] = dict(opt, takes="none", const=False)
                    table["--no-" + n[2:].replace("_", "-")] = dict(opt, takes="none", const=False)
        for n in names:
            table[n] = opt
    return table


def looks_like_option(a, table):
    if not a.startswith("-") or a == "-":
        return False
    # a negative number is a value when no option looks like one (argparse)
    return not (NEGATIVE.match(a) and not any(NEGATIVE.match(n) for n in table))


def lookup(name, table, spec):
    if name in table:
        return table[name]
    if spec.get("allow_abbrev") and name.startswith("--"):
        hits = {id(o): (n, o) for n, o in table.items() if n.startswith(name)}
        if len(hits) == 1:
            return next(iter(hits.values()))[1]
        if len(hits) > 1:
            raise Refused(f"ambiguous option: {name} could match {', '.join(sorted(n for n, _ in hits.values()))}")
    raise Refused(f"unrecognized arguments: {name}")


def parse_options(args, spec, stop_at_positional=False):
    """argparse's parse of options; with stop_at_positional (a launcher) the first positional and
    everything after it are the script and its arguments. Returns (values, rest)."""
    table = option_table(spec)
    values = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not looks_like_option(a, table):
            if stop_at_positional:
                break
            raise Refused(f"unrecognized arguments: {a}")
        name, attached = (a.split("=", 1) + [None])[:2] if a.startswith("--") else (a, None)
        if attached is None and not a.startswith("--") and len(a) > 2 and a[:2] in table:
            name, attached = a[:2], a[2:]  # -b4
        opt = lookup(name, table, spec)
        long = [n for n in opt["names"] if n.startswith("--")] or opt["names"]
        dest = opt.get("dest", long[0].lstrip("-").replace("-", "_"))
        takes = opt["takes"]
        i += 1
        if takes == "none":
            if attached is not None:
                raise Refused(f"{name}: ignored explicit argument {attached!r}")
            values[dest] = opt.get("const", True)
        elif takes == "one":
            if attached is None:
                if i >= len(args) or looks_like_option(args[i], table):
                    raise Refused(f"{name}: expected one argument")
                attached = args[i]
                i += 1
            values[dest] = convert(opt, attached, spec)
        elif takes == "optional":
            if attached is None and i < len(args) and not looks_like_option(args[i], table):
                attached = args[i]
                i += 1
            values[dest] = True if attached is None and opt.get("type") == "bool" else (
                None if attached is None else convert(opt, attached, spec))
        else:  # one or more
            got = [attached] if attached is not None else []
            while i < len(args) and not looks_like_option(args[i], table):
                got.append(args[i])
                i += 1
            if not got:
                raise Refused(f"{name}: expected at least one argument")
            values[dest] = [convert(opt, v, spec) for v in got]
    return values, args[i:]


PY_VALUE = {"-W", "-X", "--check-hash-based-pycs"}


def split_python(argv):
    """(interpreter options, '-m' module or None, the rest: script and its arguments)."""
    if not re.match(r"^(python|pypy)", os.path.basename(argv[0])):
        return None, None, argv
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        if argv[i] == "-m":
            if i + 1 >= len(argv):
                raise Refused("python: -m needs a module")
            return argv[1:i], argv[i + 1], argv[i + 2:]
        if argv[i] == "-c":
            raise Refused("python -c: no script")
        i += 2 if argv[i] in PY_VALUE else 1
    if i >= len(argv):
        raise Refused("python: no script")
    return argv[1:i], None, argv[i:]


LAUNCHERS = ["torchrun", "deepspeed", "accelerate"]


def launcher_of(module, rest):
    for fam in LAUNCHERS:
        spec = load(fam)
        if module is not None and module in spec.get("modules", []):
            return spec, rest
        if module is None and rest:
            base = os.path.basename(rest[0])
            if fam == "accelerate" and base == "accelerate" and rest[1:2] == ["launch"]:
                return spec, rest[2:]
            if base in spec["commands"] and fam != "accelerate":
                return spec, rest[1:]
    return None, rest


def world_of(spec, values):
    def val(names, default):
        for n in names:
            d = n.lstrip("-").replace("-", "_")
            if d in values:
                return values[d]
        return default
    nproc = val(spec["nproc"], spec["nproc_default"])
    nnodes = val(spec["nnodes"], 1)
    try:
        nproc, nnodes = int(nproc), int(nnodes)
    except (TypeError, ValueError):
        return None  # auto, MIN:MAX, or every visible GPU: not on the command line
    return nproc * nnodes if spec["world"] == "nproc*nnodes" else nproc


def ultralytics(args, spec, meaning):
    """cfg/__init__.py entrypoint(): merge_equals_args, then each argument."""
    merged = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "=" and 0 < i < len(args) - 1:
            merged[-1] += "=" + args[i + 1]
            i += 2
            continue
        if a.endswith("=") and i < len(args) - 1 and "=" not in args[i + 1]:
            merged.append(a + args[i + 1])
            i += 2
            continue
        if a.startswith("=") and i > 0:
            merged[-1] += a
            i += 1
            continue
        merged.append(a)
        i += 1
    cfg = dict(spec["defaults"])
    for a in merged:
        if a.startswith("--"):
            a = a[2:]  # "does not require leading dashes", stripped
        if a.endswith(","):
            a = a[:-1]
        if "=" in a:
            k, v = re.sub(r" *= *", "=", a).split("=", 1)
            if not v:
                raise Refused(f"missing '{k}' value")
            if k not in spec["keys"]:
                raise Refused(f"'{k}' is not a valid YOLO argument")
            low = v.lower()
            if low in ("true", "false", "none"):
                cfg[k] = {"true": True, "false": False, "none": None}[low]
            else:
                try:
                    cfg[k] = int(v)
                except ValueError:
                    try:
                        cfg[k] = float(v)
                    except ValueError:
                        cfg[k] = v
        elif a in spec["tasks"] or a in spec["modes"]:
            pass
        elif a in spec["bool_keys"]:
            cfg[a] = True
        elif a in spec["keys"]:
            raise Refused(f"'{a}' is a valid YOLO argument but is missing an '=' sign to set its value")
        else:
            raise Refused(f"'{a}' is not a valid YOLO argument")
    b = cfg["batch"]
    meaning["autobatch"] = b == -1 or (isinstance(b, float) and 0 < b < 1)
    if not meaning["autobatch"]:
        if not isinstance(b, int) or b < 1:
            raise Refused(f"batch={b} is no batch size")
        meaning["batch"] = b
        meaning["accumulate"] = max(round(cfg["nbs"] / b), 1)  # engine/trainer.py
    meaning.update(imgsz=cfg["imgsz"], amp=bool(cfg["amp"]), nbs=cfg["nbs"])


# "auto": the real parser where its package imports, else the option list; "real": the real
# parser for every family in REAL (main checked that they import); "list": the option lists only
MODE = "auto"


def real_for(family, script=None, mode=None):
    """Whether the family's real parser reads this command line."""
    mode = mode or MODE
    if mode == "list" or family not in REAL:
        return False
    if family == "generic":
        return script is not None and real_parsers.script_parser(script) is None
    return mode == "real" or real_parsers.available(family)


def check(family, argv, mode=None):
    """What the command line means to its parsers; raises Refused when one of them refuses it.
    meaning["read_by"] names the parsers that read it."""
    meaning = {"launcher": None, "world_size": 1, "read_by": []}
    _, module, rest = split_python(argv)
    lspec, rest = launcher_of(module, rest)
    script = None
    if lspec:
        lfam = lspec["family"]
        meaning["launcher"] = lfam
        if real_for(lfam, mode=mode):
            world, as_module, rest, by = real_parsers.launcher(lfam, module, rest)
            meaning["world_size"] = world
        else:
            by = f"{lfam}.json"
            try:
                values, rest = parse_options(rest, lspec, stop_at_positional=True)
            except Refused as e:
                e.by = by
                raise
            if not rest:
                raise Refused(f"{lfam}: no training script", by)
            meaning["world_size"] = world_of(lspec, values)
            as_module = bool(values.get("module"))
        meaning["read_by"].append(by)
        if as_module:
            rest = rest[1:]  # a module name, then its arguments
        else:
            _, module, rest = split_python(rest) if re.match(r"^(python|pypy)", os.path.basename(rest[0])) else (
                None, None, rest)
            if module is None:
                script, rest = rest[0], rest[1:]
    elif module is None:
        script, rest = rest[0], rest[1:]  # the script itself
    if real_for(family, script, mode):
        meaning["read_by"].append(real_parsers.script(family, script, rest, meaning))
        return meaning
    meaning["read_by"].append(f"{family}.json")
    try:
        return _check_listed(family, rest, meaning)
    except Refused as e:
        e.by = e.by or f"{family}.json"
        raise


def _check_listed(family, rest, meaning):
    spec = load(family)
    if spec["parser"] == "key=value":
        ultralytics(rest, spec, meaning)
        return meaning
    values, _ = parse_options(rest, spec)
    for key in ("batch", "imgsz", "accumulate", "eval_batch", "fp16", "bf16", "gradient_checkpointing", "checkpoint",
                "amp"):
        if key in values:
            meaning[key] = values[key]
    if family == "yolov9":
        b = values.get("batch", 16)
        meaning["autobatch"] = b == -1
        if b != -1:
            if b < 1:
                raise Refused(f"--batch-size {b}")
            meaning["batch"] = b
            meaning["accumulate"] = max(round(spec["nominal_batch"] / b), 1)  # train()
        world = meaning["world_size"]
        if world and world > 1:
            # main(): DDP mode asserts
            if b == -1:
                raise Refused("AutoBatch with --batch-size -1 is not compatible with YOLO Multi-GPU DDP training")
            if b % world:
                raise Refused(f"--batch-size {b} must be multiple of WORLD_SIZE")
    if family == "generic":
        meaning.setdefault("amp", True)
        meaning.setdefault("accumulate", 1)
    if family == "hf":
        meaning.setdefault("accumulate", 1)
    return meaning


def require_real(python):
    """For --real: None when this interpreter is PY and every package with a real parser imports
    in it; else the exit status of the same check run under PY, or 77 (skip) with the reason."""
    if not python:
        print("skip: no Python with PyTorch for the real parsers (meson -Dtorch_python=PATH; "
              "tools/torch-venv.sh makes one)")
        return SKIP
    if os.environ.get("ADVISE_REAL_PARSERS") != python:
        env = dict(os.environ, ADVISE_REAL_PARSERS=python)
        return subprocess.run([python, os.path.abspath(sys.argv[0])] + sys.argv[1:], env=env).returncode
    missing = [f"{real_parsers.PACKAGE[f]} ({real_parsers.package(real_parsers.PACKAGE[f])})"
               for f in REAL if real_parsers.PACKAGE[f] and not real_parsers.available(f)]
    if missing:
        print(f"skip: {python} cannot import " + "; ".join(missing) +
              " (tools/torch-venv.sh installs them)")
        return SKIP
    return None


def parsers_line():
    """Which parser reads each family here, on one line."""
    out = []
    for fam in REAL:
        if fam == "generic":
            out.append("generic: the script's own parser where it loads, else generic.json")
        elif real_for(fam):
            out.append(f"{fam}: {real_parsers.version(fam)}")
        else:
            why = real_parsers.package(real_parsers.PACKAGE[fam])
            out.append(f"{fam}: {fam}.json ({why if isinstance(why, str) else 'not consulted'})")
    out += [f"{fam}: {fam}.json only ({why})" for fam, why in real_parsers.LIST_ONLY.items()]
    return "parsers: " + "; ".join(out)


def read_by_real(family, argv, by):
    """In --real mode, the parsers that must have been real ones, and were not (by: what read
    it, or what refused it)."""
    _, module, rest = split_python(argv)
    lspec, _ = launcher_of(module, rest)
    want = [lspec["family"]] if lspec and lspec["family"] in REAL else []
    want += [family] if family in REAL and family != "generic" else []
    return [f for f in want if f + ".json" in by]


def real_mode_problems(family, argv, got, want):
    """In --real mode, {what: (wanted, found)} for a command line the real parsers read as `got`:
    a family with a real parser that was read by its option list instead, and the option lists
    (which the runs without these packages consult) reading the keys of `want` otherwise."""
    bad = {}
    if MODE != "real":
        return bad
    not_real = read_by_real(family, argv, got["read_by"])
    if not_real:
        bad["read_by"] = (f"the real parsers of {', '.join(not_real)}", got["read_by"])
    try:
        listed = check(family, argv, mode="list")
        bad.update({f"{k} (option lists)": (v, listed.get(k)) for k, v in want.items() if listed.get(k) != v})
    except Refused as e:
        bad["option lists"] = ("accepted", f"refused by {e.by}: {e}")
    return bad


# Misspelt or badly typed flags: the checker must refuse what the real parsers refuse, or its
# passes mean nothing. (family, argv, only with the real parsers: the option lists accept it)
NEGATIVE_CASES = [
    ("ultralytics", ["yolo", "train", "--batch", "16"], False),
    ("ultralytics", ["yolo", "train", "model=yolov8n.pt", "bacth=16"], False),
    ("ultralytics", ["yolo", "train", "batch=abc"], True),       # get_cfg: int or float
    ("ultralytics", ["yolo", "train", "amp=maybe"], True),       # get_cfg: a bool or a precision
    ("yolov9", ["torchrun", "--nproc_per_node", "8", "train_dual.py", "--batch", "52"], False),
    ("yolov9", ["torchrun", "--nproc_per_node", "8", "-u", "train_dual.py"], False),
    ("yolov9", ["torchrun", "--nprocs_per_node", "2", "train_dual.py", "--batch", "16"], False),
    ("hf", ["python3", "run_clm.py", "--fp16", "maybe"], False),
    ("hf", ["python3", "run_clm.py", "--per_device_train_bach_size", "16"], False),
    ("hf", ["python3", "run_clm.py", "--gradient_accumulation_steps", "two"], False),
    ("hf", ["accelerate", "launch", "--num-proceses", "2", "run_clm.py"], False),
    ("generic", ["python3", "train_torch.py", "--grad-accum", "2"], False),
    ("generic", ["python3", "examples/train_torch.py", "--img", "100"], True),  # its own check
]


def main():
    global MODE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--driver")
    ap.add_argument("--real", metavar="PY", help="every parser that can be installed must be the real one "
                    "(an empty PY: exit 77)")
    ap.add_argument("family", nargs="?")
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    o = ap.parse_args()
    if o.real is not None:
        rc = require_real(o.real)
        if rc is not None:
            return rc
        MODE = "real"
    if not o.driver:
        try:
            print(json.dumps(check(o.family, o.argv)))
        except Refused as e:
            print(f"refused by {e.by}: {e}")
            return 1
        return 0
    print(parsers_line())
    out = subprocess.run([o.driver], check=True, capture_output=True, text=True).stdout
    failed = n = 0
    for line in out.splitlines():
        case = json.loads(line)
        n += 1
        try:
            got = check(case["family"], case["argv"])
        except Refused as e:
            print(f"FAIL {case['name']}: refused by {e.by} ({e}): {' '.join(case['argv'])}")
            failed += 1
            continue
        bad = {k: (v, got.get(k)) for k, v in case["want"].items() if got.get(k) != v}
        bad.update(real_mode_problems(case["family"], case["argv"], got, case["want"]))
        if bad:
            print(f"FAIL {case['name']}: {' '.join(case['argv'])}")
            for k, (want, have) in bad.items():
                print(f"  {k}: wanted {want!r}, the parser reads {have!r}")
            failed += 1
        else:
            print(f"ok   {case['name']}: {' + '.join(got['read_by'])}")
    for family, argv, real_only in NEGATIVE_CASES:
        if real_only and MODE != "real":
            continue
        n += 1
        try:
            got = check(family, argv)
            print(f"FAIL {' + '.join(got['read_by'])} accepts what the real parser refuses: {' '.join(argv)}")
            failed += 1
        except Refused as e:
            not_real = read_by_real(family, argv, [e.by]) if MODE == "real" else []
            if not_real:
                print(f"FAIL {' '.join(argv)}: refused by {e.by}, not by the real parser of {', '.join(not_real)}")
                failed += 1
            else:
                print(f"ok   refused by {e.by}: {' '.join(argv)}: {e}")
    if n < 10:
        print(f"FAIL only {n} cases")
        return 1
    print(f"{n - failed} of {n} command lines read as intended ({'real parsers' if MODE == 'real' else MODE})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
