#!/usr/bin/env python3
"""A user's launcher for Ultralytics, as people write them: its own file only calls into the
package, so the line that runs out of memory is Ultralytics', never this one.

    yolo_api.py key=value ...     (the same keys as `yolo train`, model= among them)
"""
import sys

from ultralytics import YOLO


def value(text):
    """"64" as 64, "0.5" as 0.5, "True" as True: what a launcher's own parsing gives."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def main():
    args = {k: value(v) for k, v in (a.split("=", 1) for a in sys.argv[1:])}
    model = YOLO(args.pop("model", "yolov9c.yaml"))
    model.train(**args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
