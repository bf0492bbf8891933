#!/bin/bash
# The examples' checks that are more than one program run, kept here so that
# tests/examples/meson.build only wires tests. One check per call, named first:
#
#   check_examples.sh syntax PYTHON GPU_RUN_SH GPU_CHECKS_PY EXAMPLE.py...
#       the real-GPU check script parses (bash -n) and the Python files compile; nothing runs
#   check_examples.sh train_sim_oom PYTHON TRAIN_SIM_PY
#       train_sim.py at batch 64 on a 16 GiB simulated card ends with exit 1 and PyTorch's own
#       out-of-memory message (the environment names the card: meson passes it)
set -u

case "${1-}" in
syntax)
    [ $# -ge 4 ] || { echo "usage: $0 syntax PYTHON RUN_SH PY..." >&2; exit 2; }
    python=$2 run_sh=$3
    shift 3
    bash -n "$run_sh" && "$python" -m py_compile "$@"
    ;;
train_sim_oom)
    [ $# -eq 3 ] || { echo "usage: $0 train_sim_oom PYTHON TRAIN_SIM_PY" >&2; exit 2; }
    out=$("$2" "$3" --batch 64 --img 640 2>&1)
    st=$?
    echo "$out"
    [ "$st" = 1 ] && echo "$out" | grep -q "CUDA out of memory. Tried to allocate"
    ;;
*)
    echo "usage: $0 syntax|train_sim_oom ARGS..." >&2
    exit 2
    ;;
esac
