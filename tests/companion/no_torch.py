"""A Python job that never imports torch, with device memory on the simulated GPU: the companion
must not import torch, and places no marker."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import facts  # noqa: E402

facts.record()
# The simulated runtime by path (the test gives it): with PyTorch's CUDA wheel imported, the
# wheel's own libcudart.so.13 is already loaded under that soname and would answer instead.
rt = ctypes.CDLL(os.environ.get("VW_TEST_CUDART", "libcudart.so.13"))
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
