"""C++ exceptions of a real C++ library under the preload: PyTorch (Debian's CPU build) throws
c10::Error for bad arguments, from libraries Python loaded with RTLD_LOCAL. The throw must
reach its Python handler unchanged (the library's __cxa_throw forwards it to the C++ runtime,
which here is not in the global scope).

Then a library named libc10_cuda.so that names no out-of-memory type of its own is loaded, as
PyTorch 1.4 and before would have it: from then on the hook reads the message of every plain
c10::Error, through slot 2 of the real libc10's vtable. Those errors must still arrive
unchanged, and none of them (one quoting the out-of-memory sentence after words of its own
included) may become PyTorch's verdict."""
import ctypes
import glob
import json
import os

import torch

QUOTED = ("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB "
          "already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)")


def throw_all():
    said = []
    for bad in (lambda: torch.zeros(-1), lambda: torch.ones(2, 3) @ torch.ones(4, 5),
                lambda: torch.device(QUOTED)):
        try:
            bad()
        except RuntimeError as e:
            assert str(e), "an empty message"
            said.append(str(e))
        else:
            raise SystemExit("no exception")
    assert QUOTED in said[2], said[2]
    return said


before = throw_all()

# The integration tests' stub, built beside this file's other programs: the preloaded library is
# BUILD/lib/libvramwatch.so (or the versioned file it links to), the stub
# BUILD/tests/integration/libc10_cuda.so.
lib = [p for p in os.environ.get("LD_PRELOAD", "").split(":")
       if os.path.basename(p).startswith("libvramwatch.so")]
assert lib, "run under the preload"
stub = os.path.join(os.path.dirname(os.path.dirname(lib[0])), "tests", "integration", "libc10_cuda.so")
assert os.path.exists(stub), f"no c10 stub at {stub}"
ctypes.CDLL(stub)  # RTLD_LOCAL, as Python loads PyTorch's libraries

after = throw_all()
assert after == before, (before, after)

# No device allocation was made, so nothing is written unless asked.
assert ctypes.CDLL(None).vramwatch_dump(b"request") == 0, "vramwatch_dump failed"
reports = glob.glob(os.path.join(os.environ["VRAMWATCH_DIR"], "vramwatch-*-%d-request-*.json" % os.getpid()))
assert len(reports) == 1, reports
with open(reports[0], encoding="utf-8") as fh:
    report = json.load(fh)
assert report["framework"] is None, report["framework"]
print("torch exceptions arrived unchanged, and none was taken for an out-of-memory verdict")
