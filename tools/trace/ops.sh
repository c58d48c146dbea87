#!/bin/sh
# Counts the eager operators of a training micro-batch, a scoring pass and a decode step
# (tools/trace/ops.py): tools/trace/ops.sh [--family qwen3 ...] [--moe gpt_oss ...]
#   -> calibration/ops/ops.json
set -eu
env=${TRACE_ENV:-/work/trace-env}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
release=0.23.0
dir="$env/releases/trl-$release"
[ -f "$dir/.complete" ] || python3 "$here/envs.py" "$release"
mkdir -p "$root/calibration/ops"
out=${OPS_OUT:-$root/calibration/ops/ops.json}
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 \
  PYTHONPATH="$dir:$here" \
  "$env/bin/python" "$here/ops.py" --out "$out" "$@"
