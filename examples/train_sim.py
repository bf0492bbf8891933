#!/usr/bin/env python3
"""A training-like job that runs out of GPU memory the way YOLOv9 does, with no framework.

It drives the CUDA runtime through ctypes (on the simulated GPU where there is no real one):
a caching allocator like PyTorch's keeps freed blocks for reuse, splits them for smaller
requests and, when cudaMalloc fails, releases its cache and retries once before raising "CUDA out
of memory" (PYTORCH_CUDA_ALLOC_CONF's max_split_size_mb and expandable_segments are honoured). The memory it asks
for follows a detector's shape: weights, gradients, EMA and optimizer state that do not depend
on the batch, then activations that grow with the batch and with the square of the image side,
freed again by the backward pass; validation runs at twice the batch, without gradients.
--static-gib, --sample-mib and --val-mem set the workload's truth for the accuracy tests.
--no-cache replaces the caching allocator by one cudaMalloc and cudaFree per tensor (the same
requests, nothing kept), so the job's peak is its need; --no-retry makes the caching allocator
raise at the first failed cudaMalloc without releasing its cache. --multi-scale trains each
step at another image side between half and one and a half times --img, as YOLOv5/v7/v9's
--multi-scale and Ultralytics' multi_scale=True do; here the sides follow a fixed cycle (1, 0.75,
1.5, 0.5, 1.25 times --img, rounded down to a multiple of 32) rather than a random draw, so the
largest side comes at the third step and a run's outcome does not depend on chance.

The sizes are anchored on published YOLOv9-s figures on a 16 GB V100 at 640x640 with AMP
(peak 15.8 GB at batch 64, 9.6 GB at batch 32: about 3.2 GiB fixed and 0.18 GiB per image).
Here they are 3.0 GiB and 0.205 GiB per image, so that batch 64 does not fit a 16 GiB card
once the CUDA context and the allocator's rounding are counted, as users report.

    python3 examples/train_sim.py --batch 64 --img 640            # runs out of memory
    python3 examples/train_sim.py --batch 32 --img 640            # fits

The same job takes the batch, image size and epochs as the usual training scripts spell them, so
that one workload can be run in each style without changing what it does:

    YOLOv5/v7/v9     --batch 32, --batch-size 32, --img 640, --imgsz, --img-size, --epochs 2
    Ultralytics      batch=32 imgsz=640 epochs=2 (also --batch=32: leading "--" is dropped)
    Hugging Face     --per_device_train_batch_size 32 (or --per-device-train-batch-size),
                     --num_train_epochs 2 (or --num-train-epochs)
    generic          --bs 32, -b 32, --batch_size 32, --image-size 640, --image_size, --img_size

The output ends with the peak reserved memory, like torch.cuda.max_memory_reserved().
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


# --multi-scale: the image side of each training step, as a share of --img, in turn
MULTI_SCALE = (1.0, 0.75, 1.5, 0.5, 1.25)


class OutOfMemory(RuntimeError):
    pass


def out_of_memory(rt, device, size, allocated, reserved):
    """PyTorch's message, so that tools reading the output see the text they know."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    return OutOfMemory(
        f"CUDA out of memory. Tried to allocate {fmt(size)}. GPU {device} has a total "
        f"capacity of {fmt(total.value)} of which {fmt(free.value)} is free. Of the "
        f"allocated memory {fmt(allocated)} is allocated by this job, and "
        f"{fmt(reserved - allocated)} is reserved but unallocated.")


def declare_retries():
    """Tell vramwatch, when it is preloaded, that this allocator releases its cache and retries
    a failed cudaMalloc once: in observe mode it then gets the small card's failure at the
    allocation that crosses the limit, flushes as it would there, and the run measures the need
    instead of a peak swollen by cache. Without the library (or an older one) there is nothing
    to tell."""
    try:
        fn = ctypes.CDLL(None).vramwatch_allocator_retries
    except AttributeError:
        return
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    fn(1)


def fmt(n):
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.2f} MiB"


class Block:
    __slots__ = ("seg", "offset", "size", "free")

    def __init__(self, seg, offset, size, free):
        self.seg, self.offset, self.size, self.free = seg, offset, size, free


class Segment:
    """One cudaMalloc'ed range, cut into blocks (kept in address order)."""

    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size
        self.blocks = [Block(self, 0, size, True)]


