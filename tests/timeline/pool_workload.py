#!/usr/bin/env python3
"""A stream-ordered workload on the simulated GPU, recorded as tests/timeline/data/pool-async.json.

Each step allocates activations with cudaMallocAsync and frees them with cudaFreeAsync without
synchronising, so the device's pool keeps what it reached: reserved memory stays above live
memory (the fragmentation band of `vramwatch timeline`). Validation marks show the phases.
usage: LD_PRELOAD=libvramwatch.so LD_LIBRARY_PATH=build/tools/simgpu python3 pool_workload.py
"""
import ctypes
import time

MiB = 1 << 20
rt = ctypes.CDLL("libcudart.so")
try:
    mark = ctypes.CDLL(None).vramwatch_mark
    mark.argtypes = [ctypes.c_char_p]
except AttributeError:
    mark = lambda label: None


def alloc(size):
    p = ctypes.c_void_p()
    assert rt.cudaMallocAsync(ctypes.byref(p), ctypes.c_size_t(size), None) == 0
    return p


weights = [alloc(256 * MiB) for _ in range(4)]
for epoch in range(3):
    mark(f"epoch {epoch}".encode())
    for step in range(6):
        acts = [alloc((64 + 32 * k + 16 * step) * MiB) for k in range(8)]
        for p in acts[::2]:
            rt.cudaFreeAsync(p, None)
        time.sleep(0.01)
        for p in acts[1::2]:
            rt.cudaFreeAsync(p, None)
    mark(f"val {epoch}".encode())
    val = [alloc(48 * MiB) for _ in range(4)]
    for p in val:
        rt.cudaFreeAsync(p, None)
    time.sleep(0.01)
