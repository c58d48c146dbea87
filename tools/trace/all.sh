#!/bin/sh
# Traces every release of releases.json not yet traced (calibration/cpu-trace/trl-X.jsonl absent),
# in the order given or releases.json's: qwen2 with every mix, the other families `base` only;
# TRACE_ARGS replaces those choices (e.g. TRACE_ARGS="--family qwen2 --mix base --mix full").
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
releases=${*:-$(python3 -c "import json; print(' '.join(json.load(open('$here/releases.json'))['releases']))")}
for r in $releases; do
  [ -f "$root/calibration/cpu-trace/trl-$r.jsonl" ] && continue
  # shellcheck disable=SC2086
  "$here/run.sh" "$r" ${TRACE_ARGS:---other-mix base} > "/tmp/trace-$r.log" 2>&1 || echo "trl $r: exit $?"
done
