#!/usr/bin/env python3
"""Function length and parameter count in the C sources of lib/ and tools/ (issue: no function
over 100 lines, no parameter list over 6; a struct instead).

usage: functions.py SOURCE_ROOT [--max-lines N] [--max-params N] [--top K]

A function is a definition at file level: a line at column 0 that ends its declarator with ')'
and a '{' at column 0 on the next line (the house style, which every file here follows), up to
the '}' at column 0 that closes it. Its length counts the lines from the declarator to that '}'.
Prints the longest K and the widest K, and fails (exit 1) naming each one over a limit.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import vwtest  # noqa: E402

DIRS = ("lib", "tools")
START = re.compile(r"^(?!static_assert|#|typedef|struct\s+\w+\s*$)[A-Za-z_]")


def strip_attributes(text):
    """The declarator without its __attribute__((...)) parts."""
    while True:
        k = text.find("__attribute__")
        if k < 0:
            return text
        depth, e = 0, k
        for e in range(text.index("(", k), len(text)):
            depth += {"(": 1, ")": -1}.get(text[e], 0)
            if depth == 0:
                break
        text = text[:k] + text[e + 1:]


# Functions whose signature another library dictates (the simulated GPU's CUDA, NCCL and cuBLAS
# entry points, the hooks): their parameter lists are not ours to shorten.
FOREIGN = re.compile(r"^(cu|cuda|nccl|cublas|cudnn|nvml|__cuda)[A-Z_a-z]")


def split_params(text):
    """The parameters between the declarator's outermost parentheses."""
    depth, start = 0, None
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
            if depth == 1 and start is None:
                # the first '(' after the function's name (skip attribute parentheses)
                start = i + 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and start is not None:
                inner = text[start:i]
                break
    else:
        return 0
    inner = re.sub(r"\([^()]*\)", "()", inner)
    inner = re.sub(r"\([^()]*\)", "()", inner)
    if inner.strip() in ("", "void"):
        return 0
    return inner.count(",") + 1


def functions(path):
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines) - 1:
        if lines[i + 1] == "{" and lines[i].rstrip().endswith(")"):
            # the declarator may span lines: its first line is the nearest one at column 0
            j = i
            while j > 0 and j > i - 10 and not START.match(lines[j]) and lines[j][:1] in (" ", "\t"):
                j -= 1
            if not START.match(lines[j]) or "(" not in lines[j]:
                i += 1
                continue
            decl = strip_attributes(" ".join(l.strip() for l in lines[j:i + 1]))
            k = i + 2
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"(\w+)\s*\(", decl)
            name = m.group(1) if m else "?"
            yield name, j + 1, k - j + 1, split_params(decl)
            i = k
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--max-lines", type=int, default=100)
    ap.add_argument("--max-params", type=int, default=6)
    ap.add_argument("--top", type=int, default=5)
    opts = ap.parse_args()
    found = []
    for top in DIRS:
        for d, dirs, files in os.walk(os.path.join(opts.root, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    p = os.path.join(d, f)
                    for name, line, length, params in functions(p):
                        found.append((os.path.relpath(p, opts.root), line, name, length, params))
    if len(found) < 100:
        print("FAIL  found only %d functions under %s: the scan no longer sees the sources"
              % (len(found), ", ".join(DIRS)))
        return 1
    print("%d functions in %s" % (len(found), ", ".join(DIRS)))
    print("longest:")
    for p, line, name, length, params in sorted(found, key=lambda r: -r[3])[:opts.top]:
        print("  %4d lines  %s:%d %s" % (length, p, line, name))
    print("most parameters (not counting entry points whose signature CUDA, NCCL or cuBLAS set):")
    for p, line, name, length, params in sorted((r for r in found if not FOREIGN.match(r[2])),
                                                key=lambda r: -r[4])[:opts.top]:
        print("  %4d        %s:%d %s" % (params, p, line, name))
    bad = [r for r in found if r[3] > opts.max_lines
           or (r[4] > opts.max_params and not FOREIGN.match(r[2]))]
    tally = vwtest.Tally(verbose=False)
    for p, line, name, length, params in bad:
        tally.check(False, "%s:%d %s: %d lines, %d parameters (at most %d and %d)"
                    % (p, line, name, length, params, opts.max_lines, opts.max_params))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
