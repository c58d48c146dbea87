#!/bin/sh
# Traces one TRL release: tools/trace/run.sh 1.15.0 [trace.py options...]
# Appends to calibration/cpu-trace/trl-RELEASE.jsonl (remove it first to retrace).
set -eu
release=$1; shift
env=${TRACE_ENV:-/work/trace-env}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir="$env/releases/trl-$release"
[ -f "$dir/.complete" ] || python3 "$here/envs.py" "$release"
mkdir -p "$root/calibration/cpu-trace"
# offline: every model and tokenizer is built locally; nothing is fetched
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
  CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 PYTHONPATH="$dir" \
  "$env/bin/python" "$here/trace.py" --out "$root/calibration/cpu-trace/trl-$release.jsonl" "$@"
