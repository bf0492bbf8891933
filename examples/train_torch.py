#!/usr/bin/env python3
"""A YOLO-like detector trained on synthetic data, in plain PyTorch: the real-GPU example.

Conv-BN-SiLU backbone with split-and-merge (ELAN-style) blocks, a path-aggregation neck, three
detection heads (strides 8, 16, 32), a simple anchor-free detection loss, an EMA copy of the
weights, SGD or AdamW. Nothing is downloaded: images and boxes are random, seeded.

Flags follow YOLOv9's spelling, so the commands vramwatch advises can be pasted here:

    python3 examples/train_torch.py --batch 64 --img 640 --cfg s --epochs 2 --steps 20
    vramwatch run -- python3 examples/train_torch.py --batch 64 --img 640

It prints steps per second and torch.cuda.max_memory_reserved(). When libvramwatch is
preloaded it puts markers on the timeline at phase changes (vramwatch_mark), and with
--report-at-end it asks for a report right after printing torch.cuda.memory_reserved(), so the
two can be compared at the same moment (tests/gpu/run.sh does).
"""
import argparse
import copy
import ctypes
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
except ImportError:  # very old PyTorch
    torch_checkpoint = None

# width of the first stage, blocks per stage: 6.6 M, 18.1 M and 24.7 M parameters, close to
# YOLOv9-s, -m and -c (7.1 M, 20.0 M, 25.3 M)
CONFIGS = {"s": (24, 1), "m": (40, 1), "c": (40, 2)}
# --multi-scale: each training step's image side as a share of --img, in turn. YOLOv5/v7/v9 draw
# it at random from [0.5, 1.5] x imgsz, rounded down to the stride; a fixed cycle reaches the
# largest side at the third step, whatever the seed.
MULTI_SCALE = (1.0, 0.75, 1.5, 0.5, 1.25)
NUM_CLASSES = 80


# ---------------------------------------------------------------- model

class Conv(nn.Module):
    """Conv2d + BatchNorm + SiLU, YOLO's basic unit."""

    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1 = Conv(c, c, 3)
        self.cv2 = Conv(c, c, 3)

    def forward(self, x):
        return x + self.cv2(self.cv1(x))


