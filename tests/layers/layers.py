#!/usr/bin/env python3
"""Who may include whom: the folders of lib/, tools/ and include/ are layers, and an #include
may only point to its own folder or to a folder its layer lists below (the table LAYERS; each
folder's README.md says the same in words). Also checked:

- every folder that holds C sources is in the table (a new folder must say where it stands);
- no two headers of one name on an include path (the library's folders, the command line's
  folders with lib/base, and include/ are each one path: an #include "x.h" must mean one file);
- the CUDA-free layers (lib/base, lib/core, lib/report, and the whole command line) include no
  CUDA or NVML header;
- nothing but the command line's model (tools/vramwatch/model) calls cJSON's readers: the report
  is read in one place and every view reads the model;
- no include cycle among files.

usage: layers.py SOURCE_ROOT [--plant KIND]
--plant adds one violation of the given kind to an in-memory copy of the tree (include, folder,
cuda, cjson, cycle, name) and must then fail: the test checks itself with it (tests/layers/meson.build).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import vwtest  # noqa: E402

# folder -> the folders its files may include (besides its own). Lower layers first.
LIB = ["lib/base", "lib/core", "lib/report", "lib/cuda", "lib/interpose", "lib/hooks"]
CLI = ["tools/vramwatch/base", "tools/vramwatch/model", "tools/vramwatch/advice",
       "tools/vramwatch/views", "tools/vramwatch/commands"]
LAYERS = {
    "include/vramwatch": [],
    "lib/base": [],
    "lib/core": ["lib/base"],
    "lib/report": ["lib/core", "lib/base"],
    # NVML's list of other processes is kept in the report's own struct.
    "lib/cuda": ["lib/report", "lib/core", "lib/base"],
    # The interposition layer builds the table of real functions from the list of hooks.
    "lib/interpose": ["lib/cuda", "lib/report", "lib/core", "lib/base", "lib/hooks/hooks.def",
                      "include/vramwatch"],
    "lib/hooks": ["lib/interpose", "lib/cuda", "lib/report", "lib/core", "lib/base",
                  "include/vramwatch"],
    # The command line takes from the library only lib/base (built into it as well).
    "tools/vramwatch/base": ["lib/base"],
    "tools/vramwatch/model": ["tools/vramwatch/base", "lib/base"],
    "tools/vramwatch/advice": ["tools/vramwatch/model", "tools/vramwatch/base", "lib/base"],
    "tools/vramwatch/views": ["tools/vramwatch/advice", "tools/vramwatch/model",
                              "tools/vramwatch/base", "lib/base"],
    # Commands start jobs on the simulated GPU, so they read its table of named cards.
    "tools/vramwatch/commands": ["tools/vramwatch/views", "tools/vramwatch/advice",
                                 "tools/vramwatch/model", "tools/vramwatch/base", "lib/base",
                                 "tools/simgpu/cards.def"],
    # The simulated GPU stands apart: it shares nothing with the library or the command line.
    "tools/simgpu": [],
    "tools/simgpu/standins": ["tools/simgpu"],
    "tools/simgpu/stubs": ["tools/simgpu"],
}
# The include paths: a quoted include is looked up next to the file, then along its path.
PATHS = {
    "lib": LIB + ["include/vramwatch"],
    "cli": CLI + ["lib/base"],
    "simgpu": ["tools/simgpu", "tools/simgpu/standins", "tools/simgpu/stubs"],
}
# Generated at configure time (include/meson.build): on every path, includes nothing.
GENERATED = {"config.h"}
CUDA_FREE = ["lib/base", "lib/core", "lib/report"] + CLI
CUDA_HEADERS = re.compile(r"^\s*#\s*include\s*[<\"](cuda[\w.]*\.h|cudaTypedefs\.h|nvml\.h|"
                          r"driver_types\.h|cuda_runtime[\w.]*\.h)[>\"]", re.M)
CJSON_READERS = re.compile(r"\bcJSON_(Parse\w*|Get\w+|Is\w+|ArrayForEach|HasObjectItem)\b")
MODEL = "tools/vramwatch/model"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = (".c", ".h", ".def", ".cpp")


def path_of(folder):
    for name, folders in PATHS.items():
        if folder in folders or any(folder.startswith(f + "/") for f in folders):
            return name
    return None


def load(root):
    """{relative path: text} of every C source under lib/, tools/ and include/."""
    tree = {}
    for top in ("lib", "tools", "include"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(SOURCE):
                    p = os.path.join(d, f)
                    with open(p, encoding="utf-8", errors="replace") as fh:
                        tree[os.path.relpath(p, root)] = fh.read()
    return tree


def resolve(tree, src, inc, by_path):
    """The file an #include "inc" in src means, or None (a system or generated header)."""
    near = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if near in tree:
        return near
    return by_path.get(path_of(os.path.dirname(src)), {}).get(os.path.basename(inc))


