#!/usr/bin/env python3
"""A training-like job that runs out of GPU memory the way YOLOv9 does, with no framework.

It drives the CUDA runtime through ctypes (on the simulated GPU where there is no real one):
a caching allocator like PyTorch's keeps freed blocks for reuse and, when cudaMalloc fails,
releases its cache and retries once before raising "CUDA out of memory". The memory it asks
for follows a detector's shape: weights, gradients, EMA and optimizer state that do not depend
on the batch, then activations that grow with the batch and with the square of the image side,
freed again by the backward pass; validation runs at twice the batch, without gradients.

The sizes are anchored on published YOLOv9-s figures on a 16 GB V100 at 640x640 with AMP
(peak 15.8 GB at batch 64, 9.6 GB at batch 32: about 3.2 GiB fixed and 0.18 GiB per image).
Here they are 3.0 GiB and 0.205 GiB per image, so that batch 64 does not fit a 16 GiB card
once the CUDA context and the allocator's rounding are counted, as users report.

    python3 examples/train_sim.py --batch 64 --img 640            # runs out of memory
    python3 examples/train_sim.py --batch 32 --img 640            # fits

Flags follow YOLOv9's spelling (--batch/--batch-size, --img/--imgsz, --epochs, --cfg). The
output ends with the peak reserved memory, like torch.cuda.max_memory_reserved().
"""
import argparse
import ctypes
import os
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

# Per model size: (fixed bytes, activation bytes per image at 640x640, layers)
CONFIGS = {
    "s": (int(3.0 * GiB), int(0.205 * GiB), 24),
    "m": (int(4.6 * GiB), int(0.300 * GiB), 32),
    "c": (int(6.2 * GiB), int(0.410 * GiB), 40),
}


class OutOfMemory(RuntimeError):
    pass


def fmt(n):
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.2f} MiB"


