"""vramwatch's companion, started by Python's site module (docs/companion.md).

Python imports the first sitecustomize it finds on sys.path and no other. `vramwatch run` puts
this folder first, so this one sets the companion up and then runs the sitecustomize that would
have been found without it (the user's, a virtual environment's, the distribution's), under the
same name, as if it had been found first. It is kept small and imports nothing new, because it
runs in every Python process: the companion itself (vramwatch_companion) is imported only when
the job imports torch.
"""
import sys


class TorchFinder(object):
    """Waits on sys.meta_path for `import torch`; every other import passes straight on."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            import vramwatch_companion

            return vramwatch_companion.find_torch(self, name, path, target)
        except Exception:
            return None  # torch is imported as it would be without us


def companion():
    try:
        import os

        # Without LD_PRELOAD the library cannot be loaded: the process is left exactly as it is.
        if not os.environ.get("LD_PRELOAD"):
            return
        if "torch" in sys.modules:
            import vramwatch_companion

            vramwatch_companion.patch(sys.modules["torch"])
        elif not any(isinstance(f, TorchFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, TorchFinder())
    except Exception:
        pass  # the job runs as it would without us


def machinery():
    """PathFinder and module_from_spec from the import system that is already loaded:
    importlib.util would import contextlib, functools and collections into every process."""
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is not None and external is not None:
        return external.PathFinder, bootstrap.module_from_spec
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    return PathFinder, module_from_spec


def next_sitecustomize(path_finder):
    """The spec of the sitecustomize module after this folder on sys.path, or None."""
    from os import getcwd
    from os.path import abspath, dirname

    here = dirname(abspath(__file__))

    def ours(entry):
        # site has made the entries absolute; realpath() would cost a millisecond here
        return isinstance(entry, str) and abspath(entry or getcwd()) == here

    after = [i for i, entry in enumerate(sys.path) if ours(entry)]
    rest = sys.path[after[0] + 1:] if after else sys.path
    return path_finder.find_spec("sitecustomize", [p for p in rest if not ours(p)])


class Forget(object):
    """Without us there would be no sitecustomize module at all: once the import that ran this
    one is over (the module cannot leave sys.modules while it is being imported), the next
    import takes it out again, then this finder leaves sys.meta_path."""

    def __init__(self, module):
        self.module = module

    def find_spec(self, name, path=None, target=None):
        # A new list rather than list.remove(): the import under way walks the list it started
        # with, and removing the first entry from that list would make it skip the next finder
        # (the TorchFinder, when the first import after start-up is torch's).
        sys.meta_path = [f for f in sys.meta_path if f is not self]
        if sys.modules.get(__name__) is self.module:
            del sys.modules[__name__]
        return None


def run_next():
    try:
        path_finder, module_from_spec = machinery()
        spec = next_sitecustomize(path_finder)
        if spec is None or spec.loader is None:
            sys.meta_path.insert(0, Forget(sys.modules.get(__name__)))
            return
        module = module_from_spec(spec)
    except Exception:
        return
    sys.modules[__name__] = module
    # Its own errors are not ours to hide: site reports them as it would have without us.
    spec.loader.exec_module(module)


if sys.version_info >= (3, 5):  # module_from_spec
    companion()
    run_next()
