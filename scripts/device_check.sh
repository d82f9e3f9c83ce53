#!/usr/bin/env bash
# On a lent GPU machine (no network): install the carried wheels (.whl/, from scripts/fetch_device_wheels.sh), run every GPU test,
# then the README's main job (the quickstart campaign) and its report. Logs go to $OUT (or ./device-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"
. scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout "${TEST_TIMEOUT:-420}" python3 -m pytest -q -m gpu ${TESTS:-tests} -p no:cacheprovider \
  --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.txt" | tail -25
if [ -n "${QUICKSTART-1}" ]; then  # QUICKSTART= (empty) skips the campaign
  timeout "${CAMPAIGN_TIMEOUT:-300}" python3 -m agent.cli campaign --shapes examples/shapes_small.txt --model builtin \
    --budget "${BUDGET:-4}" --run quickstart --runs-dir /tmp/runs --no-global 2>&1 | tail -15 | tee "$OUT/campaign.txt"
  python3 -m agent.cli report quickstart --runs-dir /tmp/runs -o "$OUT/report.html" 2>&1 | tail -3
fi
