"""real_parsers.py: the command-line parsers of the packages themselves, where they are installed
in the interpreter that runs the check (check_cmdline.py consults these first, and the option
lists in this folder only for a family whose package does not import):

  ultralytics  ultralytics.cfg.entrypoint() itself (merge_equals_args, parse_key_value_pair,
               smart_value, check_dict_alignment on sys.argv), stopped where it would build the
               model: the overrides it would hand to Model.train() then go through
               get_cfg(DEFAULT_CFG_DICT, overrides), whose check_cfg checks each value's type
  hf           transformers.HfArgumentParser over TrainingArguments and the script's own fields
               (run_clm.py's ModelArguments and DataTrainingArguments are not in the wheel: their
               fields, only those, come from hf.json), read as parse_args_into_dataclasses() does
               when run_clm.py calls it: parse_known_args(), an argument left over refused, then
               TrainingArguments(...) built, whose __post_init__ checks the values (a refusal that
               only says this machine lacks the GPU, such as bf16's, is retried with use_cpu)
  torchrun     torch.distributed.run.get_args_parser() (torch.distributed.launch's own parser
               for `python -m torch.distributed.launch`)
  accelerate   accelerate.commands.launch.launch_command_parser()
  generic      the script's own argparse parser: the script is loaded (not run) and its
               parse_args() called, or the parse at its top level caught (tests/advise/data/
               scripts/train_generic.py); examples/train_torch.py needs torch to load

Not here, and why (their option lists stay): deepspeed (deepspeed.json; DeepSpeed is not
installed with the test interpreter: it builds CUDA extensions at install time) and yolov9
(yolov9.json; WongKinYiu/yolov9's train_dual.py is a script in a git repository, not on PyPI).

Nothing heavy is imported until a family asks for it."""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import runpy
import sys
import tempfile
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# family -> the module whose import makes its real parser available
PACKAGE = {"ultralytics": "ultralytics", "hf": "transformers", "torchrun": "torch",
           "accelerate": "accelerate", "generic": None}
# families that keep their option list, and why
LIST_ONLY = {
    "deepspeed": "DeepSpeed is not installed with the test interpreter: it builds CUDA extensions "
                 "when installed",
    "yolov9": "WongKinYiu/yolov9's train_dual.py is not on PyPI",
}


class Refused(Exception):
    """A command line a parser refuses; `by` names the parser (the package and its version, or
    the option list)."""

    def __init__(self, msg, by=None):
        super().__init__(msg)
        self.by = by


_imported = {}


def _environment():
    # no settings written to $HOME, nothing fetched, no banners
    os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="advise-parsers-"))
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_VERBOSE", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def package(name):
    """The imported module, or the reason it did not import (a str)."""
    if name not in _imported:
        _environment()
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                _imported[name] = __import__(name)
        except Exception as e:  # noqa: BLE001: any reason an import fails means no real parser
            _imported[name] = f"{type(e).__name__}: {e}".splitlines()[0]
    return _imported[name]


def available(family):
    """True when the family's real parser can be consulted here."""
    if family == "generic":
        return True  # decided per script (script_parser)
    name = PACKAGE.get(family)
    return name is not None and not isinstance(package(name), str)


def version(family):
    name = PACKAGE.get(family) or "torch"
    mod = package(name)
    return f"{name} {getattr(mod, '__version__', '?')}" if not isinstance(mod, str) else name


def _last_line(text, default):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else default


