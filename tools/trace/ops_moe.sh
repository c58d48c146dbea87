#!/bin/sh
# Counts a decode step of transformers' `generate` through each MoE block, in training mode (as
# TRL calls it) and eval (as Unsloth does) (tools/trace/ops_moe.py):
#   tools/trace/ops_moe.sh [RELEASE] [--family gpt_oss ...]
#   -> calibration/ops/moe_decode-<transformers>.json
#   tools/trace/ops_moe.sh [RELEASE] --passes  # a training micro-batch's and a scoring pass's
#   -> calibration/ops/moe_pass-<transformers>.json
# RELEASE is the traced TRL release whose folder gives the transformers (0.23.0: 4.56.1;
# 1.15.0: 5.17.0).
set -eu
env=${TRACE_ENV:-/work/trace-env}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
release=0.23.0
case "${1:-}" in [0-9]*) release=$1; shift ;; esac
dir="$env/releases/trl-$release"
[ -f "$dir/.complete" ] || python3 "$here/envs.py" "$release"
transformers=$(ls "$dir" | sed -n 's/^transformers-\([0-9.]*\)\.dist-info$/\1/p')
mkdir -p "$root/calibration/ops"
what=moe_decode
case " $* " in *" --passes "*) what=moe_pass ;; esac
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 \
  PYTHONPATH="$dir:$here" \
  "$env/bin/python" "$here/ops_moe.py" --out "$root/calibration/ops/$what-$transformers.json" "$@"
