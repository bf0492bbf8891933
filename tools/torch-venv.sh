#!/usr/bin/env bash
# Makes, or reuses, the Python venv with PyTorch that the test suite runs its PyTorch tests with
# (the CPU run of examples/train_torch.py, C++ exceptions under the preload, and the frameworks
# users run on top of it: Ultralytics, Hugging Face's transformers and accelerate; meson option
# torch_python), and prints its python's path as the last line on stdout.
#
#   tools/torch-venv.sh               makes it if needed (tools/install-deps.sh --tests)
#   tools/torch-venv.sh --no-install  only finds it: exit 1, and one line, when it is not ready
#                                     (tests/run_all.sh, after install-deps)
#
# The venv lives in ${VRAMWATCH_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vramwatch/torch-venv};
# `rm -r` that folder to remove it. It is made with the first python3.11 on PATH (else python3,
# with a note), and pip installs the versions below into it (the default build on PyPI, made for
# CUDA 13, about 3 GB to download, unless pip's configuration finds them on local disk). A stamp
# file in the venv records the versions installed: a rerun that finds the stamp and a torch that
# imports installs nothing. A venv made by hand with the right versions is accepted (stamped).
# Exits 1 with one line on stderr when it cannot make the venv or install into it (saying why:
# pip's own reason, such as a server it could not reach).
set -uo pipefail
install=1
[ "${1:-}" = "--no-install" ] && install=0

want=(torch==2.14.1 torchvision==0.29.1 ultralytics==8.4.190 transformers==5.25.0 accelerate==1.16.0)
venv=${VRAMWATCH_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vramwatch/torch-venv}
case $venv in /*) ;; *) venv=$PWD/$venv ;; esac
stamp=$venv/.vramwatch-torch-stamp
py=$venv/bin/python
# Nothing the checks below import may come from the current folder (a folder named torch).
cd / || exit 1

say() { printf 'torch-venv: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# True when the venv's torch and torchvision import and every package has the version asked for
# (a local build suffix such as +cu130 is allowed). The others are not imported: importing
# Ultralytics writes its settings file into the user's configuration folder.
versions_ok() {
  "$py" - "${want[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib import metadata
import torch, torchvision
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    if metadata.version(name).split("+")[0] != version:
        sys.exit(1)
PY
}

done_here() { printf '%s\n' "$py"; exit 0; }

# pip's reason for a failure, on one line. A server it could not reach comes first: without any
# version found, pip's last words blame the constraints instead (ResolutionImpossible).
pip_reason() {
  "$py" - "$1" <<'PY' 2>/dev/null || tail -n 1 "$1"
import re, sys
text = open(sys.argv[1], errors="replace").read()
m = re.search(r"^Could not fetch URL (\S+): (.*?)(?: - skipping)?$", text, re.M)
if m:
    why = re.search(r"\[SSL: [^\]]*\][^'()]*|Failed to establish a new connection: [^'()]*|"
                    r"Temporary failure in name resolution|ProxyError[^'()]*|Read timed out", m.group(2))
    print("could not reach %s (%s)" % (m.group(1), (why.group(0) if why else m.group(2)[:200]).strip()))
elif re.search(r"after connection broken by '(.*)': (\S+)$", text, re.M):
    m = re.search(r"after connection broken by '(.*)': (\S+)$", text, re.M)
    print("connection broken at %s (%s)" % (m.group(2), m.group(1)[:200]))
else:
    errors = [l[len("ERROR: "):] for l in text.splitlines()
              if l.startswith("ERROR: ") and "ResolutionImpossible" not in l]
    print(errors[0] if errors else (text.strip().splitlines() or ["no output"])[-1])
PY
}

# The quick way: stamped with these versions, and torch imports.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${want[*]}" ] && "$py" -c 'import torch' >/dev/null 2>&1; then
  done_here
fi

mkdir -p "$(dirname "$venv")" || die "cannot create $(dirname "$venv")"
# One install at a time (two test runs started together): a lock on the folder that holds the
# venv, so that nothing is left behind once the venv is removed.
if command -v flock >/dev/null; then
  exec 9<"$(dirname "$venv")" && flock 9 || die "cannot lock $(dirname "$venv")"
fi

# A venv that already has the right versions (made by hand, or by a run that was stopped before
# its stamp): stamp it, install nothing.
if [ -x "$py" ] && versions_ok; then
  printf '%s\n' "${want[*]}" >"$stamp" || die "cannot write $stamp"
  done_here
fi
[ $install = 1 ] || die "no venv with ${want[*]} in $venv (tools/torch-venv.sh makes it)"

if [ ! -x "$py" ]; then
  if [ -e "$venv" ] && [ -n "$(ls -A "$venv" 2>/dev/null)" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    die "$venv exists and is not a Python venv; remove it or set VRAMWATCH_TORCH_VENV to another folder"
  fi
  base=$(command -v python3.11 || true)
  if [ -z "$base" ]; then
    base=$(command -v python3 || true)
    [ -n "$base" ] || die "no python3.11 or python3 on PATH (Debian: apt-get install python3 python3-venv)"
    say "no python3.11 on PATH: making the venv with $base ($("$base" -V 2>&1)), which PyTorch may not support"
  fi
  say "making a venv in $venv with $base"
  # --clear: a venv left half-made (pyvenv.cfg but no python) is made again from nothing.
  if ! err=$("$base" -m venv --clear "$venv" 2>&1 >/dev/null); then
    die "cannot make a venv with $base ($(printf '%s\n' "$err" | grep -v '^[[:space:]]*$' | tail -n 1); Debian: apt-get install python3-venv)"
  fi
fi

rm -f "$stamp"
log=$venv/pip-install.log
say "installing ${want[*]} into $venv with pip (about 3 GB to download unless found on local disk; several minutes; log: $log)"
# --no-cache-dir: the wheels are not kept a second time in pip's own cache.
if ! "$py" -m pip install --no-cache-dir --progress-bar off "${want[@]}" >"$log" 2>&1; then
  die "pip could not install ${want[*]} into $venv: $(pip_reason "$log") (log: $log)"
fi
versions_ok || die "${want[*]} installed into $venv, but they do not import with those versions (log: $log)"
printf '%s\n' "${want[*]}" >"$stamp" || die "cannot write $stamp"
say "PyTorch installed in $venv"
done_here