def check(tree):
    errors = []
    folders = sorted({os.path.dirname(p) for p in tree})
    for f in folders:
        if f not in LAYERS:
            errors.append("%s: a folder of sources the layer table does not know: add it to "
                          "tests/layers/layers.py's LAYERS with what it may include" % f)
    # Header names, one file per name on each path.
    by_path = {}
    for name, path_folders in PATHS.items():
        seen = by_path.setdefault(name, {})
        for p in sorted(tree):
            if os.path.dirname(p) in path_folders and not p.endswith((".c", ".cpp")):
                base = os.path.basename(p)
                if base in GENERATED:
                    errors.append("%s: has the name of a generated header (%s)" % (p, base))
                elif base in seen:
                    errors.append("%s and %s: two headers named %s on the %s include path"
                                  % (seen[base], p, base, name))
                else:
                    seen[base] = p
    edges = {}
    for src, text in sorted(tree.items()):
        folder = os.path.dirname(src)
        allowed = LAYERS.get(folder, [])
        for inc in INCLUDE.findall(text):
            target = resolve(tree, src, inc, by_path)
            if target is None:
                if os.path.basename(inc) not in GENERATED:
                    errors.append("%s: #include \"%s\": no such file on its include path" % (src, inc))
                continue
            edges.setdefault(src, set()).add(target)
            tfolder = os.path.dirname(target)
            if tfolder != folder and tfolder not in allowed and target not in allowed:
                errors.append("%s: #include \"%s\": %s may not include %s (it may include: %s)"
                              % (src, inc, folder, tfolder, ", ".join(allowed) or "its own folder"))
        if any(folder == f for f in CUDA_FREE):
            m = CUDA_HEADERS.search(text)
            if m:
                errors.append("%s: includes %s, but %s knows nothing of CUDA" % (src, m.group(1), folder))
        if src.startswith("tools/vramwatch/") and folder != MODEL:
            for call in sorted(set(CJSON_READERS.findall(text))):
                errors.append("%s: calls cJSON_%s: only the model (%s) reads report JSON"
                              % (src, call, MODEL))
    for cycle in cycles(edges):
        errors.append("include cycle: " + " -> ".join(cycle))
    return errors, len(tree), len(folders)


def cycles(edges):
    """One cycle through each group of files that include each other, as a -> b -> ... -> a."""
    found, state = [], {}

    def visit(v, stack):
        state[v] = 1
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if state.get(w) == 1:
                found.append(stack[stack.index(w):] + [w])
            elif w not in state:
                visit(w, stack)
        stack.pop()
        state[v] = 2

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in state:
            visit(v, [])
    return found


def plant(tree, kind):
    """One violation of the given kind, added to the tree."""
    if kind == "include":      # a view includes a command
        tree["tools/vramwatch/views/postmortem.c"] += '\n#include "commands.h"\n'
    elif kind == "folder":     # a folder nobody placed
        tree["lib/extra/new.c"] = "int x;\n"
    elif kind == "cuda":       # the core learns of CUDA
        tree["lib/core/core.c"] += "\n#include <cuda.h>\n"
    elif kind == "cjson":      # a view reads JSON itself
        tree["tools/vramwatch/views/postmortem.c"] += "\nstatic void f(void) { cJSON_GetObjectItem(0, 0); }\n"
    elif kind == "cycle":      # two core headers include each other
        tree["lib/core/timeline.h"] += '\n#include "core.h"\n'
    elif kind == "name":       # a second util.h, now on the library's path
        tree["lib/core/sizes.h"] = "\n"
    else:
        raise SystemExit("layers.py: --plant: unknown kind %r" % kind)


def main():
    ap = argparse.ArgumentParser(description="the layer rules of lib/, tools/ and include/")
    ap.add_argument("root")
    ap.add_argument("--plant", help="add one violation (include, folder, cuda, cjson, cycle, "
                    "name) and expect the check to fail")
    opts = ap.parse_args()
    tree = load(opts.root)
    if len(tree) < 100:
        print("FAIL  found only %d sources under %s: the walk no longer sees the tree" % (len(tree), opts.root))
        return 1
    if opts.plant:
        # The planted violation must add an error to whatever the tree has already.
        before = set(check(tree)[0])
        plant(tree, opts.plant)
        new = [e for e in check(tree)[0] if e not in before]
        if not new:
            print("FAIL  planted a violation (%s) and the check did not see it" % opts.plant)
            return 1
        for e in new:
            print("planted %s, caught: %s" % (opts.plant, e))
        return 0
    errors, nfiles, nfolders = check(tree)
    tally = vwtest.Tally(verbose=False)
    for e in errors:
        tally.check(False, e)
    if not errors:
        print("%d files in %d folders: every include within the layers, no cycle" % (nfiles, nfolders))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