class CachingAllocator:
    """PyTorch's default CUDA caching allocator, reduced to what decides memory: requests are
    rounded, segments come from cudaMalloc and stay cached after free, a cached block is split to
    serve a smaller request (best fit), neighbouring free blocks merge, and when cudaMalloc fails
    the segments that are wholly free are released and the call retried once before "CUDA out of
    memory". PYTORCH_CUDA_ALLOC_CONF is honoured as PyTorch reads it:
    max_split_size_mb:N (blocks of N MiB or more are never split, and serve only requests within
    20 MiB of their size: the fragmentation it was made for, and causes) and
    expandable_segments:True (no fragmentation: modelled as memory given back as soon as it is
    freed and asked for again at the exact size)."""

    SMALL = 1 * MiB        # PyTorch's kSmallSize: a remainder above it is split off
    LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment for mid-sized requests, the oversize slack

    def __init__(self, rt, device, total, conf="", retry=True):
        self.rt = rt
        # --no-retry: a program that raises at the first failed cudaMalloc, keeping its cache
        self.retry = retry
        if retry:
            declare_retries()
        self.device = device
        self.total = total
        self.segments = []
        self.allocated = 0       # handed to tensors
        self.reserved = 0        # asked of CUDA
        self.max_reserved = 0
        self.max_allocated = 0
        self.retries = 0
        self.max_split = None
        self.expandable = False
        for item in conf.replace(";", ",").split(","):
            key, _, value = item.partition(":")
            key, value = key.strip(), value.strip()
            if key == "max_split_size_mb" and value.isdigit():
                self.max_split = int(value) * MiB
            elif key == "expandable_segments":
                self.expandable = value == "True"

    @staticmethod
    def round_size(n):
        return max(512, (n + 511) // 512 * 512) if n < MiB else (n + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)

    def segment_size(self, size):
        if self.expandable:
            return size
        if size <= self.SMALL:
            return 2 * MiB
        if size < 10 * MiB:
            return self.LARGE_BUFFER
        return size

    def _cuda_malloc(self, size):
        ptr = ctypes.c_void_p()
        err = self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
        if err != 0:
            self.rt.cudaGetLastError()
            return None
        return ptr.value

    def _usable(self, b, size):
        if not b.free or b.size < size:
            return False
        if self.max_split is not None:
            if size < self.max_split and b.size >= self.max_split:
                return False
            if size >= self.max_split and b.size >= size + self.LARGE_BUFFER:
                return False
        return True

    def _release_free_segments(self):
        keep = []
        for seg in self.segments:
            if len(seg.blocks) == 1 and seg.blocks[0].free:
                self.rt.cudaFree(ctypes.c_void_p(seg.ptr))
                self.reserved -= seg.size
            else:
                keep.append(seg)
        self.segments = keep

    def empty_cache(self):
        """torch.cuda.empty_cache(): give back the segments nothing is using."""
        self._release_free_segments()

    def malloc(self, nbytes):
        size = self.round_size(nbytes)
        best = None
        if not self.expandable:
            for seg in self.segments:
                for b in seg.blocks:
                    if self._usable(b, size) and (best is None or b.size < best.size):
                        best = b
        if best is None:
            seg_size = self.segment_size(size)
            p = self._cuda_malloc(seg_size)
            if p is None and self.retry:
                # PyTorch's one retry: give back the wholly free segments, ask again for the same size
                self._release_free_segments()
                self.retries += 1
                p = self._cuda_malloc(seg_size)
            if p is None:
                raise out_of_memory(self.rt, self.device, size, self.allocated, self.reserved)
            seg = Segment(p, seg_size)
            self.segments.append(seg)
            self.reserved += seg_size
            self.max_reserved = max(self.max_reserved, self.reserved)
            best = seg.blocks[0]
        remaining = best.size - size
        splittable = self.max_split is None or size < self.max_split
        if remaining > self.SMALL and splittable:
            seg = best.seg
            i = seg.blocks.index(best)
            seg.blocks.insert(i + 1, Block(seg, best.offset + size, remaining, True))
            best.size = size
        best.free = False
        self.allocated += best.size
        self.max_allocated = max(self.max_allocated, self.allocated)
        return best

    def free(self, block):
        self.allocated -= block.size
        block.free = True
        seg = block.seg
        if self.expandable:
            self.rt.cudaFree(ctypes.c_void_p(seg.ptr))
            self.reserved -= seg.size
            self.segments.remove(seg)
            return
        i = seg.blocks.index(block)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].free:
            block.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].free:
            prev = seg.blocks[i - 1]
            prev.size += block.size
            seg.blocks.pop(i)


class Tensor:
    __slots__ = ("ptr", "size")

    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size


