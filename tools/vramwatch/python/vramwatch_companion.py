"""vramwatch's Python companion: phase markers for PyTorch jobs that place none (docs/companion.md).

The report's phase model needs a marker at each switch between training and validation
(`epoch 0 train`, `epoch 0 val`, `epoch 1 train`, ...). Training code already says where those
switches are: it calls `model.train()` and `model.eval()`. This module wraps
`torch.nn.Module.train` (which `eval()` calls) and turns the switches into `vramwatch_mark()`
calls, and nothing else: it never imports torch, it only patches torch once the job has imported
it, and it stays out of processes that do not have the preloaded library. Whatever goes wrong in
here is swallowed; the job's own calls and their exceptions pass through unchanged.

sitecustomize (beside this file) waits for `import torch` and imports this module only then, so
that a process that never imports torch pays for nothing more than that wait.
"""
import os
import sys

# Set on every function this module wraps, so that nothing is wrapped twice.
WRAPPED = "vramwatch_companion_wrapped"


class Phases:
    """The process's phase as the markers tell it: `training` is None before the first train()
    call, then True or False. One per process: the validation of YOLOv9 calls eval() on its EMA
    copy, a different module from the one train() is called on, so a switch is a change of the
    process's phase, not of one module's flag."""

    def __init__(self, mark, threading):
        self.mark = mark
        self.threading = threading
        self.lock = threading.Lock()
        self.training = None
        self.epoch = 0
        # True once the job looked vramwatch_mark up itself: it places its own markers then, and
        # ours would only duplicate them. The same for vramwatch_step and its steps.
        self.job_marks = False
        self.job_steps = False
        # vramwatch_step_reporting once the companion promised a call after every step
        self.step_reporting = None

    def switch(self, training):
        """Called when train(training) may be a switch: the wrappers have already seen that
        training differs from self.training, without the lock."""
        with self.lock:
            if self.job_marks or training is self.training:
                return
            if self.training is None and not training:
                # eval() before any training is set-up, not validation: an EMA copy, a model
                # from from_pretrained(), a frozen teacher.
                return
            if self.training is False:
                self.epoch += 1
            self.training = training
            # Under the lock, so that markers from two threads keep the order of the switches.
            self.mark(("epoch %d %s" % (self.epoch, "train" if training else "val")).encode())

    def after_fork(self):
        # A thread of the parent may have held the lock at fork; the child's copy would never
        # be released.
        self.lock = self.threading.Lock()


def wrap_train(fn, phases, depth):
    """fn (a train method) with the switch it makes reported to phases. Only the outermost call
    on a thread counts: Module.train calls train() on every child, and a model's own train()
    override may call eval() on its batch-norm layers after super().train()."""

    def report(mode):
        # Hugging Face's Trainer calls model.train() at every step: the usual call is no switch,
        # seen here without a lock.
        if mode is not phases.training and (mode is True or mode is False):
            try:
                phases.switch(mode)
            except Exception:
                pass

    code = getattr(fn, "__code__", None)
    if (code is not None and code.co_varnames[:code.co_argcount] == ("self", "mode")
            and not code.co_flags & 0x0C and code.co_kwonlyargcount == 0):
        # Module.train's own signature: called once per module of the model, so the nested
        # calls take the shortest path there is.
        def train(self, mode=True):
            if depth.n:
                return fn(self, mode)
            depth.n = 1
            try:
                result = fn(self, mode)
            finally:
                depth.n = 0
            report(mode)
            return result
    else:
        def train(self, *args, **kwargs):
            if depth.n:
                return fn(self, *args, **kwargs)
            depth.n = 1
            try:
                result = fn(self, *args, **kwargs)
            finally:
                depth.n = 0
            report(args[0] if args else kwargs.get("mode", True))
            return result

    for name in ("__module__", "__name__", "__qualname__", "__doc__", "__defaults__"):
        try:
            if name != "__defaults__" or train.__code__.co_argcount == 2:
                setattr(train, name, getattr(fn, name))
        except Exception:
            pass
    train.__dict__.update(getattr(fn, "__dict__", {}))
    train.__wrapped__ = fn  # inspect.signature() shows the original's
    setattr(train, WRAPPED, True)
    return train


def wrap_own_train(cls, phases, depth, function_type):
    """Wraps cls.train if cls itself defines it (DistributedDataParallel does, and so do models
    that keep batch norm frozen), so that the override, not the Module.train it calls, is the
    outermost call."""
    fn = cls.__dict__.get("train")
    if isinstance(fn, function_type) and not getattr(fn, WRAPPED, False):
        setattr(cls, "train", wrap_train(fn, phases, depth))


def find_mark():
    """vramwatch_mark from the preloaded library, or None when it is not loaded."""
    import ctypes  # torch has imported it already

    try:
        fn = ctypes.CDLL(None).vramwatch_mark
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_char_p]
    fn.restype = ctypes.c_int
    return fn


