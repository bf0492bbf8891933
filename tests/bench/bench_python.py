"""Benchmark: cudaMalloc + cudaFree pairs from Python through ctypes on the simulated GPU,
made from 40 Python frames deep, so Python frame capture walks its full depth. Prints the
nanoseconds per pair (best of 5 rounds); tests/bench/run.sh runs it with Python frames on and
off and reports the difference."""
import ctypes
import sys
import time

rt = ctypes.CDLL("libcudart.so.13")
malloc, free = rt.cudaMalloc, rt.cudaFree
p = ctypes.c_void_p()
ref = ctypes.byref(p)
size = ctypes.c_size_t(4096)


def pairs(n):
    for _ in range(n):
        malloc(ref, size)
        free(p)


def deep(depth, n):
    if depth:
        return deep(depth - 1, n)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        pairs(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
print(f"{deep(40, n):.0f}")
