#!/usr/bin/env python3
"""Write a small object-detection dataset in YOLO's layout, with nothing downloaded.

    yolo_data.py DIR [--train N] [--val N] [--size PX] [--seed S]

DIR/images/{train,val}/*.jpg are SIZE x SIZE pictures of a few filled rectangles on a plain
background; DIR/labels/{train,val}/*.txt give one line per rectangle ("class cx cy w h", all
relative, as Ultralytics and YOLOv9 read them); DIR/data.yaml names both folders and three
classes. Ultralytics takes it as data=DIR/data.yaml. The same seed writes the same files, so
that two runs over the folder read the same pictures.
"""
import argparse
import os
import random
import sys

NAMES = ["box", "bar", "dot"]


def picture(rng, size):
    """One picture as an encoded JPEG and its labels; cv2 is what Ultralytics reads with."""
    import numpy as np
    import cv2
    img = np.full((size, size, 3), rng.randrange(40, 200), dtype=np.uint8)
    labels = []
    for _ in range(rng.randrange(1, 6)):
        w = rng.randrange(size // 16, size // 3)
        h = rng.randrange(size // 16, size // 3)
        x = rng.randrange(0, size - w)
        y = rng.randrange(0, size - h)
        cls = rng.randrange(len(NAMES))
        colour = tuple(rng.randrange(256) for _ in range(3))
        cv2.rectangle(img, (x, y), (x + w, y + h), colour, -1)
        labels.append(f"{cls} {(x + w / 2) / size:.6f} {(y + h / 2) / size:.6f} "
                      f"{w / size:.6f} {h / size:.6f}")
    ok, data = cv2.imencode(".jpg", img)
    if not ok:
        raise RuntimeError("cv2 could not encode a JPEG")
    return data.tobytes(), labels


def write(root, split, count, size, rng):
    os.makedirs(os.path.join(root, "images", split), exist_ok=True)
    os.makedirs(os.path.join(root, "labels", split), exist_ok=True)
    for i in range(count):
        data, labels = picture(rng, size)
        stem = f"{split}{i:05d}"
        with open(os.path.join(root, "images", split, stem + ".jpg"), "wb") as f:
            f.write(data)
        with open(os.path.join(root, "labels", split, stem + ".txt"), "w") as f:
            f.write("\n".join(labels) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--train", type=int, default=64)
    ap.add_argument("--val", type=int, default=16)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    root = os.path.abspath(a.dir)
    rng = random.Random(a.seed)
    write(root, "train", a.train, a.size, rng)
    write(root, "val", a.val, a.size, rng)
    with open(os.path.join(root, "data.yaml"), "w") as f:
        f.write(f"path: {root}\ntrain: images/train\nval: images/val\n")
        f.write("names:\n" + "".join(f"  {i}: {n}\n" for i, n in enumerate(NAMES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
