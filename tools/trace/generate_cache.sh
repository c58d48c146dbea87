#!/bin/sh
# tools/trace/generate_cache.sh RELEASE: generate's KV cache in training mode with checkpointing,
# on the traced TRL release's transformers (tools/trace/generate_cache.py)
set -eu
env=${TRACE_ENV:-/work/trace-env}
here=$(cd "$(dirname "$0")" && pwd)
dir="$env/releases/trl-$1"
[ -f "$dir/.complete" ] || python3 "$here/envs.py" "$1"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 \
  PYTHONPATH="$dir:$here" "$env/bin/python" "$here/generate_cache.py"
