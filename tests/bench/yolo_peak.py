#!/usr/bin/env python3
"""yolo_peak.py key=value ...: Ultralytics' training, as `yolo train key=value ...` runs it, then
PyTorch's own figure for the run: "max_memory_reserved N" (bytes) on stdout, the second witness
beside vramwatch's report in the seed table (tests/bench/yolo_tables.py)."""
import sys

import torch
from ultralytics.cfg import entrypoint


def main():
    sys.argv = ["yolo", "train"] + sys.argv[1:]
    try:
        entrypoint()
    finally:
        if torch.cuda.is_available():
            print(f"max_memory_reserved {torch.cuda.max_memory_reserved()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
