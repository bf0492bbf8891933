#!/usr/bin/env python3
"""The man page and the bash completion: installed, rendering, and naming every option.

Usage: manpage.py --vramwatch EXE --man BUILT_PAGE --completion FILE --build-root DIR
                  --prefix P --mandir M --datadir D --source-root DIR

1. `meson install --destdir` puts the page in MANDIR/man1/vramwatch.1 and the completion in
   DATADIR/bash-completion/completions/vramwatch.
2. The installed page renders (groff -man, else man -l) without a warning.
3. Every command `vramwatch --help` lists has its part of the page, and every option its --help
   lists (and the top level's) is named in that part; every VRAMWATCH_* variable the sources read
   is in ENVIRONMENT.
4. Completing "vramwatch CMD --" in bash offers exactly the long options CMD's --help lists, and
   "vramwatch CMD -" its short ones too; "vramwatch " offers exactly the commands.
So neither the page nor the completion can drift from the program. Exit 77 (with the reason)
when no troff renderer or no bash is installed.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP, Failed, check, clean_env  # noqa: E402


def env():
    e = clean_env(keep_preload=True)
    e.update(LC_ALL="C.UTF-8", TERM="dumb", NO_COLOR="1", MANWIDTH="100", COLUMNS="100")
    return e


def help_of(opts, args):
    r = subprocess.run([opts.vramwatch] + args, capture_output=True, env=env(), timeout=30)
    check(r.returncode == 0, "%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.decode()))
    return r.stdout.decode()


# An option line of a --help: two to four spaces (deeper lines continue a description), then "-o, --output FILE" or "--json".
OPTION_LINE = re.compile(r"^ {2,4}((?:-[A-Za-z], )?--[a-z][a-z0-9-]*|-[A-Za-z])\b")
LONG = re.compile(r"--[a-z][a-z0-9-]*")
SHORT = re.compile(r"(?<![-\w])-[A-Za-z]\b")


def options_of(text):
    """The long and short options a --help text lists, one per option line."""
    longs, shorts = set(), set()
    for line in text.splitlines():
        m = OPTION_LINE.match(line)
        if not m:
            continue
        head = m.group(1)
        longs.update(LONG.findall(head))
        shorts.update(SHORT.findall(head))
    return longs, shorts


def commands_of(text):
    """The commands of `vramwatch --help`: the lines under "Commands:" up to a blank line."""
    cmds, inside = [], False
    for line in text.splitlines():
        if line.strip() == "Commands:":
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            cmds.append(line.split()[0])
    return cmds


def troff_text(src):
    """Source text with the escapes this page uses turned back into plain characters."""
    t = re.sub(r"\\f[BIRP]", "", src)
    t = t.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
    return t


def man_sections(src):
    """The page's parts: ('vramwatch CMD', text) for each .SS "vramwatch CMD ..." and
    ('.SH NAME', text) for each section."""
    parts, name, buf = {}, None, []
    for line in src.splitlines():
        m = re.match(r'^\.S([SH]) "?([^"]*)"?', line)
        if m:
            if name:
                parts[name] = "\n".join(buf)
            title = troff_text(m.group(2)).strip()
            name = " ".join(title.split()[:2]) if m.group(1) == "S" else title
            buf = []
        else:
            buf.append(line)
    if name:
        parts[name] = "\n".join(buf)
    return parts


def render(page):
    """The page as text, or None when nothing here renders troff (then why is printed)."""
    if shutil.which("groff"):
        cmd = ["groff", "-man", "-Tutf8", "-ww", "-P-cbou", page]
    elif shutil.which("man"):
        cmd = ["man", "-l", "-Tutf8", page]
    else:
        print("manpage: neither groff nor man is installed: the page cannot be rendered",
              file=sys.stderr)
        return None
    r = subprocess.run(cmd, capture_output=True, env=env(), timeout=60)
    check(r.returncode == 0, "%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode()))
    check(r.stderr.strip() == b"", "%s warns: %s" % (" ".join(cmd), r.stderr.decode()))
    text = r.stdout.decode("utf-8")
    # groff's hyphens and minus signs back to ASCII, for comparing with --help.
    return text.replace("\u2212", "-").replace("\u2010", "-").replace("\u2011", "-")


def complete(opts, words):
    """What bash offers for the command line `words` (the last one being completed)."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; _vramwatch; printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", opts.completion] + words,
                       capture_output=True, env=env(), timeout=30)
    check(r.returncode == 0 and not r.stderr, "completing %r: exit %d: %s" %
          (words, r.returncode, r.stderr.decode()))
    return set(l for l in r.stdout.decode().splitlines() if l)


def installed(opts):
    dest = tempfile.mkdtemp(prefix="vramwatch-install-")
    try:
        meson = shutil.which("meson")
        check(meson, "meson is not on PATH")
        r = subprocess.run([meson, "install", "-C", opts.build_root, "--no-rebuild", "--quiet",
                            "--destdir", dest], capture_output=True, timeout=300)
        check(r.returncode == 0, "meson install --destdir: exit %d: %s" %
              (r.returncode, (r.stdout + r.stderr).decode()[-2000:]))
        def under(d):  # meson's folders are relative to the prefix, or absolute
            return dest + (d if os.path.isabs(d) else os.path.join(opts.prefix, d))
        man = os.path.join(under(opts.mandir), "man1", "vramwatch.1")
        comp = os.path.join(under(opts.datadir), "bash-completion", "completions", "vramwatch")
        check(os.path.isfile(man), "not installed: %s (under %s: %s)" %
              (man, dest, sorted(glob.glob(dest + "/**/man*", recursive=True))))
        check(os.path.isfile(comp), "not installed: %s" % comp)
        with open(man) as f, open(opts.man) as g:
            check(f.read() == g.read(), "the installed page is not the built one")
        with open(comp) as f, open(opts.completion) as g:
            check(f.read() == g.read(), "the installed completion is not the source's")
        print("installed: %s, %s" % (man[len(dest):], comp[len(dest):]))
        return man
    finally:
        shutil.rmtree(dest)


