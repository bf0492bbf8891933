#!/usr/bin/env python3
"""A small DDP job for torchrun: a conv net on synthetic images, one rank per device, NCCL.

    torchrun --standalone --nproc_per_node 2 tests/torch/ddp_job.py --batch 4

Each rank prints its torch.cuda.max_memory_reserved() at the end, so a test can hold every
rank's report against PyTorch's own figure.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--img", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.SiLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).cuda()
    model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(a.steps):
        x = torch.randn(a.batch, 3, a.img, a.img, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dist.barrier()
    print(f"rank {dist.get_rank()} max_memory_reserved {torch.cuda.max_memory_reserved()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