class CachingAllocator:
    """Whole segments from cudaMalloc, kept after free for reuse (PyTorch's default allocator,
    reduced to what matters for memory: rounding, caching, release-and-retry on failure)."""

    def __init__(self, rt, device, total):
        self.rt = rt
        self.device = device
        self.total = total
        self.cache = []          # (size, ptr) of freed segments
        self.allocated = 0       # handed to tensors
        self.reserved = 0        # asked of CUDA
        self.max_reserved = 0
        self.retries = 0

    @staticmethod
    def round_size(n):
        # Small requests share 2 MiB segments in PyTorch; large ones round up to 2 MiB.
        return max(512, (n + 511) // 512 * 512) if n < MiB else (n + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)

    def _cuda_malloc(self, size):
        ptr = ctypes.c_void_p()
        err = self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
        if err != 0:
            self.rt.cudaGetLastError()
            return None
        return ptr.value

    def malloc(self, nbytes):
        size = self.round_size(nbytes)
        # 1. a cached segment that fits (best fit, and not more than 20 MiB too big)
        best = None
        for i, (s, p) in enumerate(self.cache):
            if size <= s <= size + 20 * MiB and (best is None or s < self.cache[best][0]):
                best = i
        if best is not None:
            s, p = self.cache.pop(best)
            self.allocated += s
            return (s, p)
        # 2. a new segment; 3. on failure release every cached segment and retry once
        p = self._cuda_malloc(size)
        if p is None:
            for s, q in self.cache:
                self.rt.cudaFree(ctypes.c_void_p(q))
                self.reserved -= s
            self.cache.clear()
            self.retries += 1
            p = self._cuda_malloc(size)
        if p is None:
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            self.rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
            raise OutOfMemory(
                f"CUDA out of memory. Tried to allocate {fmt(size)}. GPU {self.device} has a total "
                f"capacity of {fmt(total.value)} of which {fmt(free.value)} is free. Of the "
                f"allocated memory {fmt(self.allocated)} is allocated by this job, and "
                f"{fmt(self.reserved - self.allocated)} is reserved but unallocated.")
        self.reserved += size
        self.max_reserved = max(self.max_reserved, self.reserved)
        self.allocated += size
        return (size, p)

    def free(self, block):
        self.allocated -= block[0]
        self.cache.append(block)


def load_runtime():
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("train_sim: no CUDA runtime found (build the project, or set LD_LIBRARY_PATH to "
             "the simulated GPU in build/tools/simgpu)")


def marker():
    """vramwatch_mark when the library is preloaded, else a no-op."""
    try:
        fn = ctypes.CDLL(None).vramwatch_mark
        fn.argtypes = [ctypes.c_char_p]
        return lambda label: fn(label.encode())
    except AttributeError:
        return lambda label: None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", "--batch-size", type=int, default=16)
    ap.add_argument("--img", "--imgsz", "--img-size", type=int, default=640)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4, help="steps per epoch")
    ap.add_argument("--cfg", choices=sorted(CONFIGS), default="s")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--workers", type=int, default=8, help="accepted for YOLOv9 compatibility")
    ap.add_argument("--leak-mib-per-epoch", type=int, default=0, metavar="MIB",
                    help="keep MIB of device memory per epoch for good (a history of tensors that "
                         "still hold their graph): the slow leak that ends in an OOM after hours")
    ap.add_argument("--step-ms", type=float, default=0.0, metavar="MS",
                    help="time each training step takes (default 0: as fast as it goes)")
    ap.add_argument("--no-markers", action="store_true",
                    help="do not call vramwatch_mark (phases must then be found from the run)")
    args = ap.parse_args()
    if args.batch < 1 or args.img < 32:
        ap.error("--batch must be >= 1 and --img >= 32")

    rt = load_runtime()
    mark = marker() if not args.no_markers else (lambda label: None)
    if rt.cudaSetDevice(args.device) != 0:
        sys.exit(f"train_sim: cannot use device {args.device}")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    alloc = CachingAllocator(rt, args.device, total.value)
    fixed, per_image, layers = CONFIGS[args.cfg]
    per_image = int(per_image * (args.img / 640) ** 2)
    print(f"train_sim: yolov9-{args.cfg} batch {args.batch} img {args.img} on a "
          f"{fmt(total.value)} card ({fmt(free.value)} free)", flush=True)

    t0 = time.time()
    steps = 0
    history = []  # what --leak-mib-per-epoch keeps
    try:
        mark("setup")
        # weights, gradients, EMA copy, optimizer state, workspaces: a few large buffers
        model = [alloc.malloc(fixed // 8) for _ in range(8)]
        for epoch in range(args.epochs):
            mark(f"epoch {epoch} train")
            for _ in range(args.steps):
                # forward: activations kept for backward, one per layer, growing with depth
                acts = []
                for layer in range(layers):
                    share = (2 * (layer + 1)) / (layers * (layers + 1))
                    acts.append(alloc.malloc(int(per_image * args.batch * share)))
                # backward: activation gradients come and go, activations are released
                for a in reversed(acts):
                    g = alloc.malloc(a[0] // 2)
                    alloc.free(a)
                    alloc.free(g)
                steps += 1
                if args.step_ms > 0:
                    time.sleep(args.step_ms / 1000)
            if args.leak_mib_per_epoch > 0:
                p = ctypes.c_void_p()
                if rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(args.leak_mib_per_epoch * MiB)) != 0:
                    raise OutOfMemory(f"CUDA out of memory keeping the epoch's history ({epoch})")
                history.append(p)
            mark(f"epoch {epoch} val")
            # validation: twice the batch, no gradients, half precision: a third of the memory
            vacts = [alloc.malloc(int(per_image * args.batch * 2 / 3 / layers)) for _ in range(layers)]
            for a in vacts:
                alloc.free(a)
        del model
    except OutOfMemory as e:
        print(f"train_sim: {e}", file=sys.stderr)
        print(f"train_sim: max reserved {fmt(alloc.max_reserved)} after {steps} steps",
              file=sys.stderr)
        return 1
    dt = time.time() - t0
    print(f"train_sim: {steps} steps, {steps / dt:.1f} steps/s, max reserved "
          f"{fmt(alloc.max_reserved)} ({alloc.max_reserved} bytes), {alloc.retries} cache flushes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
