"""C++ exceptions of a real C++ library under the preload: PyTorch (Debian's CPU build) throws
c10::Error for bad arguments, from libraries Python loaded with RTLD_LOCAL. The throw must
reach its Python handler unchanged (the library's __cxa_throw forwards it to the C++ runtime,
which here is not in the global scope)."""
import torch

for bad in (lambda: torch.zeros(-1), lambda: torch.ones(2, 3) @ torch.ones(4, 5)):
    try:
        bad()
    except RuntimeError as e:
        assert str(e), "an empty message"
    else:
        raise SystemExit("no exception")
print("torch exceptions arrived unchanged")