@contextlib.contextmanager
def _argparse_errors(by):
    """argparse's exit on an error, as Refused with its message (its usage text is dropped)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            yield
    except SystemExit as e:
        raise Refused(_last_line(err.getvalue(), f"exit {e.code}"), by) from None


# --- launchers ---------------------------------------------------------------------------------

def _count(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None  # auto, gpu, cpu, MIN:MAX, or every visible GPU: not on the command line


def launcher(family, module, args):
    """(world size or None, the script given as a module name?, [script, its arguments...]) as the
    launcher's own parser reads `args` (the launcher's options, the script, its arguments)."""
    by = version(family)
    if family == "torchrun":
        if module == "torch.distributed.launch":
            from torch.distributed import launch as mod
        else:
            from torch.distributed import run as mod
        by = f"{mod.__name__} ({by})"
        with _argparse_errors(by):
            ns = mod.get_args_parser().parse_args(args)
        lo, _, hi = str(ns.nnodes).partition(":")
        nnodes = _count(lo) if not hi or hi == lo else None
        nproc = _count(ns.nproc_per_node)
        world = nproc * nnodes if nproc is not None and nnodes is not None else None
        return world, bool(ns.module), [ns.training_script] + list(ns.training_script_args), by
    if family == "accelerate":
        from accelerate.commands.launch import launch_command_parser
        with _argparse_errors(by):
            ns = launch_command_parser().parse_args(args)
        # --num_processes counts the processes of all machines; without it accelerate's config
        # file or every visible GPU decides: not on the command line
        world = _count(ns.num_processes)
        return world, bool(ns.module), [ns.training_script] + list(ns.training_script_args), by
    raise ValueError(family)


# --- scripts -----------------------------------------------------------------------------------

class _Captured(Exception):
    pass


def _ultralytics(args, meaning):
    by = version("ultralytics")
    import ultralytics
    from ultralytics import cfg as C

    class Model:  # stands for YOLO(...) and the others: the parse stops where training would start
        def __init__(self, model=None, task=None, **_):
            self.task = task or "detect"

        def __getattr__(self, mode):
            def run(**overrides):
                raise _Captured(mode, overrides)
            return run

    saved = {n: getattr(ultralytics, n, None) for n in ("YOLO", "RTDETR", "FastSAM", "SAM", "NAS")}
    saved_argv = C.ARGV
    out = io.StringIO()
    try:
        for n in saved:
            setattr(ultralytics, n, Model)
        C.ARGV = ["yolo"] + list(args)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            C.entrypoint()
        raise Refused("entrypoint() returned without a mode to run (a special command such as "
                      "help or settings)", by)
    except _Captured as c:
        mode, overrides = c.args
    except (SyntaxError, ValueError, TypeError, KeyError, AssertionError) as e:
        # its first line: the help text follows
        raise Refused((str(e).strip().splitlines() or [type(e).__name__])[0], by) from None
    finally:
        for n, v in saved.items():
            setattr(ultralytics, n, v)
        C.ARGV = saved_argv
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            cfg = C.get_cfg(C.DEFAULT_CFG_DICT, overrides)
    except (SyntaxError, ValueError, TypeError) as e:
        raise Refused(_last_line(str(e), type(e).__name__), by) from None
    b = cfg.batch
    # engine/trainer.py: a batch under 1 (-1, or a fraction of the memory) is AutoBatch's; else
    # accumulate = max(round(nbs / batch), 1)
    meaning["autobatch"] = b < 1
    if not meaning["autobatch"]:
        if not isinstance(b, int):
            raise Refused(f"batch={b} is no batch size", by)
        meaning["batch"] = b
        meaning["accumulate"] = max(round(cfg.nbs / b), 1)
    # amp: True, False, or (newer) the precision's name
    amp = cfg.amp if isinstance(cfg.amp, bool) else str(cfg.amp).lower() in ("fp16", "bf16")
    meaning.update(mode=mode, imgsz=cfg.imgsz, amp=amp, nbs=cfg.nbs)
    return by


_hf_parser = None


def _hf(args, meaning):
    global _hf_parser
    by = version("hf")
    from transformers import HfArgumentParser, TrainingArguments
    if _hf_parser is None:
        with open(os.path.join(HERE, "hf.json"), encoding="utf-8") as f:
            spec = json.load(f)
        known = {f.name for f in dataclasses.fields(TrainingArguments)}
        kinds = {"int": typing.Optional[int], "float": typing.Optional[float], "str": typing.Optional[str]}
        own = []
        for o in spec["options"]:
            name = o["names"][0][2:]
            if name in known:
                continue  # TrainingArguments' own field, from transformers itself
            if o.get("type") == "bool":
                own.append((name, bool, dataclasses.field(default=bool(o.get("default", False)))))
            else:
                own.append((name, kinds[o.get("type", "str")], dataclasses.field(default=None)))
        script = dataclasses.make_dataclass("ScriptArguments", own)
        _hf_parser = (HfArgumentParser((script, TrainingArguments)), script, TrainingArguments)
    parser, script, training = _hf_parser
    with _argparse_errors(by):
        ns, rest = parser.parse_known_args(list(args))
    if rest:
        # parse_args_into_dataclasses() without return_remaining_strings, as run_clm.py calls it
        raise Refused(f"Some specified arguments are not used by the HfArgumentParser: {rest}", by)
    fields = {f.name for f in dataclasses.fields(training) if f.init}
    values = {k: v for k, v in vars(ns).items() if k in fields}
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            training(**values)
    except ValueError as e:
        # __post_init__ also checks this machine (bf16 wants a GPU that has it): the same command
        # line told to use the CPU shows whether the refusal is of the command line or the machine
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                training(**dict(values, use_cpu=True))
        except ValueError:
            raise Refused(_last_line(str(e), "ValueError"), by) from None
    meaning.update(batch=ns.per_device_train_batch_size, eval_batch=ns.per_device_eval_batch_size,
                   accumulate=ns.gradient_accumulation_steps, fp16=ns.fp16, bf16=ns.bf16,
                   gradient_checkpointing=ns.gradient_checkpointing)
    return by


# folders a script named by a relative path is looked for in first (the folder the command
# lines' reports are read in: advice_families.py sets it)
SCRIPT_DIRS = []


def find_script(path):
    """The script a command line names, on this disk: as named (from SCRIPT_DIRS, the current
    folder, then the repository), else the repository's example of that name
    (examples/train_torch.py, which the recorded reports name from the folder they were made in)."""
    for p in [os.path.join(d, path) for d in SCRIPT_DIRS] + [
            path, os.path.join(REPO, path), os.path.join(REPO, "examples", os.path.basename(path))]:
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


def script_parser(path):
    """Why the script's own parser cannot be consulted here, or None when it can."""
    found = find_script(path)
    if not found:
        return f"{path}: no such script here"
    if os.path.basename(found) == "train_torch.py" and isinstance(package("torch"), str):
        return f"{os.path.relpath(found, REPO)} needs torch to load ({package('torch')})"
    return None