class SplitMerge(nn.Module):
    """ELAN-style block: split the channels, run one half through a chain of bottlenecks while
    keeping every intermediate output, concatenate everything, mix with a 1x1 conv."""

    def __init__(self, c1, c2, n):
        super().__init__()
        self.h = c2 // 2
        self.cv1 = Conv(c1, 2 * self.h)
        self.m = nn.ModuleList(Bottleneck(self.h) for _ in range(n))
        self.cv2 = Conv((2 + n) * self.h, c2)

    def forward(self, x):
        y = list(self.cv1(x).split(self.h, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class Stage(nn.Module):
    def __init__(self, c1, c2, n):
        super().__init__()
        self.down = Conv(c1, c2, 3, 2)
        self.block = SplitMerge(c2, c2, n)

    def forward(self, x):
        return self.block(self.down(x))


class Detector(nn.Module):
    def __init__(self, width, depth, nc=NUM_CLASSES, checkpoint=False):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8, width * 16]
        self.checkpoint = checkpoint
        self.stem = Conv(3, w[0], 3, 2)                      # /2
        self.stages = nn.ModuleList([
            Stage(w[0], w[1], depth),                        # /4
            Stage(w[1], w[2], 2 * depth),                    # /8  -> P3
            Stage(w[2], w[3], 2 * depth),                    # /16 -> P4
            Stage(w[3], w[4], depth),                        # /32 -> P5
        ])
        # neck: top-down then bottom-up path aggregation
        self.lat5 = Conv(w[4], w[3])
        self.td4 = SplitMerge(w[3] * 2, w[3], depth)
        self.lat4 = Conv(w[3], w[2])
        self.td3 = SplitMerge(w[2] * 2, w[2], depth)
        self.down3 = Conv(w[2], w[2], 3, 2)
        self.bu4 = SplitMerge(w[2] + w[3], w[3], depth)
        self.down4 = Conv(w[3], w[3], 3, 2)
        self.bu5 = SplitMerge(w[3] + w[4], w[4], depth)
        # heads: per cell 4 box values, 1 objectness, nc classes
        self.no = 5 + nc
        self.heads = nn.ModuleList(
            nn.Sequential(Conv(c, c, 3), nn.Conv2d(c, self.no, 1)) for c in (w[2], w[3], w[4]))
        self.strides = (8, 16, 32)

    def _stage(self, i, x):
        if self.checkpoint and self.training and torch_checkpoint is not None:
            try:
                return torch_checkpoint(self.stages[i], x, use_reentrant=False)
            except TypeError:  # PyTorch before 1.11
                return torch_checkpoint(self.stages[i], x)
        return self.stages[i](x)

    def forward(self, x):
        x = self.stem(x)
        x = self._stage(0, x)
        p3 = self._stage(1, x)
        p4 = self._stage(2, p3)
        p5 = self._stage(3, p4)
        t5 = self.lat5(p5)
        t4 = self.td4(torch.cat([F.interpolate(t5, scale_factor=2.0, mode="nearest"), p4], 1))
        t4l = self.lat4(t4)
        n3 = self.td3(torch.cat([F.interpolate(t4l, scale_factor=2.0, mode="nearest"), p3], 1))
        n4 = self.bu4(torch.cat([self.down3(n3), t4], 1))
        n5 = self.bu5(torch.cat([self.down4(n4), p5], 1))
        return [h(f) for h, f in zip(self.heads, (n3, n4, n5))]


# ---------------------------------------------------------------- loss and data

def detection_loss(preds, targets, strides):
    """Anchor-free: each box is assigned to the cell holding its centre at every scale.
    Objectness BCE everywhere, box L1 and class BCE at the assigned cells.
    targets: (N, 6) rows of [image, class, cx, cy, w, h] in pixels."""
    total = preds[0].new_zeros(())
    for p, s in zip(preds, strides):
        b, no, gh, gw = p.shape
        p = p.float()
        obj_t = torch.zeros(b, gh, gw, device=p.device)
        img = targets[:, 0].long()
        gx = (targets[:, 2] / s).long().clamp_(0, gw - 1)
        gy = (targets[:, 3] / s).long().clamp_(0, gh - 1)
        obj_t[img, gy, gx] = 1.0
        total = total + F.binary_cross_entropy_with_logits(p[:, 4], obj_t)
        cell = p[img, :, gy, gx]                      # (N, no)
        box_t = torch.stack([targets[:, 2] / s - gx, targets[:, 3] / s - gy,
                             torch.log(targets[:, 4] / s), torch.log(targets[:, 5] / s)], 1)
        total = total + F.l1_loss(cell[:, :4], box_t)
        cls_t = F.one_hot(targets[:, 1].long(), no - 5).float()
        total = total + F.binary_cross_entropy_with_logits(cell[:, 5:], cls_t)
    return total


def synthetic_batch(batch, img, device, gen):
    # Images are made on the device (seeded by torch.manual_seed): a batch of 640x640 images is
    # hundreds of MiB, too slow to make on the CPU every step. Boxes are few: CPU, own generator.
    images = torch.rand(batch, 3, img, img, device=device)
    per_image = torch.randint(1, 9, (batch,), generator=gen)
    rows = []
    for i, n in enumerate(per_image.tolist()):
        wh = torch.rand(n, 2, generator=gen) * (img / 3) + 8
        cxy = torch.rand(n, 2, generator=gen) * (img - 1)
        cls = torch.randint(0, NUM_CLASSES, (n, 1), generator=gen).float()
        rows.append(torch.cat([torch.full((n, 1), float(i)), cls, cxy, wh], 1))
    return images, torch.cat(rows).to(device)


class EMA:
    """Exponential moving average of the weights, as YOLO keeps for evaluation."""

    def __init__(self, model, decay=0.9999, tau=2000):
        self.ema = copy.deepcopy(model).eval()
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                v.mul_(d).add_(msd[k].detach(), alpha=1 - d)


# ---------------------------------------------------------------- vramwatch hooks

def vramwatch_api():
    """(mark, dump) from the preloaded library, or no-ops when it is not loaded."""
    try:
        lib = ctypes.CDLL(None)
        mark, dump = lib.vramwatch_mark, lib.vramwatch_dump
    except (AttributeError, OSError):
        return (lambda label: None), (lambda reason: None)
    mark.argtypes = dump.argtypes = [ctypes.c_char_p]
    return (lambda label: mark(label.encode())), (lambda reason: dump(reason.encode()))


# ---------------------------------------------------------------- training

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="YOLO-like detector on synthetic data")
    ap.add_argument("--batch", "--batch-size", type=int, default=16)
    ap.add_argument("--img", "--imgsz", "--img-size", type=int, default=640)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10, help="training steps per epoch")
    ap.add_argument("--cfg", choices=sorted(CONFIGS), default="s")
    ap.add_argument("--amp", dest="amp", action="store_true", default=True)
    ap.add_argument("--no-amp", dest="amp", action="store_false")
    ap.add_argument("--checkpoint", action="store_true", help="gradient checkpointing of backbone stages")
    ap.add_argument("--multi-scale", action="store_true",
                    help="train each step at another image side, up to 1.5 times --img, as YOLOv5/v7/v9's "
                         "--multi-scale (here in a fixed cycle, not at random); validation stays at --img")
    ap.add_argument("--accumulate", type=int, default=1, help="optimizer step every N batches")
    ap.add_argument("--val-every", type=int, default=1, help="validate every N epochs (0: never), at twice the batch")
    ap.add_argument("--val-steps", type=int, default=2)
    ap.add_argument("--optimizer", choices=["SGD", "AdamW"], default="SGD")
    ap.add_argument("--device", default="0", help="CUDA ordinal, cuda:N or cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=8, help="accepted for YOLOv9 compatibility")
    ap.add_argument("--report-at-end", action="store_true",
                    help="print torch.cuda.memory_reserved() and ask vramwatch for a report at the same moment")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.img < 64 or args.img % 32 or args.accumulate < 1:
        ap.error("--batch >= 1, --img a multiple of 32 and >= 64, --accumulate >= 1")
    return args


def pick_device(spec):
    if spec == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        sys.exit("train_torch: CUDA is not available (use --device cpu to run on the CPU)")
    return torch.device(spec if spec.startswith("cuda") else f"cuda:{int(spec.split(',')[0])}")


def grad_scaler(enabled):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler("cuda", enabled=enabled)
        except TypeError:
            pass
    return torch.cuda.amp.GradScaler(enabled=enabled)


def main(argv=None):
    args = parse_args(argv)
    mark, dump = vramwatch_api()
    device = pick_device(args.device)
    cuda = device.type == "cuda"
    amp = args.amp and cuda
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    mark("setup")
    width, depth = CONFIGS[args.cfg]
    model = Detector(width, depth, checkpoint=args.checkpoint).to(device)
    ema = EMA(model)
    if args.optimizer == "SGD":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True, weight_decay=5e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=0.001, betas=(0.937, 0.999), weight_decay=5e-4)
    scaler = grad_scaler(amp)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"train_torch: cfg {args.cfg} ({nparams / 1e6:.1f} M parameters), batch {args.batch}, "
          f"img {args.img}, amp {amp}, checkpoint {args.checkpoint}, accumulate {args.accumulate}, "
          f"device {device}", flush=True)

    steps = 0
    train_time = 0.0
    for epoch in range(args.epochs):
        mark(f"epoch {epoch} train")
        model.train()
        opt.zero_grad(set_to_none=True)
        for i in range(args.steps):
            side = args.img
            if args.multi_scale:
                side = max(64, int(args.img * MULTI_SCALE[steps % len(MULTI_SCALE)]) // 32 * 32)
            images, targets = synthetic_batch(args.batch, side, device, gen)
            t0 = time.time()
            with torch.autocast(device_type=device.type, enabled=amp):
                preds = model(images)
                loss = detection_loss(preds, targets, model.strides) / args.accumulate
            scaler.scale(loss).backward()
            if (i + 1) % args.accumulate == 0 or i + 1 == args.steps:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                ema.update(model)
            if cuda:
                torch.cuda.synchronize(device)
            train_time += time.time() - t0
            steps += 1
        print(f"train_torch: epoch {epoch} loss {loss.item() * args.accumulate:.3f}", flush=True)
        if args.val_every and (epoch + 1) % args.val_every == 0:
            mark(f"epoch {epoch} val")
            # YOLOv9 validates at twice the training batch, in half precision, with the EMA.
            with torch.no_grad(), torch.autocast(device_type=device.type, enabled=amp):
                for _ in range(args.val_steps):
                    images, targets = synthetic_batch(args.batch * 2, args.img, device, gen)
                    detection_loss(ema.ema(images), targets, model.strides)
    mark("end")
    rate = steps / train_time if train_time > 0 else float("nan")
    print(f"train_torch: {steps} steps, {rate:.2f} steps/s", flush=True)
    if cuda:
        torch.cuda.synchronize(device)
        reserved = torch.cuda.memory_reserved(device)
        if args.report_at_end:
            dump("request")  # the same moment: nothing allocates in between
        print(f"train_torch: memory_reserved {reserved} max_memory_reserved "
              f"{torch.cuda.max_memory_reserved(device)} memory_allocated "
              f"{torch.cuda.memory_allocated(device)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
