#!/usr/bin/env python3
"""No cycle among a folder's files: each X.c and X.h is one module, an #include "Y.h" in either is
an edge from X to Y, and the graph must have no cycle (a lower layer never includes a higher
one). Usage: include_cycles.py DIR... ; prints each cycle found and exits 1."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(name):
    base = os.path.basename(name)
    return base.rsplit(".", 1)[0] if base.endswith((".c", ".h")) else base


def graph(folder):
    edges = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            text = f.read()
        src = module(name)
        edges.setdefault(src, set())
        for inc in INCLUDE.findall(text):
            if os.path.exists(os.path.join(folder, inc)) and module(inc) != src:
                edges[src].add(module(inc))
    return edges


def cycles(edges):
    """Every strongly connected component of more than one module, with one cycle through it."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def path_in(edges, comp):
    """One cycle inside the component, as a -> b -> ... -> a."""
    start = comp[0]
    members = set(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, ())):
            if w not in members:
                continue
            if w == start:
                chain = [v]
                while prev[chain[-1]] is not None:
                    chain.append(prev[chain[-1]])
                return [start] + chain[::-1][1:] + [start] if len(chain) > 1 else [start, v, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def main():
    if len(sys.argv) < 2:
        print("usage: include_cycles.py DIR...", file=sys.stderr)
        return 2
    bad = 0
    for folder in sys.argv[1:]:
        edges = graph(folder)
        found = cycles(edges)
        for comp in found:
            print("%s: include cycle: %s" % (folder, " -> ".join(path_in(edges, comp))))
        if not found:
            print("%s: %d modules, no include cycle" % (folder, len(edges)))
        bad += len(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
