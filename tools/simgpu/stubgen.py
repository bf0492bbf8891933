#!/usr/bin/env python3
"""stubgen.py: writes the long tail of the simulated card's stand-in libraries from the import
lists of an installed PyTorch, so a new PyTorch release is one rerun, not hand work.

    python3 tools/simgpu/stubgen.py SITE_PACKAGES [--out tools/simgpu/stubs]

For every ELF file under SITE_PACKAGES that is not one of NVIDIA's own (torch/lib, torch's
extension modules, torchvision, triton, ...), it reads the undefined dynamic symbols and the
version each one asks for (readelf), and finds which NVIDIA library provides it: by its version
node (cudaMalloc@libcudart.so.13) or, for the unversioned libraries (NCCL, cuFile, cuSPARSELt),
by the real library's exports among the file's DT_NEEDED. For each stand-in library it writes

    stubs/<soname>.c    one weak function per imported symbol, returning 0 (success for every
                        NVIDIA status enum, NULL for pointers); the hand-written functions of the
                        stand-in (strong definitions in tools/simgpu/*.c) replace them at link time
    stubs/<soname>.map  the version script: every export under the real library's node

The script needs only Python and binutils' readelf. Its output is committed; the build never runs
it. Nothing of NVIDIA's is copied: only the names the consumers import.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

# The stand-ins: soname, the C prefix patterns that are exported (hand-written functions outside
# the imported set stay visible through them), and whether the real library versions its symbols.
STANDINS = {
    "libcudart.so.13": ["cuda*", "__cuda*"],
    "libcuda.so.1": ["cu*"],
    "libcublas.so.13": ["cublas*"],
    "libcublasLt.so.13": ["cublasLt*"],
    "libcudnn.so.9": ["cudnn*"],
    "libnccl.so.2": ["nccl*", "pnccl*"],
    "libcufft.so.12": ["cufft*"],
    "libcurand.so.10": ["curand*"],
    "libcusparse.so.12": ["cusparse*"],
    "libcusparseLt.so.0": ["cusparseLt*"],
    "libcusolver.so.12": ["cusolver*"],
    "libcufile.so.0": ["cuFile*"],
    "libcupti.so.13": ["cupti*", "Cupti*"],
    "libnvrtc.so.13": ["nvrtc*"],
    "libnvshmem_host.so.3": ["nvshmem*", "nvshmemx*"],
    "libnvJitLink.so.13": ["nvJitLink*", "__nvJitLink*"],
    "libnvToolsExt.so.1": ["nvtx*"],
}

SYM_RE = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)\s+(\S+)")


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def readelf(args, path):
    out = subprocess.run(["readelf", "-W"] + args + [path], capture_output=True, text=True)
    return out.stdout


def dyn_syms(path):
    """(name, version or None, defined, type, size) of each dynamic symbol."""
    syms = []
    for line in readelf(["--dyn-syms"], path).splitlines():
        m = SYM_RE.match(line)
        if not m:
            continue
        _, size, typ, bind, _vis, ndx, name = m.groups()
        if bind not in ("GLOBAL", "WEAK") or typ not in ("FUNC", "OBJECT", "IFUNC"):
            continue
        version = None
        if "@" in name:
            name, _, version = name.partition("@")
            version = version.lstrip("@")
            version = version.split(" ")[0]
        syms.append((name, version, ndx != "UND", typ, int(size, 0) if size.isdigit() else 0))
    return syms


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))


def find_real(site):
    """soname -> path of NVIDIA's real library in the wheel's nvidia/ folders."""
    found = {}
    for root, _dirs, files in os.walk(os.path.join(site, "nvidia")):
        for f in files:
            if f in STANDINS and f not in found:
                found[f] = os.path.join(root, f)
    return found


def consumers(site):
    for root, dirs, files in os.walk(site):
        dirs[:] = [d for d in dirs if d != "nvidia" and not d.endswith(".dist-info")]
        for f in files:
            if ".so" in f:
                p = os.path.join(root, f)
                if not os.path.islink(p) and is_elf(p):
                    yield p


def collect(site):
    real = find_real(site)
    exports = {}  # soname -> {name: (version, type, size)}
    for soname, path in real.items():
        exports[soname] = {n: (v, t, s) for n, v, d, t, s in dyn_syms(path) if d}
    wanted = {s: {} for s in STANDINS}
    linked = set()
    for path in consumers(site):
        libs = [n for n in needed(path) if n in STANDINS]
        linked.update(libs)
        for name, version, defined, typ, size in dyn_syms(path):
            if defined:
                continue
            owner = None
            if version in STANDINS:
                owner = version
            else:
                for lib in libs:
                    if name in exports.get(lib, {}):
                        owner = lib
                        break
            if owner is None:
                # A stand-in without a real copy in the wheel (libcuda.so.1 is the driver's):
                # by the stand-in's export patterns.
                for lib in libs:
                    if lib not in exports and any(fnmatch.fnmatchcase(name, p) for p in STANDINS[lib]):
                        owner = lib
                        break
            if owner is None:
                continue
            info = exports.get(owner, {}).get(name)
            if info:
                wanted[owner][name] = info
            else:
                wanted[owner][name] = (version, typ, size)
    # A stand-in is built when something links it or imports from it; the rest of the table is
    # kept for libraries that a later release may link.
    wanted = {s: v for s, v in wanted.items() if v or s in linked}
    return wanted, exports


def write(out, wanted, exports, site):
    os.makedirs(out, exist_ok=True)
    torch_version = "unknown"
    vf = os.path.join(site, "torch", "version.py")
    if os.path.exists(vf):
        m = re.search(r"__version__\s*=\s*'([^']+)'", open(vf).read())
        if m:
            torch_version = m.group(1)
    for soname, syms in sorted(wanted.items()):
        nodes = {v for v, _t, _s in exports.get(soname, {}).values() if v}
        node = sorted(nodes)[0] if nodes else None
        lines = [
            f"/* {soname}: the long tail of the stand-in, generated by tools/simgpu/stubgen.py",
            f" * from the import lists of torch {torch_version} and its companions. Do not edit:",
            " * rerun the script. Each function does nothing and returns 0; the hand-written",
            " * functions of the stand-in are strong definitions that replace these. */",
            "",
            '#include "stub.h"',
            "",
        ]
        for name in sorted(syms):
            _v, typ, size = syms[name]
            if typ == "OBJECT":
                lines.append(f"DATA({name}, {max(size, 8)})")
            else:
                lines.append(f"STUB({name})")
        with open(os.path.join(out, soname + ".c"), "w") as f:
            f.write("\n".join(lines) + "\n")
        patterns = STANDINS[soname]
        body = "  global:\n" + "".join(f"    {p};\n" for p in patterns) + "  local:\n    *;\n"
        with open(os.path.join(out, soname + ".map"), "w") as f:
            f.write(f"/* {soname}: generated by tools/simgpu/stubgen.py. */\n")
            if node:
                f.write(f"{node} {{\n{body}}};\n")
            else:
                f.write(f"{{\n{body}}};\n")
    with open(os.path.join(out, "stub.h"), "w") as f:
        f.write("""/* stub.h: the two shapes of a generated stand-in symbol (tools/simgpu/stubgen.py writes this
 * file and every stubs/<soname>.c that includes it). Weak, so that a hand-written definition of
 * the same name in the stand-in replaces it at link time; exported whatever the build's default
 * visibility. A function takes nothing and returns 0 in a full register: success for every
 * NVIDIA status enum, NULL for a pointer. */
