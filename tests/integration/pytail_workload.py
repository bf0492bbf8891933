"""Native frames below Python, walked in full and taken from what a thread kept: the same.

A capture walks the native stack only down to the outermost run of the evaluation loop when
the thread's last full walk already gave the frames below it (lib/core/pyframes.c, "py_tail"). This
workload makes each allocation path once in a fresh thread (its first capture, walked in full:
"cold") and several times in one thread that has allocated from other paths before and between
("warm"). The two threads start the same way, so every native frame of a path must be the same
in both. Paths: a plain call, a call back from C (libc's qsort), a call back inside a call back,
a generator, 45 Python frames deep, and a call back from 40 deep. Each allocation has its own
size; the sizes and their path and kind go to expected_tail.json. Every path runs a hundred times
in the main thread first: from 3.11 the interpreter specialises an instruction after its first
runs, and a specialised call can reach C by fewer native frames, so the paths are warmed before
either thread takes its frames."""
import ctypes
import json
import threading

KiB = 1 << 10
rt = ctypes.CDLL("libcudart.so.13")
libc = ctypes.CDLL(None)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMP]
expected = {}
keep = []
next_id = [1]


state = {"kind": "main"}


def alloc(path):
    """The one place that allocates; in the main thread's warm-up, freed at once."""
    size = 64 * KiB * next_id[0]
    p = ctypes.c_void_p()
    if state["kind"] == "main":
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4 * KiB)) == 0
        assert rt.cudaFree(p) == 0
        return
    next_id[0] += 1
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    keep.append(p)
    expected[str(size)] = [path, state["kind"]]


def scratch():
    """An allocation from yet another place, freed at once: the thread's last walk moves."""
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4 * KiB)) == 0
    assert rt.cudaFree(p) == 0


def from_c(fn):
    """fn called back once from inside libc's qsort (two elements: one comparison, but a
    sanitizer's qsort may compare more: only the first calls fn)."""
    arr = (ctypes.c_int * 2)(2, 1)
    done = []

    def compare(a, b):
        if not done:
            done.append(1)
            fn()
        return 0

    libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), CMP(compare))


def deep(n, fn):
    if n:
        return deep(n - 1, fn)
    return fn()


def gen(fn):
    fn()
    yield 1


PATHS = {
    "plain": lambda: alloc("plain"),
    "callback": lambda: from_c(lambda: alloc("callback")),
    "callback2": lambda: from_c(lambda: from_c(lambda: alloc("callback2"))),
    "generator": lambda: next(gen(lambda: alloc("generator"))),
    "deep": lambda: deep(45, lambda: alloc("deep")),
    "deep_callback": lambda: deep(40, lambda: from_c(lambda: alloc("deep_callback"))),
}


def run_thread(target, *args):
    # Both kinds of thread call their paths from the same depth: before 3.11 every Python frame
    # is a native one too, and the native frames kept are counted from the innermost.
    th = threading.Thread(target=target, args=args)
    th.start()
    th.join()


def warm_thread():
    state["kind"] = "warm"
    for _ in range(100):
        scratch()
    for name, path in PATHS.items():
        path()
        scratch()
        path()
    for name, path in reversed(list(PATHS.items())):
        deep(10, scratch)
        path()
        path()


def cold_thread(path):
    state["kind"] = "cold"
    path()


for _ in range(100):
    for path in PATHS.values():
        path()
for path in PATHS.values():
    run_thread(cold_thread, path)
run_thread(warm_thread)
with open("expected_tail.json", "w", encoding="utf-8") as fh:
    json.dump(expected, fh)