def main():
    ap = argparse.ArgumentParser()
    for a in ("vramwatch", "man", "completion", "build-root", "prefix", "mandir", "datadir",
              "source-root"):
        ap.add_argument("--" + a, required=True)
    opts = ap.parse_args()
    opts.vramwatch = os.path.abspath(opts.vramwatch)
    skipped = []
    try:
        installed(opts)
        with open(opts.man) as f:
            src = f.read()
        check(not re.search(r"@[A-Z]+@", src), "a @VARIABLE@ left unfilled in the built page")
        text = render(opts.man)
        if text is None:
            skipped.append("no troff renderer")
        parts = man_sections(src)

        top = help_of(opts, ["--help"])
        cmds = commands_of(top)
        check(len(cmds) >= 6, "vramwatch --help lists %d commands: %r" % (len(cmds), cmds))
        missing = []
        top_long, top_short = options_of(top)
        options_part = troff_text(parts.get("OPTIONS", ""))
        for o in sorted(top_long | top_short):
            if not re.search(r"(?<![\w-])%s\b" % re.escape(o), options_part):
                missing.append("the top level's %s is not in OPTIONS" % o)
        every = {}
        for cmd in cmds:
            h = help_of(opts, [cmd, "--help"])
            longs, shorts = options_of(h)
            check("--help" in longs, "%s --help lists no options (or not as option lines)" % cmd)
            every[cmd] = (longs, shorts)
            part = parts.get("vramwatch " + cmd)
            if part is None:
                missing.append("no part 'vramwatch %s' (.SS) in the page" % cmd)
                continue
            part = troff_text(part)
            for o in sorted(longs | shorts):
                if not re.search(r"(?<![\w-])%s\b" % re.escape(o), part):
                    missing.append("%s %s is not in the page's part for %s" % (cmd, o, cmd))
                if text is not None and not re.search(r"(?<![\w-])%s\b" % re.escape(o), text):
                    missing.append("%s %s is not in the rendered page" % (cmd, o))
        for cmd in parts:
            if cmd.startswith("vramwatch ") and cmd.split()[1] not in cmds + ["help"]:
                missing.append("the page describes '%s', which --help does not list" % cmd)

        # Every variable the library or the command line reads.
        names = set()
        for path in glob.glob(os.path.join(opts.source_root, "lib", "**", "*.c"), recursive=True) + \
                glob.glob(os.path.join(opts.source_root, "tools", "vramwatch", "**", "*.c"), recursive=True):
            with open(path, errors="replace") as f:
                names.update(re.findall(r'getenv\("(VRAMWATCH_[A-Z_]+)"\)', f.read()))
        check(len(names) >= 8, "found %d VRAMWATCH_ variables in the sources" % len(names))
        environment = troff_text(parts.get("ENVIRONMENT", ""))
        for n in sorted(names):
            if not re.search(r"^\.B %s$" % n, environment, re.M):
                missing.append("%s is read but not in ENVIRONMENT" % n)
        for section in ("SYNOPSIS", "DESCRIPTION", "COMMANDS", "SIZES", "EXIT STATUS", "FILES"):
            if section not in parts:
                missing.append("no %s section" % section)

        if not shutil.which("bash"):
            skipped.append("no bash to complete with")
        else:
            got = complete(opts, ["vramwatch", ""])
            if got != set(cmds) | {"help"}:
                missing.append("completing 'vramwatch ': %s, expected %s" %
                               (sorted(got), sorted(set(cmds) | {"help"})))
            got = complete(opts, ["vramwatch", "--"])
            if got != top_long:
                missing.append("completing 'vramwatch --': %s, expected %s" % (sorted(got), sorted(top_long)))
            for cmd, (longs, shorts) in every.items():
                got = complete(opts, ["vramwatch", cmd, "--"])
                if got != longs:
                    missing.append("completing 'vramwatch %s --': %s; its --help: %s" %
                                   (cmd, sorted(got), sorted(longs)))
                got = complete(opts, ["vramwatch", cmd, "-"])
                if not shorts <= got:
                    missing.append("completing 'vramwatch %s -': %s lacks %s" %
                                   (cmd, sorted(got), sorted(shorts - got)))
        check(not missing, "%d thing(s) drifted:\n  %s" % (len(missing), "\n  ".join(missing)))
        print("%d commands, %d options: each in its part of the page and in the completion; %d "
              "variables in ENVIRONMENT" % (len(cmds), sum(len(a) + len(b) for a, b in every.values()),
                                           len(names)))
    except Failed as e:
        print("FAIL:", e)
        return 1
    if skipped:
        print("manpage: skipped (exit 77), not a pass: %s; every other check passed" % ", ".join(skipped),
              file=sys.stderr)
        return SKIP
    print("ok: manpage")
    return 0


if __name__ == "__main__":
    sys.exit(main())
