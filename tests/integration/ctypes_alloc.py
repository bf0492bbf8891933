"""Allocates through the simulated runtime from Python with ctypes, as people do in notebooks:
CDLL releases the GIL during the call, PyDLL keeps it. Both go through dlsym on a library
handle, which is the path under test."""
import ctypes

MiB = 1 << 20

rt = ctypes.CDLL("libcudart.so.13")  # RTLD_LOCAL: only dlsym on this handle finds it
a, b = ctypes.c_void_p(), ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(a), ctypes.c_size_t(1 * MiB)) == 0
assert rt.cudaMalloc(ctypes.byref(b), ctypes.c_size_t(5 * MiB)) == 0
assert rt.cudaFree(b) == 0

rt_gil = ctypes.PyDLL("libcudart.so.13")
c = ctypes.c_void_p()
assert rt_gil.cudaMalloc(ctypes.byref(c), ctypes.c_size_t(2 * MiB)) == 0