def watch_steps(torch, phases):
    """vramwatch_step after every optimizer step: the report then tells what the completed steps
    of a phase needed when a later step fails (a larger side of multi-scale training). PyTorch's
    global hook (torch 2.0 on) sees every optimizer's step, also through GradScaler, Hugging
    Face's Accelerate and Ultralytics' trainer, which all end in optimizer.step()."""
    import ctypes

    try:
        step = ctypes.CDLL(None).vramwatch_step
    except (AttributeError, OSError):
        return  # an older library: no steps
    step.argtypes = []
    step.restype = ctypes.c_int
    # torch.optim removes the name of its optimizer module, which torch's import loaded already
    module = sys.modules.get("torch.optim.optimizer")
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is None:
        return

    def after_step(optimizer, args, kwargs):
        try:
            if not phases.job_steps:
                step()
        except Exception:
            pass

    register(after_step)
    # Every step now ends in a call: a report without steps then tells that none ended, so the
    # advice does not read a pause within the first step as steps that completed.
    try:
        reporting = ctypes.CDLL(None).vramwatch_step_reporting
    except (AttributeError, OSError):
        return  # an older library: steps, but not the promise
    reporting.argtypes = [ctypes.c_int]
    reporting.restype = ctypes.c_int
    reporting(1)  # the job's lookups are watched only from here on (patch): none seen yet
    phases.step_reporting = reporting


def watch_job_lookups(phases):
    """Notes when the job itself looks vramwatch_mark up through ctypes (as the project's
    examples do): such a job marks its own phases."""
    import ctypes

    lookup = ctypes.CDLL.__getitem__
    if getattr(lookup, WRAPPED, False):
        return

    def getitem(self, name_or_ordinal):
        if name_or_ordinal == "vramwatch_mark":
            phases.job_marks = True
        elif name_or_ordinal == "vramwatch_step" and not phases.job_steps:
            phases.job_steps = True
            # the job calls it on its own terms from now on: our promise no longer holds
            if phases.step_reporting is not None:
                try:
                    phases.step_reporting(0)
                except Exception:
                    pass
        return lookup(self, name_or_ordinal)

    getitem.__wrapped__ = lookup
    setattr(getitem, WRAPPED, True)
    ctypes.CDLL.__getitem__ = getitem


def patch(torch):
    """Installs the wrappers on the torch module the job has just imported."""
    Module = torch.nn.Module
    if getattr(Module.__dict__.get("train"), WRAPPED, False):
        return
    mark = find_mark()
    if mark is None:
        return  # not preloaded: nothing to mark with, so nothing is changed
    import threading
    import types

    class Depth(threading.local):
        n = 0

    phases = Phases(mark, threading)
    depth = Depth()
    function_type = types.FunctionType
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=phases.after_fork)

    # Classes that exist already (torch's own: DistributedDataParallel, fused QAT modules), then
    # every class made later (the job's models), as it is made.
    seen, todo = set(), [Module]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        wrap_own_train(cls, phases, depth, function_type)
        try:
            todo.extend(type.__subclasses__(cls))
        except Exception:
            pass

    prior = Module.__dict__.get("__init_subclass__")
    if prior is None or isinstance(prior, classmethod):
        def init_subclass(cls, **kwargs):
            if prior is None:
                super(Module, cls).__init_subclass__(**kwargs)
            else:
                prior.__func__(cls, **kwargs)
            try:
                wrap_own_train(cls, phases, depth, function_type)
            except Exception:
                pass

        setattr(init_subclass, WRAPPED, True)
        Module.__init_subclass__ = classmethod(init_subclass)
    try:
        watch_steps(torch, phases)  # before the lookups are watched: its own is not the job's
    except Exception:
        pass
    watch_job_lookups(phases)


class Loader:
    """torch's own loader, with the patch applied once torch's module has executed."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None  # None: the default module

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            # From here on torch looks as if it had been imported without us.
            module.__loader__ = self.loader
            module.__spec__.loader = self.loader
        except Exception:
            pass
        try:
            patch(module)
        except Exception:
            pass


def find_torch(finder, name, path, target):
    """The spec of torch as the job's own finders (every one on sys.meta_path but `finder`, the
    one sitecustomize installed) find it, with torch's loader wrapped; None to let the import
    go on as if we were not there."""
    for other in list(sys.meta_path):
        if other is finder:
            continue
        find = getattr(other, "find_spec", None)
        spec = find(name, path, target) if find else None
        if spec is not None:
            break
    else:
        return None
    if spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return None
    sys.meta_path.remove(finder)  # one torch per process: every later import is left alone
    spec.loader = Loader(spec.loader)
    return spec