#ifndef SIMGPU_STUB_H
#define SIMGPU_STUB_H

#define STUB(name) \\
    long name(void); \\
    __attribute__((weak, visibility("default"))) long name(void) { return 0; }
#define DATA(name, size) \\
    extern unsigned char name[size]; \\
    __attribute__((weak, visibility("default"))) unsigned char name[size];

#endif
""")
    listing = os.path.join(out, "README.md")
    with open(listing, "w") as f:
        f.write("# Generated stand-in stubs\n\n")
        f.write(f"Written by `tools/simgpu/stubgen.py` from torch {torch_version}'s import lists; "
                "rerun it for a new release (see docs/simgpu.md).\n\n")
        f.write("| library | imported functions | version node |\n| --- | --- | --- |\n")
        for soname, syms in sorted(wanted.items()):
            nodes = {v for v, _t, _s in exports.get(soname, {}).values() if v}
            f.write(f"| {soname} | {len(syms)} | {sorted(nodes)[0] if nodes else '(none)'} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site", help="the site-packages folder holding torch and its nvidia wheels")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs"))
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.site, "torch")):
        sys.exit(f"stubgen: {a.site}: no torch folder here")
    wanted, exports = collect(a.site)
    write(a.out, wanted, exports, a.site)
    for soname in sorted(wanted):
        print(f"{soname}: {len(wanted[soname])} symbols")


if __name__ == "__main__":
    main()
