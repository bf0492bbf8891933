"""Loads a snapshot written by `vramwatch timeline --format=torch-snapshot` with the installed
PyTorch's own torch.cuda._memory_viz, as a user would, and prints what it found as one JSON object
for torch_snapshot.py to check against the report.

usage: PY snapshot_load.py SNAPSHOT.pickle HTML_DIR   (PY: an interpreter that imports torch)

Every text view is built (segments and memory as flame graph lines: format_flamegraph is given
as the identity, since PyTorch's own downloads flamegraph.pl; segsum; trace), and both HTML pages
(trace_plot: the Active Memory Timeline; segment_plot: the Allocator State History) are written
to HTML_DIR for the render group. Exits 77 when torch cannot be imported.
"""
import json
import os
import pickle
import sys

try:
    from torch.cuda import _memory_viz as mv
except ImportError as e:
    print("torch cannot be imported: %s" % e, file=sys.stderr)
    sys.exit(77)


def lines(x):
    return x if isinstance(x, str) else "".join(x)


def main():
    path, html_dir = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        snap = pickle.load(f)
    ident = lambda x: x  # noqa: E731
    seg_lines = lines(mv.segments(snap, format_flamegraph=ident)).splitlines()
    mem_lines = lines(mv.memory(snap, format_flamegraph=ident)).splitlines()
    text = mv.trace(snap)
    summary = mv.segsum(snap)
    pages = {"trace_plot": mv.trace_plot(snap), "segment_plot": mv.segment_plot(snap)}
    for name, html in pages.items():
        with open(os.path.join(html_dir, name + ".html"), "w", encoding="utf-8") as f:
            f.write(html)
    out = {
        "keys": sorted(snap),
        "segments": [{"address": s["address"], "total_size": s["total_size"], "device": s["device"],
                      "blocks": [(b["size"], b["state"]) for b in s["blocks"]],
                      "frames": [(fr["filename"], fr["line"], fr["name"]) for fr in s["blocks"][0]["frames"]]}
                     for s in snap["segments"]],
        "device_traces": [[{k: e[k] for k in ("action", "size", "time_us") if k in e} |
                           {"addr": e.get("addr"), "device_free": e.get("device_free"),
                            "frames": [(fr["filename"], fr["line"], fr["name"]) for fr in e["frames"]]}
                           for e in d] for d in snap["device_traces"]],
        "segments_lines": seg_lines,
        "memory_lines": mem_lines,
        "trace_text": text.splitlines(),
        "segsum": summary.splitlines(),
        "html_bytes": {k: len(v) for k, v in pages.items()},
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