def _generic(path, args, meaning):
    found = find_script(path)
    by = os.path.relpath(found, REPO) + "'s own parser"
    parse_args = argparse.ArgumentParser.parse_args

    def caught(self, a=None, namespace=None):
        raise _Captured(parse_args(self, a, namespace))

    saved_argv, saved_path = sys.argv, list(sys.path)
    ns = None
    with _argparse_errors(by):
        try:
            sys.argv = [found] + list(args)
            sys.path.insert(0, os.path.dirname(found))
            argparse.ArgumentParser.parse_args = caught  # a parse at the script's top level
            try:
                mod = runpy.run_path(found, run_name="advise_parsers_script")
            finally:
                argparse.ArgumentParser.parse_args = parse_args
            if not callable(mod.get("parse_args")):
                raise Refused("no parse at the top level and no parse_args() to call", by)
            ns = mod["parse_args"](list(args))  # with the script's own checks after the parse
        except _Captured as c:
            ns = c.args[0]
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    v = vars(ns)
    for key, names in (("batch", ("batch", "batch_size")), ("imgsz", ("img", "imgsz", "img_size")),
                       ("accumulate", ("accumulate",)), ("amp", ("amp",)), ("checkpoint", ("checkpoint",))):
        for n in names:
            if n in v:
                meaning[key] = v[n]
                break
    return by


def script(family, path, args, meaning):
    """Fills `meaning` from the script's real parser; returns the parser's name."""
    if family == "ultralytics":
        return _ultralytics(args, meaning)
    if family == "hf":
        return _hf(args, meaning)
    if family == "generic":
        return _generic(path, args, meaning)
    raise ValueError(family)
