#!/usr/bin/env bash
# The README's first command: set everything up, build, and run the main job, a YOLOv9-like
# training at --batch 64 --img 640 on a 16 GiB card that runs out of memory, under vramwatch,
# then the measured search for the largest batch that fits.
# Without an NVIDIA GPU the job runs on the simulated GPU built with the project.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

sim=()
if [ -e /dev/nvidiactl ] && ldconfig -p | grep -q 'libcuda\.so\.1'; then
  echo "quickstart: NVIDIA driver found: running on the real GPU, with an emulated 16 GiB limit" >&2
  limit=(--limit 16GiB)
else
  echo "quickstart: no NVIDIA GPU here: running on the simulated 16 GiB GPU (build/tools/simgpu)" >&2
  sim=(env "LD_LIBRARY_PATH=$PWD/build/tools/simgpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SIMGPU_MEMORY=16GiB)
  limit=()
fi
mkdir -p reports
set +e
"${sim[@]}" build/tools/vramwatch/vramwatch run --dir reports "${limit[@]}" -- \
  python3 examples/train_sim.py --batch 64 --img 640
status=$?
set -e
echo "quickstart: the job exited with status $status; its report is in reports/ (vramwatch report reports/*.json)" >&2
# The report of a failure in the first step only bounds the need, so the advice above proposes
# the next run and the measured search; run that search, as a user would next.
echo "quickstart: measuring the largest batch that fits (vramwatch fit, the command the advice gives)" >&2
if [ ${#limit[@]} -eq 0 ]; then limit=(--limit 16GiB); fi
"${sim[@]}" build/tools/vramwatch/vramwatch fit "${limit[@]}" -- \
  python3 examples/train_sim.py --batch 64 --img 640 || true
exit 0