class DirectAllocator:
    """No cache (--no-cache): each tensor is its own cudaMalloc, given back by cudaFree as soon
    as it is freed, as a framework without a caching allocator does. The requests are the caching
    allocator's, unrounded; nothing is kept between phases, so the peak of a run is what the job
    needs. There is no cache to release, so a failed cudaMalloc is the end: no retry."""

    def __init__(self, rt, device):
        self.rt = rt
        self.device = device
        self.allocated = 0
        self.reserved = 0
        self.max_reserved = 0
        self.max_allocated = 0
        self.retries = 0

    def malloc(self, nbytes):
        size = max(1, nbytes)  # cudaMalloc(0) would hand back no pointer to free
        ptr = ctypes.c_void_p()
        if self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) != 0:
            self.rt.cudaGetLastError()
            raise out_of_memory(self.rt, self.device, size, self.allocated, self.reserved)
        self.allocated += size
        self.reserved = self.allocated
        self.max_reserved = self.max_allocated = max(self.max_reserved, self.reserved)
        return Tensor(ptr.value, size)

    def free(self, t):
        self.rt.cudaFree(ctypes.c_void_p(t.ptr))
        self.allocated -= t.size
        self.reserved = self.allocated

    def empty_cache(self):
        """Nothing is cached."""


def load_runtime():
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("train_sim: no CUDA runtime found (build the project, or set LD_LIBRARY_PATH to "
             "the simulated GPU in build/tools/simgpu)")


def stepper():
    """vramwatch_step when the library is preloaded (and has it), else a no-op."""
    try:
        fn = ctypes.CDLL(None).vramwatch_step
        fn.argtypes = []
        return fn
    except AttributeError:
        return lambda: None


def marker():
    """vramwatch_mark when the library is preloaded, else a no-op."""
    try:
        fn = ctypes.CDLL(None).vramwatch_mark
        fn.argtypes = [ctypes.c_char_p]
        return lambda label: fn(label.encode())
    except AttributeError:
        return lambda label: None


# Ultralytics' keys this job understands, and the option each one is (`yolo train batch=16`)
ULTRALYTICS_KEYS = {"batch": "--batch", "imgsz": "--imgsz", "epochs": "--epochs", "device": "--device",
                    "workers": "--workers"}


def from_key_value(argv):
    """Ultralytics' key=value items as the options argparse knows, before it sees them. Like
    Ultralytics, a leading "--" is dropped first (`--batch=16` is batch=16); unknown keys are left
    for argparse to refuse, and nothing after "--" is touched."""
    out = []
    for i, a in enumerate(argv):
        if a == "--":
            return out + argv[i:]
        key, eq, value = (a[2:] if a.startswith("--") else a).partition("=")
        if eq and key in ULTRALYTICS_KEYS:
            out += [ULTRALYTICS_KEYS[key], value]
        elif eq and key == "multi_scale":  # a switch: multi_scale=True
            out += ["--multi-scale"] if value.lower() in ("true", "1") else []
        else:
            out.append(a)
    return out


