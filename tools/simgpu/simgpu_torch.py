"""The simulated card's PyTorch side, run by the simulated libcudart at PyTorch's first CUDA call.

No kernel runs on the simulated card, and what a kernel would have computed reads back as zeros
(tools/simgpu/readback.c). For most operators that is harmless: a size the device counts comes
back as 0, as for an input that holds nothing, and the framework goes on. Unique is the
exception: the unique values of a non-empty tensor are never none, and code that takes
`counts.max()` of them fails where it could never fail on a card (Ultralytics' loss does, at
every step). So the unique operators run on the host here, over the bytes the tensor reads back
as; the result goes back to the card by a copy, and is as exact as its input.

Nothing else changes: every other operator is PyTorch's own. This module keeps the registration
alive (a torch.library.Library is dropped with its last reference) as sys.modules['_simgpu_torch'].
"""
import warnings

import torch

# aten operators whose output size the device computes and for which no input gives "none".
UNIQUE_OPS = ("_unique", "_unique2", "unique_dim", "unique_consecutive",
              "unique_dim_consecutive")


def _on_host(op):
    def run(*args, **kwargs):
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        args = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
        out = op(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            return out.to(device)
        return tuple(t.to(device) for t in out)
    return run


def _install():
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # "Overriding a previously registered kernel": that is the point
        warnings.simplefilter("ignore")
        for name in UNIQUE_OPS:
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            lib.impl(name, _on_host(packet.default), "CUDA")
    return lib


LIBRARY = _install()
