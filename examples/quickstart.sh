#!/usr/bin/env bash
# The README's first command: set everything up, build, and run the main job under vramwatch on a
# 16 GiB card, where it runs out of memory, then the measured search for the largest batch that
# fits. The main job is unchanged PyTorch: examples/train_torch.py, a YOLO-like detector, at
# --batch 128 --img 640, with PyTorch's CUDA wheel in a venv (tools/torch-venv.sh). Where PyTorch
# cannot be installed, it is examples/train_sim.py at --batch 64 (a job written here that
# allocates as YOLOv9 does, without PyTorch), and one line says so.
# Without an NVIDIA GPU the job runs on the simulated GPU built with the project.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

if py=$(bash tools/torch-venv.sh | tail -n 1) && [ -x "$py" ]; then
  job=("$py" examples/train_torch.py --batch 128 --img 640 --cfg s --steps 2 --val-steps 1 --workers 0)
else
  echo "quickstart: PyTorch could not be installed (the line above says why): running examples/train_sim.py, a job written here without PyTorch, instead" >&2
  job=(python3 examples/train_sim.py --batch 64 --img 640)
fi

card=()
if [ -e /dev/nvidiactl ] && ldconfig -p | grep -q 'libcuda\.so\.1'; then
  echo "quickstart: NVIDIA driver found: running on the real GPU, with an emulated 16 GiB limit" >&2
  card=(--limit 16GiB)
else
  echo "quickstart: no NVIDIA GPU here: running on the simulated 16 GiB GPU (build/tools/simgpu)" >&2
  card=(--sim 16GiB)
fi
mkdir -p reports
set +e
build/tools/vramwatch/vramwatch run --dir reports "${card[@]}" -- "${job[@]}"
status=$?
set -e
echo "quickstart: the job exited with status $status; its report is in reports/ (vramwatch report reports/*.json)" >&2
# The report of a failure in the first step only bounds the need, so the advice above proposes
# the next run and the measured search; run that search, as a user would next.
echo "quickstart: measuring the largest batch that fits (vramwatch fit, the command the advice gives)" >&2
build/tools/vramwatch/vramwatch fit "${card[@]}" -- "${job[@]}" || true
exit 0