def whole(text):
    """An integer, also written as Hugging Face's float epochs ("2.0"): a fraction of an epoch
    is not something this job can run, so it is refused rather than rounded."""
    try:
        return int(text)
    except ValueError:
        v = float(text)
        if not v.is_integer():
            raise argparse.ArgumentTypeError(f"{text} is not a whole number") from None
        return int(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # One option per quantity, under each style's spelling (see the top of this file), so the
    # same job can be given as any of them and does the same thing.
    ap.add_argument("--batch", "--batch-size", "--per_device_train_batch_size",
                    "--per-device-train-batch-size", "--bs", "-b", "--batch_size",
                    dest="batch", type=int, default=16)
    ap.add_argument("--img", "--imgsz", "--img-size", "--image-size", "--image_size", "--img_size",
                    dest="img", type=int, default=640)
    ap.add_argument("--epochs", "--num_train_epochs", "--num-train-epochs", dest="epochs", type=whole,
                    default=2)
    ap.add_argument("--steps", type=int, default=4, help="steps per epoch")
    ap.add_argument("--cfg", choices=sorted(CONFIGS), default="s")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--workers", type=int, default=8, help="accepted for YOLOv9 compatibility")
    # The workload itself, for tests that need to know the truth (defaults: --cfg's figures)
    ap.add_argument("--static-gib", type=float, help="memory that does not depend on the batch")
    ap.add_argument("--sample-mib", type=float, help="training activations per image at 640x640")
    ap.add_argument("--val-mem", type=float, default=1 / 3,
                    help="validation's working set (at twice the batch) as a share of training's "
                         "activations at the batch; above 1 validation is the peak")
    ap.add_argument("--keep-cache", action="store_true",
                    help="do not empty the allocator's cache after validation: its segments are then "
                         "split by the next epoch's training (fragmentation)")
    ap.add_argument("--leak-mib-per-epoch", type=int, default=0, metavar="MIB",
                    help="keep MIB of device memory per epoch for good (a history of tensors that "
                         "still hold their graph): the slow leak that ends in an OOM after hours")
    ap.add_argument("--step-ms", type=float, default=0.0, metavar="MS",
                    help="time each training step takes (default 0: as fast as it goes)")
    ap.add_argument("--no-markers", action="store_true",
                    help="do not call vramwatch_mark nor vramwatch_step (phases and steps must then "
                         "be found from the run)")
    ap.add_argument("--no-cache", action="store_true",
                    help="no caching allocator: every tensor is its own cudaMalloc and cudaFree")
    ap.add_argument("--multi-scale", "--multi_scale", dest="multi_scale", action="store_true",
                    help="train each step at another image side, up to 1.5 times --img (validation "
                         "stays at --img)")
    ap.add_argument("--no-retry", action="store_true",
                    help="the caching allocator raises at the first failed cudaMalloc, without "
                         "releasing its cache and retrying (and does not tell vramwatch it would)")
    args = ap.parse_args(from_key_value(sys.argv[1:]))
    if args.batch < 1 or args.img < 32:
        ap.error("--batch must be >= 1 and --img >= 32")
    if (args.static_gib is not None and args.static_gib < 0) or \
            (args.sample_mib is not None and args.sample_mib <= 0) or args.val_mem < 0:
        ap.error("--static-gib must be >= 0, --sample-mib > 0 and --val-mem >= 0")

    rt = load_runtime()
    mark = marker() if not args.no_markers else (lambda label: None)
    # the end of each training step, where a real job's companion says it (optimizer.step)
    step_done = stepper() if not args.no_markers else (lambda: None)
    if rt.cudaSetDevice(args.device) != 0:
        sys.exit(f"train_sim: cannot use device {args.device}")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    if args.no_cache:
        alloc = DirectAllocator(rt, args.device)
    else:
        alloc = CachingAllocator(rt, args.device, total.value, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                                 retry=not args.no_retry)
    fixed, per_image, layers = CONFIGS[args.cfg]
    if args.static_gib is not None:
        fixed = int(args.static_gib * GiB)
    if args.sample_mib is not None:
        per_image = int(args.sample_mib * MiB)
    per_image_640 = per_image
    per_image = int(per_image * (args.img / 640) ** 2)
    kind = "no cache" if args.no_cache else "caching allocator, no retry" if args.no_retry else "caching allocator"
    print(f"train_sim: yolov9-{args.cfg} batch {args.batch} img {args.img} epochs {args.epochs} ({kind}) on a "
          f"{fmt(total.value)} card ({fmt(free.value)} free)", flush=True)

    t0 = time.time()
    steps = 0
    history = []  # what --leak-mib-per-epoch keeps
    try:
        mark("setup")
        # weights, gradients, EMA copy, optimizer state, workspaces: a few large buffers
        model = [alloc.malloc(fixed // 8) for _ in range(8)] if fixed >= 8 else []
        for epoch in range(args.epochs):
            mark(f"epoch {epoch} train")
            for _ in range(args.steps):
                side = args.img
                if args.multi_scale:
                    side = max(32, int(args.img * MULTI_SCALE[steps % len(MULTI_SCALE)]) // 32 * 32)
                step_image = int(per_image_640 * (side / 640) ** 2)
                # forward: activations kept for backward, one per layer, growing with depth
                acts = []
                for layer in range(layers):
                    share = (2 * (layer + 1)) / (layers * (layers + 1))
                    acts.append(alloc.malloc(int(step_image * args.batch * share)))
                # backward: activation gradients come and go, activations are released
                for a in reversed(acts):
                    g = alloc.malloc(a.size // 2)
                    alloc.free(a)
                    alloc.free(g)
                steps += 1
                step_done()
                if args.step_ms > 0:
                    time.sleep(args.step_ms / 1000)
            if args.leak_mib_per_epoch > 0:
                p = ctypes.c_void_p()
                if rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(args.leak_mib_per_epoch * MiB)) != 0:
                    raise OutOfMemory(f"CUDA out of memory keeping the epoch's history ({epoch})")
                history.append(p)
            mark(f"epoch {epoch} val")
            # validation: inference at twice the batch, no gradients: each layer's output is
            # kept only until the next layer has read it (two live at a time)
            if args.val_mem > 0:
                each = int(per_image * args.batch * args.val_mem / 2)
                prev = alloc.malloc(each)
                for _ in range(layers - 1):
                    out = alloc.malloc(each)
                    alloc.free(prev)
                    prev = out
                alloc.free(prev)
            if not args.keep_cache:
                # what Ultralytics' trainer does after validation (torch.cuda.empty_cache)
                alloc.empty_cache()
        del model
    except OutOfMemory as e:
        print(f"train_sim: {e}", file=sys.stderr)
        print(f"train_sim: max reserved {fmt(alloc.max_reserved)} after {steps} steps",
              file=sys.stderr)
        return 1
    dt = time.time() - t0
    print(f"train_sim: {steps} steps, {steps / dt:.1f} steps/s, max reserved "
          f"{fmt(alloc.max_reserved)} ({alloc.max_reserved} bytes), max allocated "
          f"{fmt(alloc.max_allocated)}, {alloc.retries} cache flushes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
