#!/usr/bin/env python3
"""What the simulated card's convolutions cost beyond cuDNN's, on examples/train_torch.py.

Run on the simulated card (vramwatch sim 16GiB -- PY tests/bench/cudnn_columns.py [--batch N]).
cuDNN is off there (docs/simgpu.md, "cuDNN"), so PyTorch's own convolution (slow_conv2d) runs:
for each sample it fills an im2col buffer of C_in*kh*kw x H_out*W_out elements
(aten/src/ATen/native/cuda/ConvolutionMM2d.cu), which cuDNN does not allocate (it takes a
workspace of its own choice instead). This prints the peak PyTorch measured, the largest such
buffer of the model's real convolutions (shapes taken from forward hooks, the buffer from that
rule, in the dtype the convolution ran in) and its share of the peak: what the simulated peak
can exceed a zero-workspace cuDNN run by, since one buffer is live at a time.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--img", type=int, default=640)
    ap.add_argument("--cfg", default="s")
    a = ap.parse_args()
    import train_torch
    model = train_torch.Detector(*train_torch.CONFIGS[a.cfg]).cuda()
    biggest = [0, ""]

    def hook(mod, inp, out):
        x = inp[0]
        kh, kw = mod.kernel_size
        if (kh, kw) == (1, 1) and mod.stride == (1, 1) and mod.padding in ((0, 0), 0):
            return  # a 1x1 convolution reads its input in place: no buffer
        cols = x.shape[1] // mod.groups * kh * kw * out.shape[2] * out.shape[3] * out.element_size()
        if cols > biggest[0]:
            biggest[:] = [cols, f"{tuple(x.shape)} -> {tuple(out.shape)}, {kh}x{kw}"]

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.register_forward_hook(hook)
    x = torch.randn(a.batch, 3, a.img, a.img, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        out = model(x)
        loss = sum(o.float().mean() for o in (out if isinstance(out, (list, tuple)) else [out]))
    loss.backward()
    peak = torch.cuda.max_memory_allocated()
    print(f"cudnn enabled: {torch.backends.cudnn.enabled}")
    print(f"peak allocated (one step, batch {a.batch}, {a.img}px, cfg {a.cfg}, AMP): {peak / 2**30:.2f} GiB")
    print(f"largest im2col buffer: {biggest[0] / 2**20:.1f} MiB ({biggest[1]}), "
          f"{biggest[0] / peak * 100:.2f}% of the peak")


if __name__ == "__main__":
    main()
    # Ends without the interpreter's finalization: PyTorch's autograd device thread may still be
    # dropping the finished backward's state and then dies taking the GIL (std::terminate,
    # pytorch/pytorch#38228 and #38230), on a real card as here.
    sys.stdout.flush()
    os._exit(0)
