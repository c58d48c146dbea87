#!/bin/sh
# Counts the memory-bound operators' bytes a token of a training pass (tools/trace/traffic.py):
# tools/trace/traffic.sh [--family qwen3 ...]  -> calibration/traffic/traffic.json
set -eu
env=${TRACE_ENV:-/work/trace-env}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
release=0.23.0
dir="$env/releases/trl-$release"
[ -f "$dir/.complete" ] || python3 "$here/envs.py" "$release"
mkdir -p "$root/calibration/traffic"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 \
  PYTHONPATH="$dir:$here" \
  "$env/bin/python" "$here/traffic.py" --out "$root/calibration/traffic/traffic.json" "$@"
