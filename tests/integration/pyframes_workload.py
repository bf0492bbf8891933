"""Allocations from Python at known places, for the Python call-site checks (run_case.py's
python_* cases). Each allocation has its own size; next to it the workload records what
CPython itself says the stack is (traceback.extract_stack), so the report's Python frames can
be compared with the interpreter's own answer, frame by frame. Written to expected.json.

Covers: the main thread, a class method, a generator, a call through map(), a lambda, a
threading.Thread, a module and a function with non-ASCII names, ctypes.CDLL (GIL released)
and ctypes.PyDLL (GIL held), a thread Python never saw (no Python frames), and an allocation
that fails (out of memory)."""
import ctypes
import json
import os
import sys
import threading
import traceback

MiB = 1 << 20
rt = ctypes.CDLL("libcudart.so.13")
rt_gil = ctypes.PyDLL("libcudart.so.13")
expected = {}
keep = []


def alloc(mib, lib=rt):
    stack = traceback.extract_stack()[:-1]  # without this frame's own extract_stack line
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(mib * MiB))  # ALLOC LINE
    # innermost first, like the report
    frames = [[os.path.abspath(f.filename), f.name, f.lineno] for f in reversed(stack)]
    frames.insert(0, [os.path.abspath(__file__), "alloc", ALLOC_LINE])
    expected[str(mib)] = {"frames": frames, "rc": rc}
    keep.append(p)
    return rc


with open(__file__, encoding="utf-8") as fh:
    ALLOC_LINE = [i + 1 for i, l in enumerate(fh) if l.rstrip().endswith("# ALLOC LINE")][0]


class Trainer:
    def step(self, mib):
        return alloc(mib)

    def validate(self, mib):
        return alloc(mib, rt_gil)


def batches():
    yield alloc(3)


def main():
    t = Trainer()
    t.step(1)
    t.validate(2)
    list(batches())
    list(map(lambda m: alloc(m), [4]))
    th = threading.Thread(target=t.step, args=(5,))
    th.start()
    th.join()
    # a module and a function with non-ASCII names, written next to the reports
    here = os.getcwd()
    with open(os.path.join(here, "modülé_ü.py"), "w", encoding="utf-8") as fh:
        fh.write("def größe_berechnen(alloc):\n    return alloc(6)\n")
    sys.path.insert(0, here)
    mod = __import__("modülé_ü")
    mod.größe_berechnen(alloc)
    # a thread Python never saw
    native = ctypes.CDLL(os.environ["NATIVE_THREAD_LIB"])
    assert native.alloc_in_native_thread(ctypes.c_size_t(7 * MiB)) == 0
    expected["7"] = {"frames": [], "rc": 0}
    # out of memory (the card is 1 GiB): the failure's Python line
    rc = alloc(2000)
    assert rc == 2, rc


main()
with open("expected.json", "w", encoding="utf-8") as fh:
    json.dump(expected, fh, ensure_ascii=False)
