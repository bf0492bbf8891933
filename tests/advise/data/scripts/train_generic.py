#!/usr/bin/env python3
"""The options of a generic training script (those of examples/train_torch.py), for the advice's
golden case "generic-script-options": advise reads the script's source for the switches its
command line does not give (--checkpoint, --accumulate, --amp). It trains nothing."""
import argparse

ap = argparse.ArgumentParser()
ap.add_argument("--batch", "--batch-size", type=int, default=16)
ap.add_argument("--img", "--imgsz", "--img-size", type=int, default=640)
ap.add_argument("--amp", dest="amp", action="store_true", default=False)
ap.add_argument("--checkpoint", action="store_true", help="gradient checkpointing of backbone stages")
ap.add_argument("--accumulate", type=int, default=1, help="optimizer step every N batches")
print(ap.parse_args())
