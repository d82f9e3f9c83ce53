#!/usr/bin/env bash
# On a lent GPU machine (no network): scripts/autotune_check.py over the dev sample's shapes of at least 2^36 FLOP,
# NN and TN, in the three offline regimes; JSON, Markdown table and log go to $OUT (or ./device-out).
#   bash scripts/device_autotune_check.sh                                  # all of them, within 8 minutes
#   SHAPES="4096x1024x12288 8192x2048x8192" bash scripts/device_autotune_check.sh       # a subset
#   LAYOUTS=TN REGIMES=steady CHECK_ARGS="--top 4" bash scripts/device_autotune_check.sh
# The check stops at CHECK_TIMEOUT seconds (default 420, which leaves the wheels' install and the table inside 8
# minutes); its JSON is rewritten after every layout, so what finished is kept and the table names what did not.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"
. scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
if [ -n "${SHAPES:-}" ]; then
  read -r -a FIELD <<<"$SHAPES"
else
  FIELD=(--sample docs/benchmarks/dev_sample.txt --min-log2-flop 36)
fi
# shellcheck disable=SC2086  # CHECK_ARGS holds several options
timeout "${CHECK_TIMEOUT:-420}" python3 scripts/autotune_check.py "${FIELD[@]}" --out "$OUT" \
  --layouts "${LAYOUTS:-NN,TN}" --regimes "${REGIMES:-back-to-back,separated,steady}" ${CHECK_ARGS:-} 2>&1 \
  | tee "$OUT/autotune_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && echo "autotune_check: stopped at ${CHECK_TIMEOUT:-420} s; the table holds the layouts done"
if [ -f "$OUT/autotune_check.json" ]; then
  python3 scripts/autotune_check.py --table "$OUT/autotune_check.json" --md "$OUT/autotune_check.md" \
    && tail -8 "$OUT/autotune_check.md"
fi
exit "$rc"
